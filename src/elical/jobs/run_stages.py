"""The stages of ``elical run`` (:func:`elical.jobs.run.run`), in order, each declaring what it reads and writes
(:class:`elical.jobs.pipeline.Stage`), and the results it writes at the end.

generate and judge (records/annotations.jsonl) -> hidden states (features/, resumed by
:func:`elical.jobs.pipeline.resume_stage`) -> training-free estimators (estimators.json, resumed the same way)
-> heads (heads/<method>/, each resumed by its own fingerprint) -> other layers and poolings -> controls ->
calibrated baselines -> evaluation (predictions.jsonl, results.json, table.md).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from elical.jobs.pipeline import RunState, Stage
from elical.records import write_json_atomic

__all__ = ["RUN_STAGES", "stage_features", "stage_estimators", "check_study", "write_results"]


def stage_features(run_dir: Path, records: list[dict], model, tok, cfg,
                    fresh: dict | None = None, progress: bool = True) -> np.ndarray:
    """Last-prompt-token hidden states of ``records`` (float32, shape (len(records), hidden_size)), saved in
    ``features/hidden_states.safetensors`` in record order. ``fresh``: ``{id: {layer: state}}`` taken from the
    generator's prefill (:func:`elical.jobs.annotate.annotate`); the other records (resumed, reused from a build,
    or made by a backend without hidden states) get a separate forward pass or the build's features."""
    from elical.generation.features import load_features, save_features
    from elical.jobs.pipeline import resume_stage

    path = run_dir / "features" / "hidden_states.safetensors"
    ids = [r["id"] for r in records]

    def load():
        if path.exists():
            saved_ids, feats, _ = load_features(path)
            if saved_ids == ids:
                return feats
        return None

    def compute():
        known = {i: h[cfg.layer] for i, h in (fresh or {}).items() if cfg.layer in h}
        todo = [i for i, r in enumerate(records) if r["id"] not in known]
        feats = np.zeros((len(records), model.config.hidden_size), dtype=np.float32)
        if todo:
            feats[todo] = _features_rest([records[i] for i in todo], model, tok, cfg, progress)
        for i, r in enumerate(records):
            if r["id"] in known:
                feats[i] = known[r["id"]]
        return feats

    # what the hidden states depend on: the prompts (in record order), the model and the layer
    inputs = {"prompts": [[r["id"], r["prompt"]] for r in records], "model": cfg.model, "layer": cfg.layer}
    return resume_stage(run_dir, "features", inputs, load=load, compute=compute, legacy=True,
                        save=lambda feats: save_features(path, ids, feats, meta={
                            "model": cfg.model, "layer": cfg.layer, "token": "last prompt token"}))


def _features_rest(records: list[dict], model, tok, cfg, progress: bool = True) -> np.ndarray:
    """Hidden states by a separate pass (or from the build directory) for records without prefill states."""
    from elical.generation.features import extract_hidden_states

    if cfg.build_dir:
        from elical.jobs.reuse import reuse_features

        feats = reuse_features(cfg.build_dir, records, model, tok, model_name=cfg.model, layer=cfg.layer,
                               batch_size=cfg.batch_size, progress=progress)
    else:
        feats = extract_hidden_states(model, tok, [r["prompt"] for r in records], layer=cfg.layer,
                                      batch_size=cfg.batch_size, progress=progress)
    return feats


