"""Training-free confidence estimators, one registry and one call signature.

``ESTIMATORS`` maps a paper name to its function; :func:`estimate` calls any of them the same way::

    est = estimate("Consis-Sem", records, EstimatorContext())                       # from the records alone
    est = estimate("P(True)", records, EstimatorContext(model=lm, tokenizer=tok))   # queries the model again
    est.confidence        # ndarray of shape (len(records),), in [0, 1], higher = more likely correct

Each entry declares what it reads (LM-Polygraph's "stats dependencies"; :mod:`elical.estimators.stats`):
``fields`` (record fields), ``stats`` (shared statistics: ``semantic_clusters`` with the equivalence judge
``context.equivalent``, ``language_model`` from ``context.model``/``tokenizer``, ``train_records``, Verbal-k's
pool), ``options`` (context settings that change its value). :func:`kind_of` derives "record", "semantic" or
"model" from them; ``elical run`` derives its estimator cache fingerprint from them. A package adds an estimator
with an entry point of the group ``elical.estimators`` (:func:`elical.registry.load_plugins`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from elical.registry import Registry

__all__ = ["ESTIMATORS", "EstimatorContext", "Estimate", "estimate", "names_of_kind", "kind_of"]

ESTIMATORS = Registry("estimator")
_S = "elical.estimators.stats:"
_G = ("greedy_response",)  # the shared rule: an empty greedy answer gets confidence 0
_LOGPROBS = ("greedy_logprobs", "greedy_cumulative_logprobs")
ESTIMATORS.add("Prob", _S + "prob", summary="probability of the greedy answer", fields=_G + _LOGPROBS)
ESTIMATORS.add("N-Prob", _S + "n_prob", summary="length-normalized probability of the greedy answer",
               fields=_G + _LOGPROBS)
ESTIMATORS.add("Consis-Lex", _S + "consis_lex", summary="mean ROUGE-L of the samples with the greedy answer",
               fields=_G + ("consistency_rougeL",))
ESTIMATORS.add("Consis-Sem", _S + "consis_sem", summary="share of samples equivalent to the greedy answer",
               fields=_G + ("consistency_judgement",))
ESTIMATORS.add("SE-Discrete", _S + "se_discrete", summary="1 - discrete semantic entropy / log N",
               fields=_G + ("sampling_response",), stats=("semantic_clusters",))
ESTIMATORS.add("SE-Weighted", _S + "se_weighted", summary="1 - likelihood-weighted semantic entropy / log N",
               fields=_G + ("sampling_response", "sampling_cumulative_logprobs", "sampling_num_tokens"),
               stats=("semantic_clusters",), options=("se_length_normalized",))
ESTIMATORS.add("Verbal-0", _S + "verbal_0", summary="the model states its confidence before answering",
               fields=("question",), stats=("language_model",))
ESTIMATORS.add("Verbal-k", _S + "verbal_k", summary="Verbal with k rated pool examples in the prompt",
               fields=("question",), stats=("language_model", "train_records"))
ESTIMATORS.add("P(True)", _S + "p_true", summary="the model's probability that its own greedy answer is true",
               fields=("question", "greedy_response"), stats=("language_model",))


@dataclass
class EstimatorContext:
    """What estimators may need beyond the records; each reads only its part.

    equivalent : equivalence judge for semantic entropy (None: the default judge). se_length_normalized : see
    :func:`elical.estimators.training_free.se_weighted`. model, tokenizer : for the model-based estimators.
    train_records : the training pool (Verbal-k's examples). k, seed : Verbal-k's example count and draw.
    batch_size : model batch; progress : show a progress bar."""

    equivalent: Any = None
    se_length_normalized: bool = False
    model: Any = None
    tokenizer: Any = None
    train_records: Sequence[dict] = ()
    k: int = 8
    seed: int = 0
    batch_size: int = 16
    progress: bool = False


@dataclass
class Estimate:
    """One estimator's output: ``confidence`` (ndarray of shape (n,), in [0, 1]) and ``info`` (JSON-ready facts:
    kind, the judge, unparseable Verbal outputs, ...)."""

    confidence: Any
    info: dict = field(default_factory=dict)


def kind_of(name: str) -> str:
    """What an estimator needs, derived from its declared statistics: "model" (queries the language model),
    "semantic" (clusters the samples with an equivalence judge) or "record" (the record fields alone)."""
    stats = ESTIMATORS[name].info.get("stats", ())
    return "model" if "language_model" in stats else "semantic" if "semantic_clusters" in stats else "record"


def names_of_kind(*kinds: str) -> list[str]:
    """Registered estimator names whose :func:`kind_of` is among ``kinds``, in registry order."""
    return [n for n in ESTIMATORS if kind_of(n) in kinds]


def estimate(name: str, records: Sequence[dict], context: EstimatorContext | None = None,
             shared: dict | None = None) -> Estimate:
    """Run the estimator ``name`` on ``records``: its declared statistics (:mod:`elical.estimators.stats`) are
    taken from ``shared`` (a dict the caller keeps for these records, so that estimators needing the same
    statistic compute it once) or computed into it, then ``fn(records, stats, context)``.

    Raises UnknownNameError (a ValueError) for an unknown name, ValueError when a model-based estimator gets no
    model, and :class:`elical.estimators.training_free.EstimatorInputError` for a record it cannot score."""
    from elical.estimators.stats import compute_stat

    ctx = context or EstimatorContext()
    entry = ESTIMATORS[name]
    shared = {} if shared is None else shared
    stats = {s: compute_stat(s, records, ctx, shared) for s in entry.info.get("stats", ())}
    out = entry.load()(records, stats, ctx)
    info = {"kind": kind_of(name), **{o: getattr(ctx, o) for o in entry.info.get("options", ())}}
    if hasattr(out, "confidence"):  # a model-based estimate with its own facts (unparseable outputs, ...)
        return Estimate(out.confidence, {**info, **out.info()})
    return Estimate(out, info)
