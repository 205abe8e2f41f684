"""Optional dependencies: imported when a feature needs them, with a message naming the extra that installs them.

The base install runs ``elical run`` end to end (transformers decoder, probe heads, judges, metrics). The extras
of ``pyproject.toml`` add the rest: ``lora`` (peft: ``--head lora``), ``report`` (matplotlib: figures of
``elical report`` and ``elical study``), ``distributed`` (accelerate: several processes or GPUs), ``openai``
(the OpenAI-compatible backend and LLM judge), ``serve`` (``elical serve``), ``vllm``, ``facts`` (the knowledge
packages, only to regenerate the frozen ``facts`` questions) and ``test``. Layer 0: imports nothing from elical.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MissingExtraError", "require"]


class MissingExtraError(ImportError):
    """An optional package a feature needs is not installed; the message says which extra installs it. The
    command line reports it with exit code 2, like bad input."""


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` (e.g. ``"matplotlib.figure"``) for ``feature`` (words for the message, e.g. ``"--head
    lora"``). Raises MissingExtraError naming ``pip install 'elical[<extra>]'`` when its top-level package is
    missing; an ImportError from inside an installed package is raised as it is."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        if exc.name is not None and exc.name.split(".")[0] != top:
            raise
        raise MissingExtraError(f"{feature} needs the package {top!r}, which is not installed: "
                                f"pip install 'elical[{extra}]'") from None
