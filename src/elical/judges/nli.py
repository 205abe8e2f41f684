"""Semantic equivalence by bidirectional entailment with a local NLI model.

Two answers are equivalent when each entails the other (Kuhn, Gal and Farquhar, 2023, *Semantic Uncertainty*,
Sec. 3.2: bidirectional entailment with a DeBERTa-large MNLI model, the question prepended to both answers).
Any sequence-classification model with an ``entailment`` label works (MNLI-style models such as
``microsoft/deberta-large-mnli``, ``cross-encoder/nli-deberta-v3-base``, ``roberta-large-mnli``); it is loaded
from a local directory only, and the entailment class index is read from its config, because label orders
differ between models (``{0: contradiction, 1: neutral, 2: entailment}`` in one, ``{0: entailment, ...}`` in
another).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from elical.judges.base import PairJudge, check_pairs
from elical.judges.text import normalize_answer

__all__ = ["NLIEquivalenceJudge", "entailment_index"]

_ENTAILMENT_NAMES = ("entailment", "entails", "entail")


def entailment_index(config, path: str | Path = "<model>") -> int:
    """Index of the entailment class in a sequence-classification config.

    Read from ``config.id2label`` (and ``config.label2id``), case-insensitively ("ENTAILMENT", "entailment").

    Raises
    ------
    ValueError
        When no label is called entailment (generic ``LABEL_0``-style labels included); the message names the
        model path and the labels found.
    """
    id2label = {int(i): str(label) for i, label in (getattr(config, "id2label", None) or {}).items()}
    label2id = {str(label): int(i) for label, i in (getattr(config, "label2id", None) or {}).items()}
    found = {i for i, label in id2label.items() if label.strip().lower() in _ENTAILMENT_NAMES}
    found |= {i for label, i in label2id.items() if label.strip().lower() in _ENTAILMENT_NAMES}
    if len(found) != 1:
        raise ValueError(
            f"{path}: cannot find the entailment class in the model config (id2label={id2label}, "
            f"label2id={label2id}); an NLI model with an 'entailment' label is needed")
    return found.pop()


class NLIEquivalenceJudge(PairJudge):
    """Equivalence of two answers by bidirectional entailment with a local NLI model.

    For a pair (a, b): ``premise -> hypothesis`` is scored in both directions, a -> b and b -> a. A direction
    entails when the entailment class is the argmax of the model's logits (``threshold=None``, Kuhn et al.,
    2023) or when its softmax probability is >= ``threshold``. The pair is equivalent (1) when both directions
    entail (``direction="both"``), or when a entails b (``direction="forward"``: "the response states the gold
    answer", used for correctness). Before the model: answers equal after `normalize_answer` -> 1; an answer
    empty after normalization (``""``, ``"..."``) -> 0.

    With ``question_aware=True`` the question is put before each answer, as Kuhn et al. do:
    ``"{question} {answer}"`` (pass ``questions`` to `judge_many`; pairs without one are scored bare).

    Parameters
    ----------
    model_path : str or path
        Local directory of a transformers sequence-classification NLI model and its tokenizer.
    device : str, default "cpu"
    batch_size : int, default 32
        Premise/hypothesis pairs per forward pass.
    threshold : float in (0, 1], optional
        Entailment probability needed; None (default) means argmax.
    question_aware : bool, default False
    direction : {"both", "forward"}, default "both"
    max_length : int, default 256
        Tokens per premise+hypothesis (longer ones are truncated).

    Every directed pair's logits are cached by its (premise, hypothesis) text, so a pair judged again, or the
    reverse pair, costs no model call. Raises ValueError on bad parameters, and when the model has no
    entailment label (`entailment_index`).
    """

    name = "nli"

    def __init__(self, model_path=None, device: str = "cpu", batch_size: int = 32, threshold: float | None = None,
                 question_aware: bool = False, direction: str = "both", max_length: int = 256):
        if model_path is None:
            raise ValueError("model_path is required: a local directory with an NLI model (no download)")
        if threshold is not None and not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1] or None, got {threshold!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        if direction not in ("both", "forward"):
            raise ValueError(f"direction must be 'both' or 'forward', got {direction!r}")
        self.model_path, self.device, self.batch_size = model_path, device, batch_size
        self.threshold, self.question_aware, self.direction, self.max_length = (
            threshold, question_aware, direction, max_length)
        self._model = self._tokenizer = None
        self._cache: dict[tuple[str, str], np.ndarray] = {}

    def _load(self) -> None:
        if self._model is not None:
            return
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = Path(self.model_path)
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: NLI model directory not found (only local models are loaded)")
        model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True)
        self.entailment_index_ = entailment_index(model.config, path)
        self._tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self._model = model.to(self.device).eval()

    @property
    def model(self):
        """The classification model, loaded on first use from local files."""
        self._load()
        return self._model

    def logits(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        """NLI logits of each (premise, hypothesis) pair: ndarray of float32, shape (n, n_labels). Cached."""
        import torch

        self._load()
        todo = list(dict.fromkeys(k for k in zip(premises, hypotheses) if k not in self._cache))
        for i in range(0, len(todo), self.batch_size):
            chunk = todo[i:i + self.batch_size]
            enc = self._tokenizer([p for p, _ in chunk], [h for _, h in chunk], padding=True, truncation=True,
                                  max_length=self.max_length, return_tensors="pt").to(self._model.device)
            with torch.inference_mode():
                out = self._model(**enc).logits.float().cpu().numpy()
            self._cache.update(zip(chunk, out))
        n_labels = self._model.config.num_labels
        return np.array([self._cache[k] for k in zip(premises, hypotheses)], dtype=np.float32).reshape(-1, n_labels)

    def _entails(self, logits: np.ndarray) -> np.ndarray:
        ent = self.entailment_index_
        if self.threshold is None:
            return logits.argmax(axis=-1) == ent
        z = logits - logits.max(axis=-1, keepdims=True)
        prob = np.exp(z[:, ent]) / np.exp(z).sum(axis=-1)
        return prob >= self.threshold

    def judge_many(self, pairs: Sequence[tuple[str, str]], questions: Sequence[str | None] | None = None) -> np.ndarray:
        """Judge n (a, b) pairs, all model calls batched. ``questions``: one (or None) per pair, used when
        ``question_aware``. Returns ndarray of int 0/1, shape (n,). Raises TypeError for a non-str answer."""
        check_pairs(pairs, questions)
        out = np.zeros(len(pairs), dtype=int)
        todo, texts = [], []
        for i, (a, b) in enumerate(pairs):
            na, nb = normalize_answer(a), normalize_answer(b)
            if not na or not nb:
                continue
            if na == nb:
                out[i] = 1
                continue
            q = questions[i] if questions is not None and self.question_aware else None
            texts.append((f"{q.strip()} {a.strip()}", f"{q.strip()} {b.strip()}") if q else (a.strip(), b.strip()))
            todo.append(i)
        if todo:
            fwd = self._entails(self.logits([p for p, _ in texts], [h for _, h in texts]))
            if self.direction == "both":
                fwd &= self._entails(self.logits([h for _, h in texts], [p for p, _ in texts]))
            out[todo] = fwd.astype(int)
        return out
