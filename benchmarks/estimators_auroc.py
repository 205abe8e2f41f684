"""AUROC of every training-free confidence estimator on a real evaluation set.

Generates and judges answers with elical's own pieces (greedy + N samples per question, SmolLM2-135M-Instruct by
default), then runs ``elical evaluate --model-estimators`` on the result and prints each estimator's AUROC (95 %
bootstrap interval), ECE and Brier against the correctness of the greedy answer.

    python benchmarks/estimators_auroc.py                                   # 150 ParaRel questions, N = 5
    python benchmarks/estimators_auroc.py --dataset nq --n-eval 200 --output runs/est-nq
    python benchmarks/estimators_auroc.py --dataset facts --no-model-estimators

The records and results stay in ``--output`` (a run directory ``elical evaluate`` can read again); an existing
directory is resumed (its records are reused). On 2 CPU cores the default takes about 20 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "honestybench-qa"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data-dir", default=str(DEFAULT_DATA), help="HonestyBench QA layout (ignored for 'facts')")
    p.add_argument("--dataset", default="pararel_patterns")
    p.add_argument("--n-eval", type=int, default=150, help="evaluation questions (hash 'test' side)")
    p.add_argument("--n-train", type=int, default=32, help="training-pool questions (Verbal-k examples)")
    p.add_argument("--n-samples", type=int, default=5, help="sampled answers per question (N)")
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--k", type=int, default=8, help="Verbal-k examples")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", help="run directory to write (default: a new temporary directory)")
    p.add_argument("--no-model-estimators", action="store_true", help="skip Verbal-0, Verbal-k and P(True)")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from elical.jobs.annotate import Annotator, annotate
    from elical.data.sources import load_questions, select_run_questions
    from elical.jobs.evaluate import evaluate_run
    from elical.generation.base import DecodingConfig
    from elical.generation.prefix_sharing import TransformersGenerator
    from elical.generation.models import load_model

    out = Path(args.output or tempfile.mkdtemp(prefix="elical-estimators-"))
    data_dir = None if args.dataset == "facts" else args.data_dir
    questions = select_run_questions(load_questions([args.dataset], data_dir), args.n_train, args.n_eval, args.seed)
    t0 = time.time()
    model, tok = load_model(args.model, device=args.device)
    decoding = DecodingConfig(n_samples=args.n_samples, max_new_tokens=args.max_new_tokens,
                              batch_size=args.batch_size)
    annotator = Annotator.default()
    meta = {"model": args.model, "seed": args.seed, "decoding": asdict(decoding), "judges": annotator.describe()}
    records = annotate(questions, TransformersGenerator(model, tok, decoding), annotator,
                       out / "records" / "annotations.jsonl", seed=args.seed, meta=meta)
    t_gen = time.time() - t0
    del model
    config = {"model": args.model, "datasets": [args.dataset], "data_dir": data_dir, "n_train": args.n_train,
              "n_eval": args.n_eval, "n_samples": args.n_samples, "max_new_tokens": args.max_new_tokens,
              "batch_size": args.batch_size, "seed": args.seed, "device": args.device, "semantic_model": None,
              "dev_fraction": 0.2, "n_bootstrap": 1000}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    t1 = time.time()
    res = evaluate_run(out, model_estimators=not args.no_model_estimators, k=args.k, batch_size=args.batch_size,
                       device=args.device, progress=True)
    t_est = time.time() - t1

    test = [r for r in records if r["split"] == "test"]
    acc = sum(r["greedy_correctness"] for r in test) / len(test)
    print(f"\n{args.dataset}: {len(test)} eval questions, greedy accuracy {acc:.1%}, N = {args.n_samples}, "
          f"model {args.model}; generation {t_gen:.0f} s, estimators {t_est:.0f} s")
    print(f"{'estimator':<12} {'AUROC':>6} {'95% CI':>14} {'ECE':>6} {'Brier':>6}  note")
    for name, m in res["results"]["all"].items():
        ci = m["ci"]["auroc"]
        info = res["estimators"].get(name, {})
        note = f"unparseable {info['n_unparseable']}/{info['n']}" if name.startswith("Verbal") else ""
        print(f"{name:<12} {m['auroc']:6.3f} [{ci[0]:5.3f}, {ci[1]:5.3f}] {m['ece']:6.3f} {m['brier']:6.3f}  {note}")
    for name in res["evaluate"]["skipped"]:
        print(f"{name:<12} skipped: {res['estimators'][name]['skipped']}")
    print(f"records and results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
