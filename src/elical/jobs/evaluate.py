"""``elical evaluate RUN_DIR``: every training-free confidence estimator beside the trained methods of a run.

Reads ``RUN_DIR/config.json`` and ``RUN_DIR/records/annotations.jsonl``; computes the record-based estimators
(:data:`elical.estimators.ESTIMATORS`: Prob, N-Prob, Consis-Lex, Consis-Sem, SE-Discrete, SE-Weighted) on the
evaluation records (``split == "test"``) and, with ``--model-estimators``, the model-based ones
(the "model" kind of the same registry: Verbal-0, Verbal-k, P(True); the run's model is loaded from
``config.json``, Verbal-k takes its examples from the run's training pool). The trained methods already in
``RUN_DIR/predictions.jsonl`` (Eli-Only, Cal-Only(k), EliCal(k), ...) are kept as they are, and every method is
scored with :func:`elical.evaluation.metrics.evaluate_confidence` (the run's seed, dev fraction and bootstrap size).

Writes, each atomically (temporary file + rename): ``predictions.jsonl`` (recomputed estimators replace their own
lines, every other line is kept), ``results.json`` (the pipeline's shape; existing keys are kept, ``results`` is
updated per group and method, ``estimators`` says what each estimator did — e.g. Verbal's unparseable count —
and ``evaluate`` holds timings and skipped estimators) and ``table.md``; then prints the table.

Bad input: a missing run directory, config or record file, ``predictions.jsonl`` without ``results.json`` or
the other way round (a run evaluated again needs both), a malformed record or a record an explicitly requested
estimator cannot score stops with an :class:`elical.records.InputError` naming file, line and field (exit 2), and
nothing is written. Without ``--estimators``, an estimator that cannot score some record (e.g. SE-Weighted on
records from a backend without log-probs) is skipped with a warning that names the record.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from elical.fileio import write_text_atomic
from elical.records import InputError, read_records, write_json_atomic

__all__ = ["register", "evaluate_run", "record_estimates", "model_estimates"]



def register(subparsers) -> None:
    """Add the ``evaluate`` subcommand to the ``elical`` command line."""
    p = subparsers.add_parser("evaluate", help="score every training-free estimator beside a run's trained methods",
                              description="Score every training-free confidence estimator beside the trained "
                              "methods of a run directory; updates predictions.jsonl, results.json and table.md.")
    p.add_argument("run_dir", help="a run directory written by `elical run`")
    p.add_argument("--estimators", help="comma-separated estimator names (default: all record-based ones, plus the "
                   "model-based ones with --model-estimators); naming one makes its errors fatal")
    p.add_argument("--model-estimators", action="store_true",
                   help="also run Verbal-0, Verbal-k and P(True) with the run's model")
    p.add_argument("--k-shot", type=_positive, default=8, help="Verbal-k: number of training-pool examples (8)")
    p.add_argument("--se-judge", help="equivalence judge that clusters answers for semantic entropy (default: the "
                   "run's own equivalence judge, learned unless the run chose another): learned, embedding, nli (Kuhn "
                   "et al.; needs --se-judge-model), exact, rouge-l, ...")
    p.add_argument("--se-judge-model", help="local model directory of the SE judge (nli: an MNLI model)")
    p.add_argument("--se-length-normalized", action="store_true",
                   help="SE-Weighted: weight samples by their mean token log-prob instead of the sequence log-prob")
    p.add_argument("--batch-size", type=_positive, help="prompts per model batch (default: the run's)")
    p.add_argument("--device", help="device for the model (default: the run's)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(handler=_main)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _main(args) -> int:
    from elical.evaluation.tables import format_table

    names = [n.strip() for n in args.estimators.split(",") if n.strip()] if args.estimators else None
    out = evaluate_run(args.run_dir, names=names, model_estimators=args.model_estimators, k=args.k_shot,
                       batch_size=args.batch_size, device=args.device, progress=not args.quiet,
                       se_judge=args.se_judge, se_judge_model=args.se_judge_model,
                       se_length_normalized=args.se_length_normalized)
    for group, table in out["results"].items():
        print(format_table(_complete(table), group))
    print(f"results in {Path(args.run_dir) / 'results.json'}")
    return 0


def _complete(table: dict) -> dict:
    """The methods with every metric the table shows (an older results.json may hold others)."""
    from elical.evaluation import headline_metrics

    shown = set(headline_metrics())
    return {m: v for m, v in table.items() if isinstance(v, dict) and shown <= v.keys()}


def _warn(message: str) -> None:
    print(f"elical evaluate: warning: {message}", file=sys.stderr)


def record_estimates(records: list[dict], names=None, equivalent=None) -> dict[str, np.ndarray]:
    """Confidence of each estimator that reads the records only: {name: ndarray of shape (n,)} in registry order.

    names : estimator names (default: every "record" and "semantic" estimator of :data:`elical.estimators.ESTIMATORS`).
    equivalent : the equivalence judge semantic entropy clusters with (default: the default judge).
    Raises :class:`elical.estimators.training_free.EstimatorInputError` for a record an estimator cannot score."""
    from elical.estimators import EstimatorContext, estimate, names_of_kind

    ctx = EstimatorContext(equivalent=equivalent)
    shared: dict = {}  # statistics computed once for these records (one clustering for both SE estimators)
    return {name: estimate(name, records, ctx, shared).confidence
            for name in names or names_of_kind("record", "semantic")}


def model_estimates(model, tokenizer, records: list[dict], train_records: list[dict], names=None, *, k: int = 8,
                    seed: int = 0, batch_size: int = 16, progress: bool = False) -> dict:
    """Run the model-based estimators: {name: :class:`elical.estimators.Estimate`} (default: every "model"
    estimator). ``train_records`` (the training pool) feed Verbal-k's k examples (``seed`` picks them)."""
    from elical.estimators import EstimatorContext, estimate, names_of_kind

    ctx = EstimatorContext(model=model, tokenizer=tokenizer, train_records=train_records, k=k, seed=seed,
                           batch_size=batch_size, progress=progress)
    shared: dict = {}
    return {name: estimate(name, records, ctx, shared) for name in names or names_of_kind("model")}


