"""Agreement of each equivalence / correctness judge with hand labels on real SmolLM2 answer pairs.

    python benchmarks/judge_agreement.py                       # exact, contains, token-f1, rouge-l, embedding
    python benchmarks/judge_agreement.py --nli-model DIR       # + NLI (a local MNLI-style model directory)
    python benchmarks/judge_agreement.py --llm smollm2         # + LLM judge with SmolLM2-135M-Instruct (slow)
    python benchmarks/judge_agreement.py --llm-url http://localhost:8000/v1 --llm-model NAME   # + any server
    python benchmarks/judge_agreement.py --sweep               # + accuracy at other thresholds

Labels: tests/data/judge_pairs.jsonl (label 1 = the two answers give the same answer to the question; see
tests/data/README.md). Every judge sees all pairs in one ``judge_many`` call on a fresh instance (cold cache);
pairs/s is that call's throughput after the model is loaded (load time printed apart). The positive class is
"same": precision = share of the judge's "same" that are same, recall = share of the same pairs it finds.
A second table scores the correctness judges on the (answer, gold alias) pairs.
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

DEFAULT_PAIRS = Path(__file__).resolve().parents[1] / "tests" / "data" / "judge_pairs.jsonl"
CATEGORIES = ("numbers", "dates", "names", "partial", "paraphrase", "other")


def load_pairs(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def scores(y: np.ndarray, pred: np.ndarray) -> dict:
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

    return {"accuracy": accuracy_score(y, pred), "precision": precision_score(y, pred, zero_division=0),
            "recall": recall_score(y, pred, zero_division=0), "f1": f1_score(y, pred, zero_division=0)}


def build_judges(args, kind: str) -> dict:
    from elical.judges.core import make_correctness_judge, make_equivalence_judge

    make = make_equivalence_judge if kind == "equivalence" else make_correctness_judge
    judges = {name: (lambda name=name: make(name)) for name in args.judges.split(",")}
    if args.nli_model:
        judges["nli"] = lambda: make("nli", model_path=args.nli_model, device=args.device,
                                     question_aware=args.question_aware)
    if args.llm or args.llm_url:
        judges["llm"] = lambda: make("llm", complete=llm_backend(args))
    return judges


_BACKEND = {}


def llm_backend(args):
    if "b" not in _BACKEND:
        from elical.judges.llm import OpenAICompletion, TransformersCompletion

        if args.llm_url:
            _BACKEND["b"] = OpenAICompletion(args.llm_url, args.llm_model, api_key=os.environ.get("OPENAI_API_KEY"))
        else:
            from elical.generation.models import load_model

            model, tok = load_model(args.llm, device=args.device)
            _BACKEND["b"] = TransformersCompletion(model, tok)
    return _BACKEND["b"]


def warm(judge) -> float:
    """Load the judge's model (if any) and return the seconds it took."""
    t0 = time.perf_counter()
    inner = getattr(judge, "equivalence", judge)  # correctness judges built on an equivalence judge
    if hasattr(inner, "model"):
        inner.model
    return time.perf_counter() - t0


def run_table(rows, judges, pair_fn, questions, title) -> dict:
    y = np.array([r["label"] for r in rows])
    pairs = [pair_fn(r) for r in rows]
    print(f"\n### {title}: {len(rows)} pairs, {int(y.sum())} same / {int(len(y) - y.sum())} different\n")
    print("| judge | accuracy | precision | recall | F1 | pairs/s | load s |")
    print("|---|---|---|---|---|---|---|")
    preds = {}
    for name, factory in judges.items():
        judge = factory()
        load = warm(judge)
        t0 = time.perf_counter()
        pred = np.asarray(judge.judge_many(pairs, questions))
        dt = time.perf_counter() - t0
        s = scores(y, pred)
        preds[name] = pred
        extra = f" ({judge.n_unparsed_} unparsed)" if hasattr(judge, "n_unparsed_") else ""
        print(f"| {name}{extra} | {s['accuracy']:.3f} | {s['precision']:.3f} | {s['recall']:.3f} | {s['f1']:.3f} "
              f"| {len(pairs) / max(dt, 1e-9):,.0f} | {load:.1f} |")
    return preds


def by_category(rows, preds) -> None:
    y = np.array([r["label"] for r in rows])
    cats = np.array([r["category"] for r in rows])
    print("\n### Accuracy by category (equivalence)\n")
    print("| judge | " + " | ".join(f"{c} ({(cats == c).sum()})" for c in CATEGORIES) + " |")
    print("|---|" + "---|" * len(CATEGORIES))
    for name, pred in preds.items():
        cells = [f"{(pred[cats == c] == y[cats == c]).mean():.2f}" for c in CATEGORIES]
        print(f"| {name} | " + " | ".join(cells) + " |")


def sweep(rows) -> None:
    from elical.judges.core import SemanticEquivalenceJudge, rouge_l, token_f1

    y = np.array([r["label"] for r in rows])
    print("\n### Threshold sweep (in-sample accuracy; the defaults were fixed before labelling)\n")
    print("| threshold | token-f1 | rouge-l | embedding |")
    print("|---|---|---|---|")
    f1 = np.array([token_f1(r["a"], r["b"]) for r in rows])
    rl = np.array([rouge_l(r["a"], r["b"]) for r in rows])
    emb = {t: SemanticEquivalenceJudge(threshold=t) for t in (0.5, 0.6, 0.7, 0.8, 0.85, 0.88, 0.9, 0.95)}
    shared = next(iter(emb.values()))
    for t in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.88, 0.9, 0.95):
        e = ""
        if t in emb:
            emb[t]._model, emb[t]._cache = shared.model, shared._cache
            e = f"{(emb[t].judge_many([(r['a'], r['b']) for r in rows]) == y).mean():.3f}"
        print(f"| {t} | {((f1 >= t) == y).mean():.3f} | {((rl >= t) == y).mean():.3f} | {e} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=Path, default=DEFAULT_PAIRS)
    p.add_argument("--judges", default="exact,contains,token-f1,rouge-l,embedding")
    p.add_argument("--nli-model", help="local NLI model directory (adds the nli judge)")
    p.add_argument("--question-aware", action="store_true", help="NLI: prepend the question to both answers")
    p.add_argument("--llm", help="adds the LLM judge with this local model (e.g. smollm2-135m-instruct); slow")
    p.add_argument("--llm-url", help="adds the LLM judge with an OpenAI-compatible server, e.g. http://host:8000/v1")
    p.add_argument("--llm-model", default="default", help="model name sent to --llm-url")
    p.add_argument("--device", default="cpu")
    p.add_argument("--sweep", action="store_true", help="also print accuracy at other thresholds")
    args = p.parse_args(argv)
    if args.llm == "smollm2":
        args.llm = "smollm2-135m-instruct"

    rows = load_pairs(args.pairs)
    questions = [r["question"] for r in rows]
    print(f"pairs: {args.pairs} ({len(rows)}); python {sys.version.split()[0]}, {os.cpu_count()} CPUs visible, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    preds = run_table(rows, build_judges(args, "equivalence"), lambda r: (r["a"], r["b"]), questions,
                      "Equivalence judges, all pairs")
    by_category(rows, preds)
    gold = [r for r in rows if r["kind"] == "answer-gold"]
    run_table(gold, build_judges(args, "correctness"), lambda r: (r["a"], [r["b"]]), [r["question"] for r in gold],
              "Correctness judges, (answer, gold alias) pairs")
    if args.sweep:
        sweep(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
