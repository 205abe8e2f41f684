"""``elical study``: the HonestyBench protocol of Ni et al. (arXiv 2510.17509, Sec. 5-6) as one resumable command.

    elical study --preset cpu --output runs/study-cpu        # SmolLM2-135M-Instruct, about 70 minutes on 2 cores

Steps, each resumable: (1) ``elical run`` into ``OUTPUT/run`` (training pool from the in-domain sets only,
evaluation parts of every in-domain and out-of-domain set and MMLU, the training-free estimators); (2) per seed and
label target, every label-using method on the same nested label sets (``OUTPUT/study/parts``); (3) the
elicitation curve (Eli-Only against the unlabelled pool size); (4) per dataset and group metrics with bootstrap
intervals and the seeds' spread, the headline ratios, ``OUTPUT/study.json``, ``OUTPUT/study.md`` and the figures
of ``elical report OUTPUT``. See docs/study.md.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from elical.records import InputError

__all__ = ["run_study", "register"]

_TARGETS = ("sample-accuracy", "greedy")


def _default_dir(kind: str) -> str | None:
    """``../shared/data/<kind>`` or ``./shared/data/<kind>`` when present (the offline copies), else None."""
    for base in (Path.cwd().parent, Path.cwd()):
        path = base / "shared" / "data" / kind
        if path.is_dir():
            return str(path.resolve())
    return None


def _check_study_dir(out: Path, config: dict, resume: bool) -> None:
    from elical.jobs.checks import check_output_dir

    check_output_dir(out)
    saved_path = out / "study_config.json"
    if out.exists() and any(out.iterdir()):
        if not resume:
            raise InputError(out, None, "--output", "study directory exists and is not empty; pass --resume to "
                             "continue it or choose another --output (nothing was overwritten)")
        if saved_path.is_file():
            saved = json.loads(saved_path.read_text(encoding="utf-8"))
            diff = sorted(k for k in set(saved) | set(config) if saved.get(k) != config.get(k))
            if diff:
                raise InputError(saved_path, None, diff[0], f"differs from this command ({diff[0]}: "
                                 f"{saved.get(diff[0])!r} in the directory, {config.get(diff[0])!r} now)")


def _fitted_parts(inputs, study_dir: Path, seeds, targets, k_values, pool_sizes, progress: bool) -> dict:
    """{target or "elicitation": {seed: {method: confidences}}}, fitted or read back from the part files."""
    from elical.heads import stage2
    from elical.study.protocol import fit_elicitation, fit_part, part_path, read_part, write_part

    ids = inputs.test_ids
    # a part fitted under another stage-2 rule is fitted again on resume, not read back
    meta = {"k_values": [str(k) for k in k_values], "pool_sizes": list(pool_sizes), "n_pool": len(inputs.pool),
            "feature_tags": list(inputs.extra),
            "stage2": {"rule": stage2.DEFAULT_STAGE2_RULE, "full_from_k": stage2.FULL_FROM_K}}
    out: dict = {t: {} for t in (*targets, "elicitation")}
    for seed in seeds:
        t0, eli = time.time(), None
        for name in (*targets, "elicitation"):
            path = part_path(study_dir, f"{name}_seed{seed}")
            if path.is_file():
                saved_ids, conf, saved_meta = read_part(path)
                if saved_ids == ids and saved_meta == {**meta, "name": name, "seed": seed}:
                    out[name][seed] = conf
                    continue
            if name == "elicitation":
                conf = fit_elicitation(inputs, seed, pool_sizes, eli_all=(eli or {}).get(None))
            else:
                conf, eli = fit_part(inputs, name, seed, k_values, eli=eli)
            write_part(path, ids, conf, {**meta, "name": name, "seed": seed})
            out[name][seed] = conf
        if progress:
            print(f"study: seed {seed} done in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return out


def run_study(preset: str, output, *, seeds=None, k_values=None, targets=_TARGETS, n_bootstrap: int | None = None,
              resume: bool = False, progress: bool = True, data_dir: str | None = None, mmlu_dir: str | None = None,
              **run_overrides) -> dict:
    """Run (or resume) the study of :data:`elical.study.presets.STUDY_PRESETS` ``preset`` into ``output``.

    seeds, k_values, n_bootstrap default to the preset's; targets: label targets of every label-using method
    (the first is the headline's; both by default). ``run_overrides``: :class:`elical.jobs.run.RunConfig` fields
    (model, head, backend, device, judges, ...). Returns the dict written to ``output/study.json``.
    Raises InputError for bad input (missing data directory, existing output without ``resume``, a changed
    configuration on resume, malformed run files) before anything is overwritten."""
    from elical.jobs.run import RESUME_FREE_FIELDS, check_run_dir, run
    from elical.jobs.sweep import json_safe
    from elical.records import write_json_atomic
    from elical.study.presets import STUDY_PRESETS
    from elical.study.protocol import load_inputs
    from elical.study.summary import headline, summarize
    from elical.study.tables import format_study

    p = STUDY_PRESETS[preset]
    released = run_overrides.get("honestybench")
    data_dir = data_dir or (None if released else _default_dir("honestybench-qa"))
    mmlu_dir = mmlu_dir or (None if released else _default_dir("mmlu"))
    if not data_dir and not released:
        raise InputError("--data-dir", None, "--data-dir", "no HonestyBench QA directory found at "
                         "../shared/data/honestybench-qa; pass --data-dir")
    datasets = p.datasets if mmlu_dir else tuple(d for d in p.datasets if d != "mmlu")
    if released:  # the released files' datasets (all of them), their answers and verdicts (elical.jobs.released)
        datasets, run_overrides = (), {**run_overrides, "honestybench": os.path.abspath(released)}
    # real paths: a resume through a symlinked ../shared (or with --data-dir given one way and found the other)
    # compares the same directory, not two spellings of it
    cfg = p.run_config(os.path.realpath(data_dir) if data_dir else None, os.path.realpath(mmlu_dir) if mmlu_dir
                       else None, **run_overrides)
    cfg = type(cfg)(**{**asdict(cfg), "datasets": datasets})
    seeds = [int(s) for s in (seeds if seeds is not None else p.seeds)]
    k_values = list(k_values if k_values is not None else p.k_values)
    targets = list(targets)
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise InputError("--seeds", None, "--seeds", f"expected distinct non-negative integers, got {seeds}")
    if not targets or any(t not in _TARGETS for t in targets):
        raise InputError("--targets", None, "--targets", f"expected a subset of {', '.join(_TARGETS)}, got {targets}")
    n_bootstrap = p.n_bootstrap if n_bootstrap is None else int(n_bootstrap)
    out = Path(output)
    config = {"preset": preset, "model": cfg.model, "seeds": seeds, "k_values": [str(k) for k in k_values],
              "targets": targets, "pool_sizes": list(p.pool_sizes), "n_bootstrap": n_bootstrap,
              "run": json.loads(json.dumps({k: v for k, v in asdict(cfg).items() if k not in RESUME_FREE_FIELDS}))}
    _check_study_dir(out, config, resume)
    run_dir = out / "run"
    check_run_dir(run_dir, cfg, resume=True)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "study_config.json", config)
    t0, timings = time.time(), {}
    if not (run_dir / "results.json").is_file():
        run(cfg, run_dir, resume=run_dir.exists(), progress=progress)
    timings["run_s"] = time.time() - t0
    inputs = load_inputs(run_dir)
    n_pool = len(inputs.pool)
    t1 = time.time()
    parts = _fitted_parts(inputs, out / "study", seeds, targets, k_values, p.pool_sizes, progress)
    timings["heads_s"] = time.time() - t1
    t1 = time.time()
    common = dict(dev_fraction=cfg.dev_fraction, eval_seed=cfg.seed, n_resamples=n_bootstrap)
    eli_curve = {m: np.stack([parts["elicitation"][s][m] for s in seeds]) for m in parts["elicitation"][seeds[0]]}
    elicitation = summarize(inputs.test, eli_curve, **common)
    results = {}
    for target in targets:
        methods = {name: c[None] for name, c in inputs.training_free.items()}
        methods.update({m: np.stack([parts[target][s][m] for s in seeds]) for m in parts[target][seeds[0]]})
        summary = summarize(inputs.test, methods, **common)
        ks = sorted({n_pool if k == "all" else min(int(k), n_pool) for k in k_values})
        results[target] = {"summary": summary, "headline": headline(summary, n_pool, ks, elicitation)}
    timings["summary_s"] = time.time() - t1
    timings["total_s"] = time.time() - t0
    eval_per = {d: v["n"] for d, v in next(iter(results.values()))["summary"]["datasets"].items()}
    study = {"config": config, "sizes": {"pool": n_pool, "eval": len(inputs.test), "eval_per_dataset": eval_per,
                                         "pool_per_dataset": _count(inputs.pool)},
             "pool_ids": [r["id"] for r in inputs.pool], "eval_ids": inputs.test_ids,
             "feature_tags": list(inputs.extra),
             "targets": results, "elicitation": elicitation, "timings": timings}
    write_json_atomic(out / "study.json", json_safe(study))
    (out / "study.md").write_text(format_study(study), encoding="utf-8")
    from elical.extras import MissingExtraError
    from elical.study.page import build_study_report

    try:
        build_study_report(out)
    except MissingExtraError as exc:  # the numbers are written; the page can follow with `elical report`
        print(f"elical: WARNING: no report page: {exc}; then: elical report {out}", file=sys.stderr, flush=True)
    return study


def _count(records) -> dict:
    out: dict = {}
    for r in records:
        out[r["dataset"]] = out.get(r["dataset"], 0) + 1
    return out


def _handler(args) -> int:
    from elical.study.tables import format_headline

    seeds = None
    if args.seeds:
        try:
            seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
        except ValueError:
            raise InputError("--seeds", None, "--seeds", f"expected comma-separated integers, got '{args.seeds}'") from None
    k_values = None
    if args.k:
        from elical.jobs.sweep import _parse_k

        k_values = _parse_k(args.k)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()] if args.targets else _TARGETS
    out = args.output or os.path.join("runs", f"study-{args.preset}")
    from elical.jobs.config import given_options

    study = run_study(args.preset, out, seeds=seeds, k_values=k_values, targets=targets,
                      n_bootstrap=args.n_bootstrap, resume=args.resume, progress=not args.quiet,
                      data_dir=args.data_dir, mmlu_dir=args.mmlu_dir, **given_options(args, _RUN_OPTIONS))
    for target, res in study["targets"].items():
        print(f"label target {target}:")
        print(format_headline(res["headline"]))
    print(f"wall time {study['timings']['total_s']:.0f} s; tables in {out}/study.md; page in {out}/report/index.html")
    return 0


#: The run options ``elical study`` passes on to its run, declared with ``elical run``'s (elical.jobs.config).
_RUN_OPTIONS = ("model", "head", "layer", "pooling", "batch_size", "device", "backend", "base_url",
                "equivalence_judge", "correctness_judge", "semantic_model", "judge_base_url", "honestybench",
                "rejudge", "alignment_protocol")


def register(subparsers) -> None:
    """Add ``elical study [--preset smoke|cpu|paper] [--output DIR] [--resume] ...``."""
    from elical.jobs.config import add_run_arguments
    from elical.study.presets import STUDY_PRESETS

    p = subparsers.add_parser("study", help="the HonestyBench study as one resumable command (docs/study.md)",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", choices=list(STUDY_PRESETS), default="cpu",
                   help="smoke (tests, minutes), cpu (SmolLM2 on 2 cores, about 70 minutes), paper (GPUs)")
    p.add_argument("--output", help="study directory (default runs/study-<preset>)")
    p.add_argument("--resume", action="store_true", help="continue a study directory with the same configuration")
    p.add_argument("--data-dir", help="HonestyBench QA directory (default ../shared/data/honestybench-qa)")
    p.add_argument("--mmlu-dir", help="MMLU directory (default ../shared/data/mmlu; none: no MMLU)")
    p.add_argument("--seeds", help="comma-separated seeds of label choice and head training (default 0-4)")
    p.add_argument("--k", help="comma-separated label counts, 'all' = the whole pool (default: the preset's grid)")
    p.add_argument("--targets", help="label targets, comma-separated: sample-accuracy (the paper's), greedy "
                   "(default both; the first gives the headline)")
    p.add_argument("--n-bootstrap", type=int, help="bootstrap resamples of the intervals (default the preset's)")
    # the study fits probe heads on the run's saved features (elical.study.protocol): no LoRA head here;
    # with --layer, Eli-Only, Cal-Only(k) and EliCal(k) per layer are reported per group in study.md
    add_run_arguments(p, _RUN_OPTIONS, choices={"head": ("linear", "mlp")},
                      helps={"head": "probe head (default linear)"})
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(handler=_handler)
