"""Time the judges over `elical run`-sized work: 900 questions, greedy + 5 samples each (the default preset).

    python benchmarks/judge_speed.py --judges learned,normalized,contains

Questions and answers are the recorded real SmolLM2 outputs of benchmarks/judge_pairs/*_outputs.jsonl (1,279
questions; the first 900 in file order), so the texts are real model answers. Per judge: equivalence over the
900 x 5 (greedy, sample) pairs and correctness over the 900 x 6 answers against their gold aliases, each in one
``judge_many`` call on a fresh judge, with the question. Prints wall and CPU seconds (model loading included:
a run pays it once) and, given ``--run-seconds`` (the wall time of `elical run`'s default preset timed the same day
on the same machine, e.g. by benchmarks/run_walltime.py), the share of that run the judge would take. Machines and
days differ several-fold (docs/benchmarks.md), so a share against a run timed elsewhere means little.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]


def load(n: int, samples: int) -> list[dict]:
    rows = []
    for stem in ("outputs", "dev2_outputs", "dev3_outputs", "test2_outputs", "test3_outputs", "test4_outputs",
                 "test5_outputs"):
        with open(ROOT / "benchmarks" / "judge_pairs" / f"{stem}.jsonl", encoding="utf-8") as f:
            rows += [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if len(r["samples"]) >= samples][:n]
    for r in rows:
        r["samples"] = r["samples"][:samples]
        r["answer"] = [a for a in (r["answer"] if isinstance(r["answer"], list) else [r["answer"]]) if a.strip()]
    return rows


def main(argv=None) -> int:
    from elical.judges import make_correctness_judge, make_equivalence_judge

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--judges", default="learned,normalized,contains")
    p.add_argument("--questions", type=int, default=900)
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--run-seconds", type=float, help="wall s of `elical run` timed the same day here: print shares")
    args = p.parse_args(argv)
    if args.run_seconds is not None and args.run_seconds <= 0:
        p.error("--run-seconds must be positive")
    rows = load(args.questions, args.samples)
    eq = [(r["greedy"], s) for r in rows for s in r["samples"]]
    eq_q = [r["question"] for r in rows for _ in r["samples"]]
    co = [(a, r["answer"]) for r in rows for a in [r["greedy"], *r["samples"]]]
    co_q = [r["question"] for r in rows for _ in range(args.samples + 1)]
    print(f"{len(rows)} questions: {len(eq)} equivalence pairs, {len(co)} correctness answers; OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, load average {os.getloadavg()[0]:.1f}")
    share = f"share of a {args.run_seconds:.0f} s run (wall)" if args.run_seconds else "share of a run (--run-seconds)"
    print(f"| judge | task | wall s | CPU s | {share} |\n|---|---|---|---|---|")
    for name in args.judges.split(","):
        for task, make, pairs, qs in (("equivalence", make_equivalence_judge, eq, eq_q),
                                      ("correctness", make_correctness_judge, co, co_q)):
            try:
                judge = make(name)
            except ValueError:
                continue
            w0, c0 = time.perf_counter(), time.process_time()
            judge.judge_many(pairs, qs)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            frac = f"{wall / args.run_seconds:.1%}" if args.run_seconds else "-"
            print(f"| {name} | {task} | {wall:.1f} | {cpu:.1f} | {frac} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
