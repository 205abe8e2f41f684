"""Metrics for confidence evaluation: AUROC, ECE, Brier, Alignment, risk-coverage, bootstrap CIs.

Every function takes ``y``, an ndarray of shape (n,) with 0/1 (is the greedy answer correct), and ``confidence``,
an ndarray of shape (n,) of probabilities in [0, 1] (higher = more likely correct). Inputs are checked once, at
the public boundary; a bad input raises ``ValueError`` naming the argument. The metrics follow the EliCal paper
(Ni et al., arXiv 2510.17509, Sec. 5 "Evaluation metrics" and HonestyBench), selective prediction follows
Geifman & El-Yaniv (2017) / Geifman et al. (2019, AURC), ECE follows Guo et al. (2017).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy.stats import rankdata
from sklearn.metrics import brier_score_loss, roc_auc_score

from elical.evaluation.decision import percentile_interval, resample_rows
from elical.evaluation.paper import paper_alignment

_STRATEGIES = ("uniform", "quantile")


# ----------------------------------------------------------------------------------------------- validation
def _check(y, confidence) -> tuple[np.ndarray, np.ndarray]:
    """Return (y as int64, confidence as float64), both of shape (n,), or raise ValueError naming the argument."""
    try:
        c = np.asarray(confidence, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"confidence must be numeric, got {type(confidence).__name__}: {err}") from None
    try:
        y_arr = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"y must be numeric 0/1, got {type(y).__name__}: {err}") from None
    for name, arr in (("y", y_arr), ("confidence", c)):
        if arr.ndim != 1:
            raise ValueError(f"{name} must be 1-D of shape (n,), got shape {arr.shape}")
    if y_arr.shape[0] != c.shape[0]:
        raise ValueError(f"y and confidence must have the same length, got {y_arr.shape[0]} and {c.shape[0]}")
    if c.shape[0] == 0:
        raise ValueError("y and confidence must not be empty")
    bad = ~np.isin(y_arr, (0.0, 1.0))
    if bad.any():
        raise ValueError(f"y must contain only 0 and 1, got {y_arr[bad][:5].tolist()}")
    if not np.isfinite(c).all():
        raise ValueError("confidence must be finite (no NaN or inf)")
    if c.min() < 0.0 or c.max() > 1.0:
        raise ValueError(f"confidence must lie in [0, 1], got min {c.min():.6g} and max {c.max():.6g}")
    return y_arr.astype(np.int64), c


def _check_n_bins_strategy(n_bins, strategy) -> None:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    if strategy not in _STRATEGIES:
        raise ValueError(f"strategy must be one of {_STRATEGIES}, got {strategy!r}")


def _check_fraction(name: str, value, closed_right: bool = False) -> float:
    ok = isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not (0.0 < value < 1.0 or (closed_right and value == 1.0)):
        interval = "(0, 1]" if closed_right else "(0, 1)"
        raise ValueError(f"{name} must be a number in {interval}, got {value!r}")
    return float(value)


# ----------------------------------------------------------------------------------------- fast internals
# Unchecked versions on validated arrays, used by the public functions and by the bootstrap loop.
def _auroc_rank(y: np.ndarray, c: np.ndarray) -> float:
    """AUROC by the Mann-Whitney rank statistic (ties count 1/2); equal to roc_auc_score, ~20x faster."""
    n_pos = int(y.sum())
    n_neg = y.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(c)
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def _brier(y: np.ndarray, c: np.ndarray) -> float:
    return float(np.mean((c - y) ** 2))


def _bins(y: np.ndarray, c: np.ndarray, n_bins: int, strategy: str):
    """Return (edges (n_bins+1,), count, sum of confidence, sum of y), each per bin of shape (n_bins,)."""
    if strategy == "uniform":
        # i / n_bins (not linspace) so that a confidence written as e.g. 0.3 lands in bin 3 = [0.3, 0.4).
        edges = np.arange(n_bins + 1, dtype=np.float64) / n_bins
        idx = np.clip(np.searchsorted(edges, c, side="right") - 1, 0, n_bins - 1)
    else:
        edges = np.quantile(c, np.arange(n_bins + 1, dtype=np.float64) / n_bins)
        # The bin is a function of the value alone, so equal confidences always share a bin.
        idx = np.searchsorted(edges[1:-1], c, side="right")
    count = np.bincount(idx, minlength=n_bins).astype(np.float64)
    conf_sum = np.bincount(idx, weights=c, minlength=n_bins)
    y_sum = np.bincount(idx, weights=y.astype(np.float64), minlength=n_bins)
    return edges, count, conf_sum, y_sum


def _ece(y: np.ndarray, c: np.ndarray, n_bins: int, strategy: str) -> float:
    _, _, conf_sum, y_sum = _bins(y, c, n_bins, strategy)
    return float(np.abs(y_sum - conf_sum).sum() / c.shape[0])  # = sum_b |B|/n * |acc(B) - conf(B)|


def _risk_curve(y: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Risk at k = 1..n most confident, ties resolved by their expected error under random tie order."""
    order = np.argsort(-c, kind="stable")
    c_s, err = c[order], 1.0 - y[order]
    n = c_s.shape[0]
    starts = np.flatnonzero(np.r_[True, c_s[1:] != c_s[:-1]])
    sizes = np.diff(np.r_[starts, n])
    group_err = np.add.reduceat(err, starts)
    err_before = np.cumsum(group_err) - group_err
    gid = np.repeat(np.arange(starts.shape[0]), sizes)
    k = np.arange(1, n + 1, dtype=np.float64)
    cum_err = err_before[gid] + (k - starts[gid]) * group_err[gid] / sizes[gid]
    return cum_err / k


