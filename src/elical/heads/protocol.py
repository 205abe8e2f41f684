"""The one fitting protocol of every label-using method (Ni et al., arXiv 2510.17509, Sec. 3 and 5).

Given a head kind's :class:`~elical.heads.stages.HeadStages`, the pool's features, its self-consistency, its label
target, a label order and a k grid, it fits every method the same way:

- stage 1, **Eli-Only**, once on the whole pool's self-consistency (no label);
- per k, on the first k questions of the label order (sorted: a head depends on *which* questions are labelled,
  not on their order), **Cal-Only(k)** from scratch and **EliCal(k)** from the stage-1 head, with the same target;
- optionally **Cal-Only(all=n)** on the whole pool;
- the post-hoc **calibrated rivals** (``<estimator>+Platt(k)``, ``<estimator>+Isotonic(k)``) on the same k
  questions and the same target (:func:`calibrated_rivals`).

``elical run`` (:mod:`elical.jobs.heads_stage`), ``elical sweep`` (:mod:`elical.jobs.sweep`) and ``elical study``
(:mod:`elical.study.protocol`) all call :func:`label_sets`, :func:`fit_heads` and :func:`calibrated_rivals`; none
has a k-loop of its own. Evaluation labels are never read here.
"""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple

import numpy as np

__all__ = ["Fitted", "label_sets", "fit_labelled", "fit_heads", "calibrated_rivals", "ALL_RIVALS"]

#: ``pairs`` value of :func:`calibrated_rivals` meaning every estimator with every calibrator.
ALL_RIVALS = None


class Fitted(NamedTuple):
    """One fitted head of the protocol. ``method``: "Eli-Only", "Cal-Only" or "EliCal"; ``k``: number of labelled
    questions (None for Eli-Only); ``whole_pool``: Cal-Only on every pool question (``include_all``)."""

    method: str
    k: int | None
    head: object
    whole_pool: bool = False

    @property
    def name(self) -> str:
        """The method's name in every table: "Eli-Only", "EliCal(64)", "Cal-Only(all=600)"."""
        if self.k is None:
            return self.method
        return f"{self.method}(all={self.k})" if self.whole_pool else f"{self.method}({self.k})"


def label_sets(order, k_values) -> dict[int, np.ndarray]:
    """{k: sorted pool indices}: the first k of ``order`` (a permutation of the pool, ndarray of shape (n_pool,))
    for every k of ``k_values`` (ints; ``"all"`` and values above the pool size mean the whole pool). Nested in k,
    increasing k. Raises ValueError for a k below 1."""
    order = np.asarray(order)
    n_pool = len(order)
    ks = set()
    for k in k_values:
        k = n_pool if k == "all" else int(k)
        if k < 1:
            raise ValueError(f"every k must be >= 1 or 'all', got {k}")
        ks.add(min(k, n_pool))
    return {k: np.sort(order[:k]) for k in sorted(ks)}


def fit_labelled(stages, eli, X_k, y_k) -> tuple[object, object]:
    """(Cal-Only, EliCal) on the same k labelled questions: ``X_k`` (features of shape (k, d) or k prompts),
    ``y_k`` (shape (k,), in [0, 1]); EliCal continues from the stage-1 head ``eli``."""
    return stages.cal_only(X_k, y_k), stages.elical(eli, X_k, y_k)


def fit_heads(stages, X_pool, c_cons, y, sets: dict[int, np.ndarray], *, eli=None, include_all: bool = False,
              cache: dict | None = None, reuse: Callable | None = None) -> Iterator[Fitted]:
    """Every label-using head of one seed on one feature set, in a fixed order.

    Parameters
    ----------
    stages : :class:`elical.heads.stages.HeadStages` (it carries the head kind and the seed).
    X_pool : the pool's inputs: ndarray of shape (n_pool, d), or n_pool prompts for a head on prompts.
    c_cons : ndarray of shape (n_pool,), self-consistency in [0, 1] (stage 1's target; unused when ``eli`` given).
    y : ndarray of shape (n_pool,), the label target in [0, 1] (only rows in ``sets`` are read).
    sets : {k: sorted pool indices} (:func:`label_sets`).
    eli : a fitted stage-1 head to reuse (e.g. across targets or label orders of a seed); None: fitted here.
    include_all : also Cal-Only on the whole pool when n_pool is not among the k.
    cache : a dict kept by the caller: an equal labelled set gets the same heads (``elical sweep`` shares them
        between the random and stratified orders).
    reuse : ``reuse(method, k, idx)`` -> a saved head or None (``elical run --resume``: a head whose fingerprint
        matches is loaded, not refitted); ``k`` None for Eli-Only, ``idx`` the pool indices it trains on.

    Yields
    ------
    :class:`Fitted`: Eli-Only first, then Cal-Only(k), EliCal(k) for increasing k, then Cal-Only(all=n_pool).
    """
    n_pool = len(y)
    everything = np.arange(n_pool)
    if eli is None:
        eli = (reuse and reuse("Eli-Only", None, everything)) or stages.eli_only(X_pool, c_cons)
    yield Fitted("Eli-Only", None, eli)
    cache = {} if cache is None else cache
    for k, idx in sets.items():
        key = tuple(np.asarray(idx).tolist())
        if key not in cache:
            saved = [reuse(m, k, idx) for m in ("Cal-Only", "EliCal")] if reuse else [None, None]
            if None in saved:
                saved = fit_labelled(stages, eli, stages.take(X_pool, idx), y[idx])
            cache[key] = tuple(saved)
        cal, elical = cache[key]
        yield Fitted("Cal-Only", k, cal)
        yield Fitted("EliCal", k, elical)
    if include_all and n_pool not in sets:
        head = (reuse and reuse("Cal-Only", n_pool, everything)) or stages.cal_only(X_pool, y)
        yield Fitted("Cal-Only", n_pool, head, whole_pool=True)


def calibrated_rivals(train_scores: dict[str, np.ndarray], eval_scores: dict[str, np.ndarray], y,
                      sets: dict[int, np.ndarray], pairs=ALL_RIVALS) -> dict[str, np.ndarray]:
    """The post-hoc calibrated rivals of EliCal(k): each estimator's pool score mapped onto the same k labels and
    the same target by a 1-D calibrator (:func:`elical.estimators.calibration.calibrated_baselines`).

    train_scores / eval_scores : {estimator: scores on the pool (n_pool,) / on the evaluation set (n_eval,)};
    y, sets : as :func:`fit_heads`. pairs : ``(estimator, calibrator)`` pairs to fit (e.g. ``(("Eli-Only",
    "Platt"),)``), or :data:`ALL_RIVALS` for every estimator with Platt and isotonic. Returns
    {"<estimator>+<calibrator>(<k>)": confidences of shape (n_eval,)}, by estimator, calibrator, then k.
    Raises ValueError as ``calibrated_baselines`` or for a pair naming an estimator without scores.
    """
    from elical.estimators.calibration import calibrated_baselines

    if pairs is None:
        return calibrated_baselines(train_scores, eval_scores, y, sets, calibrators=("Platt", "Isotonic"))
    out = {}
    for estimator, calibrator in pairs:
        if estimator not in train_scores or estimator not in eval_scores:
            raise ValueError(f"calibrated rival {estimator}+{calibrator}: no scores of {estimator!r}")
        out.update(calibrated_baselines({estimator: train_scores[estimator]}, {estimator: eval_scores[estimator]},
                                        y, sets, calibrators=(calibrator,)))
    return out
