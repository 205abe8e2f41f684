"""Training-free confidence estimators computed from annotated records.

Each estimator maps a list of records to a float ndarray of shape (n_records,) in [0, 1], higher = more likely
correct (registry :data:`ESTIMATORS`, uniform call ``fn(records) -> ndarray``). Sources:

* **Prob / N-Prob** — sequence probability of the greedy answer, raw and length-normalized (Malinin & Gales,
  2021; Ni et al., 2025, Sec. 4.2);
* **Consis-Lex** — mean ROUGE-L between samples and the greedy answer (Lin et al., 2023);
* **Consis-Sem** — share of samples semantically equivalent to the greedy answer (Ni et al., 2025, Sec. 4.2);
* **SE-Discrete / SE-Weighted** — semantic entropy over clusters of sampled answers (Kuhn et al., ICLR 2023;
  Farquhar et al., Nature 2024), mapped to a confidence ``1 - SE / log N``.

Shared rule: a greedy answer that is empty after :func:`elical.judges.text.normalize_answer` (nothing, or only
punctuation) answers nothing and can never be judged correct, so every estimator gives it 0.0. A record that an
estimator cannot score (missing field, NaN, mismatched lengths) raises :class:`EstimatorInputError`, which names
the record id, its index and the field. Model-based estimators (Verbal, P(True)) live in
:mod:`elical.estimators.model_based`.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Sequence

import numpy as np

from elical.judges.text import normalize_answer
from elical.records import greedy_text

__all__ = [
    "EstimatorInputError", "prob", "n_prob", "consis_lex", "consis_sem", "semantic_clusters",
    "semantic_clusters_many", "sample_clusters", "semantic_entropy", "se_discrete", "se_weighted",
]  # fmt: skip


class EstimatorInputError(ValueError):
    """A record an estimator cannot score. ``record_id``, ``index`` (position in the input list) and ``field``
    say where; callers with a file (``elical evaluate``) turn it into an InputError naming file and line."""

    def __init__(self, record: dict, index: int, field: str, problem: str):
        self.record_id, self.index, self.field, self.problem = record.get("id", "?"), index, field, problem
        super().__init__(f"record {self.record_id} (#{index}): field '{field}': {problem}")


def _empty_greedy(record: dict) -> bool:
    return not normalize_answer(greedy_text(record))


def _float(value, record: dict, index: int, field: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise EstimatorInputError(record, index, field, f"expected a number, got {value!r}") from None
    if math.isnan(out):
        raise EstimatorInputError(record, index, field, "contains NaN")
    return out


def _cumulative_logprob(record: dict, index: int) -> tuple[float, int]:
    """(cumulative log-prob, number of tokens) of a non-empty greedy answer."""
    lps = record.get("greedy_logprobs")
    if not isinstance(lps, list) or not lps:
        # an empty list with a non-empty answer: a backend without log-probs (not a 0-token answer)
        raise EstimatorInputError(record, index, "greedy_logprobs", "missing or empty for a non-empty answer (the "
                                  "backend gave no log-probs)")
    lps = [_float(x, record, index, "greedy_logprobs") for x in lps]
    cum = record.get("greedy_cumulative_logprobs")
    if isinstance(cum, list):  # released HonestyBench files store a one-element list
        cum = cum[0] if cum else None
    cum = sum(lps) if cum is None else _float(cum, record, index, "greedy_cumulative_logprobs")
    return cum, len(lps)


def prob(records: Sequence[dict]) -> np.ndarray:
    """Prob: ``exp(sum of greedy token log-probs)``, the sequence probability of the greedy answer.

    records : sequence of n records with ``greedy_logprobs`` (natural-log probabilities, one per token) and
    optionally ``greedy_cumulative_logprobs``. Returns ndarray of shape (n,) in [0, 1]. A greedy answer that is
    empty after normalization gets 0.0. Raises :class:`EstimatorInputError` naming the record when the log-probs
    of a non-empty answer are missing or empty (a backend without log-probs), non-numeric or NaN."""
    out = np.empty(len(records))
    for i, r in enumerate(records):
        if _empty_greedy(r):
            out[i] = 0.0
            continue
        cum, _ = _cumulative_logprob(r, i)
        out[i] = math.exp(min(cum, 0.0))
    return np.clip(out, 0.0, 1.0)


def n_prob(records: Sequence[dict]) -> np.ndarray:
    """N-Prob: ``exp(cumulative log-prob / number of greedy tokens)``, the geometric-mean token probability.

    Shapes, empty answers and errors as in :func:`prob`."""
    out = np.empty(len(records))
    for i, r in enumerate(records):
        if _empty_greedy(r):
            out[i] = 0.0
            continue
        cum, n = _cumulative_logprob(r, i)
        out[i] = math.exp(min(cum, 0.0) / n)
    return np.clip(out, 0.0, 1.0)


def _mean_field(records: Sequence[dict], field: str) -> np.ndarray:
    out = np.empty(len(records))
    for i, r in enumerate(records):
        if _empty_greedy(r):  # the shared rule: agreeing with "no answer" is no confidence in an answer
            out[i] = 0.0
            continue
        values = r.get(field)
        if not isinstance(values, list) or not values:
            raise EstimatorInputError(r, i, field, "missing or empty (no sampled answers)")
        out[i] = float(np.mean([_float(v, r, i, field) for v in values]))
    return np.clip(out, 0.0, 1.0)


def consis_lex(records: Sequence[dict]) -> np.ndarray:
    """Consis-Lex: mean ROUGE-L F1 between each sampled answer and the greedy answer (``consistency_rougeL``).

    Returns ndarray of shape (n,) in [0, 1]; a greedy answer that is empty after normalization gets 0.0 (the
    shared rule above). Raises :class:`EstimatorInputError` for a missing, empty or NaN field. Source: Lin et
    al. (2023), lexical similarity."""
    return _mean_field(records, "consistency_rougeL")


def consis_sem(records: Sequence[dict]) -> np.ndarray:
    """Consis-Sem: share of sampled answers judged equivalent to the greedy answer (``consistency_judgement``);
    this is also the self-consistency target of EliCal's elicitation stage (Ni et al., 2025, Sec. 3).

    Returns ndarray of shape (n,) in [0, 1]; empty greedy answers and errors as in :func:`consis_lex`."""
    return _mean_field(records, "consistency_judgement")


# ------------------------------------------------------------------------------------------ semantic entropy
@functools.lru_cache(maxsize=1)
def _default_judge():
    from elical.judges import DEFAULT_EQUIVALENCE, make_equivalence_judge

    return make_equivalence_judge(DEFAULT_EQUIVALENCE)  # question-aware: semantic_clusters_many passes questions


def _takes_questions(fn) -> bool:
    try:
        return "questions" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _judge_pairs(equivalent, pairs: list[tuple[str, str]], questions: list) -> np.ndarray:
    """0/1 judgement per ordered pair, in one batched call when the judge has ``judge_many``."""
    if not pairs:
        return np.zeros(0, dtype=bool)
    judge = _default_judge() if equivalent is None else equivalent
    if hasattr(judge, "judge_many"):
        kw = {"questions": questions} if any(q is not None for q in questions) and \
            _takes_questions(judge.judge_many) else {}
        out = np.asarray(judge.judge_many(pairs, **kw)).reshape(-1)
    elif callable(judge):
        out = np.array([bool(judge(a, b)) for a, b in pairs])
    else:
        raise TypeError(f"equivalent must be callable(a, b) -> bool or have judge_many(pairs), got {judge!r}")
    if out.shape != (len(pairs),):
        raise ValueError(f"the judge returned {out.shape[0]} judgements for {len(pairs)} pairs")
    return out.astype(bool)


def semantic_clusters_many(groups: Sequence[Sequence[str]], equivalent=None,
                           questions: Sequence[str | None] | None = None) -> list[np.ndarray]:
    """Cluster the answers of many questions by bidirectional equivalence, with one batched judge call.

    Answers equal after :func:`normalize_answer` always share a cluster (all empty or punctuation-only answers
    form one "no answer" cluster, never equivalent to a real answer); the judge only sees distinct non-empty
    normalized strings (their first raw form), each unordered pair in both orders. Clusters are then built as in
    Kuhn et al. (2023, Alg. 1): in order of first appearance, an answer joins the first cluster whose first member
    is equivalent to it in both directions, else it opens a new cluster.

    groups : sequence of sequences of str (one per question). equivalent : callable ``(a, b) -> bool``, or an
    object with ``judge_many(pairs) -> 0/1 array`` (e.g. :class:`elical.judges.learned.LearnedEquivalenceJudge`,
    the default). questions : one question per group (or None), handed to a ``judge_many`` that takes ``questions=``
    (an NLI judge prepends it to both answers, as Kuhn et al. do). Returns one int ndarray of shape (len(group),)
    per group: cluster ids 0, 1, ... in order of first appearance.
    """
    plans, pairs, pair_questions = [], [], []
    questions = list(questions) if questions is not None else [None] * len(groups)
    if len(questions) != len(groups):
        raise ValueError(f"questions must hold one entry per group: {len(questions)} for {len(groups)} groups")
    for texts, question in zip(groups, questions):
        keys = [normalize_answer(t) for t in texts]
        units = list(dict.fromkeys(keys))  # distinct normalized strings in order of first appearance
        raw = {k: t for k, t in zip(reversed(keys), reversed(list(texts)))}  # first raw form of each key
        real = [u for u in units if u]
        offset = len(pairs)
        idx = {}
        for i in range(len(real)):
            for j in range(i + 1, len(real)):
                idx[(real[i], real[j])] = len(pairs) - offset
                pairs += [(raw[real[i]], raw[real[j]]), (raw[real[j]], raw[real[i]])]
        pair_questions += [question] * (len(pairs) - offset)
        plans.append((keys, units, idx, offset))
    verdicts = _judge_pairs(equivalent, pairs, pair_questions)
    return [_kuhn_clusters(keys, units, idx, verdicts[offset:]) for keys, units, idx, offset in plans]


def _kuhn_clusters(keys: list[str], units: list[str], idx: dict, verdicts: np.ndarray) -> np.ndarray:
    def same(a: str, b: str) -> bool:
        if not a or not b:
            return False
        k = idx[(a, b)] if (a, b) in idx else idx[(b, a)]
        return bool(verdicts[k] and verdicts[k + 1])  # both directions

    reps: list[str] = []  # first member of each cluster
    cluster_of = {}
    for u in units:
        c = next((c for c, rep in enumerate(reps) if same(u, rep)), None)
        if c is None:
            c = len(reps)
            reps.append(u)
        cluster_of[u] = c
    return np.array([cluster_of[k] for k in keys], dtype=int)


def semantic_clusters(texts: Sequence[str], equivalent=None, question: str | None = None) -> np.ndarray:
    """Cluster ids (int ndarray of shape (n,)) of one question's answers; see :func:`semantic_clusters_many`."""
    return semantic_clusters_many([texts], equivalent, [question])[0]


