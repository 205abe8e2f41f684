"""One registry shape for every kind found by name (head kinds, backends, estimators, datasets, metrics, judges).

A :class:`Registry` maps a name to an :class:`Entry`: the factory that makes the thing, what the factory needs
(the keyword arguments a caller must provide) and a one-line summary for ``--help`` and the docs. The factory may
be given as ``"package.module:attribute"`` and is then imported on first use, so registries stay cheap to import
(the CLI reads their names for its choices without loading torch).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

__all__ = ["Entry", "Registry", "UnknownNameError"]


class UnknownNameError(ValueError):
    """A name that is not in a registry; the message lists the names that are."""


@dataclass(frozen=True)
class Entry:
    """One registered name. ``factory``: a callable or ``"module:attribute"``; ``needs``: keyword arguments the
    factory requires; ``summary``: one line for help texts; ``info``: free-form facts other code reads (e.g. the
    inputs a head kind trains on)."""

    name: str
    factory: Callable[..., Any] | str
    needs: tuple[str, ...] = ()
    summary: str = ""
    info: dict = field(default_factory=dict)

    def load(self) -> Callable[..., Any]:
        """The factory itself, imported when it was registered by path."""
        if callable(self.factory):
            return self.factory
        module, _, attr = self.factory.partition(":")
        return getattr(importlib.import_module(module), attr)


class Registry:
    """Name -> :class:`Entry`, in registration order.

    >>> r = Registry("head kind"); _ = r.add("linear", dict, summary="a linear probe")
    >>> r.names(), r.create("linear", a=1)
    (['linear'], {'a': 1})
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry] = {}

    def add(self, name: str, factory: Callable[..., Any] | str, *, needs: tuple[str, ...] = (), summary: str = "",
            **info) -> Entry:
        """Register ``name``; raises ValueError when it is already taken."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered already")
        entry = Entry(name, factory, tuple(needs), summary, info)
        self._entries[name] = entry
        return entry

    def __getitem__(self, name: str) -> Entry:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(f"unknown {self.kind} {name!r}; choose one of {', '.join(self._entries)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        """Registered names, in registration order (the CLI's choices)."""
        return list(self._entries)

    def create(self, name: str, /, **kwargs) -> Any:
        """``factory(**kwargs)`` of ``name``. Raises :class:`UnknownNameError` for an unknown name and ValueError
        naming the missing arguments when a need is not in ``kwargs`` (or is None)."""
        entry = self[name]
        missing = [n for n in entry.needs if kwargs.get(n) is None]
        if missing:
            raise ValueError(f"{self.kind} {name!r} needs {', '.join(missing)}")
        return entry.load()(**kwargs)
