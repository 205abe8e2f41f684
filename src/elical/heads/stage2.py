"""Rules of EliCal's stage 2 (calibration on k labels, Ni et al., arXiv 2510.17509, Sec. 3) that are safe at every k.

With k = 4 ... 64 labels at a 5-10 % base rate most label sets hold 0-5 positives; continued training of all of a
head's weights then mostly removes the stage-1 ranking. The rules here (``rule=`` of
:func:`elical.heads.stages.fit_elical`; the table that chose the default is in docs/study.md, "Stage 2 at small k"):

- ``"full"``: continue training every weight from stage 1, epochs by the argmin of the mean CV curve (MSE).
- ``"one_se"``: the same, but the CV loss is class-balanced and stage 1 is left only when the CV gain over epoch 0
  exceeds its standard error (:mod:`elical.heads.cv`).
- ``"l2sp"``: ``"one_se"``'s CV with an L2-SP penalty towards the stage-1 weights, its strength chosen by CV from
  :data:`L2SP_GRID` (Li et al., 2018).
- ``"paper"``: the paper's settings for stage 2: learning rate 5e-5, a few (10) epochs, no early stopping.
- ``"affine"``: only an intercept b and a slope a >= 0 on the stage-1 logit z: confidence = sigmoid(a z + b), fitted
  by (monotone) Platt scaling on the k labels (:class:`elical.estimators.calibration.PlattCalibrator`) with
  0 < a <= :data:`MAX_SLOPE`; when the slope would be <= 0, a = 1 and only b is fitted. Eli-Only's ranking is kept exactly; its level is fixed.
- ``"affine<512"`` (the default): ``"affine"`` below :data:`FULL_FROM_K` = 512 labels, ``"full"`` from there on.
- ``"affine+full"``: ``"affine"``, switching to ``"one_se"``'s full stage 2 when the labels support it: both are
  cross-validated on the same folds and the full stage 2 is taken only when its class-balanced CV loss is lower
  than the affine map's by more than the difference's standard error.

Every rule: when the k labels hold one value (all 0, say), there is nothing to calibrate against and no stage-2
step is taken: EliCal(k) is Eli-Only.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from elical.estimators.calibration import PlattCalibrator
from elical.heads.cv import cv_splits, question_weights
from elical.heads.probe import ProbeHead

__all__ = ["STAGE2_RULES", "DEFAULT_STAGE2_RULE", "FULL_FROM_K", "LORA_STAGE2_RULES", "L2SP_GRID", "fit_stage2", "affine_stage2",
           "affine_parameters", "keep_stage1"]

STAGE2_RULES = ("full", "one_se", "l2sp", "paper", "affine", "affine+full", "affine<512")
#: The default of :func:`elical.heads.stages.fit_elical`, chosen by benchmarks/stage2_rules.py (docs/study.md,
#: "Stage 2 at small k"): the affine map below :data:`FULL_FROM_K` labels, the full stage 2 from there on.
DEFAULT_STAGE2_RULE = "affine<512"
#: Labels from which ``"affine<512"`` trains the full stage 2: on the 800-question SmolLM2 pool it beat Eli-Only in
#: 10/10 seeds with all 560 labelable questions and lost on average at k <= 128.
FULL_FROM_K = 512
#: Rules of the LoRA head's stage 2 (:func:`elical.heads.stages.fit_lora_elical`): the affine map of its logit, or
#: the full stage 2 (adapter and head) with epochs from the mean CV curve.
LORA_STAGE2_RULES = ("full", "affine")
#: Largest slope of the affine rule: with 4-16 labels nearly separable soft targets (one 0.2 on the top-scored
#: question, zeros elsewhere) drive the slope to ~80, which saturates float32 confidences to exactly 0 or 1 and ties
#: half the questions; the stage-1 logit is already on the self-consistency scale, so a few units suffice.
MAX_SLOPE = 4.0
#: L2-SP strengths tried by cross-validation (the penalty is added to a batch-mean MSE).
L2SP_GRID = (0.01, 0.1, 1.0)


def _stage1_logit(head: ProbeHead, X) -> np.ndarray:
    with torch.no_grad():
        Z = torch.from_numpy(np.ascontiguousarray((np.asarray(X, np.float32) - head.mean_.astype(np.float32))
                                                  / head.scale_.astype(np.float32)))
        return head.module_(Z).squeeze(-1).numpy().astype(np.float64)


def _intercept_only(z: np.ndarray, t: np.ndarray) -> float:
    """b maximising sum t log s(z + b) + (1 - t) log(1 - s(z + b)): the root of sum s(z + b) = sum t."""
    from scipy.optimize import brentq

    target = float(np.clip(t.sum(), 1e-6, t.shape[0] - 1e-6))
    return float(brentq(lambda b: np.sum(1.0 / (1.0 + np.exp(-(z + b)))) - target, -60.0, 60.0))


def affine_parameters(z: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(a, b) of the affine map sigmoid(a z + b) on the stage-1 logit ``z`` (ndarray of shape (k,)) for targets
    ``y`` (shape (k,), in [0, 1], two values at least): monotone Platt scaling with the slope in (0, MAX_SLOPE];
    a = 1 with b alone when the slope would be <= 0, a = MAX_SLOPE with b refitted when it would be larger.
    Shared by the probe and the LoRA heads."""
    cal = PlattCalibrator().fit(z, y)
    if cal.constant_ is None and 0 < cal.coef_ <= MAX_SLOPE:
        return cal.coef_, cal.intercept_
    # The likelihood is concave in (a, b): with the slope outside (0, MAX_SLOPE] the constrained optimum lies on
    # the boundary; a <= 0 keeps the stage-1 slope (a = 1) rather than a constant, a > MAX_SLOPE is cut there.
    a = MAX_SLOPE if cal.constant_ is None and cal.coef_ > MAX_SLOPE else 1.0
    binary = bool(np.isin(y, (0.0, 1.0)).all())
    n_pos = int(y.sum()) if binary else 0
    t = np.where(y == 1, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (y.shape[0] - n_pos + 2.0)) if binary else y
    return a, _intercept_only(a * z, t)