def _alignment_accuracy(y: np.ndarray, c: np.ndarray, threshold: float) -> float:
    answered = c >= threshold
    return float(np.mean(np.where(answered, y == 1, y == 0)))


def _best_threshold(y: np.ndarray, c: np.ndarray) -> float:
    values = np.unique(c)  # ascending
    # Abstain on all: a threshold above every possible confidence (they lie in [0, 1]), not just above this part's
    # largest, so a dev part that chooses it keeps abstaining on every test question.
    candidates = np.r_[values, np.nextafter(max(values[-1], 1.0), np.inf)]
    # For threshold t: right = #(correct with c >= t) + #(wrong with c < t).
    pos_below = np.searchsorted(np.sort(c[y == 1]), candidates, side="left")
    neg_below = np.searchsorted(np.sort(c[y == 0]), candidates, side="left")
    right = (int(y.sum()) - pos_below) + neg_below
    return float(candidates[int(np.argmax(right))])  # argmax: first = smallest threshold among maximizers


def _split(n: int, dev_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if n < 2:
        raise ValueError(f"alignment needs at least 2 questions to split into dev and test parts, got {n}")
    n_dev = min(max(int(round(dev_fraction * n)), 1), n - 1)
    perm = np.random.default_rng(seed).permutation(n)
    return perm[:n_dev], perm[n_dev:]


def _check_resamples(n_resamples, level) -> float:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    return _check_fraction("confidence_level", level)


def _batch_metrics(Y: np.ndarray, C: np.ndarray, n_bins: int) -> dict[str, np.ndarray]:
    """AUROC, ECE (equal-width and equal-mass), Brier, AURC, Acc@50 and Acc@80 of each row of Y, C (shape (R, n)),
    in one vectorized pass: {metric: values of shape (R,)} (the registry's ``rows`` of these metrics)."""
    R, n = Y.shape
    rows = np.arange(R)[:, None]
    Yf = Y.astype(np.float64)
    out = {}
    for name, strategy in (("ece", "uniform"), ("ece_quantile", "quantile")):
        if strategy == "uniform":
            edges = np.arange(n_bins + 1, dtype=np.float64) / n_bins
            idx = np.clip(np.searchsorted(edges, C, side="right") - 1, 0, n_bins - 1)
        else:  # same rule as _bins: the bin is the number of inner quantile edges <= the value
            inner = np.quantile(C, np.arange(n_bins + 1, dtype=np.float64) / n_bins, axis=1).T[:, 1:-1]
            idx = (C[:, :, None] >= inner[:, None, :]).sum(axis=2)
        flat = (idx + rows * n_bins).ravel()
        conf_sum = np.bincount(flat, weights=C.ravel(), minlength=R * n_bins).reshape(R, n_bins)
        y_sum = np.bincount(flat, weights=Yf.ravel(), minlength=R * n_bins).reshape(R, n_bins)
        out[name] = np.abs(y_sum - conf_sum).sum(axis=1) / n
    out["brier"] = np.mean((C - Yf) ** 2, axis=1)
    # Risk curve per row, ties spread evenly as in _risk_curve; groups are numbered per row, offset by row * n.
    order = np.argsort(-C, axis=1, kind="stable")
    c_s, err = np.take_along_axis(C, order, axis=1), 1.0 - np.take_along_axis(Yf, order, axis=1)
    gid = np.concatenate([np.zeros((R, 1), np.int64), np.cumsum(c_s[:, 1:] != c_s[:, :-1], axis=1)], axis=1)
    flat = (gid + rows * n).ravel()
    size = np.bincount(flat, minlength=R * n).reshape(R, n)
    group_err = np.bincount(flat, weights=err.ravel(), minlength=R * n).reshape(R, n)
    start = np.cumsum(size, axis=1) - size
    err_before = np.cumsum(group_err, axis=1) - group_err
    g_size, g_start = np.take_along_axis(size, gid, 1), np.take_along_axis(start, gid, 1)
    k = np.arange(1, n + 1, dtype=np.float64)
    cum_err = np.take_along_axis(err_before, gid, 1) + (k - g_start) * np.take_along_axis(group_err, gid, 1) / g_size
    risk = cum_err / k
    # AUROC from the same sort: a tie group at descending positions [start, start + size) has mean ascending
    # rank n - start - (size - 1) / 2 (the average rank of rankdata), then the Mann-Whitney statistic.
    n_pos = Yf.sum(axis=1)
    n_neg = n - n_pos
    rank_sum = ((1.0 - err) * (n - g_start - (g_size - 1) / 2.0)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["auroc"] = np.where((n_pos > 0) & (n_neg > 0),
                                (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg), np.nan)
    out["aurc"] = risk.mean(axis=1)
    for name, coverage in (("acc@50", 0.5), ("acc@80", 0.8)):
        out[name] = 1.0 - risk[:, _coverage_k(coverage, n) - 1]
    return out


def batch_metrics(Y: np.ndarray, C: np.ndarray, n_bins: int = 10) -> dict[str, np.ndarray]:
    """Public name of the vectorized resampled metrics (the ``rows`` of seven registered metrics)."""
    return _batch_metrics(Y, C, n_bins)


def _coverage_k(coverage: float, n: int) -> int:
    # rounded to 9 decimals first so that e.g. 0.7 * 10 gives k = 7, not 8
    return max(int(math.ceil(round(coverage * n, 9))), 1)


# ------------------------------------------------------------------------------------------- public API
def auroc(y, confidence) -> float:
    """Area under the ROC curve of ``confidence`` as a score for ``y`` (EliCal Sec. 5; discrimination).

    y : ndarray of shape (n,), 0/1. confidence : ndarray of shape (n,), in [0, 1].
    Returns a float in [0, 1] computed with ``sklearn.metrics.roc_auc_score`` (ties count 1/2), or
    ``float("nan")`` when ``y`` holds one class only (AUROC is undefined then).
    Raises ValueError on invalid input.
    """
    y, c = _check(y, confidence)
    if y.min() == y.max():
        return float("nan")
    return float(roc_auc_score(y, c))


def reliability_bins(y, confidence, n_bins: int = 10, strategy: str = "uniform") -> dict:
    """Per-bin statistics for reliability diagrams and ECE (Guo et al., 2017).

    y : ndarray of shape (n,), 0/1. confidence : ndarray of shape (n,), in [0, 1].
    strategy "uniform": bin i = [i/n_bins, (i+1)/n_bins), the last bin closed, so a confidence of exactly 1.0
    falls in the top bin and 0.0 in the first. "quantile": edges ``np.quantile(confidence, i/n_bins)``, bin
    i = [edge_i, edge_i+1) with the last closed; equal confidences always share one bin, so bins can be
    empty or unequal when confidences tie.
    Returns a dict of ndarrays of shape (n_bins,): "lower", "upper" (bin edges), "count" (int),
    "mean_confidence" and "accuracy" (nan for empty bins).
    Raises ValueError on invalid input, n_bins < 1, or an unknown strategy.
    """
    y, c = _check(y, confidence)
    _check_n_bins_strategy(n_bins, strategy)
    edges, count, conf_sum, y_sum = _bins(y, c, n_bins, strategy)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.where(count > 0, conf_sum / count, np.nan)
        acc = np.where(count > 0, y_sum / count, np.nan)
    return {"lower": edges[:-1], "upper": edges[1:], "count": count.astype(np.int64),
            "mean_confidence": mean_conf, "accuracy": acc}


def ece(y, confidence, n_bins: int = 10, strategy: str = "uniform") -> float:
    """Expected calibration error, sum_b |B|/n * |acc(B) - conf(B)| (Guo et al., 2017; EliCal Sec. 5).

    y : ndarray of shape (n,), 0/1. confidence : ndarray of shape (n,), in [0, 1].
    Bins as in :func:`reliability_bins` ("uniform": equal width, 1.0 in the top bin; "quantile": equal mass).
    Empty bins contribute 0. Returns a float in [0, 1] (lower is better).
    Raises ValueError on invalid input, n_bins < 1, or an unknown strategy.
    """
    y, c = _check(y, confidence)
    _check_n_bins_strategy(n_bins, strategy)
    return _ece(y, c, n_bins, strategy)


def brier(y, confidence) -> float:
    """Brier score, mean (confidence - y)^2, via ``sklearn.metrics.brier_score_loss`` (pos_label=1).

    y : ndarray of shape (n,), 0/1. confidence : ndarray of shape (n,), in [0, 1].
    Returns a float in [0, 1] (lower is better); defined for one-class ``y`` too. Raises ValueError on invalid input.
    """
    y, c = _check(y, confidence)
    return float(brier_score_loss(y, c, pos_label=1))


def alignment_accuracy(y, confidence, threshold: float) -> float:
    """Alignment at a fixed threshold (EliCal Sec. 5): the share of right answer/abstain decisions.

    The model answers when ``confidence >= threshold`` and abstains otherwise; a decision is right when it
    answers and is correct (y = 1) or abstains and would have been wrong (y = 0).
    y : ndarray of shape (n,), 0/1. confidence : ndarray of shape (n,), in [0, 1]. threshold : float (any finite
    value; above every confidence means abstain on all). Returns a float in [0, 1].
    Raises ValueError on invalid input or a non-finite threshold.
    """
    y, c = _check(y, confidence)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.number)) \
            or not math.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number, got {threshold!r}")
    return _alignment_accuracy(y, c, float(threshold))


