"""Training-free confidence estimators, one registry and one call signature.

``ESTIMATORS`` maps a paper name to its function; :func:`estimate` calls any of them the same way::

    est = estimate("Consis-Sem", records, EstimatorContext())                       # from the records alone
    est = estimate("P(True)", records, EstimatorContext(model=lm, tokenizer=tok))   # queries the model again
    est.confidence        # ndarray of shape (len(records),), in [0, 1], higher = more likely correct

Each entry's ``info["kind"]`` says what it needs (LM-Polygraph's "stats dependencies", by kind):
``"record"`` the record fields only; ``"semantic"`` also an equivalence judge (``context.equivalent``; semantic
entropy clusters with it); ``"model"`` the language model (``context.model``/``tokenizer``; Verbal-k also the
training pool for its examples).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from elical.registry import Registry

__all__ = ["ESTIMATORS", "EstimatorContext", "Estimate", "estimate", "names_of_kind"]

ESTIMATORS = Registry("estimator")
_T, _M = "elical.estimators.training_free:", "elical.estimators.model_based:"
ESTIMATORS.add("Prob", _T + "prob", summary="probability of the greedy answer", kind="record")
ESTIMATORS.add("N-Prob", _T + "n_prob", summary="length-normalized probability of the greedy answer", kind="record")
ESTIMATORS.add("Consis-Lex", _T + "consis_lex", summary="mean ROUGE-L of the samples with the greedy answer",
               kind="record")
ESTIMATORS.add("Consis-Sem", _T + "consis_sem", summary="share of samples equivalent to the greedy answer",
               kind="record")
ESTIMATORS.add("SE-Discrete", _T + "se_discrete", summary="1 - discrete semantic entropy / log N", kind="semantic")
ESTIMATORS.add("SE-Weighted", _T + "se_weighted", summary="1 - likelihood-weighted semantic entropy / log N",
               kind="semantic")
ESTIMATORS.add("Verbal-0", _M + "verbal_0", summary="the model states its confidence before answering",
               kind="model")
ESTIMATORS.add("Verbal-k", _M + "verbal_k", summary="Verbal with k rated pool examples in the prompt", kind="model")
ESTIMATORS.add("P(True)", _M + "p_true", summary="the model's probability that its own greedy answer is true",
               kind="model")


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


def names_of_kind(*kinds: str) -> list[str]:
    """Registered estimator names whose kind is among ``kinds``, in registry order."""
    return [n for n in ESTIMATORS if ESTIMATORS[n].info["kind"] in kinds]


def estimate(name: str, records: Sequence[dict], context: EstimatorContext | None = None) -> Estimate:
    """Run the estimator ``name`` on ``records``. Raises UnknownNameError (a ValueError) for an unknown name,
    ValueError when a model-based estimator gets no model, and
    :class:`elical.estimators.training_free.EstimatorInputError` for a record it cannot score."""
    ctx = context or EstimatorContext()
    entry = ESTIMATORS[name]
    fn, kind = entry.load(), entry.info["kind"]
    if kind == "record":
        return Estimate(fn(records), {"kind": kind})
    if kind == "semantic":
        kw = {"length_normalized": True} if ctx.se_length_normalized and name == "SE-Weighted" else {}
        return Estimate(fn(records, ctx.equivalent, **kw), {"kind": kind})
    if ctx.model is None or ctx.tokenizer is None:
        raise ValueError(f"estimator {name!r} queries the model: give context.model and context.tokenizer")
    out = fn(ctx.model, ctx.tokenizer, records, train_records=ctx.train_records, k=ctx.k, seed=ctx.seed,
             batch_size=ctx.batch_size, progress=ctx.progress)
    return Estimate(out.confidence, {"kind": kind, **out.info()})