def _load_run(run_dir: Path):
    if not run_dir.is_dir():
        raise InputError(run_dir, None, "RUN_DIR", "not a directory (expected a run directory of `elical run`)")
    cfg_path = run_dir / "config.json"
    if not cfg_path.is_file():
        raise InputError(cfg_path, None, None, "missing (is this a run directory of `elical run`?)")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(cfg_path, exc.lineno, None, f"malformed JSON ({exc.msg})") from None
    rec_path = run_dir / "records" / "annotations.jsonl"
    if not rec_path.is_file():
        raise InputError(rec_path, None, None, "missing: the run has no records yet")
    records = read_records(rec_path)
    lines = [i for i, line in enumerate(rec_path.read_text(encoding="utf-8").split("\n"), 1) if line.strip()]
    has_split = any("split" in r for r in records)
    test = [(lines[i], r) for i, r in enumerate(records) if not has_split or r.get("split") == "test"]
    if not test:
        raise InputError(rec_path, None, "split", "no evaluation records (split 'test')")
    seen = set()
    for line, r in test:
        if not isinstance(r.get("id"), str) or not r["id"]:
            raise InputError(rec_path, line, "id", "missing or not a string")
        if r["id"] in seen:
            raise InputError(rec_path, line, "id", f"duplicate id {r['id']!r}")
        seen.add(r["id"])
        if r.get("greedy_correctness") not in (0, 1):  # True/False compare equal to 1/0
            raise InputError(rec_path, line, "greedy_correctness",
                             f"expected 0 or 1, got {r.get('greedy_correctness')!r}")
    pool = [r for r in records if has_split and r.get("split") == "train"]
    line_of = {r.get("id"): lines[i] for i, r in enumerate(records) if isinstance(r.get("id"), str)}
    return cfg, rec_path, test, pool, line_of


def _as_input_error(exc, rec_path: Path, line_of: dict, name: str) -> InputError:
    from elical.estimators.training_free import EstimatorInputError

    if isinstance(exc, EstimatorInputError):  # the record may be an evaluation or (Verbal-k) a pool record
        return InputError(rec_path, line_of.get(exc.record_id), exc.field,
                          f"{name}: record {exc.record_id}: {exc.problem}")
    return InputError(rec_path, None, None, f"{name}: {exc}")