def alignment_rows(Y, C, threshold: float):
    """:func:`alignment_accuracy` along the last axis, unchecked: a float for shape (m,), shape (R,) for (R, m)
    (the registry's ``score`` of Alignment, on the test part and on its resamples)."""
    Y, C = np.asarray(Y), np.asarray(C)
    return np.mean(np.where(C >= threshold, Y == 1, Y == 0), axis=-1)


def best_threshold(y, confidence) -> float:
    """Threshold maximizing :func:`alignment_accuracy` on (y, confidence).

    Candidates: every distinct confidence, plus the next float above 1.0 (abstain on all: every confidence in
    [0, 1] lies below it, so the choice carries over to other questions as "abstain on all").
    Ties: the smallest threshold among the maximizers (answer as much as the data allow). Deterministic.
    y : ndarray of shape (n,), 0/1. confidence : ndarray of shape (n,), in [0, 1]. Returns a float.
    Raises ValueError on invalid input.
    """
    y, c = _check(y, confidence)
    return _best_threshold(y, c)


def alignment(y, confidence, dev_fraction: float = 0.2, seed: int = 0, protocol: str = "elical") -> dict:
    """Alignment with the threshold chosen on a held-out dev part (EliCal Sec. 5).

    ``protocol="elical"`` (leak-free): dev part = the first ``round(dev_fraction * n)`` (clipped to [1, n-1])
    indices of ``np.random.default_rng(seed).permutation(n)``, threshold = :func:`best_threshold` on it; ``"paper"``:
    the official code's (:mod:`elical.evaluation.paper`). Alignment = :func:`alignment_accuracy` on the rest.
    y : ndarray (n,), 0/1, n >= 2. confidence : ndarray (n,) in [0, 1]. Returns {"alignment", "threshold",
    "n_dev", "n_test"}. Raises ValueError on invalid input, n < 2, dev_fraction outside (0, 1), an unknown protocol.
    """
    y, c = _check(y, confidence)
    dev_fraction = _check_fraction("dev_fraction", dev_fraction)
    if protocol != "elical":  # the paper's protocol (a ValueError for an unknown one)
        return paper_alignment(y, c, dev_fraction, protocol=protocol)
    dev, test = _split(y.shape[0], dev_fraction, seed)
    threshold = _best_threshold(y[dev], c[dev])
    return {"alignment": _alignment_accuracy(y[test], c[test], threshold), "threshold": threshold,
            "n_dev": int(dev.shape[0]), "n_test": int(test.shape[0])}


