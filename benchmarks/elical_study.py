"""EliCal study: how few labels does calibration need? (Ni et al., arXiv 2510.17509, Fig. 1 and Sec. 6.2)

On real run directories (SmolLM2-135M-Instruct on `facts`, and on HonestyBench sets from ../shared/data), sweep the
number k of labelled pool questions and print, per k, AUROC / ECE / Alignment of Consis-Sem, N-Prob, Eli-Only,
Cal-Only(k) and EliCal(k) (mean ± sample std over seeds), then

- the ratio EliCal(k ≈ 2 % of the pool) / Cal-Only(all labels) for AUROC and Alignment, per seed then mean ± std
  (the paper reports about 98 % of the fully supervised quality with 0.18 % of its 560k training questions);
  for AUROC also the ratio of the parts above chance, (AUROC - 0.5) / (AUROC_all - 0.5), which is not flattered by
  the 0.5 floor;
- stratified (labels spread over the stage-1 confidence) versus random label choice at small k: the per-seed
  difference stratified - random, mean ± std, and on how many seeds stratified wins.

Usage:
    python benchmarks/elical_study.py /tmp/default1                       # an existing `elical run` directory
    python benchmarks/elical_study.py --build facts,honestybench --runs-dir runs/study --n-train 600 --n-eval 300
    python benchmarks/elical_study.py RUN_DIR --seeds 0,1,2,3,4,5,6,7,8,9 --output study.json

--build makes the run directories first with elical.jobs.run (resuming a partial one): `facts` is the embedded
set, `honestybench` is nq + pararel_patterns from --data-dir (default ../shared/data/honestybench-qa). Model
selection never sees evaluation labels (see elical.jobs.sweep).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "honestybench-qa"
SMALL_K = 32  # "small k" of the stratified-vs-random comparison: k <= this


def _build(kind: str, runs_dir: Path, args) -> Path:
    from elical.jobs.run import PRESETS, run

    base = replace(PRESETS["default"], n_train=args.n_train, n_eval=args.n_eval, k_values=(16,), n_bootstrap=200)
    if kind == "facts":
        cfg = base
    elif kind == "honestybench":
        cfg = replace(base, datasets=tuple(args.datasets.split(",")), data_dir=str(Path(args.data_dir).resolve()),
                      n_eval=max(1, args.n_eval // len(args.datasets.split(","))))
    else:
        raise SystemExit(f"--build: unknown kind {kind!r} (facts, honestybench)")
    out = runs_dir / kind
    t0 = time.time()
    run(cfg, out, resume=out.exists(), progress=not args.quiet)
    print(f"built {out} in {time.time() - t0:.0f} s", file=sys.stderr)
    return out


def _row(res: dict, method: str, selection, k: int) -> dict:
    return next(r for r in res["results"] if (r["method"], r["selection"], r["k"]) == (method, selection, k))


def _fmt(mean, std) -> str:
    if mean is None or mean != mean:
        return "nan"
    return f"{mean:.3f}" if not std else f"{mean:.3f} ± {std:.3f}"


def _ms(values) -> tuple[float, float | None]:
    v = np.asarray(values, dtype=float)
    return float(np.mean(v)), (float(np.std(v, ddof=1)) if v.size > 1 else None)


def report(res: dict, k_small: int) -> dict:
    """Print the study tables of one sweep; return the summary numbers."""
    s, seeds = res["sizes"], [str(x) for x in res["config"]["seeds"]]
    n_pool, ks = s["pool"], res["config"]["k_values"]
    metrics = ("auroc", "ece", "alignment")
    print(f"\n## {res['run_dir']}: pool {n_pool}, eval {s['eval']} (greedy accuracy {s['eval_accuracy']:.1%}), "
          f"seeds {res['config']['seeds']}, head {res['config']['head']} {res['config']['head_params'] or ''}, "
          "random label choice\n")
    print("| method | k | labels | AUROC | ECE | Alignment |\n|---|---|---|---|---|---|")
    rows = [_row(res, m, None, 0) for m in ("Consis-Sem", "N-Prob", "Eli-Only")]
    rows += [_row(res, m, "random", k) for k in ks for m in ("Cal-Only", "EliCal")]
    for r in rows:
        name = r["method"] if not r["k"] else f"{r['method']}({r['k']})"
        print(f"| {name} | {r['k']} | {r['label_fraction']:.2%} | "
              + " | ".join(_fmt(r["mean"][m], r["std"][m]) for m in metrics) + " |")
    full = _row(res, "Cal-Only", "random", n_pool)["per_seed"]
    few = _row(res, "EliCal", "random", k_small)["per_seed"]
    summary = {"k_small": k_small, "label_fraction": k_small / n_pool}
    print(f"\nEliCal({k_small}) / Cal-Only(all={n_pool}), k = {k_small / n_pool:.2%} of the pool, per seed then "
          "mean ± std:")
    for m in ("auroc", "alignment"):
        ratio = [few[x][m] / full[x][m] for x in seeds]
        summary[f"ratio_{m}"] = _ms(ratio)
        print(f"  {m:9s} {_fmt(*summary[f'ratio_{m}'])}   (per seed: {', '.join(f'{v:.3f}' for v in ratio)})")
    acc = s["eval_accuracy"]
    print(f"  (Alignment of a constant policy, answer all or abstain on all: max(acc, 1 - acc) = "
          f"{max(acc, 1 - acc):.3f})")
    above = [(few[x]["auroc"] - 0.5) / (full[x]["auroc"] - 0.5) for x in seeds]
    summary["ratio_auroc_above_chance"] = _ms(above)
    print(f"  AUROC above chance, (A-0.5)/(A_all-0.5): {_fmt(*summary['ratio_auroc_above_chance'])}")
    if "stratified" in res["config"]["selections"]:
        print(f"\nstratified - random label choice, k <= {SMALL_K} (per-seed difference, mean ± std; wins = seeds "
              "where stratified is better: higher AUROC/Alignment, lower ECE)\n")
        print("| method | k | ΔAUROC | wins | ΔECE | wins | ΔAlignment | wins |\n|---|---|---|---|---|---|---|---|")
        summary["stratified_minus_random"] = {}
        for k in [k for k in ks if k <= SMALL_K and k < n_pool]:
            for m in ("Cal-Only", "EliCal"):
                st, ra = _row(res, m, "stratified", k)["per_seed"], _row(res, m, "random", k)["per_seed"]
                cells = []
                for metric, sign in (("auroc", 1), ("ece", -1), ("alignment", 1)):
                    d = [st[x][metric] - ra[x][metric] for x in seeds]
                    wins = sum(sign * v > 0 for v in d)
                    summary["stratified_minus_random"][f"{m}({k}).{metric}"] = _ms(d)
                    cells += [_fmt(*_ms(d)), f"{wins}/{len(d)}"]
                print(f"| {m} | {k} | " + " | ".join(cells) + " |")
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run_dirs", nargs="*", help="existing run directories (records + features)")
    p.add_argument("--build", default="", help="comma-separated: facts, honestybench (built under --runs-dir)")
    p.add_argument("--runs-dir", default="runs/study")
    p.add_argument("--data-dir", default=str(DEFAULT_DATA))
    p.add_argument("--datasets", default="nq,pararel_patterns", help="HonestyBench sets for --build honestybench")
    p.add_argument("--n-train", type=int, default=600, help="pool size of built runs")
    p.add_argument("--n-eval", type=int, default=300, help="evaluation questions of built runs (split over sets)")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--k", help="comma-separated k grid (default: powers of two from 4, ~2 %% of the pool, all)")
    p.add_argument("--head", choices=["linear", "mlp"], default="linear")
    p.add_argument("--head-batch-size", type=int, help="mini-batch size of every head (default: the heads' own)")
    p.add_argument("--selection", choices=["random", "stratified", "both"], default="both")
    p.add_argument("--output", help="write every sweep and summary to this JSON file")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from elical.records import read_records
    from elical.jobs.sweep import default_k_grid, json_safe, run_sweep

    run_dirs = [Path(d) for d in args.run_dirs]
    run_dirs += [_build(kind, Path(args.runs_dir), args) for kind in args.build.split(",") if kind.strip()]
    if not run_dirs:
        p.error("give run directories or --build")
    seeds = [int(x) for x in args.seeds.split(",")]
    selections = ("random", "stratified") if args.selection == "both" else (args.selection,)
    out = {}
    for run_dir in run_dirs:
        t0 = time.time()
        n_pool = sum(r.get("split") == "train" for r in read_records(run_dir / "records" / "annotations.jsonl"))
        k_small = max(1, round(0.02 * n_pool))
        ks = ([int(k) for k in args.k.split(",")] if args.k else default_k_grid(n_pool)) + [k_small, n_pool]
        head_params = {"batch_size": args.head_batch_size} if args.head_batch_size else None
        res = run_sweep(run_dir, k_values=sorted(set(ks)), seeds=seeds, selections=selections, head=args.head,
                        head_params=head_params, progress=not args.quiet)
        out[str(run_dir)] = {"sweep": res, "summary": report(res, k_small)}
        print(f"\n(sweep of {run_dir}: {time.time() - t0:.0f} s)")
    if args.output:
        Path(args.output).write_text(json.dumps(json_safe(out), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
