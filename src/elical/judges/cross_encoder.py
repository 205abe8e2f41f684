"""A MiniLM cross-encoder for answer equivalence: all-MiniLM-L6-v2 read as a BERT text pair ("question [SEP] a",
"b"), with shipped LoRA weights (``learned_cross_encoder.safetensors``, 1.3 MB) merged into a private copy of
the encoder and a linear head on [CLS]; P(same) is the mean over both orders of a and b, or (half the cost) the one
order with the smaller string first, so it is symmetric either way.

The weights are written by ``benchmarks/judge_cross_encoder.py --write`` (seeded) from the labelled pairs; nothing is
trained at run time and peft is not needed to use them: each LoRA pair (A, B) is merged as W += (alpha / r) B A.
Source: cross-encoder answer-equivalence classifiers (BEM, Bulian et al., 2022; PEDANTS, Li et al., 2024); LoRA
(Hu et al., 2022).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Sequence

import numpy as np

__all__ = ["CE_WEIGHTS_PATH", "CrossEncoder", "pair_inputs", "symmetric_proba"]

CE_WEIGHTS_PATH = Path(__file__).with_name("learned_cross_encoder.safetensors")


def pair_inputs(tok, rows: Sequence[tuple[str, str, str | None]], swap: bool, max_length: int = 128):
    """Tokenised text pairs ("question [SEP] a", "b") (a and b exchanged when ``swap``) of (a, b, question) rows."""
    first = [f"{q or ''} [SEP] {b if swap else a}" for a, b, q in rows]
    second = [a if swap else b for a, b, _ in rows]
    return tok(first, second, padding=True, truncation=True, max_length=max_length, return_tensors="pt")


def symmetric_proba(tok, bert, head, rows: Sequence[tuple[str, str, str | None]], max_length: int = 128,
                    orders: int = 2):
    """P(same) of (a, b, question) rows as a torch tensor of shape (n,): sigmoid(head([CLS] of ``bert``)), the mean
    over both orders of a and b (``orders`` 2), or of the order given (``orders`` 1: half the cost; `CrossEncoder`
    gives each pair in one fixed order, so its score stays symmetric). Used by `CrossEncoder` and by the training
    script's cross-validation. Raises ValueError for ``orders`` other than 1 or 2."""
    import torch

    if orders not in (1, 2):
        raise ValueError(f"orders must be 1 or 2, not {orders!r}")
    probs = [torch.sigmoid(head(bert(**pair_inputs(tok, rows, s, max_length)).last_hidden_state[:, 0]).squeeze(-1))
             for s in (False, True)[:orders]]
    return sum(probs) / orders


class CrossEncoder:
    """P(same answer) of (a, b, question) rows from the shipped cross-encoder weights.

    ``sentence_model``: the loaded all-MiniLM-L6-v2 SentenceTransformer (its tokenizer and BERT are copied, never
    changed); ``path``: the safetensors file (default `CE_WEIGHTS_PATH`), holding ``head.weight`` (1, 384),
    ``head.bias`` (1,) and, per adapted linear layer NAME of the BERT, ``NAME.lora_A`` (r, in) and ``NAME.lora_B``
    (out, r); its metadata holds ``r``, ``alpha`` and ``max_length``. Raises FileNotFoundError when the file is
    missing, KeyError when it names a layer the encoder lacks.
    """

    def __init__(self, sentence_model, path=None, batch_size: int = 64):
        import torch
        from safetensors import safe_open

        path = Path(path or CE_WEIGHTS_PATH)
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
        self.meta = {k: json.loads(v) for k, v in meta.items()}
        self.tok = sentence_model.tokenizer
        self.bert = copy.deepcopy(sentence_model[0].auto_model).eval()
        scale = float(self.meta["alpha"]) / float(self.meta["r"])
        modules = dict(self.bert.named_modules())
        with torch.no_grad():
            for key in [k for k in tensors if k.endswith(".lora_A")]:
                name = key[: -len(".lora_A")]
                if name not in modules:
                    raise KeyError(f"{path}: layer {name!r} is not in the encoder")
                modules[name].weight += scale * tensors[f"{name}.lora_B"] @ tensors[key]
        self.head = torch.nn.Linear(tensors["head.weight"].shape[1], 1)
        with torch.no_grad():
            self.head.weight.copy_(tensors["head.weight"])
            self.head.bias.copy_(tensors["head.bias"])
        self.max_length = int(self.meta.get("max_length", 128))
        self.batch_size = batch_size

    def proba(self, rows: Sequence[tuple[str, str, str | None]], orders: int = 2) -> np.ndarray:
        """P(same) of each (a, b, question) row, shape (n,), in [0, 1]: the mean over both orders of a and b
        (``orders`` 2), or (``orders`` 1, half the cost) the order with the smaller string first. Symmetric either
        way. Raises ValueError for ``orders`` other than 1 or 2."""
        import torch

        # each distinct pair once, in one order (the score is symmetric: (a, b) and (b, a) are one pair), shortest
        # first (padding)
        keys = [(min(a, b), max(a, b), q) for a, b, q in rows]
        todo = sorted(dict.fromkeys(keys), key=lambda k: sum(len(t or "") for t in k))
        got = {}
        with torch.inference_mode():
            for i in range(0, len(todo), self.batch_size):
                part = todo[i:i + self.batch_size]
                got.update(zip(part, symmetric_proba(self.tok, self.bert, self.head, part, self.max_length,
                                                           orders).tolist()))
        return np.array([got[k] for k in keys], dtype=float).reshape(len(rows))
