"""Per-question latency of confidence before answering (ConfidenceModel: one forward pass, no generation) against
Consis-Sem with N = 20 samples (generation of the greedy answer + 20 samples, then semantic judging), on the same
questions and the same model.

    python benchmarks/confidence_latency.py                       # 20 facts questions, SmolLM2-135M, CPU
    python benchmarks/confidence_latency.py --head-dir runs/x/heads/elical_k64 --n-questions 50

Without ``--head-dir`` a linear probe head and a LoRA head are built on the spot (their latency does not depend on
what they learned). Each question is scored alone (``batch 1``: the latency a user waits for), after one warm-up
call per method; the batched cost per question is printed too. Consis-Sem uses the decoding of ``elical run``
(temperature 1.0, top-p 0.95, top-k 50, answers stop at the end of their line).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np


def _timed(fn, items) -> list[float]:
    out = []
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        out.append(time.perf_counter() - t0)
    return out


def _row(name: str, times: list[float]) -> str:
    return (f"{name:<38} mean {1000 * statistics.mean(times):9.1f} ms   median "
            f"{1000 * statistics.median(times):9.1f} ms")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--device", default="cpu")
    p.add_argument("--head-dir", help="a trained head directory (default: build a probe and a LoRA head here)")
    p.add_argument("--n-questions", type=int, default=20)
    p.add_argument("--n-samples", type=int, default=20, help="N of Consis-Sem")
    p.add_argument("--max-new-tokens", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    import torch

    from elical.heads.confidence import ConfidenceModel, write_model_json
    from elical.data.facts import load_facts
    from elical.generation.features import extract_hidden_states
    from elical.generation.base import DecodingConfig, build_prompt
    from elical.generation.prefix_sharing import TransformersGenerator
    from elical.heads.probe import ProbeHead
    from elical.judges import SemanticEquivalenceJudge
    from elical.heads.lora import LoRAConfig, LoRAHead
    from elical.generation.models import load_model

    print(f"cores {os.cpu_count()}, torch threads {torch.get_num_threads()}, "
          f"load average before {os.getloadavg()[0]:.1f}")
    model, tok = load_model(args.model, device=args.device)
    facts = load_facts()
    pick = np.random.default_rng(args.seed).permutation(len(facts))
    questions = [facts[i]["question"] for i in pick[:args.n_questions]]
    other = [facts[i]["question"] for i in pick[args.n_questions:args.n_questions + 32]]

    heads = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.head_dir:
            heads[f"ConfidenceModel ({os.path.basename(args.head_dir.rstrip('/'))})"] = ConfidenceModel.load(
                args.head_dir, model=(model, tok))
        else:
            prompts = [build_prompt(tok, q) for q in other]
            X = extract_hidden_states(model, tok, prompts)
            y = np.linspace(0.05, 0.95, len(other))
            ProbeHead(max_epochs=5).fit(X, y).save(os.path.join(tmp, "probe"))
            write_model_json(os.path.join(tmp, "probe"), args.model)
            LoRAHead(model, tok, LoRAConfig(max_epochs=0), base_model=args.model).fit(prompts, y).save(
                os.path.join(tmp, "lora"))
            heads["ConfidenceModel (linear probe)"] = ConfidenceModel.load(os.path.join(tmp, "probe"),
                                                                           model=(model, tok))
            heads["ConfidenceModel (LoRA + linear head)"] = ConfidenceModel.load(os.path.join(tmp, "lora"),
                                                                                 model=(model, tok))
        results = {}
        for name, cm in heads.items():
            cm.predict(questions[:1])  # warm-up
            results[name] = _timed(lambda q: cm.predict([q]), questions)
            t0 = time.perf_counter()
            cm.predict(questions)
            batched = (time.perf_counter() - t0) / len(questions)
            print(_row(name + ", batch 1", results[name]) + f"   (batched: {1000 * batched:.1f} ms/question)")

    decoding = DecodingConfig(n_samples=args.n_samples, max_new_tokens=args.max_new_tokens)
    generator = TransformersGenerator(model, tok, decoding)
    judge = SemanticEquivalenceJudge()
    judge.judge("Paris", ["Paris, France"])  # loads MiniLM (excluded, as the head's model load is)

    def consis_sem(item):
        i, q = item
        g = generator.generate([build_prompt(tok, q)], [f"q{i}"], seed=args.seed)[0]
        return float(np.mean(judge.judge(g.greedy_response, g.sampling_response)))

    consis_sem((-1, questions[0]))  # warm-up
    sem = _timed(consis_sem, list(enumerate(questions)))
    print(_row(f"Consis-Sem, N={args.n_samples} (generate + judge)", sem))
    for name, times in results.items():
        print(f"Consis-Sem / {name}: {statistics.mean(sem) / statistics.mean(times):.0f}x slower per question")
    print(f"{len(questions)} questions, model {args.model} on {args.device}; load average now "
          f"{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
