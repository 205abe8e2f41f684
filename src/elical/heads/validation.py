"""Input checks and validation splits shared by the probe heads and the LoRA head."""

from __future__ import annotations

import numpy as np

__all__ = ["MIN_SAMPLES_FOR_VALIDATION", "holdout_split"]

#: Below this many training samples (and without an explicit validation set) no validation split is carved out:
#: with fewer than 10 questions a held-out part of one or two questions says nothing, and it would take a large
#: share of the labels. The head then trains for ``min(max_epochs, epochs_without_validation)`` epochs.
MIN_SAMPLES_FOR_VALIDATION = 10


#: Tag of the validation-split stream: the split is drawn from its own seed sequence, independent of the label
#: order (:func:`elical.heads.labeling.random_label_order` draws from the plain seed), so with the same seed the
#: k labelled questions are not the stage-1 validation set.
_HOLDOUT_STREAM = 0x484F4C44  # "HOLD"


def holdout_split(n: int, fraction: float, random_state: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of ``range(n)`` into (train, validation) indices, ``round(fraction * n)`` held out and at least
    one of each; shared by the probe heads and the LoRA head. The permutation comes from
    ``SeedSequence([random_state, _HOLDOUT_STREAM])``, a stream independent of the label order's."""
    perm = np.random.default_rng(np.random.SeedSequence([int(random_state), _HOLDOUT_STREAM])).permutation(n)
    n_val = min(n - 1, max(1, int(round(fraction * n))))
    return perm[n_val:], perm[:n_val]


def _check_X(X, name: str) -> np.ndarray:
    arr = _as_float32(X, name, "(n_samples, n_features)")
    if arr.ndim != 2 or 0 in arr.shape:
        raise ValueError(f"{name} must be 2-D of shape (n_samples, n_features) with at least one sample and "
                         f"one feature, got shape {arr.shape}")
    return _finite(arr, name)


def _check_y(y, name: str, n_samples: int, x_name: str) -> np.ndarray:
    arr = _as_float32(y, name, "(n_samples,)")
    if arr.ndim != 1 or arr.shape[0] != n_samples:
        raise ValueError(f"{name} must be 1-D of shape (n_samples,) = ({n_samples},) to match {x_name}, "
                         f"got shape {arr.shape}")
    if _finite(arr, name).min() < 0.0 or arr.max() > 1.0:
        raise ValueError(f"{name} must lie in [0, 1] (a probability target), got range [{arr.min()}, {arr.max()}]")
    return arr


def _as_float32(values, name: str, shape: str) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric array of shape {shape}: {exc}") from None


def _finite(arr: np.ndarray, name: str) -> np.ndarray:
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite values (or values too large for float32)")
    return arr