def _samples(record: dict, index: int) -> list[str]:
    samples = record.get("sampling_response")
    if not isinstance(samples, list) or not samples:
        raise EstimatorInputError(record, index, "sampling_response", "missing or empty (no sampled answers)")
    if not all(isinstance(s, str) for s in samples):
        raise EstimatorInputError(record, index, "sampling_response", "expected a list of strings")
    return samples


def _sequence_weights(record: dict, index: int, samples: list[str], length_normalized: bool) -> np.ndarray:
    """Probability of each sample for the weighted estimator; identical strings share one sequence's mass."""
    n = len(samples)
    lps = record.get("sampling_cumulative_logprobs")
    if not isinstance(lps, list) or not lps:
        raise EstimatorInputError(record, index, "sampling_cumulative_logprobs",
                                  "missing or empty (the backend gave no per-sample log-probs)")
    if len(lps) != n:
        raise EstimatorInputError(record, index, "sampling_cumulative_logprobs",
                                  f"has {len(lps)} values for {n} sampled answers")
    lps = np.array([_float(v, record, index, "sampling_cumulative_logprobs") for v in lps])
    if (lps > 1e-4).any():  # a hair above 0 is float rounding of a probability near 1
        raise EstimatorInputError(record, index, "sampling_cumulative_logprobs", "log-probability above 0")
    lps = np.minimum(lps, 0.0)
    ntok = record.get("sampling_num_tokens")
    if ntok is not None and (not isinstance(ntok, list) or len(ntok) != n):
        raise EstimatorInputError(record, index, "sampling_num_tokens", f"expected a list of {n} token counts")
    ntok = np.array([_float(v, record, index, "sampling_num_tokens") for v in ntok]) if ntok is not None else None
    # A 0-token sample stopped at once; the stop token's probability is not stored, so its likelihood is unknown.
    # It keeps its sampling frequency; the other distinct sequences share the rest by likelihood.
    zero = ntok == 0 if ntok is not None else np.array([not s.strip() for s in samples])
    if length_normalized:
        if ntok is None:
            raise EstimatorInputError(record, index, "sampling_num_tokens", "needed for length normalization")
        lps = np.where(zero, 0.0, lps / np.maximum(ntok, 1))
    weights = np.zeros(n)
    weights[zero] = 1.0 / n
    first = {}
    for i, s in enumerate(samples):
        if not zero[i]:
            first.setdefault(s.strip(), []).append(i)
    if first:
        heads = [ids[0] for ids in first.values()]
        # Same string, same token path: the log-probs agree up to rounding; max keeps one sequence's mass.
        seq_lp = np.array([lps[ids].max() for ids in first.values()])
        if not np.isfinite(seq_lp).any():
            raise EstimatorInputError(record, index, "sampling_cumulative_logprobs", "every log-prob is -inf")
        p = np.exp(seq_lp - seq_lp.max())
        weights[heads] = (1.0 - zero.mean()) * p / p.sum()
    return weights


