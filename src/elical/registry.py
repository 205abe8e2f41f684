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

__all__ = ["Entry", "Registry", "UnknownNameError", "load_plugins", "PLUGIN_GROUPS"]

#: Entry-point groups a package may declare to add entries without editing elical (``pyproject.toml``:
#: ``[project.entry-points."elical.estimators"] my-estimator = "my_pkg.module:register"``). Each entry point is
#: a callable ``register(registry)`` that calls ``registry.add(...)``; :func:`load_plugins` runs them once.
PLUGIN_GROUPS = {
    "elical.judges.correctness": "elical.judges:CORRECTNESS_JUDGES",
    "elical.judges.equivalence": "elical.judges:EQUIVALENCE_JUDGES",
    "elical.estimators": "elical.estimators:ESTIMATORS",
    "elical.metrics": "elical.evaluation:METRICS",
    "elical.heads": "elical.heads:HEADS",
    "elical.backends": "elical.generation:BACKENDS",
    "elical.sources": "elical.data:SOURCES",
}
_LOADED: set[str] = set()


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

    def remove(self, name: str) -> Entry:
        """Unregister ``name`` (a test's temporary entry, a plug-in replaced); returns its entry."""
        return self._entries.pop(self[name].name)

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
        naming the missing arguments when a need is not in ``kwargs`` (or is None), and, when the entry declares
        ``accepts`` (its optional keywords), ValueError naming a keyword that is neither needed nor accepted (so
        that, e.g., a model directory given to a judge that takes none is a clear error, not a TypeError)."""
        entry = self[name]
        missing = [n for n in entry.needs if kwargs.get(n) is None]
        if missing:
            raise ValueError(f"{self.kind} {name!r} needs {', '.join(missing)}")
        if "accepts" in entry.info:
            allowed = set(entry.needs) | set(entry.info["accepts"])
            unknown = sorted(set(kwargs) - allowed)
            if unknown:
                takes = ", ".join(sorted(allowed)) or "no arguments"
                raise ValueError(f"{self.kind} {name!r} takes no {', '.join(map(repr, unknown))} (it takes: {takes})")
        return entry.load()(**kwargs)


def load_plugins(groups=None, entry_points=None) -> list[str]:
    """Run the ``register(registry)`` entry points of ``groups`` (default every group of :data:`PLUGIN_GROUPS`)
    of the installed packages, each group once per process; returns "group:name" of each loaded plug-in.
    ``entry_points``: a callable ``(group) -> entry points`` (default ``importlib.metadata.entry_points``).
    Raises ValueError naming the plug-in when one fails to load or to register."""
    from importlib import metadata

    find = entry_points or (lambda group: metadata.entry_points(group=group))
    loaded = []
    for group in groups or PLUGIN_GROUPS:
        if group in _LOADED and entry_points is None:
            continue
        _LOADED.add(group)
        registry = Entry(group, PLUGIN_GROUPS[group]).load()
        for ep in find(group):
            try:
                ep.load()(registry)
            except Exception as exc:  # a broken plug-in must say which one it is
                raise ValueError(f"elical plug-in {ep.name!r} ({group} = {ep.value}) failed: {exc}") from exc
            loaded.append(f"{group}:{ep.name}")
    return loaded