def risk_coverage(y, confidence) -> tuple[np.ndarray, np.ndarray]:
    """Risk-coverage curve of selective prediction (Geifman & El-Yaniv, 2017).

    Questions are ranked by decreasing confidence; at coverage k/n (k = 1..n) the risk is the error rate
    (share of y = 0) of the k most confident. Ties: within a group of equal confidences the errors are spread
    evenly, i.e. the risk is its expectation under a random order of the tied questions, so the curve does not
    depend on the input order. y : ndarray of shape (n,), 0/1. confidence : ndarray of shape (n,), in [0, 1].
    Returns (coverage, risk), two ndarrays of shape (n,). Raises ValueError on invalid input.
    """
    y, c = _check(y, confidence)
    n = y.shape[0]
    return np.arange(1, n + 1, dtype=np.float64) / n, _risk_curve(y, c)


def aurc(y, confidence) -> float:
    """Area under the risk-coverage curve: the mean risk over the n coverage points (Geifman et al., 2019).

    Ties as in :func:`risk_coverage`. y : ndarray of shape (n,), 0/1. confidence : ndarray of shape (n,),
    in [0, 1]. Returns a float in [0, 1] (lower is better). Raises ValueError on invalid input.
    """
    y, c = _check(y, confidence)
    return float(np.mean(_risk_curve(y, c)))