def keep_stage1(eli_head: ProbeHead, reason: str) -> ProbeHead:
    """A copy of the stage-1 head returned as EliCal(k) without any step; ``stage2_`` records why."""
    head = copy.deepcopy(eli_head)
    head.history_, head.n_epochs_, head.best_epoch_, head.best_val_loss_ = [(0, None, None)], 0, 0, None
    head.stage2_ = {"rule": "none", "reason": reason}
    return head


def affine_stage2(eli_head: ProbeHead, X_k, y_k) -> ProbeHead:
    """EliCal(k) as sigmoid(a z + b) on the stage-1 logit z, a >= 0 (see the module docstring).

    X_k : ndarray of shape (k, n_features); y_k : ndarray of shape (k,) in [0, 1], two values at least. Returns a
    new :class:`ProbeHead` (its last layer scaled by a and shifted by b; ``stage2_`` holds a and b)."""
    y = np.asarray(y_k, dtype=np.float64)
    a, b = affine_parameters(_stage1_logit(eli_head, X_k), y)
    head = keep_stage1(eli_head, "")
    with torch.no_grad():
        last = head.module_[-1]
        last.weight.mul_(a)
        last.bias.mul_(a).add_(b)
    head.stage2_ = {"rule": "affine", "slope": a, "intercept": b}
    return head


def _affine_cv_loss(eli_head, X_k, y, splits, weights) -> np.ndarray:
    z = _stage1_logit(eli_head, X_k)
    p = np.empty_like(y)
    for tr, va in splits:
        if y[tr].min() == y[tr].max():
            p[va] = 1.0 / (1.0 + np.exp(-z[va]))  # no step on one-class folds, as on one-class k
            continue
        a, b = affine_parameters(z[tr], y[tr])
        p[va] = 1.0 / (1.0 + np.exp(-(a * z[va] + b)))
    return weights * (p - y) ** 2


def fit_stage2(eli_head: ProbeHead, X_k, y_k, rule: str, params: dict) -> ProbeHead:
    """EliCal(k) from ``eli_head`` on the k labels by ``rule`` (:data:`STAGE2_RULES`); ``params``: the
    :class:`ProbeHead` parameters of the full-training rules (stage 1's, with the caller's overrides).
    Raises ValueError for an unknown rule or as :meth:`ProbeHead.fit`."""
    if rule not in STAGE2_RULES:
        raise ValueError(f"rule must be one of {STAGE2_RULES}, got {rule!r}")
    y = np.asarray(y_k, dtype=np.float64)
    if y.ndim == 1 and y.size and y.min() == y.max():
        return keep_stage1(eli_head, f"the {y.size} labels hold one value ({y[0]:g})")
    if rule == "affine<512":
        rule = "affine" if y.shape[0] < FULL_FROM_K else "full"
    if rule == "affine":
        return affine_stage2(eli_head, X_k, y)
    if rule == "full":
        return ProbeHead(**{**params, "validation": "cv"}).fit(X_k, y_k, init=eli_head)
    if rule == "paper":
        paper = {**params, "learning_rate": 5e-5, "validation_fraction": 0.0, "epochs_without_validation": 10}
        return ProbeHead(**paper).fit(X_k, y_k, init=eli_head)
    safe = {**params, "validation": "cv", "cv_rule": "one_se", "cv_loss": "balanced"}
    if rule == "l2sp":
        fits = [ProbeHead(**{**safe, "l2sp": s, "weight_decay": 0.0}).fit(X_k, y_k, init=eli_head) for s in L2SP_GRID]
        return min(fits, key=lambda h: h.cv_curve_[h.cv_epochs_])
    full = ProbeHead(**safe).fit(X_k, y_k, init=eli_head)
    if rule == "one_se":
        return full
    # "affine+full": the same folds and weights for both, paired per question.
    splits = cv_splits(y.shape[0], full.cv_folds, full.random_state)
    weights = question_weights(y, "balanced")
    gain = _affine_cv_loss(eli_head, X_k, y, splits, weights) - weights * (full.cv_oof_ - y) ** 2
    se = gain.std(ddof=1) / np.sqrt(gain.shape[0])
    if full.cv_epochs_ > 0 and gain.mean() > se:
        full.stage2_ = {"rule": "full", "cv_gain_over_affine": float(gain.mean()), "se": float(se)}
        return full
    return affine_stage2(eli_head, X_k, y)
