"""Statistics shared by the estimators, computed once per set of records (LM-Polygraph's stat calculators).

Every estimator of :data:`elical.estimators.ESTIMATORS` declares what it reads: ``fields`` (record fields),
``stats`` (names of :data:`STATS`: ``semantic_clusters``, the samples clustered by the equivalence judge;
``language_model``, the model and tokenizer; ``train_records``, the training pool), ``options`` (context
settings that change its value). :func:`elical.estimators.estimate` computes each needed statistic once into a
cache the caller keeps (SE-Discrete and SE-Weighted share one clustering), and :func:`declared_inputs` gives the
union of what a set of estimators reads, from which ``elical run`` derives its estimator cache fingerprint.

Each estimator function here has the one signature ``fn(records, stats, ctx)``: ``stats`` {name: value} of its
declared statistics, ``ctx`` the :class:`elical.estimators.EstimatorContext`.
"""

from __future__ import annotations

from elical.registry import Registry

__all__ = ["STATS", "compute_stat", "declared_inputs", "prob", "n_prob", "consis_lex", "consis_sem", "se_discrete",
           "se_weighted", "verbal_0", "verbal_k", "p_true"]

STATS = Registry("statistic")
_S = "elical.estimators.stats:"
STATS.add("semantic_clusters", _S + "_clusters", context=("equivalent",), fields=("sampling_response", "question"),
          summary="each record's sampled answers clustered by bidirectional equivalence (Kuhn et al., 2023)")
STATS.add("language_model", _S + "_language_model", context=("model", "tokenizer"),
          summary="the QA model and its tokenizer, to query again")
STATS.add("train_records", _S + "_train_records", context=("train_records", "k", "seed"),
          pool_fields=("id", "question", "greedy_response", "sampling_correctness", "split"),
          summary="the training pool (Verbal-k's rated examples)")


def _clusters(records, ctx):
    from elical.estimators.training_free import sample_clusters

    return sample_clusters(records, ctx.equivalent)


def _language_model(records, ctx):
    if ctx.model is None or ctx.tokenizer is None:
        raise ValueError("this estimator queries the model: give context.model and context.tokenizer")
    return ctx.model, ctx.tokenizer


def _train_records(records, ctx):
    return list(ctx.train_records)


def compute_stat(name: str, records, ctx, cache: dict):
    """The statistic ``name`` of ``records``, from ``cache`` when computed before (then stored there)."""
    if name not in cache:
        cache[name] = STATS[name].load()(records, ctx)
    return cache[name]


def declared_inputs(names) -> dict:
    """What the estimators ``names`` read, from their declarations: {"fields": sorted record fields (of the
    scored records, their statistics' included), "pool_fields": sorted fields of the training pool, "context":
    sorted context settings, "stats": sorted statistics}."""
    from elical.estimators import ESTIMATORS

    fields, pool, context, stats = set(), set(), set(), set()
    for name in names:
        info = ESTIMATORS[name].info
        fields.update(info.get("fields", ()))
        context.update(info.get("options", ()))
        for stat in info.get("stats", ()):
            stats.add(stat)
            fields.update(STATS[stat].info.get("fields", ()))
            pool.update(STATS[stat].info.get("pool_fields", ()))
            context.update(STATS[stat].info.get("context", ()))
    return {"fields": sorted(fields), "pool_fields": sorted(pool), "context": sorted(context), "stats": sorted(stats)}


# ------------------------------------------------------------------ the estimators, one signature each
def prob(records, stats, ctx):
    from elical.estimators.training_free import prob as fn

    return fn(records)


def n_prob(records, stats, ctx):
    from elical.estimators.training_free import n_prob as fn

    return fn(records)


def consis_lex(records, stats, ctx):
    from elical.estimators.training_free import consis_lex as fn

    return fn(records)


def consis_sem(records, stats, ctx):
    from elical.estimators.training_free import consis_sem as fn

    return fn(records)


def se_discrete(records, stats, ctx):
    from elical.estimators.training_free import se_discrete as fn

    return fn(records, clusters=stats["semantic_clusters"])


def se_weighted(records, stats, ctx):
    from elical.estimators.training_free import se_weighted as fn

    return fn(records, clusters=stats["semantic_clusters"], length_normalized=ctx.se_length_normalized)


def _model_based(fn_name: str, records, stats, ctx):
    from elical.estimators import model_based

    model, tokenizer = stats["language_model"]
    return getattr(model_based, fn_name)(model, tokenizer, records, train_records=stats.get("train_records", ()),
                                         k=ctx.k, seed=ctx.seed, batch_size=ctx.batch_size, progress=ctx.progress)


def verbal_0(records, stats, ctx):
    return _model_based("verbal_0", records, stats, ctx)


def verbal_k(records, stats, ctx):
    return _model_based("verbal_k", records, stats, ctx)


def p_true(records, stats, ctx):
    return _model_based("p_true", records, stats, ctx)
