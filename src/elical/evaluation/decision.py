"""Metrics for decisions, not only rankings: PR-AUC, coverage at a target risk, answer/abstain utility.

Definitions (docs/metrics.md), all on y (0/1: the greedy answer is correct) and confidence c in [0, 1]:

- **PR-AUC**: average precision of ranking the correct answers first (positives = correct answers), the step-wise
  area of scikit-learn's ``average_precision_score`` (no interpolation). Useful when correct answers are scarce,
  as for small models. nan with one class.
- **Coverage at risk r** (``cov@risk10``, ``cov@risk20``; r = 0.1, 0.2; Geifman & El-Yaniv, 2017, "selective
  classification" with a risk target): the threshold is the lowest t whose answered dev questions (c >= t) have
  an error rate of at most r (the largest dev coverage at that risk; none reaching it: answer nothing); the score
  is the share of test-part questions answered at that t.
- **Utility at cost k** (``util@1/9``, ``util@1``, ``util@9``; our own, after the answer/abstain utility of
  selective prediction): +1 for a correct answer, -k for a wrong one, 0 for an abstention, averaged over the test
  part at the threshold that maximises it on the dev part (abstaining on everything allowed); ``util_mean`` is the
  mean over the three costs. k = 9 rewards answering only above 90 % confidence, k = 1/9 above 10 %.

The dev / test parts are Alignment's (:func:`elical.evaluation.metrics.alignment`): nothing is chosen on the
part that is scored. Bootstrap intervals resample the test part with the thresholds held fixed (PR-AUC: all n).

This module also holds elical's one bootstrap: :func:`resample_rows` (the resampled question indices, in chunks)
and :func:`percentile_interval`; ``evaluate_confidence``, ``bootstrap_ci`` and the study's paired intervals use them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pr_auc", "pr_auc_rows", "pr_auc_batch", "risk_threshold", "utility_threshold",
           "utility_thresholds", "coverage_at", "utility_at", "mean_utility_at", "resample_rows", "percentile_interval"]



def pr_auc(y, c) -> float:
    """Average precision of ``c`` for the correct answers ``y == 1``; nan when y has one class.
    y, c : ndarrays of shape (n,)."""
    from sklearn.metrics import average_precision_score

    y, c = np.asarray(y), np.asarray(c, dtype=np.float64)
    if y.min() == y.max():
        return float("nan")
    return float(average_precision_score(y, c))


def _counts(y: np.ndarray, c: np.ndarray):
    """Candidate thresholds (each distinct value, then "answer nothing": one above every confidence in [0, 1], not
    just above this part's largest, so a dev part that chooses it keeps abstaining on every test question) and, for
    each, the number of correct and of wrong answers with c >= t."""
    values = np.unique(c)
    candidates = np.r_[values, np.nextafter(max(values[-1], 1.0), np.inf)]
    pos, neg = np.sort(c[y == 1]), np.sort(c[y == 0])
    n_pos = pos.size - np.searchsorted(pos, candidates, side="left")
    n_neg = neg.size - np.searchsorted(neg, candidates, side="left")
    return candidates, n_pos, n_neg


def risk_threshold(y, c, risk: float) -> float:
    """The lowest threshold whose answered questions have an error rate <= ``risk`` (the largest coverage at that
    risk); one above max(1.0, max(c)) (answer nothing) when no threshold reaches it."""
    y, c = np.asarray(y), np.asarray(c, dtype=np.float64)
    candidates, n_pos, n_neg = _counts(y, c)
    answered = n_pos + n_neg
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = (answered > 0) & (n_neg <= risk * answered + 1e-12)
    return float(candidates[np.argmax(ok)] if ok.any() else candidates[-1])


def utility_threshold(y, c, cost: float) -> float:
    """The threshold maximising the mean utility (+1 correct answered, -cost wrong answered, 0 abstained); the
    smallest such threshold (the largest coverage) among ties."""
    y, c = np.asarray(y), np.asarray(c, dtype=np.float64)
    candidates, n_pos, n_neg = _counts(y, c)
    return float(candidates[int(np.argmax(n_pos - cost * n_neg))])


def utility_thresholds(y, c, costs) -> list[float]:
    """:func:`utility_threshold` for each cost of ``costs`` (``util_mean``'s dev choice)."""
    return [utility_threshold(y, c, cost) for cost in costs]


def coverage_at(Y, C, threshold: float, risk: float | None = None):
    """Share answered (``C >= threshold``) along the last axis: a float for shape (m,), shape (R,) for (R, m).
    ``risk`` is the target the threshold was chosen for (unused here)."""
    return np.mean(np.asarray(C) >= threshold, axis=-1)


def utility_at(Y, C, threshold: float, cost: float):
    """Mean utility along the last axis at ``threshold``: +1 correct answered, -cost wrong answered, 0 abstained."""
    Y, C = np.asarray(Y), np.asarray(C)
    return np.mean(np.where(C >= threshold, np.where(Y == 1, 1.0, -cost), 0.0), axis=-1)


def mean_utility_at(Y, C, thresholds, costs):
    """Mean over ``costs`` of :func:`utility_at`, each at its own threshold."""
    return np.mean([utility_at(Y, C, t, cost) for t, cost in zip(thresholds, costs)], axis=0)


#: Resampled indices held at once by the bootstrap (memory bound), the default chunk of :func:`resample_rows`.
CHUNK_ELEMENTS = 250_000


def resample_rows(n: int, n_resamples: int, seed, chunk_elements: int | None = -1):
    """elical's bootstrap resampling (Efron & Tibshirani, 1993): yields index matrices of shape (r, n), r rows per
    chunk (at most ``chunk_elements`` indices, -1: :data:`CHUNK_ELEMENTS`; None: one chunk), ``n_resamples`` rows in all, each n draws with
    replacement from range(n). ``seed``: an int (``np.random.default_rng(seed)``) or a Generator to draw from
    (the study draws every dataset from one). The rows are the stream of ``n_resamples`` successive
    ``rng.integers(0, n, size=n)`` calls, whatever the chunking."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    chunk_elements = CHUNK_ELEMENTS if chunk_elements == -1 else chunk_elements
    rows = n_resamples if chunk_elements is None else max(1, chunk_elements // max(n, 1))
    for start in range(0, n_resamples, rows):
        yield rng.integers(0, n, size=(min(rows, n_resamples - start), n))


def pr_auc_rows(Y: np.ndarray, C: np.ndarray, chunk_elements: int = 250_000) -> np.ndarray:
    """:func:`pr_auc` of every row of Y, C (shape (R, n)), vectorized: per tie group g of the descending
    confidences, (correct answers in g / all correct) x precision at g's end; nan for a one-class row."""
    R, n = Y.shape
    out = np.empty(R)
    step = max(1, chunk_elements // max(n, 1))
    for s in range(0, R, step):
        y, c = Y[s:s + step].astype(np.float64), C[s:s + step]
        r = y.shape[0]
        order = np.argsort(-c, axis=1, kind="stable")
        c_s, y_s = np.take_along_axis(c, order, 1), np.take_along_axis(y, order, 1)
        new = np.ones((r, n), bool)
        new[:, 1:] = c_s[:, 1:] != c_s[:, :-1]
        flat = (np.cumsum(new, axis=1) - 1 + np.arange(r)[:, None] * n).ravel()
        size = np.bincount(flat, minlength=r * n).reshape(r, n)
        tp = np.bincount(flat, weights=y_s.ravel(), minlength=r * n).reshape(r, n)
        n_pos = y.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            ap = (tp * np.cumsum(tp, 1) / np.maximum(np.cumsum(size, 1), 1)).sum(axis=1) / n_pos
        out[s:s + step] = np.where((n_pos > 0) & (n_pos < n), ap, np.nan)
    return out


def pr_auc_batch(Y: np.ndarray, C: np.ndarray, n_bins: int = 10) -> np.ndarray:
    """:func:`pr_auc_rows` in the metric registry's ``rows(Y, C, n_bins)`` form (``n_bins`` unused)."""
    return pr_auc_rows(Y, C)


def percentile_interval(values: np.ndarray, level: float) -> tuple[float, float]:
    """Percentile bootstrap interval of ``values`` at ``level``, nan resamples dropped; (nan, nan) when all are."""
    v = values[~np.isnan(values)]
    if v.size == 0:
        return float("nan"), float("nan")
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(v, [alpha, 1.0 - alpha])
    return float(low), float(high)
