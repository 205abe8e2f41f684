"""Training-free confidence estimators computed from annotated records.

Each estimator maps a list of records to a float ndarray of shape (n_records,) in [0, 1], higher = more likely
correct. Sources: Prob / N-Prob (length-normalized sequence probability, e.g. Malinin & Gales, 2021; Ni et al.,
2025, Sec. 4.2); Consis-Lex (mean ROUGE-L between samples and the greedy answer, Lin et al., 2023) and
Consis-Sem (share of samples semantically equivalent to the greedy answer; Ni et al., 2025, Sec. 4.2).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

__all__ = ["prob", "n_prob", "consis_lex", "consis_sem", "ESTIMATORS"]


def _cumulative_logprob(record: dict) -> tuple[float, int]:
    lps = record.get("greedy_logprobs")
    if lps is None:
        raise ValueError(f"record {record.get('id', '?')}: no 'greedy_logprobs' (the backend gave no log-probs)")
    lps = [float(x) for x in lps]
    cum = record.get("greedy_cumulative_logprobs")
    if isinstance(cum, list):  # released HonestyBench files store a one-element list
        cum = cum[0] if cum else None
    if cum is None:
        cum = sum(lps)
    return float(cum), len(lps)


def prob(records: Sequence[dict]) -> np.ndarray:
    """Prob: ``exp(sum of greedy token log-probs)``, the sequence probability of the greedy answer.

    An empty greedy answer (0 tokens) gets 0.0 (it answers nothing). Raises ValueError naming the record when
    log-probs are missing or NaN."""
    out = np.empty(len(records))
    for i, r in enumerate(records):
        cum, n = _cumulative_logprob(r)
        if math.isnan(cum):
            raise ValueError(f"record {r.get('id', '?')}: greedy log-probs contain NaN")
        out[i] = math.exp(cum) if n else 0.0
    return np.clip(out, 0.0, 1.0)


def n_prob(records: Sequence[dict]) -> np.ndarray:
    """N-Prob: ``exp(cumulative log-prob / number of greedy tokens)``, the geometric-mean token probability.

    An empty greedy answer gets 0.0. Raises ValueError naming the record when log-probs are missing or NaN."""
    out = np.empty(len(records))
    for i, r in enumerate(records):
        cum, n = _cumulative_logprob(r)
        if math.isnan(cum):
            raise ValueError(f"record {r.get('id', '?')}: greedy log-probs contain NaN")
        out[i] = math.exp(cum / n) if n else 0.0
    return np.clip(out, 0.0, 1.0)


def _mean_field(records: Sequence[dict], field: str) -> np.ndarray:
    out = np.empty(len(records))
    for i, r in enumerate(records):
        values = r.get(field)
        if not values:
            raise ValueError(f"record {r.get('id', '?')}: '{field}' is missing or empty (no sampled answers)")
        out[i] = float(np.mean(np.asarray(values, dtype=float)))
    return np.clip(out, 0.0, 1.0)


def consis_lex(records: Sequence[dict]) -> np.ndarray:
    """Consis-Lex: mean ROUGE-L F1 between each sampled answer and the greedy answer (``consistency_rougeL``)."""
    return _mean_field(records, "consistency_rougeL")


def consis_sem(records: Sequence[dict]) -> np.ndarray:
    """Consis-Sem: share of sampled answers judged equivalent to the greedy answer (``consistency_judgement``);
    this is also the self-consistency target of EliCal's elicitation stage."""
    return _mean_field(records, "consistency_judgement")


ESTIMATORS: dict[str, Callable[[Sequence[dict]], np.ndarray]] = {
    "N-Prob": n_prob,
    "Consis-Lex": consis_lex,
    "Consis-Sem": consis_sem,
}
