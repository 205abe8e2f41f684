"""A random labelled sample of a run's own judge pairs (``study_random``, ``run_random``): not chosen by any judge's
verdict.

    python benchmarks/judge_pairs/draw_study.py draw runs/study-cpu/run     # -> study_random_blind.jsonl (no labels)
    python benchmarks/judge_pairs/draw_study.py merge     # + study_random_labels.jsonl -> study_random.jsonl
    python benchmarks/judge_pairs/draw_study.py draw runs/default-v6 --set run_random     # the default run's pairs
    python benchmarks/judge_pairs/draw_study.py merge --set run_random

``draw`` reads the run's records (MMLU is judged by its letter and left out) and draws, with the set's
``random.Random(seed)``, ``n_equivalence`` (record, sample) pairs (kind ``greedy-sample``: the greedy answer against
one sample) and ``n_correctness`` greedy answers against their gold aliases (kind ``answer-gold``), each record at
most once per kind, so the sample has the run's natural label balance. The blind file holds only the question, the
answers and the aliases: no judge ran on it. ``merge`` joins the hand labels (``label`` 0/1, or ``null`` = dropped
as ambiguous) and sets ``part``: ``dev`` (training data of the learned judges) when the first 8 hex digits of the
SHA-1 of the normalised question are below ``DEV_SHARE`` x 16^8, else ``test`` (a frozen test set, scored once:
benchmarks/judge_agreement.py --part test). The same question always falls in the same part.

Sets (`SETS`): ``study_random`` from the ``cpu`` study's run (the nine HonestyBench QA sets); ``run_random`` from
the default ``elical run`` (the embedded ``facts`` set: city -> country, capitals, currencies, ...), whose answers
(an adjective or a region for the country: "in the Indian state of Gujarat") the other sets hold few of.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETS = {"study_random": {"seed": 20261203, "n_equivalence": 1000, "n_correctness": 500, "prefix": "srand"},
        "run_random": {"seed": 20261205, "n_equivalence": 300, "n_correctness": 300, "prefix": "rrand"}}
DEV_SHARE = 0.6


def files(name: str) -> tuple[Path, Path, Path]:
    """The blind, labels and labelled files of set NAME."""
    return tuple(HERE / f"{name}{s}.jsonl" for s in ("_blind", "_labels", ""))


def part_of(question: str) -> str:
    from elical.judges.text import normalize_answer

    h = int(hashlib.sha1(normalize_answer(question).encode("utf-8")).hexdigest()[:8], 16)
    return "dev" if h < DEV_SHARE * 16**8 else "test"


def draw(run_dir: Path, name: str = "study_random") -> None:
    from elical.records import read_records

    cfg, (blind, _, _) = SETS[name], files(name)
    recs = [r for r in read_records(run_dir / "records" / "annotations.jsonl")
            if r["dataset"] != "mmlu" and r.get("greedy_response") is not None]
    rng = random.Random(cfg["seed"])
    rows = []
    for r in rng.sample(recs, cfg["n_equivalence"]):
        j = rng.randrange(len(r["sampling_response"]))
        rows.append({"kind": "greedy-sample", "dataset": r["dataset"], "question": r["question"],
                     "a": r["greedy_response"], "b": r["sampling_response"][j], "aliases": r["answer"],
                     "source": f"{r['id']} sample {j}"})
    for r in rng.sample(recs, cfg["n_correctness"]):
        rows.append({"kind": "answer-gold", "dataset": r["dataset"], "question": r["question"],
                     "a": r["greedy_response"], "aliases": [a for a in r["answer"] if a.strip()],
                     "source": f"{r['id']} greedy"})
    rng.shuffle(rows)
    with open(blind, "w", encoding="utf-8") as f:
        for i, row in enumerate(rows):
            f.write(json.dumps({"pair_id": f"{cfg['prefix']}-{i:04d}", **row}, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} unlabelled pairs to {blind}")


def merge(name: str = "study_random") -> None:
    from elical.judges.text import normalize_answer

    blind, labels_file, out_file = files(name)
    labels = {}
    with open(labels_file, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                d = json.loads(line)
                if d.get("label") not in (0, 1, None):
                    raise SystemExit(f"{labels_file}:{n}: label must be 0, 1 or null, got {d.get('label')!r}")
                labels[d["pair_id"]] = d
    kept = dropped = 0
    with open(blind, encoding="utf-8") as f, open(out_file, "w", encoding="utf-8") as out:
        for line in f:
            row = json.loads(line)
            lab = labels.get(row["pair_id"])
            if lab is None:
                raise SystemExit(f"{labels_file}: no label for {row['pair_id']}")
            if lab["label"] is None:
                dropped += 1
                continue
            if row["kind"] == "answer-gold":  # the alias the answer states, else the first with a word
                row["b"] = lab.get("b") or next((a for a in row["aliases"] if normalize_answer(a)), "")
            row.update(part=part_of(row["question"]), label=lab["label"], why=lab.get("why", ""))
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            kept += 1
    print(f"wrote {kept} labelled pairs to {out_file} ({dropped} dropped as ambiguous)")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cmd", choices=["draw", "merge"])
    ap.add_argument("run_dir", nargs="?", type=Path, help="draw only: the run directory")
    ap.add_argument("--set", default="study_random", choices=sorted(SETS), help="which sample (file prefix)")
    args = ap.parse_args()
    if args.cmd == "draw":
        if not args.run_dir:
            ap.error("draw needs the run directory")
        draw(args.run_dir, args.set)
    else:
        merge(args.set)
