"""``elical sweep``: the annotation-budget sweep of EliCal on a finished run directory.

For every seed: stage 1 (Eli-Only) is fitted once on the pool's self-consistency; for every label selection
(:mod:`elical.heads.labeling`) one nested label order is drawn, and for every k in the grid Cal-Only(k) and EliCal(k) are
fitted on the *same* first k questions of that order. Every head is evaluated on the run's evaluation split with
:func:`elical.evaluation.metrics.evaluate_confidence`; the sweep writes the mean and the spread over seeds of every metric per
(method, selection, k), the per-seed values and the label orders (record ids) to ``sweep.json`` plus a CSV.

This is Figure 1 / Sec. 6.2 of Ni et al. (arXiv 2510.17509): EliCal reaches most of the calibration-only quality
with a small share of the labels. Protocol: stage 1 validates on held-out pool questions' self-consistency; stage 2
validates inside its k labels and those count in k; evaluation labels are read only to score the heads.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

from elical.evaluation import METRICS as _METRICS
from elical.records import InputError

__all__ = ["register", "default_k_grid", "run_sweep", "write_sweep", "format_sweep_table", "json_safe",
           "summarised", "BASELINES"]


def summarised() -> tuple[str, ...]:
    """Metrics summarised over seeds (keys of evaluate_confidence; counts and intervals stay in the per-seed
    values): every metric of the registry :data:`elical.evaluation.METRICS` and Alignment's dev-chosen threshold."""
    return (*_METRICS, "threshold")


_TARGETS = ("sample-accuracy", "greedy")  # elical.heads.labeling.TARGETS
#: Training-free estimators scored beside the heads: those that read record fields only (no judge model to load).
BASELINES = ("N-Prob", "Consis-Lex", "Consis-Sem")


def default_k_grid(n_pool: int, smallest: int = 4) -> list[int]:
    """Powers of two from ``smallest`` below ``n_pool``, then ``n_pool`` itself ("all"). E.g. 600 ->
    [4, 8, ..., 512, 600]. Raises ValueError if n_pool < 1."""
    if n_pool < 1:
        raise ValueError(f"n_pool must be >= 1, got {n_pool}")
    ks, k = [], smallest
    while k < n_pool:
        ks.append(k)
        k *= 2
    return ks + [n_pool]


def _parse_k(text: str) -> list:
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part.lower() == "all":
            out.append("all")
            continue
        try:
            value = int(part)
        except ValueError:
            raise InputError("--k", None, "--k", f"expected positive integers or 'all', got '{part}'") from None
        if value < 1:
            raise InputError("--k", None, "--k", f"expected positive integers or 'all', got '{part}'")
        out.append(value)
    if not out:
        raise InputError("--k", None, "--k", "empty list")
    return out


def _resolve_k(k_values, n_pool: int) -> list[int]:
    """Sorted unique ks; "all" and values above the pool size become n_pool."""
    if k_values is None:
        return default_k_grid(n_pool)
    return sorted({n_pool if k == "all" else min(int(k), n_pool) for k in k_values})


def load_run(run_dir: Path, target: str, stream: bool = False):
    """Records and features of a run directory, aligned by id, split into pool and evaluation parts: (pool records,
    evaluation records, X_pool (n_pool, d), X_test (n, d), self-consistency (n_pool,), label targets (n_pool,)).
    ``stream``: the features stay memory-mapped (:class:`elical.heads.streaming.FeatureFile` views read a chunk
    at a time, for pools larger than memory) instead of being loaded. Raises InputError for missing or malformed
    files."""
    from elical.generation.features import load_features
    from elical.heads.labeling import label_targets
    from elical.records import read_records, self_consistency

    rec_path = run_dir / "records" / "annotations.jsonl"
    feat_path = run_dir / "features" / "hidden_states.safetensors"
    for path in (rec_path, feat_path):
        if not path.is_file():
            raise InputError(path, None, None, "missing; run `elical run` (or `elical build`) on this directory first")
    records = read_records(rec_path, skip_torn_tail=False)
    if stream:
        from elical.heads.streaming import FeatureFile

        feats = FeatureFile.open(feat_path)
        ids = feats.ids
    else:
        ids, feats, _ = load_features(feat_path)
    row = {rid: i for i, rid in enumerate(ids)}
    for lineno, r in enumerate(records, start=1):
        for field in ("id", "split", "greedy_correctness", "consistency_judgement"):
            if field not in r:
                raise InputError(rec_path, lineno, field, "missing")
        if r["id"] not in row:
            raise InputError(feat_path, None, "ids", f"no hidden state for record '{r['id']}' (line {lineno} of "
                             f"{rec_path}); re-extract the features")
        if r["split"] not in ("train", "test"):
            raise InputError(rec_path, lineno, "split", f"expected 'train' or 'test', got {r['split']!r}")
    pool = [r for r in records if r["split"] == "train"]
    test = [r for r in records if r["split"] == "test"]
    if not pool or len(test) < 2:
        raise InputError(rec_path, None, "split", f"needs >= 1 pool ('train') and >= 2 evaluation ('test') "
                         f"records, found {len(pool)} and {len(test)}")
    X_pool = feats[[row[r["id"]] for r in pool]]
    X_test = feats[[row[r["id"]] for r in test]]
    try:
        c_cons = np.array([self_consistency(r) for r in pool])
        y_k = label_targets(pool, target)
    except ValueError as exc:
        raise InputError(rec_path, None, None, str(exc)) from None
    return pool, test, X_pool, X_test, c_cons, y_k