def stage_estimators(run_dir: Path, test: list[dict], pool: list[dict], cfg, annotator, model, tok,
                     progress: bool, names=None) -> tuple[dict, dict, dict]:
    """Training-free estimators on the evaluation records (model-based ones too unless turned off) and the
    record-based ones on the pool (for the calibrated baselines). Semantic entropy clusters with the run's own
    equivalence judge. Kept in ``estimators.json``; ``--resume`` reuses them exactly when the fingerprint of what
    they read is unchanged (:func:`elical.jobs.pipeline.resume_stage`), derived from their declarations
    (:func:`elical.estimators.stats.declared_inputs`: the record fields, the pool's fields, the context) plus
    the model, the judges' names and the seed (``model_estimators`` decides which estimators are declared).
    ``names``: the record-based estimators to run (default all).
    Returns ({name: test confidences}, {name: info}, {name: pool scores})."""
    from elical.estimators import names_of_kind
    from elical.estimators.stats import declared_inputs
    from elical.jobs.evaluate import model_estimates, record_estimates

    from elical.jobs.pipeline import resume_stage

    with_model = cfg.model_estimators and not cfg.honestybench  # Verbal decodes; released runs never do
    reads = declared_inputs(list(names or names_of_kind("record", "semantic"))
                            + (names_of_kind("model") if with_model else []))
    inputs = {"test": [[r.get(k) for k in ("id", "split", *reads["fields"])] for r in test],
              "pool": [[r.get(k) for k in ("id", "split", *reads["fields"], *reads["pool_fields"])] for r in pool],
              "reads": reads, "config": [cfg.model, cfg.equivalence_judge, cfg.semantic_model, cfg.seed]}
    path = run_dir / "estimators.json"
    as_arrays = lambda d: {k: np.array(v, dtype=np.float64) for k, v in d.items()}  # noqa: E731
    as_lists = lambda d: {k: [float(x) for x in v] for k, v in d.items()}  # noqa: E731

    def load():
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            return as_arrays(saved["test"]), saved["info"], as_arrays(saved["pool"])
        except (OSError, ValueError, KeyError):
            return None

    equivalent = annotator.semantic if annotator is not None else None

    def compute():
        confidences = record_estimates(test, names, equivalent=equivalent)
        info = {}
        if with_model:
            estimates = model_estimates(model, tok, test, pool, k=8, seed=cfg.seed, batch_size=cfg.batch_size,
                                        progress=progress)
            confidences.update({name: e.confidence for name, e in estimates.items()})
            info = {name: e.info for name, e in estimates.items()}
        return confidences, info, record_estimates(pool, names, equivalent=equivalent)

    return resume_stage(run_dir, "estimators", inputs, load=load, compute=compute, save=lambda out: write_json_atomic(
        path, {"test": as_lists(out[0]), "info": out[1], "pool": as_lists(out[2])}))


def check_study(cfg, model) -> list | None:
    """The feature sets beside the primary heads (:func:`elical.jobs.layers.feature_sets`), checked before anything
    is written (InputError for a layer out of range); None when the head is not a probe head (LoRA: the layer and
    pooling study and the controls are skipped with a warning)."""
    import sys

    from elical.heads import HEADS
    from elical.jobs.layers import feature_sets

    sets = feature_sets(cfg, model.config.num_hidden_layers)
    if HEADS[cfg.head].info.get("inputs", "features") == "features":
        return sets
    if sets:
        print(f"elical: WARNING: the heads of other layers and poolings are probe heads on frozen features; "
              f"skipped with --head {cfg.head}", file=sys.stderr, flush=True)
    return None


# ------------------------------------------------------------------------------------------------- the stages
def _annotate(s: RunState) -> dict:
    from elical.generation.base import decoding_meta
    from elical.jobs.annotate import annotate
    from elical.jobs.layers import prefill_layers

    cfg = s.cfg
    path = s.run_dir / "records" / "annotations.jsonl"
    fresh = {}  # the last prompt token's states from the decoder's prefill (transformers backend)
    estimator_names = None  # every record-based estimator
    if cfg.honestybench:  # no generator at all: the hidden states come from one prefill pass (stage_features)
        from elical.jobs.released import RELEASED_ESTIMATORS, annotate_released

        records = annotate_released(s.questions, cfg, s.tok, path, s.annotator, s.progress,
                                    model_meta={"model": cfg.model})
        estimator_names = RELEASED_ESTIMATORS + (("SE-Discrete",) if cfg.rejudge else ())
        return {"records": records, "fresh": fresh, "estimator_names": estimator_names,
                "pool": [r for r in records if r["split"] == "train"],
                "test": [r for r in records if r["split"] == "test"]}
    meta = {"model": cfg.model, "seed": cfg.seed, "decoding": decoding_meta(s.generator),
            "judges": s.annotator.describe()}
    if cfg.build_dir:
        from elical.jobs.reuse import reuse_build

        reuse_build(cfg.build_dir, s.questions, path, meta=meta)
    layers = prefill_layers(cfg, s.model.config.num_hidden_layers) if s.extra_sets else (cfg.layer,)
    records = annotate(s.questions, s.generator, s.annotator, path, seed=cfg.seed, meta=meta, progress=s.progress,
                       hidden_layers=layers, hidden_states=fresh)
    return {"records": records, "fresh": fresh, "estimator_names": estimator_names,
            "pool": [r for r in records if r["split"] == "train"],
            "test": [r for r in records if r["split"] == "test"]}


