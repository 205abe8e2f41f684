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


def extract_hidden_states(model, tokenizer, prompts: Sequence[str], layer: int = -1, batch_size: int = 16,
                          progress: bool = False) -> np.ndarray:
    """Hidden state of the last real prompt token for each prompt, by a forward pass over the prompts.

    ``layer``: index into ``output_hidden_states`` (0 = embeddings, -1 = final layer, as in the paper).
    Returns float32 ndarray of shape (len(prompts), hidden_size). Prompts are right-padded here; the index of
    each row's last real token comes from :func:`last_token_index`. The LM head runs on one position only
    (``logits_to_keep=1``) and no key-value cache is kept: the pass costs the model body alone.
    """
    import torch
    from tqdm.auto import tqdm

    check_layer(model, layer)
    out = []
    batches = range(0, len(prompts), batch_size)
    for start in tqdm(batches, desc="hidden states", disable=not progress, unit="batch"):
        chunk = list(prompts[start:start + batch_size])
        enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
        enc = {k: v.to(model.device) for k, v in enc.items()}
        with torch.inference_mode():
            hs = model(**enc, output_hidden_states=True, use_cache=False, logits_to_keep=1).hidden_states[layer]
        idx = last_token_index(enc["attention_mask"])
        out.append(hs[torch.arange(hs.shape[0], device=hs.device), idx].float().cpu().numpy())
    if not out:
        return np.zeros((0, model.config.hidden_size), dtype=np.float32)
    return np.concatenate(out).astype(np.float32)


def save_features(path: str | Path, ids: Sequence[str], features: np.ndarray, meta: dict | None = None) -> None:
    """Save features of shape (n, d) with their record ids (safetensors; ids and meta in its JSON header)."""
    import torch
    from safetensors.torch import save_file

    if len(ids) != features.shape[0]:
        raise ValueError(f"{len(ids)} ids for {features.shape[0]} feature rows")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    save_file({"hidden_states": torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))}, str(tmp),
              metadata={"ids": json.dumps(list(ids)), "meta": json.dumps(meta or {})})
    tmp.replace(path)


def load_features(path: str | Path) -> tuple[list[str], np.ndarray, dict]:
    """Load ``(ids, features of shape (n, d), meta)`` written by :func:`save_features`."""
    from safetensors import safe_open

    with safe_open(str(path), framework="np") as fh:
        header = fh.metadata()
        feats = fh.get_tensor("hidden_states")
    return json.loads(header["ids"]), feats, json.loads(header.get("meta", "{}"))