def _summary(per_seed: dict) -> tuple[dict, dict]:
    """Mean and sample standard deviation (ddof=1; None with one seed) over seeds of every metric of :func:`summarised`."""
    mean, std = {}, {}
    for m in summarised():
        v = np.array([per_seed[s][m] for s in per_seed], dtype=np.float64)
        mean[m] = float(np.mean(v))
        # Equal values (a training-free estimator) give exactly 0, not a rounding residue of the mean.
        std[m] = None if v.size < 2 else 0.0 if np.all(v == v[0]) else float(np.std(v, ddof=1))
    return mean, std


def run_sweep(run_dir, k_values=None, seeds=(0, 1, 2), selections=("random", "stratified"), head: str | None = None,
              target: str | None = None, n_resamples: int = 0, n_strata: int | None = None,
              head_params: dict | None = None, layers=None, pooling: str = "last", stream: bool = False,
              progress: bool = False) -> dict:
    """Eli-Only, Cal-Only(k) and EliCal(k) over a grid of k, seeds and label selections on one run directory.

    Parameters
    ----------
    run_dir : path with ``records/annotations.jsonl`` (split "train" = pool, "test" = evaluation) and
        ``features/hidden_states.safetensors`` (as ``elical run`` writes them).
    k_values : list of int or "all", optional. Numbers of labelled pool questions; values above the pool size and
        "all" mean the whole pool. Default :func:`default_k_grid`.
    seeds : ints >= 0. Each seed fits its own stage-1 head, draws its own label orders and seeds every head.
    selections : names from :data:`elical.heads.labeling.SELECTIONS`.
    head : "linear" or "mlp"; None: the run's own (config.json). target : "sample-accuracy" (share of correct
        samples, the paper's) or "greedy" (0/1); None: the run's own.
    n_resamples : bootstrap resamples for the per-seed 95 % intervals; 0 = no intervals (fast).
    n_strata : strata of the stratified selection (default :data:`elical.heads.labeling.DEFAULT_N_STRATA`).
    head_params : further :class:`elical.heads.probe.ProbeHead` parameters for every head (e.g. ``{"batch_size": 32}``);
        default: the heads' own defaults, as ``elical run``.
    layers : "8,15,-1", "all" or a list of ints, optional; pooling : "last", "mean" or "last,mean". Every (layer,
        pooling) other than the run's own features gets Eli-Only, Cal-Only(k) and EliCal(k) on the same label orders,
        named ``Eli-Only [L8]``, ``EliCal [L15 mean]`` (k in the row); features as ``elical run --layer`` writes
        them, computed with the run's model when absent (:mod:`elical.jobs.layers`).
    stream : train and score the heads on the run's features memory-mapped, read a chunk at a time
        (:mod:`elical.heads.streaming`: pools whose features do not fit in memory); the same heads up to float
        rounding.

    Returns
    -------
    dict with "config", "sizes", "timings", "label_orders" ({selection: {seed: [pool record ids, in order]}}),
    and "results": a list of rows {"method", "selection", "k", "label_fraction", "n_seeds", "mean": {metric},
    "std": {metric}, "per_seed": {seed: evaluate_confidence dict}}. Eli-Only and the training-free :data:`BASELINES`
    have k = 0 and selection None. Evaluation uses the run's ``dev_fraction`` and ``seed`` (config.json; default
    0.2 and 0) for every head, so the spread is that of training and label choice only.

    Raises
    ------
    InputError : missing or malformed run directory files. ValueError : bad arguments.
    """
    from elical.estimators import estimate
    from elical.heads.protocol import fit_heads, label_sets
    from elical.heads.stages import probe_stages
    from elical.jobs.heads_stage import tagged
    from elical.heads.labeling import DEFAULT_N_STRATA, SELECTIONS, label_order
    from elical.evaluation.metrics import evaluate_confidence

    run_dir = Path(run_dir)
    seeds = [int(s) for s in seeds]
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct non-negative ints, got {seeds}")
    if not selections or any(s not in SELECTIONS for s in selections):
        raise ValueError(f"selections must be among {SELECTIONS}, got {list(selections)}")
    cfg_path = run_dir / "config.json"
    run_cfg = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}
    head = head or run_cfg.get("head", "linear")
    target = target or run_cfg.get("target", "sample-accuracy")
    if head not in ("linear", "mlp"):
        raise ValueError(f"the sweep trains probe heads (linear, mlp); the run used {head!r}: pass --head")
    if target not in _TARGETS:
        raise ValueError(f"target must be one of {_TARGETS}, got {target!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 0:
        raise ValueError(f"n_resamples must be a non-negative int, got {n_resamples!r}")
    n_strata = DEFAULT_N_STRATA if n_strata is None else n_strata
    t0 = time.time()
    dev_fraction, eval_seed = float(run_cfg.get("dev_fraction", 0.2)), int(run_cfg.get("seed", 0))
    pool, test, X_pool, X_test, c_cons, y_k = load_run(run_dir, target, stream)
    extra = {}  # tag -> (X_pool, X_test) of the other layers and poolings
    if layers is not None or pooling != "last":
        from elical.jobs.layers import parse_pooling_arg, run_dir_features

        pooling = parse_pooling_arg(pooling)
        feats = run_dir_features(run_dir, run_cfg, pool + test, layers, pooling, progress)
        extra = {tag: (f[:len(pool)], f[len(pool):]) for tag, f in feats.items()}
    y_test = np.array([int(r["greedy_correctness"]) for r in test])
    n_pool = len(pool)
    ks = _resolve_k(k_values, n_pool)

    def evaluate(conf):
        out = evaluate_confidence(y_test, conf, dev_fraction=dev_fraction, seed=eval_seed,
                                  n_resamples=max(1, n_resamples))
        if not n_resamples:
            out.pop("ci")
        return out

    per: dict[tuple, dict] = {}  # (method, selection, k) -> {seed: metrics}
    for name in BASELINES:
        try:
            conf = estimate(name, test).confidence
        except ValueError as exc:  # EstimatorInputError names the record and the field
            raise InputError(run_dir / "records" / "annotations.jsonl", None, getattr(exc, "field", None),
                             str(exc)) from None
        metrics = evaluate(conf)
        per[(name, None, 0)] = {s: metrics for s in seeds}
    orders: dict[str, dict[int, list[str]]] = {sel: {} for sel in selections}
    features = {None: (X_pool, X_test), **extra}  # tag -> (pool, evaluation) features; None: the primary
    for seed in seeds:
        ts = time.time()
        stages = probe_stages(head, random_state=seed, **(head_params or {}))
        eli = {tag: stages.eli_only(Xp, c_cons) for tag, (Xp, _) in features.items()}
        for tag, (_, Xt) in features.items():
            per.setdefault((tagged("Eli-Only", tag), None, 0), {})[seed] = evaluate(eli[tag].predict(Xt))
        eli_pool = eli[None].predict(X_pool)  # stage-1 confidence on the pool: no label involved
        cache: dict = {tag: {} for tag in features}  # the same labelled set -> the same heads, whatever the order
        scored: dict = {}  # id(head) -> metrics
        for sel in selections:
            order = label_order(sel, n_pool, seed, eli_confidence=eli_pool, n_strata=n_strata)
            orders[sel][seed] = [pool[i]["id"] for i in order]
            sets = label_sets(order, ks)
            for tag, (Xp, Xt) in features.items():  # the same labelled questions on every feature set
                for fitted in fit_heads(stages, Xp, c_cons, y_k, sets, eli=eli[tag], cache=cache[tag]):
                    if fitted.k is None:
                        continue  # Eli-Only: scored once per seed above
                    if id(fitted.head) not in scored:
                        scored[id(fitted.head)] = evaluate(fitted.head.predict(Xt))
                    per.setdefault((tagged(fitted.method, tag), sel, fitted.k), {})[seed] = scored[id(fitted.head)]
        if progress:
            print(f"sweep: seed {seed} done in {time.time() - ts:.0f} s", file=sys.stderr, flush=True)
    rows = []
    for (method, sel, k), by_seed in per.items():
        mean, std = _summary(by_seed)
        rows.append({"method": method, "selection": sel, "k": k, "label_fraction": k / n_pool,
                     "n_seeds": len(by_seed), "mean": mean, "std": std,
                     "per_seed": {str(s): v for s, v in by_seed.items()}})
    return {
        "run_dir": str(run_dir),
        "config": {"k_values": ks, "seeds": seeds, "selections": list(selections), "head": head,
                   "head_params": dict(head_params or {}), "target": target,
                   "n_resamples": n_resamples, "n_strata": n_strata, "dev_fraction": dev_fraction,
                   "eval_seed": eval_seed, "std": "sample standard deviation over seeds (ddof=1)",
                   "layers": None if layers is None else str(layers) if isinstance(layers, str) else list(layers),
                   "pooling": pooling, "feature_tags": list(extra), "stream_features": bool(stream)},
        "sizes": {"pool": n_pool, "eval": len(test), "eval_accuracy": float(y_test.mean()),
                  "pool_target_mean": float(y_k.mean())},
        "timings": {"total_s": time.time() - t0},
        "label_orders": {sel: {str(s): ids for s, ids in by.items()} for sel, by in orders.items()},
        "results": rows,
    }


def json_safe(obj):
    """A copy of ``obj`` (dicts, lists, floats) with every NaN replaced by None, so the JSON is strict."""
    if isinstance(obj, float) and obj != obj:
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def write_sweep(result: dict, json_path, csv_path=None) -> None:
    """Write the sweep dict as JSON (NaN -> null) and, if ``csv_path``, one CSV row per (method, selection, k)
    with ``<metric>_mean`` and ``<metric>_std`` columns. Both files are written atomically."""
    from elical.records import write_json_atomic

    write_json_atomic(json_path, json_safe(result))
    if csv_path is None:
        return
    from elical.fileio import atomic_path

    with atomic_path(csv_path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["method", "selection", "k", "label_fraction", "n_seeds"]
                   + [f"{m}_{s}" for m in summarised() for s in ("mean", "std")])
        for row in result["results"]:
            w.writerow([row["method"], row["selection"] or "", row["k"], f"{row['label_fraction']:.6g}",
                        row["n_seeds"]] + ["" if row[s][m] is None else f"{row[s][m]:.6g}"
                                           for m in summarised() for s in ("mean", "std")])


def _cell(row: dict, metric: str) -> str:
    mean, std = row["mean"][metric], row["std"][metric]
    if mean is None or mean != mean:
        return "nan"
    return f"{mean:.3f}" if std is None or std == 0 else f"{mean:.3f} ± {std:.3f}"


def format_sweep_table(result: dict, metrics=("auroc", "ece", "alignment", "brier")) -> str:
    """Markdown table: one line per method, selection and k; cells are mean ± sample std over seeds."""
    s, c = result["sizes"], result["config"]
    head = " | ".join(m.upper() if m in ("auroc", "ece") else m.capitalize() for m in metrics)
    lines = [f"### sweep: pool {s['pool']}, eval {s['eval']} (greedy accuracy {s['eval_accuracy']:.1%}), "
             f"seeds {c['seeds']}, head {c['head']}, target {c['target']}", "",
             f"| method | selection | k | labels | {head} |", "|---|---|---|---|" + "---|" * len(metrics)]
    # baselines first in their own order, then per selection by k (stable sort)
    rows = sorted(result["results"],
                  key=lambda r: (r["k"] > 0, r["selection"] or "", r["k"], r["method"] if r["k"] else ""))
    for r in rows:
        base, _, tag = r["method"].partition(" [")
        name = r["method"] if r["k"] == 0 else f"{base}({r['k']})" + (f" [{tag}" if tag else "")
        lines.append(f"| {name} | {r['selection'] or '-'} | {r['k']} | {r['label_fraction']:.1%} | "
                     + " | ".join(_cell(r, m) for m in metrics) + " |")
    return "\n".join(lines) + "\n"


def _handler(args) -> int:
    run_dir = Path(args.run_dir)
    json_path = Path(args.output) if args.output else run_dir / "sweep.json"
    csv_path = json_path.with_suffix(".csv")
    if not run_dir.is_dir():
        raise InputError(run_dir, None, "RUN_DIR", "not a directory")
    for path in (json_path, csv_path):
        if path.exists() and not args.force:
            raise InputError(path, None, "--output", "exists; pass --force to overwrite it (nothing was written)")
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise InputError("--seeds", None, "--seeds", f"expected comma-separated integers, got '{args.seeds}'") from None
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise InputError("--seeds", None, "--seeds", f"expected distinct non-negative integers, got '{args.seeds}'")
    if args.n_strata is not None and args.n_strata < 1:
        raise InputError("--n-strata", None, "--n-strata", f"expected a positive integer, got {args.n_strata}")
    if args.n_resamples < 0:
        raise InputError("--n-resamples", None, "--n-resamples", f"expected >= 0, got {args.n_resamples}")
    selections = ("random", "stratified") if args.selection == "both" else (args.selection,)
    if args.layer is not None:
        from elical.jobs.layers import parse_layer_arg

        parse_layer_arg(args.layer)  # InputError naming --layer before any work
    if args.pooling is not None:
        from elical.jobs.layers import parse_pooling_arg

        parse_pooling_arg(args.pooling)
    result = run_sweep(run_dir, k_values=_parse_k(args.k) if args.k else None, seeds=seeds, selections=selections,
                       head=args.head, target=args.target, n_resamples=args.n_resamples, n_strata=args.n_strata,
                       layers=args.layer, pooling=args.pooling or "last", stream=args.stream_features,
                       progress=not args.quiet)
    write_sweep(result, json_path, csv_path)
    print(format_sweep_table(result))
    print(f"wall time {result['timings']['total_s']:.0f} s; results in {json_path} and {csv_path}")
    return 0


_DESCRIPTION = ("Per seed: fit Eli-Only once on the pool's self-consistency; per label selection draw one nested "
                "label order; per k fit Cal-Only(k) and EliCal(k) on the same first k pool questions; score every "
                "head on the evaluation split. Writes mean, sample std and per-seed values of every metric to "
                "RUN_DIR/sweep.json (and sweep.csv) and prints a table.")


def register(subparsers) -> None:
    """Add ``elical sweep RUN_DIR [--k ...] [--seeds ...] [--selection ...] [--head ...] [--output FILE]``."""
    p = subparsers.add_parser("sweep", help="annotation-budget sweep: Eli-Only, Cal-Only(k), EliCal(k) over k and "
                              "seeds on a run directory", description=_DESCRIPTION)
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by `elical run`")
    p.add_argument("--k", help="comma-separated label counts, 'all' = the whole pool (default: 4, 8, 16, ... "
                   "powers of two below the pool size, and all)")
    p.add_argument("--seeds", default="0,1,2",
                   help="comma-separated seeds (stage 1, label orders, heads); default 0,1,2")
    p.add_argument("--selection", choices=["random", "stratified", "both"], default="both",
                   help="which k to label: seeded random, spread over the stage-1 confidence, or both "
                   "(default)")
    p.add_argument("--n-strata", type=int, default=None, help="strata of the stratified selection (default 8)")
    p.add_argument("--head", choices=["linear", "mlp"], help="probe head (default: the run's)")
    p.add_argument("--target", choices=list(_TARGETS),
                   help="label target: share of correct sampled answers (sample-accuracy, the paper's) or greedy "
                   "correctness (default: the run's)")
    p.add_argument("--layer", help="also other hidden layers: 8,15,-1 or all (features of `elical run --layer`, "
                   "computed with the run's model when absent); rows 'EliCal [L8]'")
    p.add_argument("--pooling", help="with --layer: last (default), mean (over the question's tokens) or last,mean")
    p.add_argument("--stream-features", action="store_true",
                   help="keep the features memory-mapped and train chunk by chunk (pools larger than memory)")
    p.add_argument("--n-resamples", type=int, default=0, help="bootstrap resamples per head (default 0 = no intervals)")
    p.add_argument("--output", help="sweep JSON file (default RUN_DIR/sweep.json; the CSV goes beside it)")
    p.add_argument("--force", action="store_true", help="overwrite an existing sweep file")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(handler=_handler)
