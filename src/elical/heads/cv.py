"""Cross-validation inside the k labelled questions: the folds, the per-question CV loss and the epoch rule.

EliCal's stage 2 (Ni et al., arXiv 2510.17509, Sec. 3) continues training the stage-1 head on k labels; how long is
chosen by cross-validation inside those k (nothing else is labelled). Every fold's out-of-fold predictions after
each epoch are pooled into one matrix, so the CV curve is one number per epoch over all k questions (leave-one-out
and k-fold alike) and its standard error comes from the questions, not from the few folds.

Rules (:func:`choose_epoch`):

- ``"min"``: the epoch with the lowest mean CV loss (the first among ties): the argmin of the *mean* curve, not a
  median of the folds' own optima (over an even number of folds that median can be an epoch no fold chose).
- ``"one_se"``: that epoch only when its gain over epoch 0 (the starting weights: stage 1 in EliCal) exceeds the
  gain's standard error over the questions, else epoch 0: leave stage 1 only on evidence (the one-standard-error
  rule of Breiman et al., 1984, Sec. 3.4, taken against the starting point).

Losses: ``"mse"`` weighs every question alike; ``"balanced"`` gives the positive and the negative side half the
weight each (a soft target y counts y as positive and 1 - y as negative), so at a 5-10 % base rate the CV loss is
not won by shrinking every prediction towards 0.
"""

from __future__ import annotations

import numpy as np

from elical.heads.validation import MIN_SAMPLES_FOR_VALIDATION

__all__ = ["CV_RULES", "CV_LOSSES", "cv_splits", "question_weights", "choose_epoch"]

CV_RULES = ("min", "one_se")
CV_LOSSES = ("mse", "balanced")


def cv_splits(n: int, cv_folds: int, random_state: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Seeded (train, validation) index pairs of ``range(n)``: leave-one-out below
    :data:`MIN_SAMPLES_FOR_VALIDATION` questions, else ``min(cv_folds, n // 2)`` shuffled folds
    (``sklearn.model_selection.KFold(shuffle=True, random_state=random_state)``)."""
    from sklearn.model_selection import KFold

    n_splits = n if n < MIN_SAMPLES_FOR_VALIDATION else min(cv_folds, n // 2)
    return list(KFold(n_splits=n_splits, shuffle=True, random_state=random_state).split(np.arange(n)))


def question_weights(y, loss: str = "mse") -> np.ndarray:
    """Weights of the k questions in the CV loss, ndarray of shape (k,) with mean 1.

    y : ndarray of shape (k,), targets in [0, 1]. ``"mse"``: all 1. ``"balanced"``:
    ``k * (0.5 * y / sum(y) + 0.5 * (1 - y) / sum(1 - y))`` (all 1 when one side is empty). Raises ValueError for
    an unknown loss."""
    if loss not in CV_LOSSES:
        raise ValueError(f"cv_loss must be one of {CV_LOSSES}, got {loss!r}")
    y = np.asarray(y, dtype=np.float64)
    pos, neg = y.sum(), (1.0 - y).sum()
    if loss == "mse" or pos <= 0 or neg <= 0:
        return np.ones_like(y)
    return y.shape[0] * (0.5 * y / pos + 0.5 * (1.0 - y) / neg)


def choose_epoch(losses, rule: str = "min") -> int:
    """The number of epochs chosen from a CV curve.

    losses : array of shape (n_epochs + 1, k): row e holds each question's (weighted) out-of-fold loss after e
    epochs (row 0: the starting weights); the CV curve is ``losses.mean(axis=1)``. rule : "min" or "one_se"
    (module docstring). Returns an int in [0, n_epochs]. Raises ValueError for an unknown rule or a bad shape.
    """
    if rule not in CV_RULES:
        raise ValueError(f"cv_rule must be one of {CV_RULES}, got {rule!r}")
    L = np.asarray(losses, dtype=np.float64)
    if L.ndim != 2 or L.shape[0] < 1 or L.shape[1] < 1:
        raise ValueError(f"losses must have shape (n_epochs + 1, k), got {L.shape}")
    best = int(np.argmin(L.mean(axis=1)))
    if rule == "min" or best == 0:
        return best
    gain = L[0] - L[best]
    se = gain.std(ddof=1) / np.sqrt(gain.shape[0]) if gain.shape[0] > 1 else np.inf
    return best if gain.mean() > se else 0
