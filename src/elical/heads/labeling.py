"""Which k questions of the unlabelled pool to label: nested label orders for Cal-Only(k) and EliCal(k).

A *label order* is a permutation of the pool indices; the labelled set of size k is its first k entries. Label
sets are therefore nested (a larger k contains every smaller one), and Cal-Only(k) and EliCal(k) get the same k
questions when they read the same order (Ni et al., arXiv 2510.17509, Sec. 5, compare the methods at equal k).

- :func:`random_label_order` -- a seeded uniform permutation (the paper's protocol: a random subset).
- :func:`stratified_label_order` -- uses the stage-1 (Eli-Only) confidence, which needs no label, to spread every
  prefix over the range of that confidence: quantile strata visited round-robin in a low-discrepancy order.
  At small k a random subset of a pool where the model is mostly wrong can hold almost no correct answer; spreading
  the labels over the elicited confidence puts labels where the stage-1 head believes the model is right, too.
  This is stratified sampling (Cochran, *Sampling Techniques*, ch. 5) with proportional allocation, made nested by
  taking one question per stratum per round; the order in which the strata are visited within a round is the
  van der Corput sequence with a seeded Cranley-Patterson rotation (Niederreiter, *Random Number Generation and
  Quasi-Monte Carlo Methods*, 1992), so even a prefix shorter than one round covers the range evenly.

Neither order reads a correctness label; ``eli_confidence`` must come from a head that saw no label either.
"""

from __future__ import annotations

import numpy as np

__all__ = ["random_label_order", "stratified_label_order", "stratum_visit_order", "label_order", "SELECTIONS",
           "DEFAULT_N_STRATA"]

#: Names accepted by :func:`label_order` (and ``elical sweep --selection``).
SELECTIONS = ("random", "stratified")
#: Default number of confidence strata: 8 equal-count bins (a prefix of 8 labels holds one question from each).
DEFAULT_N_STRATA = 8


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    return int(seed)


def random_label_order(n_pool: int, seed: int) -> np.ndarray:
    """Seeded uniform label order: ``np.random.default_rng(seed).permutation(n_pool)``.

    The labelled set of size k is ``order[:k]`` (nested in k). This is the permutation ``elical run`` uses.

    Parameters
    ----------
    n_pool : int >= 1, number of pool questions.
    seed : int >= 0.

    Returns
    -------
    ndarray of shape (n_pool,), int64, a permutation of ``range(n_pool)``.

    Raises
    ------
    ValueError
        ``n_pool`` not a positive integer or ``seed`` not a non-negative integer.
    """
    if isinstance(n_pool, bool) or not isinstance(n_pool, (int, np.integer)) or n_pool < 1:
        raise ValueError(f"n_pool must be a positive integer, got {n_pool!r}")
    return np.random.default_rng(_check_seed(seed)).permutation(int(n_pool)).astype(np.int64)


def _radical_inverse(i: int) -> float:
    """Van der Corput sequence in base 2: the bits of ``i`` mirrored after the binary point (0, .5, .25, .75, ...)."""
    out, f = 0.0, 0.5
    while i:
        out += f * (i & 1)
        i >>= 1
        f /= 2
    return out


def stratum_visit_order(n_strata: int, shift: float = 0.0) -> list[int]:
    """Order in which to visit ``n_strata`` ordered strata so that every prefix spreads over them.

    The i-th stratum is ``floor(((vdc(i) + shift) mod 1) * n_strata)`` for i = 0, 1, 2, ... (van der Corput base 2,
    rotated by ``shift`` in [0, 1)), repeats skipped, until every stratum appears. E.g. 8 strata, shift 0:
    [0, 4, 2, 6, 1, 5, 3, 7]. Returns a permutation of ``range(n_strata)`` as a list.
    Raises ValueError if ``n_strata`` < 1 or ``shift`` is outside [0, 1).
    """
    if isinstance(n_strata, bool) or not isinstance(n_strata, (int, np.integer)) or n_strata < 1:
        raise ValueError(f"n_strata must be a positive integer, got {n_strata!r}")
    if not 0.0 <= shift < 1.0:
        raise ValueError(f"shift must be in [0, 1), got {shift!r}")
    seen: list[int] = []
    i = 0
    # Terminates: the first 2^m points (2^m >= n_strata) form a rotated grid of spacing <= 1/n_strata, which puts
    # at least one point in every stratum.
    while len(seen) < n_strata:
        s = min(int(((_radical_inverse(i) + shift) % 1.0) * n_strata), n_strata - 1)
        if s not in seen:
            seen.append(s)
        i += 1
    return seen


