"""Which EliCal stage-2 rule is safe at every k: AUROC and ECE on held-out pool questions, never evaluation labels.

Reads an ``elical run`` directory (its training pool: records, hidden states, self-consistency, sample accuracy)
and fits Eli-Only once on the whole pool's self-consistency (no label). For every seed of label choice the pool is
split at random into a *scoring part* (``--held-out``, default 30 %) and a labelable part; k questions are taken
in a seeded nested order from the labelable part (``all`` = the whole labelable part), and every stage-2 rule of
``elical.heads.stage2.STAGE2_RULES`` plus Cal-Only(k) is fitted on them with the sample-accuracy target (the
paper's). Each head is scored on the scoring part against greedy correctness: AUROC and ECE (10 uniform bins).
The run's evaluation questions are never read. One JSON line per (seed, k, method) goes to ``--out``; a re-run
skips the lines already there (resumable), then the table of mean ± seeds' std is printed, with each rule's AUROC
difference from Eli-Only (mean over seeds of the paired difference) and the seeds where it is below Eli-Only's.

    python benchmarks/stage2_rules.py RUN_DIR --seeds 10 --k 4,8,16,32,64,128,all --out stage2_rules.jsonl

``--held-out-by dataset`` (leave one pool dataset out): for every seed and every dataset of the pool, the scoring
part is that dataset's pool questions and the k labels come from the other datasets, so each rule is scored on a
dataset its labels never saw — a shift like the study's out-of-domain groups, still without evaluation labels:

    python benchmarks/stage2_rules.py RUN_DIR --held-out-by dataset --seeds 3 --k 256,512,1024,all \
        --rules full,l2sp,paper,affine --out stage2_lodo.jsonl

Two processes on two cores: add ``--only-seeds 0,2,4,6,8`` to one and ``--only-seeds 1,3,5,7,9`` to the other (same
``--out``), then run once more without it to print the table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def _parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--only-seeds", default=None,
                    help="comma-separated subset of range(--seeds) to fit in this process (several processes may "
                         "append to the same --out); the table covers every seed in --out")
    ap.add_argument("--k", default="4,8,16,32,64,128,all")
    ap.add_argument("--rules", default=None, help="comma-separated rules (default: all of STAGE2_RULES)")
    ap.add_argument("--held-out", type=float, default=0.3)
    ap.add_argument("--held-out-by", choices=("random", "dataset"), default="random",
                    help="random: --held-out of the pool at random per seed; dataset: each pool dataset in turn")
    ap.add_argument("--out", type=Path, default=Path("stage2_rules.jsonl"))
    return ap.parse_args(argv)


def _table(rows: list[dict], methods: list[str], ks: list[str]) -> str:
    by = {(r["method"], r["k"], (r["seed"], r.get("fold"))): r for r in rows}
    seeds = sorted({(r["seed"], r.get("fold")) for r in rows}, key=str)  # (seed, held-out dataset or None)
    lines = []
    for metric in ("auroc", "ece"):
        note = "; [mean paired difference from Eli-Only, seeds below it]" if metric == "auroc" else ""
        lines += [f"\n{metric.upper()} on held-out pool questions (mean ± seeds' std{note})",
                  "| method | " + " | ".join(f"k={k}" for k in ks) + " |", "|---|" + "---|" * len(ks)]
        for m in methods:
            cells = []
            for k in ks:
                vals = [by[(m, k, s)][metric] for s in seeds if (m, k, s) in by]
                if not vals:
                    cells.append("")
                    continue
                cell = f"{np.mean(vals):.3f} ± {np.std(vals, ddof=1) if len(vals) > 1 else 0:.3f}"
                if metric == "auroc" and m != "Eli-Only":
                    diff = [by[(m, k, s)]["auroc"] - by[("Eli-Only", k, s)]["auroc"] for s in seeds
                            if (m, k, s) in by and ("Eli-Only", k, s) in by]
                    cell += f" [{np.mean(diff):+.3f}, {sum(d < 0 for d in diff)}/{len(diff)}]"
                cells.append(cell)
            lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    from elical.evaluation.metrics import auroc, ece
    from elical.heads.stage2 import STAGE2_RULES
    from elical.heads.stages import fit_cal_only, fit_elical, fit_eli_only
    from elical.jobs.sweep import load_run

    args = _parse_args(argv)
    rules = args.rules.split(",") if args.rules else list(STAGE2_RULES)
    pool, _, X_pool, _, c_cons, acc = load_run(args.run_dir, "sample-accuracy")  # evaluation part unused
    y_greedy = np.array([int(r["greedy_correctness"]) for r in pool])
    n = len(pool)
    done = []
    if args.out.is_file():
        done = [json.loads(line) for line in args.out.read_text().splitlines() if line.strip()]
    have = {(r["method"], r["k"], r["seed"], r.get("fold")) for r in done}
    print(f"pool {n} questions, greedy accuracy {y_greedy.mean():.3f}, mean sample accuracy {acc.mean():.3f}; "
          f"{len(have)} results already in {args.out}", flush=True)
    t0 = time.time()
    eli = fit_eli_only(X_pool, c_cons, random_state=0)
    print(f"Eli-Only fitted in {time.time() - t0:.1f} s ({eli.n_epochs_} epochs)", flush=True)
    ks = args.k.split(",")
    with args.out.open("a") as out:
        mine = [int(x) for x in args.only_seeds.split(",")] if args.only_seeds else range(args.seeds)
        datasets = np.array([r["dataset"] for r in pool])
        folds = sorted(set(datasets)) if args.held_out_by == "dataset" else [None]
        for seed, fold in ((s_, f) for s_ in mine for f in folds):
            perm = np.random.default_rng([seed, 0x53543232]).permutation(n)
            if fold is None:
                n_score = int(round(args.held_out * n))
                score, labelable = perm[:n_score], perm[n_score:]
            else:
                score, labelable = perm[datasets[perm] == fold], perm[datasets[perm] != fold]
            y_s = y_greedy[score]
            eli_pred = eli.predict(X_pool[score])
            for k in ks:
                idx = labelable if k == "all" else labelable[:int(k)]
                fits = {"Eli-Only": lambda: eli, "Cal-Only": lambda: fit_cal_only(X_pool[idx], acc[idx],
                                                                                   random_state=seed)}
                for rule in rules:
                    fits[f"EliCal[{rule}]"] = (lambda r=rule: fit_elical(eli, X_pool[idx], acc[idx],
                                                                          random_state=seed, rule=r))
                for method, fit in fits.items():
                    if (method, k, seed, fold) in have:
                        continue
                    t = time.time()
                    head = fit()
                    pred = eli_pred if method == "Eli-Only" else head.predict(X_pool[score])
                    row = {"method": method, "k": k, "seed": seed, "fold": fold, "auroc": auroc(y_s, pred),
                           "ece": ece(y_s, pred),
                           "n_labels": int(len(idx)), "label_sum": float(acc[idx].sum()),
                           "stage2": getattr(head, "stage2_", {}).get("rule"), "seconds": round(time.time() - t, 2)}
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    done.append(row)
            print(f"seed {seed}{'' if fold is None else ', held out ' + fold} done ({time.time() - t0:.0f} s)",
                  flush=True)
    methods = ["Eli-Only", "Cal-Only", *(f"EliCal[{r}]" for r in rules)]
    print(_table(done, methods, ks))
    folds_done = sorted({r["fold"] for r in done if r.get("fold")})
    for fold in folds_done:  # leave-one-dataset-out: the paired AUROC difference from Eli-Only per held-out dataset
        by = {(r["method"], r["k"], r["seed"]): r["auroc"] for r in done if r.get("fold") == fold}
        cells = []
        for m in methods[1:]:
            diffs = [np.mean([by[(m, k, s)] - by[("Eli-Only", k, s)] for s in {r["seed"] for r in done}
                              if (m, k, s) in by and ("Eli-Only", k, s) in by] or [np.nan]) for k in ks]
            cells.append(f"{m} " + " ".join(f"{d:+.3f}" for d in diffs))
        print(f"\nheld out {fold} (AUROC - Eli-Only at k = {', '.join(ks)}): " + "; ".join(cells))
    switched = [r for r in done if r["method"] == "EliCal[affine+full]"]
    if switched:
        print("\naffine+full chose the full stage 2 in: " + ", ".join(
            f"k={k} {sum(r['stage2'] == 'full' for r in switched if r['k'] == k)}/"
            f"{sum(r['k'] == k for r in switched)}" for k in ks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
