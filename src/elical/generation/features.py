"""Hidden-state features: the hidden state of the last real prompt token, the input of EliCal's heads.

EliCal (Ni et al., 2025, Sec. 3) reads the model's confidence from the last prompt token's hidden state, before
any answer token is generated. The transformers decoder returns these states from the prefill it already runs
(:class:`elical.generation.prefix_sharing.TransformersGenerator`, ``generate(..., hidden_layers=...)``);
:func:`extract_hidden_states` is the separate pass for backends that give none (vLLM, OpenAI-compatible servers)
and for records made earlier. Features are stored as safetensors with the record ids beside them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from elical.fileio import atomic_path

__all__ = ["last_token_index", "check_layer", "extract_hidden_states", "save_features", "load_features"]


def last_token_index(attention_mask):
    """Index of the last real (unpadded) token of each row, whatever the padding side.

    ``attention_mask``: integer/bool tensor of shape (batch, seq_len), 1 for real tokens. Returns a long tensor of
    shape (batch,). Raises ValueError for a row with no real token.
    """
    import torch

    mask = attention_mask.to(torch.long)
    if (mask.sum(dim=1) == 0).any():
        raise ValueError("attention_mask has a row with no real token")
    seq_len = mask.shape[1]
    # argmax returns the first maximum: on the reversed mask that is the last 1 of the row.
    return (seq_len - 1 - mask.flip(dims=[1]).argmax(dim=1)).long()


def check_layer(model, layer: int) -> int:
    """``layer`` if it indexes transformers' ``hidden_states`` of ``model`` (0 = embeddings, -1 = final layer),
    else ValueError."""
    n_layers = model.config.num_hidden_layers
    if not -(n_layers + 1) <= layer <= n_layers:
        raise ValueError(f"layer must be in [{-(n_layers + 1)}, {n_layers}] for this model, got {layer}")
    return layer


def extract_hidden_states(model, tokenizer, prompts: Sequence[str], layer: int | Sequence[int] = -1,
                          batch_size: int = 16, progress: bool = False, *, pooling: str = "last",
                          questions: Sequence[str] | None = None):
    """Hidden states of each prompt by a forward pass over the prompts: of its last real token (``pooling="last"``,
    the paper's) or the mean over the tokens of its question (``pooling="mean"``, needs ``questions``, one per
    prompt, and a fast tokenizer; the span: :mod:`elical.generation.pooling`).

    ``layer``: index into ``output_hidden_states`` (0 = embeddings, -1 = final layer, as in the paper), or a list of
    them. Returns float32 ndarray of shape (len(prompts), hidden_size) for one layer, ``{layer: ndarray}`` for a
    list (one pass for all). Prompts are right-padded here; the index of each row's last real token comes from
    :func:`last_token_index`. The LM head runs on one position only (``logits_to_keep=1``) and no key-value cache
    is kept: the pass costs the model body alone. Raises ValueError for a layer out of range, an unknown pooling,
    ``questions`` missing or of another length, or a question not found in its prompt.
    """
    import torch
    from tqdm.auto import tqdm

    from elical.generation.pooling import POOLINGS, question_char_span, question_token_mask

    layers = [layer] if isinstance(layer, (int, np.integer)) else list(dict.fromkeys(int(x) for x in layer))
    for x in layers:
        check_layer(model, x)
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    if pooling == "mean" and (questions is None or len(questions) != len(prompts)):
        raise ValueError("mean pooling needs one question per prompt (questions=...)")
    out: dict[int, list] = {x: [] for x in layers}
    batches = range(0, len(prompts), batch_size)
    for start in tqdm(batches, desc="hidden states", disable=not progress, unit="batch"):
        chunk = list(prompts[start:start + batch_size])
        enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False,
                        return_offsets_mapping=pooling == "mean")
        offsets = enc.pop("offset_mapping", None)
        enc = {k: v.to(model.device) for k, v in enc.items()}
        with torch.inference_mode():
            states = model(**enc, output_hidden_states=True, use_cache=False, logits_to_keep=1).hidden_states
        if pooling == "last":
            idx = last_token_index(enc["attention_mask"])
            rows = torch.arange(idx.shape[0], device=idx.device)
            for x in layers:
                out[x].append(states[x][rows, idx].float().cpu().numpy())
            continue
        spans = [question_char_span(p, q) for p, q in zip(chunk, questions[start:start + batch_size])]
        mask = question_token_mask(offsets, enc["attention_mask"], spans).to(states[0].device)
        weights = (mask.float() / mask.sum(dim=1, keepdim=True)).unsqueeze(-1)
        for x in layers:
            out[x].append((states[x].float() * weights).sum(dim=1).cpu().numpy())
    feats = {x: np.concatenate(v).astype(np.float32) if v else np.zeros((0, model.config.hidden_size), np.float32)
             for x, v in out.items()}
    return feats[layers[0]] if isinstance(layer, (int, np.integer)) else feats


def save_features(path: str | Path, ids: Sequence[str], features: np.ndarray, meta: dict | None = None) -> None:
    """Save features of shape (n, d) with their record ids (safetensors; ids and meta in its JSON header)."""
    import torch
    from safetensors.torch import save_file

    if len(ids) != features.shape[0]:
        raise ValueError(f"{len(ids)} ids for {features.shape[0]} feature rows")
    with atomic_path(path) as tmp:
        save_file({"hidden_states": torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))}, str(tmp),
                  metadata={"ids": json.dumps(list(ids)), "meta": json.dumps(meta or {})})


def load_features(path: str | Path, mmap: bool = False) -> tuple[list[str], np.ndarray, dict]:
    """Load ``(ids, features of shape (n, d), meta)`` written by :func:`save_features`.

    ``mmap=False`` reads the whole float32 matrix into memory. ``mmap=True`` returns a read-only ``np.memmap``
    over the file's data instead (same ids, meta and values; nothing is read until rows are used), for pools that
    do not fit in memory: :class:`elical.heads.probe.ProbeHead` trains and predicts on it chunk by chunk
    (:mod:`elical.heads.streaming`). Raises :class:`elical.records.InputError` for a file that is not a features
    file (no ``hidden_states`` tensor, an unsupported dtype, a data block that does not match the header).
    """
    if mmap:
        return _load_features_mmap(Path(path))
    from elical.records import InputError, read_safetensors

    tensors, header = read_safetensors(path, framework="np")
    if "hidden_states" not in tensors or "ids" not in header:
        raise InputError(path, None, "hidden_states", "not an elical features file (no hidden_states / ids)")
    return json.loads(header["ids"]), tensors["hidden_states"], json.loads(header.get("meta", "{}"))


# safetensors dtypes that numpy reads as they are (bf16 has no numpy dtype; save_features writes F32)
_NP_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}


def _load_features_mmap(path: Path) -> tuple[list[str], np.ndarray, dict]:
    """The safetensors layout: 8 bytes little-endian u64 N, N bytes of JSON header (``__metadata__`` and, per
    tensor, ``dtype``, ``shape`` and ``data_offsets`` [begin, end) relative to the end of the header), the data."""
    import struct

    from elical.records import InputError

    try:
        with open(path, "rb") as fh:
            (n_header,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n_header))
        size = path.stat().st_size
        info, metadata = header["hidden_states"], header.get("__metadata__") or {}
        ids, meta = json.loads(metadata["ids"]), json.loads(metadata.get("meta", "{}"))
        begin, end = (int(v) for v in info["data_offsets"])
        shape = tuple(int(v) for v in info["shape"])
    except FileNotFoundError:
        raise InputError(path, None, None, "file not found") from None
    except (OSError, struct.error, ValueError, KeyError, TypeError) as exc:
        raise InputError(path, None, "hidden_states", f"not an elical features file ({exc!r})") from None
    if info.get("dtype") not in _NP_DTYPES:
        raise InputError(path, None, "hidden_states", f"dtype {info.get('dtype')!r} cannot be memory-mapped "
                         f"(one of {', '.join(_NP_DTYPES)})")
    dtype = np.dtype(_NP_DTYPES[info["dtype"]])
    offset = 8 + n_header + begin
    if len(shape) != 2 or end - begin != shape[0] * shape[1] * dtype.itemsize or offset + end - begin > size:
        raise InputError(path, None, "hidden_states", f"shape {list(shape)} does not match data_offsets "
                         f"[{begin}, {end}) in a file of {size} bytes")
    if len(ids) != shape[0]:
        raise InputError(path, None, "ids", f"{len(ids)} ids for {shape[0]} feature rows")
    if 0 in shape:  # mmap cannot map zero bytes
        return ids, np.zeros(shape, dtype=dtype), meta
    return ids, np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape), meta