def _features(s: RunState) -> dict:
    feats = stage_features(s.run_dir, s.records, s.model, s.tok, s.cfg, s.fresh, s.progress)
    layer_feats = None
    if s.extra_sets:
        from elical.jobs.layers import stage_layer_features

        layer_feats = stage_layer_features(s.run_dir, s.records, s.model, s.tok, s.cfg, s.fresh, s.progress)
    s.fresh.clear()
    if s.cfg.stream_features:  # the same rows, read from the saved files a chunk at a time while the heads train
        from elical.heads.streaming import FeatureFile
        from elical.jobs.layers import features_path

        feats = FeatureFile.open(s.run_dir / "features" / "hidden_states.safetensors")
        if layer_feats:
            layer_feats = {pair: FeatureFile.open(features_path(s.run_dir, *pair)) for pair in layer_feats}
    return {"feats": feats, "layer_feats": layer_feats}


def _estimators(s: RunState) -> dict:
    confidences, info, pool_scores = stage_estimators(s.run_dir, s.test, s.pool, s.cfg, s.annotator, s.model, s.tok,
                                                      s.progress, s.estimator_names)
    if s.reps.is_main:
        s.reps.barrier()  # releases the other ranks (a no-op in one process)
    return {"confidences": confidences, "estimator_info": info, "pool_scores": pool_scores,
            "training_free": list(confidences)}


def _heads(s: RunState) -> dict:
    from elical.jobs.heads_stage import stage_heads

    preds, eli_pool = stage_heads(s.run_dir, s.records, s.feats, s.cfg, s.model, s.tok,
                                  shuffled=s.cfg.controls and s.probe)
    s.confidences.update(preds)
    return {"eli_pool": eli_pool}


def _layer_heads(s: RunState) -> dict:
    from elical.jobs.layers import stage_layer_heads

    s.confidences.update(stage_layer_heads(s.run_dir, s.records, s.layer_feats, s.cfg, s.progress))
    return {}


def _controls(s: RunState) -> dict:
    from elical.jobs.controls import stage_controls

    s.confidences.update(stage_controls(s.run_dir, s.records, s.cfg, s.control_model, s.progress))
    return {}


def _calibrated(s: RunState) -> dict:
    """Post-hoc calibrated baselines on the same k labels and the same target as Cal-Only(k) / EliCal(k), Eli-Only
    among them (the elicited confidence mapped onto the k labels by a 1-D calibrator, EliCal's rival at tiny k)."""
    from elical.heads.labeling import label_targets
    from elical.heads.protocol import calibrated_rivals
    from elical.jobs.heads_stage import label_sets

    train = {**s.pool_scores, "Eli-Only": s.eli_pool}
    s.confidences.update(calibrated_rivals(train, {name: s.confidences[name] for name in train},
                                           label_targets(s.pool, s.cfg.target), label_sets(len(s.pool), s.cfg)))
    return {}


def _evaluate(s: RunState) -> dict:
    from elical.evaluation.scoring import score_methods, write_predictions

    metrics = score_methods(s.test, s.confidences, dev_fraction=s.cfg.dev_fraction, seed=s.cfg.seed,
                            n_resamples=s.cfg.n_bootstrap, alignment_protocol=s.cfg.alignment_protocol)
    write_predictions(s.run_dir / "predictions.jsonl", s.test, s.confidences)
    return {"metrics": metrics}