def sample_clusters(records: Sequence[dict], equivalent=None) -> list[np.ndarray]:
    """The semantic clusters of each record's N sampled answers (int ndarray of shape (N,) per record), by
    :func:`semantic_clusters_many` with the record's question: the statistic SE-Discrete and SE-Weighted share
    (computed once per run by :func:`elical.estimators.estimate`). Raises :class:`EstimatorInputError` for
    missing or empty samples."""
    groups = [_samples(r, i) for i, r in enumerate(records)]
    questions = [r.get("question") if isinstance(r.get("question"), str) else None for r in records]
    return semantic_clusters_many(groups, equivalent, questions)


def semantic_entropy(records: Sequence[dict], *, weighted: bool = False, equivalent=None,
                     length_normalized: bool = False, clusters=None) -> np.ndarray:
    """Semantic entropy (nats) of each record's N sampled answers; ndarray of shape (n,), in [0, log N].

    The N samples (``sampling_response``) are clustered by bidirectional equivalence
    (:func:`semantic_clusters_many`). The greedy answer is not one of them (as in Kuhn et al., 2023 and Farquhar
    et al., 2024, the entropy describes the sampling distribution).

    * ``weighted=False`` — discrete SE (Farquhar et al., 2024, Methods): cluster probability = share of the N
      samples in it; duplicates count once per draw.
    * ``weighted=True`` — likelihood-weighted SE (Kuhn et al., 2023): each *distinct* sampled string is one
      sequence with probability ``exp(sampling_cumulative_logprobs)`` (or the mean token log-prob when
      ``length_normalized``, Farquhar et al.'s default), normalized over the distinct sequences; identical strings
      are counted once, so no cluster gets more than probability 1. A 0-token sample (an immediate stop, whose
      probability the record does not hold) keeps its sampling share 1/N.

    ``SE = -sum_C p(C) log p(C)``. ``clusters``: :func:`sample_clusters` of ``records`` computed before (shared
    with the other estimator); None: clustered here with ``equivalent``. Raises :class:`EstimatorInputError`
    naming the record for missing or empty samples, and (weighted) missing, NaN, positive or mismatched log-probs.
    """
    groups = [_samples(r, i) for i, r in enumerate(records)]
    weights = [_sequence_weights(r, i, g, length_normalized) if weighted else np.full(len(g), 1.0 / len(g))
               for i, (r, g) in enumerate(zip(records, groups))]
    out = np.empty(len(records))
    if clusters is None:
        clusters = sample_clusters(records, equivalent)
    elif len(clusters) != len(records) or any(len(c) != len(g) for c, g in zip(clusters, groups)):
        raise ValueError("clusters must hold one cluster id per sampled answer of each record")
    for i, (ids, w) in enumerate(zip(clusters, weights)):
        p = np.bincount(ids, weights=w)
        p = p[p > 0] / p.sum()
        out[i] = float(-(p * np.log(p)).sum())
    return out


