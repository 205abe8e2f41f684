"""Post-hoc calibrated baselines: Platt scaling and isotonic regression on a training-free score.

EliCal's calibration stage sees k labelled questions (Ni et al., arXiv 2510.17509, Sec. 4). A fair baseline at the
same k takes a training-free estimator (N-Prob, Consis-Sem, ...) and fits a classic post-hoc calibrator on the same
k labels: Platt scaling (Platt, 1999, "Probabilistic outputs for support vector machines", Sec. 2.2) or isotonic
regression (Zadrozny & Elkan, 2002). Both calibrators follow the scikit-learn contract: the constructor stores
parameters, ``fit(scores, y)`` learns and returns ``self``, learned state ends with ``_``, ``predict(scores)``
returns confidence in [0, 1] (higher = more likely correct) and never refits.

One class only: when the k labels are all equal (all 0 or all 1 is likely at small k), both calibrators predict
that constant for every question: isotonic regression gives that by itself, and Platt scaling has no slope to
learn, so it is set to the same constant (``constant_``) instead of an unbounded logistic fit.

Monotone maps: a calibration map of a confidence must never reverse its ranking. Isotonic regression is
non-decreasing by construction; Platt scaling is fitted with its slope constrained to ``a >= 0``. The likelihood is
concave in (a, b), so when the unconstrained optimum has a < 0 the constrained one lies on a = 0: every question
gets the (weighted) mean target, ties instead of a reversed order (``slope_clipped_`` says it happened). At k = 4 ... 16
a negative slope is a frequent accident of the label draw (a few positives among low scores), not evidence that
the score ranks backwards.

Labels are 0/1 (greedy correctness) or soft targets in [0, 1] (sample accuracy, the target EliCal's calibration
stage uses): isotonic regression fits them as they are, Platt scaling maximises the Bernoulli likelihood with
each question entering as class 1 with weight y and class 0 with weight 1 - y.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PlattCalibrator", "IsotonicCalibrator", "CALIBRATORS", "calibrated_baselines"]


def _scores(scores, name: str = "scores") -> np.ndarray:
    try:
        s = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric, got {type(scores).__name__}: {err}") from None
    if s.ndim != 1:
        raise ValueError(f"{name} must be 1-D of shape (n,), got shape {s.shape}")
    if not np.isfinite(s).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return s


def _scores_labels(scores, y) -> tuple[np.ndarray, np.ndarray]:
    s = _scores(scores)
    try:
        y_arr = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"y must be numeric 0/1, got {type(y).__name__}: {err}") from None
    if y_arr.ndim != 1 or y_arr.shape[0] != s.shape[0]:
        raise ValueError(f"y must have shape ({s.shape[0]},) like scores, got {y_arr.shape}")
    if s.shape[0] == 0:
        raise ValueError("scores and y must not be empty (a calibrator needs at least one label)")
    bad = ~((y_arr >= 0.0) & (y_arr <= 1.0))
    if bad.any():
        raise ValueError(f"y must lie in [0, 1] (0/1 labels or soft targets), got {y_arr[bad][:5].tolist()}")
    return s, y_arr


class PlattCalibrator:
    """Platt scaling: confidence = sigmoid(a * score + b), fitted by maximum likelihood.

    Implemented with ``sklearn.linear_model.LogisticRegression`` (lbfgs, no penalty, tol 1e-10) on the score as
    the single feature. With ``prior_correction=True`` (Platt, 1999, Sec. 2.2; also what
    ``sklearn.calibration.CalibratedClassifierCV(method="sigmoid")`` does) the 0/1 targets are replaced by
    t+ = (N+ + 1) / (N+ + 2) and t- = 1 / (N- + 2), which keeps the fit finite when the k labels are separable;
    each question then enters twice, as class 1 with weight t and class 0 with weight 1 - t.

    ``monotone=True`` (default) constrains the slope to ``a >= 0`` (the map never reverses the score's ranking):
    when the unconstrained fit's slope is negative, the constrained maximum likelihood is ``a = 0`` and
    ``b = logit(mean target)`` (the mean of the prior-corrected or soft targets); ``monotone=False`` is the
    unconstrained fit.

    Attributes after fit: ``coef_`` (a), ``intercept_`` (b), ``constant_`` (None, or the class rate when the labels
    hold one class; then a = 0 and b is unused), ``slope_clipped_`` (True when the unconstrained slope was
    negative and a = 0 was kept), ``n_labels_`` (k).
    """

    def __init__(self, prior_correction: bool = True, max_iter: int = 1000, monotone: bool = True):
        self.prior_correction = prior_correction
        self.max_iter = max_iter
        self.monotone = monotone

    def fit(self, scores, y) -> "PlattCalibrator":
        """scores : ndarray of shape (k,), any finite reals. y : ndarray of shape (k,), 0/1 (greedy correctness) or
        soft targets in [0, 1] (then without prior correction). Returns self. Raises ValueError on invalid input
        (the message names the argument)."""
        from sklearn.linear_model import LogisticRegression

        s, y = _scores_labels(scores, y)
        self.n_labels_ = int(s.shape[0])
        self.slope_clipped_ = False
        if y.min() == y.max():
            self.constant_, self.coef_, self.intercept_ = float(y[0]), 0.0, 0.0
            return self
        self.constant_ = None
        binary = bool(np.isin(y, (0.0, 1.0)).all())
        n_pos = int(y.sum()) if binary else 0
        n_neg = self.n_labels_ - n_pos
        if self.prior_correction and binary:
            t = np.where(y == 1, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
        else:
            t = y.astype(np.float64)
        X = np.r_[s, s][:, None]
        target = np.r_[np.ones_like(s), np.zeros_like(s)]
        weight = np.r_[t, 1.0 - t]
        keep = weight > 0  # without prior correction half of the duplicated rows have weight 0
        lr = LogisticRegression(C=np.inf, solver="lbfgs", tol=1e-10, max_iter=self.max_iter)
        lr.fit(X[keep], target[keep], sample_weight=weight[keep])
        self.coef_, self.intercept_ = float(lr.coef_[0, 0]), float(lr.intercept_[0])
        if self.monotone and self.coef_ < 0:
            # Concave likelihood: the optimum under a >= 0 is on a = 0, where b is the logit of the mean target.
            p = float(np.clip(np.sum(weight[keep] * target[keep]) / np.sum(weight[keep]), 1e-12, 1 - 1e-12))
            self.coef_, self.intercept_, self.slope_clipped_ = 0.0, float(np.log(p / (1 - p))), True
        return self

    def predict(self, scores) -> np.ndarray:
        """scores : ndarray of shape (m,). Returns confidence, ndarray of shape (m,) in [0, 1].
        Raises ValueError on invalid input, RuntimeError before fit."""
        if not hasattr(self, "n_labels_"):
            raise RuntimeError("PlattCalibrator is not fitted; call fit(scores, y) first")
        s = _scores(scores)
        if self.constant_ is not None:
            return np.full(s.shape[0], self.constant_)
        z = self.coef_ * s + self.intercept_
        return np.clip(0.5 * (1.0 + np.tanh(0.5 * z)), 0.0, 1.0)  # sigmoid without overflow


class IsotonicCalibrator:
    """Isotonic regression of the 0/1 label on the score (Zadrozny & Elkan, 2002): a non-decreasing step function.

    ``sklearn.isotonic.IsotonicRegression(increasing=True, out_of_bounds="clip", y_min=0, y_max=1)``: scores
    outside the fitted range get the value at the nearest end. One-class labels give the constant class rate.
    Attributes after fit: ``isotonic_`` (the fitted sklearn object), ``constant_`` (None, or the class rate for
    one-class labels), ``n_labels_`` (k).
    """

    def fit(self, scores, y) -> "IsotonicCalibrator":
        """scores : ndarray of shape (k,), any finite reals. y : ndarray of shape (k,), 0/1 or soft targets in
        [0, 1]. Returns self. Raises ValueError on invalid input (the message names the argument)."""
        from sklearn.isotonic import IsotonicRegression

        s, y = _scores_labels(scores, y)
        self.n_labels_ = int(s.shape[0])
        self.constant_ = float(y[0]) if y.min() == y.max() else None
        self.isotonic_ = IsotonicRegression(increasing=True, out_of_bounds="clip", y_min=0.0, y_max=1.0)
        self.isotonic_.fit(s, y)
        return self

    def predict(self, scores) -> np.ndarray:
        """scores : ndarray of shape (m,). Returns confidence, ndarray of shape (m,) in [0, 1].
        Raises ValueError on invalid input, RuntimeError before fit."""
        if not hasattr(self, "n_labels_"):
            raise RuntimeError("IsotonicCalibrator is not fitted; call fit(scores, y) first")
        s = _scores(scores)
        if self.constant_ is not None:
            return np.full(s.shape[0], self.constant_)
        return np.clip(self.isotonic_.predict(s), 0.0, 1.0)


CALIBRATORS: dict[str, type] = {"Platt": PlattCalibrator, "Isotonic": IsotonicCalibrator}


def calibrated_baselines(train_scores: dict[str, np.ndarray], eval_scores: dict[str, np.ndarray], labels,
                         label_sets: dict[int, np.ndarray],
                         calibrators: tuple[str, ...] = ("Platt", "Isotonic")) -> dict[str, np.ndarray]:
    """Every training-free estimator, calibrated post hoc on the same k labels as EliCal(k), for every k.

    train_scores : {estimator: ndarray of shape (n_pool,)}, the estimator's score on the training pool.
    eval_scores : {estimator: ndarray of shape (n_eval,)}, the same estimators on the evaluation questions.
    labels : ndarray of shape (n_pool,), the label target of the pool questions in [0, 1] (the same target as
    Cal-Only(k) / EliCal(k): sample accuracy or greedy correctness); only the entries indexed by ``label_sets``
    are read, so unlabelled pool questions may hold any placeholder in [0, 1].
    label_sets : {k: ndarray of indices into the pool}, the k labelled questions (the subset Cal-Only(k) and
    EliCal(k) get). calibrators : names from :data:`CALIBRATORS`.
    Returns {"<estimator>+<calibrator>(<k>)": confidence, ndarray of shape (n_eval,) in [0, 1]}, ordered by
    estimator, then calibrator, then increasing k; e.g. "Consis-Sem+Isotonic(16)".
    Raises ValueError if the estimator names differ, a shape is wrong, an index is out of range or repeated,
    a calibrator name is unknown, or a label is outside [0, 1].
    """
    if set(train_scores) != set(eval_scores):
        raise ValueError(f"train_scores and eval_scores must name the same estimators, got {sorted(train_scores)} "
                         f"and {sorted(eval_scores)}")
    unknown = [c for c in calibrators if c not in CALIBRATORS]
    if unknown:
        raise ValueError(f"calibrators must be among {sorted(CALIBRATORS)}, got {unknown}")
    y = np.asarray(labels)
    if y.ndim != 1:
        raise ValueError(f"labels must be 1-D of shape (n_pool,), got shape {y.shape}")
    n_pool = y.shape[0]
    subsets = {}
    for k, idx in sorted(label_sets.items()):
        idx = np.asarray(idx)
        if idx.ndim != 1 or idx.size == 0 or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"label_sets[{k}] must be a non-empty 1-D array of integer pool indices")
        if idx.min() < 0 or idx.max() >= n_pool or np.unique(idx).size != idx.size:
            raise ValueError(f"label_sets[{k}] must hold distinct indices in [0, {n_pool}), got {idx[:5].tolist()}")
        subsets[k] = idx
    out = {}
    for name in train_scores:
        s_train = _scores(train_scores[name], f"train_scores[{name!r}]")
        s_eval = _scores(eval_scores[name], f"eval_scores[{name!r}]")
        if s_train.shape[0] != n_pool:
            raise ValueError(f"train_scores[{name!r}] must have shape ({n_pool},) like labels, got {s_train.shape}")
        for cal in calibrators:
            for k, idx in subsets.items():
                out[f"{name}+{cal}({k})"] = CALIBRATORS[cal]().fit(s_train[idx], y[idx]).predict(s_eval)
    return out