def _se_judge(name: str, model_path: str | None, cfg: dict):
    from elical.judges import judge_model_kw, make_equivalence_judge

    try:
        keyword = judge_model_kw(name, "equivalence")  # None: the judge takes no model (the registry says)
        # the run's --judge-model belongs to the run's own judge (for an llm judge: a model name on a server)
        own = cfg.get("semantic_model") if cfg.get("equivalence_judge") == name else None
        model_path = (model_path or own) if keyword else model_path
        return make_equivalence_judge(name, **({keyword or "model_path": model_path} if model_path else {}))
    except ValueError as exc:
        raise InputError("--se-judge", None, "--se-judge", str(exc)) from None


def evaluate_run(run_dir, names=None, model_estimators: bool = False, k: int = 8, batch_size: int | None = None,
                 device: str | None = None, progress: bool = False, se_judge: str | None = None,
                 se_judge_model: str | None = None, se_length_normalized: bool = False) -> dict:
    """Compute the estimators on a run's evaluation records, merge with its trained methods, write the outputs.

    names : estimator names from both registries (None: all record-based, plus all model-based when
    ``model_estimators``); an unknown name raises InputError. k : Verbal-k examples. batch_size / device : for the
    model (default: the run's). se_judge / se_judge_model : the equivalence judge that clusters answers for
    SE-Discrete / SE-Weighted (:func:`elical.judges.make_equivalence_judge`; by default the run's own
    ``equivalence_judge`` with its ``semantic_model``; the default, "learned", for a run without the field, with an
    llm judge, or, with a warning, with a removed judge (`elical.judges.REMOVED_JUDGES`)); se_length_normalized :
    see :func:`elical.estimators.training_free.se_weighted`.
    Returns the updated results.json dict.
    Raises InputError (nothing written) for bad input; see the module docstring."""
    from elical.estimators import ESTIMATORS, EstimatorContext, estimate, names_of_kind
    from elical.judges import DEFAULT_EQUIVALENCE, REMOVED_JUDGES

    t0 = time.time()
    run_dir = Path(run_dir)
    cfg, rec_path, test, pool, line_of = _load_run(run_dir)
    if se_judge is None:  # the judge that made the run's consistency judgements (an llm judge needs its server)
        se_judge = cfg.get("equivalence_judge") or DEFAULT_EQUIVALENCE
        if se_judge in REMOVED_JUDGES:
            print(f"elical: WARNING: {run_dir / 'config.json'}: equivalence_judge {se_judge!r} was removed (last in "
                  f"commit {REMOVED_JUDGES[se_judge]}); SE-Discrete / SE-Weighted cluster with the default, "
                  f"{DEFAULT_EQUIVALENCE!r} (--se-judge NAME chooses another)", file=sys.stderr)
        se_judge = DEFAULT_EQUIVALENCE if se_judge in ("llm", *REMOVED_JUDGES) else se_judge
    strict = names is not None
    if names is None:
        names = names_of_kind("record", "semantic") + (names_of_kind("model") if model_estimators else [])
    unknown = [n for n in names if n not in ESTIMATORS]
    if unknown:
        raise InputError("--estimators", None, "--estimators", f"unknown estimator(s) {', '.join(unknown)}; choose "
                         f"from {', '.join(ESTIMATORS)}")
    pred_path = run_dir / "predictions.jsonl"
    res_path = run_dir / "results.json"
    # One of the two without the other: evaluating would write predictions without the trained heads (that
    # results.json still lists), or a results.json without the run's versions, timings and sizes.
    for gone, there in ((pred_path, res_path), (res_path, pred_path)):
        if there.exists() and not gone.exists():
            raise InputError(gone, None, None, f"missing while {there.name} exists: evaluating now would lose the "
                             f"run's trained methods or its versions, timings and sizes. Restore it, or rebuild "
                             f"both with `elical run --output {run_dir} --resume` (the run's own options)")
    old_preds = read_records(pred_path)
    try:
        old_results = json.loads(res_path.read_text(encoding="utf-8")) if res_path.exists() else {}
    except json.JSONDecodeError as exc:
        raise InputError(res_path, exc.lineno, None, f"malformed JSON ({exc.msg})") from None

    records = [r for _, r in test]
    conf: dict[str, np.ndarray] = {}
    info: dict[str, dict] = {}
    timings: dict[str, float] = {}
    ctx = EstimatorContext(se_length_normalized=se_length_normalized, train_records=pool, k=k,
                           seed=int(cfg.get("seed", 0)), batch_size=batch_size or int(cfg.get("batch_size", 16)),
                           progress=progress)
    shared: dict = {}  # each declared statistic computed once (elical.estimators.stats)
    for name in names:
        needs = ESTIMATORS[name].info.get("stats", ())
        if "semantic_clusters" in needs and ctx.equivalent is None:
            ctx.equivalent = _se_judge(se_judge, se_judge_model, cfg)
        if "language_model" in needs and ctx.model is None:
            from elical.generation.models import load_model

            ctx.model, ctx.tokenizer = load_model(cfg.get("model", "smollm2-135m-instruct"),
                                                  device=device or cfg.get("device", "cpu"))
        t1 = time.time()
        try:
            est = estimate(name, records, ctx, shared)
        except ValueError as exc:
            err = _as_input_error(exc, rec_path, line_of, name)
            if strict:
                raise err from None
            _warn(f"skipped {name}: {err}")
            info[name] = {"skipped": str(err)}
            continue
        timings[name] = time.time() - t1
        conf[name] = est.confidence
        info[name] = {**est.info, **({"judge": se_judge} if "semantic_clusters" in needs else {})}
        if est.info.get("n_unparseable"):
            _warn(f"{name}: {est.info['n_unparseable']} of {len(records)} outputs held no number; they got 0.5")

    # Recomputed estimators first (registry order), then every other method already in predictions.jsonl; every
    # method is aligned by record id to the evaluation records before scoring.
    from elical.evaluation.scoring import align_by_id, score_methods, write_predictions

    ids = [r["id"] for r in records]
    stored: dict[str, list[dict]] = {}
    for p in old_preds:
        if not {"id", "method", "confidence"} <= p.keys():
            raise InputError(pred_path, None, "method", f"a prediction line lacks id/method/confidence: {p}")
        if p["method"] not in conf:
            stored.setdefault(p["method"], []).append(p)
    for method, rows in stored.items():
        try:
            conf[method] = align_by_id(ids, rows, method)
        except ValueError as exc:
            raise InputError(pred_path, None, "id", str(exc)) from None
    datasets = sorted({str(r.get("dataset", "")) for r in records})
    try:
        metrics = score_methods(records, conf, dev_fraction=float(cfg.get("dev_fraction", 0.2)),
                                seed=int(cfg.get("seed", 0)), n_resamples=int(cfg.get("n_bootstrap", 1000)),
                                alignment_protocol=str(cfg.get("alignment_protocol", "elical")))
    except ValueError as exc:
        raise InputError(rec_path, None, "confidence", str(exc)) from None

    results = dict(old_results) if old_results else {"config": cfg, "seed": cfg.get("seed", 0)}
    merged = {}
    for group in dict.fromkeys(list(metrics) + list(old_results.get("results", {}))):
        merged[group] = {**metrics.get(group, {}),
                         **{m: v for m, v in old_results.get("results", {}).get(group, {}).items()
                            if m not in metrics.get(group, {})}}
    results["results"] = merged
    results["estimators"] = {**old_results.get("estimators", {}), **info}
    results["evaluate"] = {"timings_s": {**timings, "total": time.time() - t0}, "n_eval": len(records),
                           "skipped": sorted(n for n, v in info.items() if "skipped" in v)}

    write_predictions(pred_path, records, conf)
    write_json_atomic(res_path, results)
    from elical.evaluation.tables import alignment_protocol_tables, format_table

    title = f"{', '.join(datasets)}: {len(records)} eval questions"
    table = "\n".join(format_table(_complete(t), title if g == "all" else g) for g, t in merged.items())
    table += alignment_protocol_tables(merged)  # a run made with --alignment-protocol paper keeps both
    write_text_atomic(run_dir / "table.md", table)
    return results