def accuracy_at_coverage(y, confidence, coverage: float) -> float:
    """Accuracy of the ``k = ceil(coverage * n)`` most confident questions (selective accuracy).

    ``coverage * n`` is rounded to 9 decimals before the ceiling so that e.g. 0.7 * 10 gives k = 7.
    Ties at the cut as in :func:`risk_coverage` (expected accuracy under a random order of tied questions).
    y : ndarray of shape (n,), 0/1. confidence : ndarray of shape (n,), in [0, 1]. coverage : float in (0, 1].
    Returns a float in [0, 1]. Raises ValueError on invalid input or coverage outside (0, 1].
    """
    y, c = _check(y, confidence)
    coverage = _check_fraction("coverage", coverage, closed_right=True)
    return float(1.0 - _risk_curve(y, c)[_coverage_k(coverage, y.shape[0]) - 1])


def bootstrap_ci(metric: Callable[[np.ndarray, np.ndarray], float], y, confidence, n_resamples: int = 1000,
                 confidence_level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``metric`` over questions (Efron & Tibshirani, 1993).

    Each resample draws n indices with replacement: ``rng = np.random.default_rng(seed)``, then
    ``rng.integers(0, n, size=n)`` once per resample. ``metric(y_resampled, confidence_resampled) -> float``;
    resamples where it returns nan (e.g. AUROC on one class) are dropped. The same seed gives the same interval.
    y : ndarray of shape (n,), 0/1. confidence : ndarray of shape (n,), in [0, 1].
    Returns (low, high), the (1-level)/2 and (1+level)/2 quantiles; (nan, nan) if every resample was nan.
    Raises ValueError on invalid input, n_resamples < 1, or confidence_level outside (0, 1).
    """
    y, c = _check(y, confidence)
    level = _check_resamples(n_resamples, confidence_level)
    values = np.concatenate([[metric(y[row], c[row]) for row in idx] for idx in resample_rows(y.shape[0],
                                                                                                n_resamples, seed)])
    return percentile_interval(np.asarray(values, dtype=np.float64), level)


def evaluate_confidence(y, confidence, dev_fraction: float = 0.2, seed: int = 0, n_bins: int = 10,
                        n_resamples: int = 1000, confidence_level: float = 0.95) -> dict:
    """All metrics of one method on one evaluation set, each with a seeded percentile bootstrap interval.

    Keys: every metric of the registry :data:`elical.evaluation.METRICS` (:mod:`elical.evaluation.spec`; e.g.
    "auroc", "ece" with ``n_bins`` equal-width bins, "ece_quantile", "brier", "alignment", "aurc", "acc@50",
    "acc@80", "pr_auc", "cov@risk10", "util@1", "util_mean"), then "threshold" (Alignment's dev-chosen threshold),
    "thresholds" ({metric: its dev choice} of every metric that needs a dev split), "n_dev", "n_test" (see
    :func:`alignment`), "accuracy" (mean y), "n", "n_bins", "strategy" ({metric: binning} of the ECE variants),
    "n_resamples", "ci_level", and "ci": {metric: [low, high]} for every metric with an interval. Intervals:
    ``n_resamples`` resamples of the n questions drawn as in :func:`bootstrap_ci` with ``seed`` (so each equals
    ``bootstrap_ci(metric, y, confidence, n_resamples, confidence_level, seed)``), shared by all metrics; a metric
    that needs a dev split is resampled over the test part with its dev choice held fixed (the choice's own
    variance is not included). Resamples with one class are dropped for AUROC and PR-AUC only; an interval is
    [nan, nan] when every resample was nan.
    ECE's bootstrap is biased upward (resampling adds noise to every bin), so its interval may lie above the point.
    y : ndarray of shape (n,), 0/1, n >= 2. confidence : ndarray of shape (n,), in [0, 1].
    Cost: one vectorized bootstrap for all metrics, about 0.5 s on one core for n = 1000 and 1000 resamples.
    Raises ValueError on invalid input or arguments.
    """
    y, c = _check(y, confidence)
    _check_n_bins_strategy(n_bins, "uniform")
    dev_fraction = _check_fraction("dev_fraction", dev_fraction)
    level = _check_resamples(n_resamples, confidence_level)
    dev, test = _split(y.shape[0], dev_fraction, seed)
    from elical.evaluation.spec import metric_names, metric_spec, score_all

    out, chosen, ci = score_all(y, c, dev, test, n_bins=n_bins, n_resamples=n_resamples, seed=seed, level=level)
    out.update({
        "threshold": float(chosen["alignment"]) if "alignment" in chosen else None,  # the key results have used
        "thresholds": chosen,
        "n_dev": int(dev.shape[0]),
        "n_test": int(test.shape[0]),
        "accuracy": float(np.mean(y)),
        "n": int(y.shape[0]),
        "n_bins": int(n_bins),
        "strategy": {name: metric_spec(name).params["strategy"] for name in metric_names()
                     if "strategy" in metric_spec(name).params},
        "n_resamples": int(n_resamples),
        "ci_level": level,
        "ci": ci,
    })
    return out