#: The run, in order. Each stage runs on rank 0 only unless ``all_ranks`` (the other ranks of a distributed run
#: resume the first three from the run directory, then train the heads together).
RUN_STAGES = [
    Stage("annotate", _annotate, reads=("questions", "generator", "annotator", "extra_sets"),
          writes=("records", "fresh", "estimator_names", "pool", "test"), timing="generate_and_judge_s",
          all_ranks=True),
    Stage("features", _features, reads=("records", "fresh", "model", "tok", "extra_sets"),
          writes=("feats", "layer_feats"), timing="hidden_states_s", all_ranks=True),
    Stage("estimators", _estimators, reads=("test", "pool", "annotator", "model", "tok", "estimator_names"),
          writes=("confidences", "estimator_info", "pool_scores", "training_free"), timing="estimators_s",
          all_ranks=True),
    Stage("heads", _heads, reads=("records", "feats", "confidences", "probe"), writes=("eli_pool",),
          timing="heads_s", all_ranks=True),
    Stage("layer_heads", _layer_heads, reads=("records", "layer_feats", "confidences"), timing="layer_heads_s",
          when=lambda s: bool(s.extra_sets)),
    Stage("controls", _controls, reads=("records", "control_model", "confidences"), timing="controls_s",
          when=lambda s: s.cfg.controls and s.probe),
    Stage("calibrated", _calibrated, reads=("pool", "pool_scores", "eli_pool", "confidences"),
          timing="calibrated_baselines_s"),
    Stage("evaluate", _evaluate, reads=("test", "confidences"), writes=("metrics",)),
]


def _at_limit(records: list[dict], limit: int) -> int:
    """How many greedy answers have ``limit`` tokens: decoding stopped at ``max_new_tokens``, not at the answer's
    end (a token count below the limit means the model ended the line itself)."""
    return int(sum(len(r.get("greedy_tokens") or []) >= limit for r in records))


def _k_run(s: RunState) -> list[int]:
    """The k the label-using methods ran with; a --k above the pool is said (config.json keeps what was asked)."""
    import sys

    from elical.jobs.heads_stage import label_sets

    k_run = sorted(label_sets(len(s.pool), s.cfg))
    if any(k > len(s.pool) for k in s.cfg.k_values):
        print(f"elical: WARNING: --k {','.join(map(str, s.cfg.k_values))} asks for more labels than the training "
              f"pool has ({len(s.pool)} questions): the label-using methods ran with k = "
              f"{', '.join(map(str, k_run))} (results.json: k_values_run)", file=sys.stderr)
    return k_run


def write_results(s: RunState) -> dict:
    """results.json (configuration, versions, timings, sizes, estimators, metrics; layers and controls when
    run), table.md and layers.md; returns the results dict."""
    from elical.evaluation.tables import alignment_protocol_tables, format_table, headline_methods

    cfg, metrics = s.cfg, s.metrics
    results = {
        "config": asdict(cfg), "versions": s.versions, "seed": cfg.seed, "timings": s.timings,
        "sizes": {"train_pool": len(s.pool), "eval": len(s.test),
                  "eval_accuracy": float(np.mean([r["greedy_correctness"] for r in s.test])),
                  "pool_accuracy": float(np.mean([r["greedy_correctness"] for r in s.pool])),
                  # greedy answers whose decoding stopped at the token limit (cut, not finished): docs/results.md
                  "greedy_at_max_new_tokens": {"eval": _at_limit(s.test, cfg.max_new_tokens),
                                               "train_pool": _at_limit(s.pool, cfg.max_new_tokens),
                                               "max_new_tokens": cfg.max_new_tokens}},
        "estimators": {"training_free": s.training_free, "model_based": s.estimator_info},
        "k_values_run": _k_run(s),  # cfg.k_values capped at the pool size
        "results": metrics,
    }
    if s.released is not None:
        results["honestybench"] = {"dir": cfg.honestybench, "datasets": s.released,
                                   "judged_by": "elical (--rejudge)" if cfg.rejudge else "released"}
    if cfg.controls:
        results["controls"] = {"shuffled_labels": s.probe, "question_embedding": s.probe and "all-MiniLM-L6-v2",
                               "control_model": s.control_model, "probe_heads_only": True}
    if s.extra_sets:
        from elical.jobs.layers import layer_table

        layers_md, results["layers"] = layer_table(metrics, cfg, s.model.config.num_hidden_layers)
    write_json_atomic(s.run_dir / "results.json", results)
    title = (f"{', '.join(s.released or cfg.datasets)}: {len(s.test)} eval questions, pool {len(s.pool)}, "
             f"greedy accuracy {results['sizes']['eval_accuracy']:.1%}")
    table = format_table(metrics["all"], title, methods=headline_methods(metrics["all"]))
    table += alignment_protocol_tables(metrics)  # with --alignment-protocol paper: both protocols, per group
    if s.extra_sets:
        (s.run_dir / "layers.md").write_text(layers_md, encoding="utf-8")
        table += "\n" + layers_md
    (s.run_dir / "table.md").write_text(table, encoding="utf-8")
    return results