def stratified_label_order(eli_confidence, seed: int, n_strata: int = DEFAULT_N_STRATA) -> np.ndarray:
    """Label order whose every prefix spreads over the range of the stage-1 (elicited) confidence.

    1. Rank the pool by ``eli_confidence`` (ties broken by a seeded random key) and cut the ranking into
       ``min(n_strata, n_pool)`` contiguous strata of equal size (+-1, ``np.array_split``): quantile bins.
    2. Shuffle the questions inside each stratum (seeded).
    3. Round r takes the r-th question of every stratum that still has one, visiting the strata in
       :func:`stratum_visit_order` with a seeded rotation; the order is the concatenation of the rounds.

    Guarantees: the prefix of length k holds ``floor(k / S)`` or ``ceil(k / S)`` questions of every stratum
    (S strata) as long as no stratum is exhausted, i.e. proportional allocation at every k; a prefix shorter than
    S touches strata spread evenly over the range (van der Corput). Nested by construction. No label is read.
    Source: stratified sampling (Cochran 1977, ch. 5) on the elicited confidence of EliCal stage 1
    (Ni et al., arXiv 2510.17509, Sec. 4); the stratification is elical's, the paper samples k at random.

    Parameters
    ----------
    eli_confidence : array-like of shape (n_pool,)
        Stage-1 confidence of every pool question (e.g. ``fit_eli_only(...).predict(X_pool)``), finite.
    seed : int >= 0
        Seeds the tie-breaking, the within-stratum shuffles and the rotation; same inputs and seed -> same order.
    n_strata : int >= 1
        Number of equal-count confidence strata (capped at n_pool). 1 gives a seeded random order.

    Returns
    -------
    ndarray of shape (n_pool,), int64, a permutation of ``range(n_pool)``.

    Raises
    ------
    ValueError
        ``eli_confidence`` not 1-D, empty or not finite; ``seed`` or ``n_strata`` invalid.
    """
    seed = _check_seed(seed)
    try:
        conf = np.asarray(eli_confidence, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"eli_confidence must be numeric of shape (n_pool,): {exc}") from None
    if conf.ndim != 1 or conf.shape[0] == 0:
        raise ValueError(f"eli_confidence must be 1-D of shape (n_pool,) with n_pool >= 1, got shape {conf.shape}")
    if not np.isfinite(conf).all():
        raise ValueError("eli_confidence must be finite (no NaN or inf)")
    if isinstance(n_strata, bool) or not isinstance(n_strata, (int, np.integer)) or n_strata < 1:
        raise ValueError(f"n_strata must be a positive integer, got {n_strata!r}")
    rng = np.random.default_rng(seed)
    n = conf.shape[0]
    ranked = np.lexsort((rng.random(n), conf))  # by confidence, then by a random key (ties)
    strata = [rng.permutation(s) for s in np.array_split(ranked, min(int(n_strata), n))]
    visit = stratum_visit_order(len(strata), float(rng.random()))
    order = [int(s[r]) for r in range(max(len(s) for s in strata)) for s in (strata[j] for j in visit) if r < len(s)]
    return np.asarray(order, dtype=np.int64)


def label_order(selection: str, n_pool: int, seed: int, eli_confidence=None,
                n_strata: int = DEFAULT_N_STRATA) -> np.ndarray:
    """Dispatch by name: ``"random"`` -> :func:`random_label_order`; ``"stratified"`` ->
    :func:`stratified_label_order` (needs ``eli_confidence`` of shape (n_pool,)).

    Raises ValueError for an unknown selection, a missing or mis-sized ``eli_confidence``, or as the functions."""
    if selection == "random":
        return random_label_order(n_pool, seed)
    if selection == "stratified":
        if eli_confidence is None or len(eli_confidence) != n_pool:
            raise ValueError(f"stratified selection needs eli_confidence of shape ({n_pool},)")
        return stratified_label_order(eli_confidence, seed, n_strata)
    raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")


#: Label targets of the k labelled questions: the paper's sample accuracy (share of correct sampled answers,
#: Ni et al., Sec. 3.2) or the greedy answer's correctness (the evaluation label). Every label-using method of a
#: run (Cal-Only, EliCal, the post-hoc calibrators) gets the same one.
TARGETS = ("sample-accuracy", "greedy")


def label_targets(records, target: str = "sample-accuracy") -> np.ndarray:
    """The label target of each record: ndarray of shape (n,), in [0, 1]. ``target``: one of :data:`TARGETS`.
    Raises ValueError for another target (or a record without the fields it needs, naming the record)."""
    from elical.records import sample_accuracy

    if target == "sample-accuracy":
        return np.array([sample_accuracy(r) for r in records], dtype=np.float64)
    if target == "greedy":
        return np.array([float(r["greedy_correctness"]) for r in records], dtype=np.float64)
    raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
