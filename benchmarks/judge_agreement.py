"""Agreement of every offline judge with hand labels on real SmolLM2 answer pairs, per kind of pair.

    python benchmarks/judge_agreement.py                      # test part of benchmarks/judge_pairs/pairs.jsonl
    python benchmarks/judge_agreement.py --part dev           # the part rules and thresholds were chosen on
    python benchmarks/judge_agreement.py --pairs tests/fixtures/judge_pairs.jsonl --part all   # the older (dev) set
    python benchmarks/judge_agreement.py --nli-model DIR      # + NLI (a local MNLI-style model directory)
    python benchmarks/judge_agreement.py --llm-url http://localhost:8000/v1 --llm-model NAME   # + an LLM judge
    python benchmarks/judge_agreement.py --pairs FILE --judges learned,normalized,contains,token-f1,embedding
    python benchmarks/judge_agreement.py --pairs FILE1 FILE2 --judges learned   # several files pooled as one set

Equivalence judges are scored on the ``greedy-sample`` pairs (is the sample the same answer as the greedy
one?), correctness judges on the ``answer-gold`` pairs (does the answer give the gold answer? the judge sees
all gold aliases of the question). Every judge receives the question and sees all pairs of a kind in one
``judge_many`` call on a fresh instance; pairs/s is that call's throughput after any model is loaded.
Columns: recall of "same" (label 1), recall of "different" (label 0), balanced accuracy (their mean) with a 95 %
bootstrap interval over questions (2,000 resamples of the questions, seed 0), n. A file whose rows have no
``part`` field (a new labelled set) is scored whole.
Rules and thresholds may be chosen on the dev part only; the test part is for reporting. The rule judges span /
span-contains were removed after commit 3e9e417; their measured numbers stay in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PAIRS = ROOT / "benchmarks" / "judge_pairs" / "pairs.jsonl"
OLD_PAIRS = ROOT / "tests" / "data" / "judge_pairs.jsonl"


def load_pairs(path: Path, part: str = "test") -> list[dict]:
    """Rows of ``path`` in ``part`` ("dev", "test" or "all"); rows without a part (the older set) are dev."""
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if not any("part" in r for r in rows):
        return rows  # a set without parts (e.g. a new final set) is scored whole
    return [r for r in rows if part == "all" or r.get("part", "dev") == part]


def bootstrap_ci(y, pred, groups, n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile interval of balanced accuracy when the questions (``groups``) are resampled with
    replacement; resamples with one class only are skipped. Returns (low, high), NaN when none is usable."""
    from sklearn.metrics import balanced_accuracy_score

    y, pred, groups = np.asarray(y, dtype=int), np.asarray(pred, dtype=int), np.asarray(groups)
    keys, inv = np.unique(groups, return_inverse=True)
    members = [np.flatnonzero(inv == k) for k in range(len(keys))]
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(n):
        idx = np.concatenate([members[k] for k in rng.integers(0, len(keys), len(keys))])
        if 0 < y[idx].sum() < len(idx):
            stats.append(balanced_accuracy_score(y[idx], pred[idx]))
    if not stats:
        return float("nan"), float("nan")
    return float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))


def agreement(y: np.ndarray, pred: np.ndarray) -> dict:
    """Recall of each class and balanced accuracy (sklearn), n."""
    from sklearn.metrics import balanced_accuracy_score, recall_score

    y, pred = np.asarray(y, dtype=int), np.asarray(pred, dtype=int)
    out = {"n": int(len(y)), "n_same": int(y.sum())}
    out["recall_same"] = float(recall_score(y, pred, pos_label=1, zero_division=0)) if y.any() else float("nan")
    out["recall_diff"] = float(recall_score(y, pred, pos_label=0, zero_division=0)) if (1 - y).any() else float("nan")
    out["balanced_accuracy"] = float(balanced_accuracy_score(y, pred)) if 0 < y.sum() < len(y) else float("nan")
    return out


def offline_judges(task: str) -> list[str]:
    from elical.judges import CORRECTNESS_JUDGES, EQUIVALENCE_JUDGES

    registry = EQUIVALENCE_JUDGES if task == "equivalence" else CORRECTNESS_JUDGES
    return [n for n in registry if not registry[n].needs]