def _se_confidence(records: Sequence[dict], weighted: bool, equivalent, length_normalized: bool = False,
                   clusters=None) -> np.ndarray:
    se = semantic_entropy(records, weighted=weighted, equivalent=equivalent, length_normalized=length_normalized,
                          clusters=clusters)
    n = np.array([len(r["sampling_response"]) for r in records], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        conf = np.where(n > 1, 1.0 - se / np.log(np.maximum(n, 2)), 1.0)
    conf[[_empty_greedy(r) for r in records]] = 0.0
    return np.clip(conf, 0.0, 1.0)


def se_discrete(records: Sequence[dict], equivalent=None, clusters=None) -> np.ndarray:
    """SE-Discrete confidence: ``1 - SE / log N`` with discrete semantic entropy (Farquhar et al., 2024).

    ``log N`` is the largest entropy N samples can show (all in different clusters), so the confidence is 1 when
    all samples agree and 0 when none do; N = 1 gives 1.0. An empty greedy answer gets 0.0.
    records : sequence of n records; returns ndarray of shape (n,) in [0, 1]. ``equivalent``: see
    :func:`semantic_clusters_many`; ``clusters``: precomputed :func:`sample_clusters`. Errors as in
    :func:`semantic_entropy`."""
    return _se_confidence(records, False, equivalent, clusters=clusters)


def se_weighted(records: Sequence[dict], equivalent=None, length_normalized: bool = False,
                clusters=None) -> np.ndarray:
    """SE-Weighted confidence: ``1 - SE / log N`` with likelihood-weighted semantic entropy (Kuhn et al., 2023).

    As :func:`se_discrete`, with cluster probabilities from the samples' normalized sequence probabilities
    (needs ``sampling_cumulative_logprobs``; records from a backend without log-probs raise
    :class:`EstimatorInputError`). ``length_normalized``: weight by the mean token log-prob instead (Farquhar et
    al.'s default; steadier when samples are cut at ``max_new_tokens``, where whole-sequence probabilities differ
    by many nats and one sample takes all the mass). ``clusters``: precomputed :func:`sample_clusters`."""
    return _se_confidence(records, True, equivalent, length_normalized, clusters)

