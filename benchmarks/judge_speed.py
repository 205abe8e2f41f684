"""Time the judges over `elical run`-sized work: 900 questions, greedy + 5 samples each (the default preset).

    python benchmarks/judge_speed.py --judges learned,normalized,contains

Questions and answers are the recorded real SmolLM2 outputs of benchmarks/judge_pairs/*_outputs.jsonl (1,279
questions; the first 900 in file order), so the texts are real model answers. Per judge: equivalence over the
900 x 5 (greedy, sample) pairs and correctness over the 900 x 6 answers against their gold aliases, each in one
``judge_many`` call on a fresh judge, with the question. Prints wall and CPU seconds (model loading included:
a run pays it once) and the share of `elical run`'s default-preset wall time it would take (517 s, measured in
docs/benchmarks.md, "elical run wall time" (3)).
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
RUN_WALL_S = 517.0


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
    args = p.parse_args(argv)
    rows = load(args.questions, args.samples)
    eq = [(r["greedy"], s) for r in rows for s in r["samples"]]
    eq_q = [r["question"] for r in rows for _ in r["samples"]]
    co = [(a, r["answer"]) for r in rows for a in [r["greedy"], *r["samples"]]]
    co_q = [r["question"] for r in rows for _ in range(args.samples + 1)]
    print(f"{len(rows)} questions: {len(eq)} equivalence pairs, {len(co)} correctness answers; OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, load average {os.getloadavg()[0]:.1f}")
    print("| judge | task | wall s | CPU s | share of a 517 s run (wall) |\n|---|---|---|---|---|")
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
            print(f"| {name} | {task} | {wall:.1f} | {cpu:.1f} | {wall / RUN_WALL_S:.1%} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