def make(task: str, name: str, args):
    from elical.judges import make_correctness_judge, make_equivalence_judge

    factory = make_equivalence_judge if task == "equivalence" else make_correctness_judge
    if name == "nli":
        return factory("nli", model_path=args.nli_model, device=args.device, question_aware=True)
    if name == "llm":
        from elical.judges.llm import OpenAICompletion

        return factory("llm", complete=OpenAICompletion(args.llm_url, args.llm_model,
                                                         api_key=os.environ.get("OPENAI_API_KEY")))
    return factory(name)


def warm(judge) -> float:
    """Load the judge's model (if any) and return the seconds it took."""
    t0 = time.perf_counter()
    inner = getattr(judge, "equivalence", judge)  # correctness judges built on an equivalence judge
    if hasattr(type(inner), "model"):
        inner.model
    return time.perf_counter() - t0


def score_kind(rows: list[dict], task: str, names: list[str], args) -> dict:
    """{judge: agreement + pairs_per_s + load_s} for one kind of pair."""
    if task == "equivalence":
        pairs = [(r["a"], r["b"]) for r in rows]
    else:
        pairs = [(r["a"], r.get("aliases") or [r["b"]]) for r in rows]
    questions = [r["question"] for r in rows]
    y = np.array([r["label"] for r in rows])
    out = {}
    for name in names:
        judge = make(task, name, args)
        load = warm(judge)
        t0 = time.perf_counter()
        pred = np.asarray(judge.judge_many(pairs, questions))
        dt = time.perf_counter() - t0
        lo, hi = bootstrap_ci(y, pred, questions)
        out[name] = {**agreement(y, pred), "ci95": [lo, hi], "pairs_per_s": len(pairs) / max(dt, 1e-9), "load_s": load,
                     "pred": pred.tolist()}
    return out


def print_table(title: str, res: dict) -> None:
    first = next(iter(res.values()), None)
    if first is None:
        return
    print(f"\n### {title}: n = {first['n']} ({first['n_same']} same)\n")
    print("| judge | recall same | recall different | balanced accuracy [95 % CI over questions] | n | pairs/s |")
    print("|---|---|---|---|---|---|")
    for name, s in res.items():
        lo, hi = s["ci95"]
        print(f"| {name} | {s['recall_same']:.3f} | {s['recall_diff']:.3f} | {s['balanced_accuracy']:.3f} "
              f"[{lo:.3f}, {hi:.3f}] | {s['n']} | {s['pairs_per_s']:,.0f} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=Path, nargs="+", default=[DEFAULT_PAIRS],
                   help="labelled pair files; several are scored as one pooled set")
    p.add_argument("--part", choices=["dev", "test", "all"], default="test",
                   help="which part to score (default test; choose rules on dev only)")
    p.add_argument("--judges", help="comma-separated names (default: every registered judge that runs offline)")
    p.add_argument("--nli-model", help="local NLI model directory (adds the nli judge)")
    p.add_argument("--llm-url", help="adds the LLM judge with an OpenAI-compatible server, e.g. http://host:8000/v1")
    p.add_argument("--llm-model", default="default", help="model name sent to --llm-url")
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", type=Path, help="also write the scores (and predictions) here")
    args = p.parse_args(argv)
    from elical.judges import REMOVED_JUDGES

    for name in [n for n in (args.judges or "").split(",") if n in REMOVED_JUDGES]:
        print(f"judge_agreement: skipped {name!r}: removed (last in commit {REMOVED_JUDGES[name]})", file=sys.stderr)

    rows = [r for path in args.pairs for r in load_pairs(path, args.part)]
    print(f"pairs: {' + '.join(map(str, args.pairs))} part={args.part} ({len(rows)}); "
          f"python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs visible, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    results = {}
    for task, kind in (("equivalence", "greedy-sample"), ("correctness", "answer-gold")):
        names = args.judges.split(",") if args.judges else offline_judges(task)
        names = [n for n in names if n in offline_judges(task)]
        names += [n for n, on in (("nli", args.nli_model), ("llm", args.llm_url)) if on]
        sub = [r for r in rows if r["kind"] == kind]
        if sub:
            results[kind] = score_kind(sub, task, names, args)
            print_table(f"{task.capitalize()} judges on {kind} pairs", results[kind])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
