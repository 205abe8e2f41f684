"""How much the study's numbers move when only the judges change (issue 20, "re-run what depends on it").

Two `elical study` directories over the *same generations*: the second made from the first's run by judging its
records again (`elical judge`) and continuing the study with those judges. Prints, per HonestyBench group, greedy
accuracy, Consis-Sem / Eli-Only / EliCal(k ~ 1 %) / Cal-Only(all) AUROC and the headline ratios under each pair of
judges, and how many verdicts the two judge pairs disagree on (greedy correctness, sample correctness, sample
equivalence), on the evaluation questions and on the pool.

Usage (the second study reuses the first's generations and hidden states; nothing is generated again):
    elical study --preset cpu --output runs/study-cpu                                   # learned judges (default)
    elical judge runs/study-cpu/run --output runs/study-cpu-B/run \\
        --equivalence-judge EQ --correctness-judge CORR
    elical study --preset cpu --output runs/study-cpu-B --resume \\
        --equivalence-judge EQ --correctness-judge CORR
    python benchmarks/judge_before_after.py runs/study-cpu-B runs/study-cpu --labels B,learned

docs/study.md's table was measured with EQ / CORR = span / span-contains (the rule judges, removed after commit
3e9e417; those commands need that commit).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

GROUPS = (("in_domain", "in-domain"), ("out_of_domain", "out-of-domain"), ("unseen", "MMLU"))


def _records(study_dir: Path) -> dict:
    from elical.records import read_records

    return {r["id"]: r for r in read_records(study_dir / "run" / "records" / "annotations.jsonl",
                                             skip_torn_tail=False)}


def _group_rows(study: dict, target: str) -> dict:
    """{group: {name: value}} of one study.json and label target."""
    res = study["targets"][target]
    summ, head = res["summary"], res["headline"]
    k, n_pool = head["k"], head["n_pool"]
    rows = {}
    for g, _ in GROUPS:
        if g not in summ["groups"]:
            continue
        members = summ["groups"][g]["datasets"]
        n = sum(summ["datasets"][d]["n"] for d in members)
        acc = sum(summ["datasets"][d]["accuracy"] * summ["datasets"][d]["n"] for d in members) / n

        def auc(name):
            return summ["methods"][name]["groups"][g]["auroc"]["mean"]

        row = {"greedy accuracy": acc, "Consis-Sem AUROC": auc("Consis-Sem"), "Eli-Only AUROC": auc("Eli-Only"),
               f"EliCal({k}) AUROC": auc(f"EliCal({k})"), f"Cal-Only({k}) AUROC": auc(f"Cal-Only({k})"),
               f"Cal-Only({n_pool}) AUROC": auc(f"Cal-Only({n_pool})")}
        for key, name in ((f"elical_over_cal_all_{g}", f"EliCal({k}) / Cal-Only(all)"),
                          (f"eli_only_over_cal_all_{g}", "Eli-Only / Cal-Only(all)")):
            if key in head:
                row[name] = head[key]["mean"]
        rows[g] = row
    return rows


def _disagreement(a: dict, b: dict) -> dict:
    """{split: {field: (disagreeing verdicts, verdicts)}} over the ids both directories hold."""
    out: dict = {}
    for rid in a.keys() & b.keys():
        ra, rb = a[rid], b[rid]
        split = out.setdefault(ra.get("split", "?"), {})
        for field in ("greedy_correctness", "sampling_correctness", "consistency_judgement"):
            va, vb = ra[field], rb[field]
            va, vb = (va, vb) if isinstance(va, list) else ([va], [vb])
            d, n = split.get(field, (0, 0))
            split[field] = (d + sum(int(x) != int(y) for x, y in zip(va, vb)), n + len(va))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", help="study directory judged the old way")
    ap.add_argument("after", help="study directory of the same generations judged the new way")
    ap.add_argument("--labels", default="before,after", help="two column names, comma-separated")
    ap.add_argument("--target", default="sample-accuracy", help="label target of the heads (the paper's first)")
    args = ap.parse_args(argv)
    la, lb = args.labels.split(",")
    studies = [json.loads((Path(d) / "study.json").read_text(encoding="utf-8")) for d in (args.before, args.after)]
    if studies[0]["eval_ids"] != studies[1]["eval_ids"]:
        raise SystemExit("the two studies do not score the same evaluation questions")
    rows = [_group_rows(s, args.target) for s in studies]
    print(f"label target: {args.target}; cells: {la} -> {lb} (difference)\n")
    names = list(rows[1][next(iter(rows[1]))])
    print("| group | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for g, title in GROUPS:
        if g in rows[0] and g in rows[1]:
            a, b = ({n: r[g].get(n, float("nan")) for n in names} for r in rows)
            cells = ["-" if a[n] != a[n] or b[n] != b[n] else f"{a[n]:.3f} -> {b[n]:.3f} ({b[n] - a[n]:+.3f})"
                     for n in names]
            print(f"| {title} | " + " | ".join(cells) + " |")
    dis = _disagreement(_records(Path(args.before)), _records(Path(args.after)))
    print("\nverdicts on which the two judge pairs disagree (same answers):\n")
    print("| split | greedy correctness | sample correctness | sample equivalence (self-consistency) |")
    print("|---|---|---|---|")
    for split in sorted(dis):
        cells = [f"{d:,} / {n:,} ({d / max(n, 1):.1%})" for d, n in
                 (dis[split][f] for f in ("greedy_correctness", "sampling_correctness", "consistency_judgement"))]
        print(f"| {split} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
