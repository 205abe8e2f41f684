"""Throughput of the record builder against a plain per-question ``generate`` loop, on the same questions.

    python benchmarks/build_throughput.py                      # 32 NQ questions, N = 20, torch's thread count
    python benchmarks/build_throughput.py --n-questions 64 --data ../shared/data/honestybench-qa/squad/dev.jsonl

(a) plain loop: per question, one greedy ``model.generate`` and one sampled ``model.generate`` with
``num_return_sequences=N`` (no prefix sharing: the prompt is prefilled N + 1 times; finished rows stay in the
batch), both with raw-model log-probs of the chosen tokens (``output_logits``) and the same stop tokens;
(b) the builder's path: ``elical.generation.backends.make_generator("transformers", ...)`` over batches of prompts: the
batch's common prompt prefix run once, each prompt's rest once for its greedy and N sampled rows, each distinct
token history run once per step (``elical.generation.prefix_sharing``), rows leaving at the end of their answer. The two run in turns, one batch
of questions at a time.
Prints questions per second for both and their ratio, and the builder's achieved model FLOP/s
(2 x parameters x tokens the model ran on: real prompt tokens and decoded tokens) as a fraction of the dense
fp32 matmul rate torch measures in the same run (2048 x 2048, best of several timings). Targets (issue 10, 2 cores):
ratio >= 8, fraction >= 0.60 (docs/benchmarks.md has the measured ceiling of the fraction on a 2-core CPU).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from elical.generation.backends import make_generator
from elical.generation.base import DecodingConfig, build_prompt
from elical.generation.models import load_model
from elical.records import read_qa_file
from matmul_rate import matmul_gflops

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "honestybench-qa" / "nq" / "test.jsonl"


def plain_loop(model, tok, prompts, d: DecodingConfig, stop_ids, seed: int):
    """Per question: greedy generate + sampled generate (num_return_sequences=N). Returns (greedy texts, tokens
    processed)."""
    greedy_texts, processed = [], 0
    with torch.random.fork_rng(devices=[]):  # transformers' sampling draws from the global RNG; keep it local
        torch.manual_seed(seed)
        for p in prompts:
            enc = tok(p, return_tensors="pt", add_special_tokens=False)
            width = enc["input_ids"].shape[1]
            common = dict(max_new_tokens=d.max_new_tokens, eos_token_id=stop_ids, pad_token_id=tok.pad_token_id,
                          return_dict_in_generate=True, output_logits=True)
            g = model.generate(**enc, do_sample=False, **common)
            s = model.generate(**enc, do_sample=True, temperature=d.temperature, top_p=d.top_p, top_k=d.top_k,
                               num_return_sequences=d.n_samples, **common)
            for out in (g, s):
                new = out.sequences[:, width:]
                logp = torch.log_softmax(torch.stack(out.logits, dim=1).float(), dim=-1)
                logp.gather(-1, new[..., None])  # the chosen tokens' log-probs, as the builder records them
                processed += out.sequences.shape[0] * width + new.numel()
            greedy_texts.append(tok.decode(g.sequences[0, width:], skip_special_tokens=True).split("\n")[0].strip())
    return greedy_texts, processed


def builder(gen, prompts, d: DecodingConfig, seed: int, offset: int = 0):
    """The builder's path over fixed batches. Returns (greedy texts, work): the tokens the model actually ran on
    (real prompt tokens; one per distinct history and step) and the tokens of all answers."""
    greedy_texts, work = [], {"prompt_tokens": 0, "decoded_tokens": 0, "answer_tokens": 0}
    for i in range(0, len(prompts), d.batch_size):
        batch = prompts[i:i + d.batch_size]
        gens = gen.generate(batch, [str(offset + i + j) for j in range(len(batch))], seed=seed)
        for k in work:
            work[k] += gen.stats_[k]
        greedy_texts += [g.greedy_response for g in gens]
    return greedy_texts, work


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="a HonestyBench QA file (question/answer JSONL)")
    ap.add_argument("--n-questions", type=int, default=32)
    ap.add_argument("--n-samples", type=int, default=20)
    ap.add_argument("--max-new-tokens", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32, help="prompts per builder batch (elical run's default)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    model, tok = load_model()
    questions = read_qa_file(args.data)[:args.n_questions]
    prompts = [build_prompt(tok, q["question"]) for q in questions]
    d = DecodingConfig(n_samples=args.n_samples, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    gen = make_generator("transformers", model, tok, decoding=d)
    print(f"{len(prompts)} questions from {args.data}; N = {d.n_samples}, max_new_tokens = {d.max_new_tokens}, "
          f"batch = {d.batch_size} prompts; builder: {type(gen).__name__}; torch threads = {torch.get_num_threads()}; "
          f"load average at start = {os.getloadavg()[0]:.2f}")

    peak = matmul_gflops() * 1e9
    gen.generate(prompts[:2], ["w0", "w1"], seed=args.seed)  # warm-up (allocator, kernels)

    # The two run in turns, one builder batch of questions at a time, so that a change in the machine's load
    # during the run weighs on both alike.
    t_plain = t_built = 0.0
    plain_greedy, built_greedy, plain_tokens = [], [], 0
    work = {"prompt_tokens": 0, "decoded_tokens": 0, "answer_tokens": 0}
    for i in range(0, len(prompts), d.batch_size):
        chunk = prompts[i:i + d.batch_size]
        t = time.perf_counter()
        texts, processed = plain_loop(model, tok, chunk, d, gen._stop_ids, args.seed)
        t_plain += time.perf_counter() - t
        plain_greedy += texts
        plain_tokens += processed
        t = time.perf_counter()
        texts, w = builder(gen, chunk, d, args.seed, offset=i)
        t_built += time.perf_counter() - t
        built_greedy += texts
        work = {k: work[k] + w[k] for k in work}
        peak = max(peak, matmul_gflops() * 1e9)

    prefill, decode = work["prompt_tokens"], work["decoded_tokens"]
    n_params = sum(p.numel() for p in model.parameters())
    n_embed = model.get_input_embeddings().weight.numel()
    tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
    n_head = model.get_output_embeddings().weight.numel()
    body = n_params - n_embed - (0 if tied else n_head)
    flops_simple = 2 * n_params * (prefill + decode)
    # exact matmul count: the LM head runs only where logits are kept (last prompt position, every decode step)
    flops_exact = 2 * body * (prefill + decode) + 2 * n_head * (len(prompts) + decode)
    q_plain, q_built = len(prompts) / t_plain, len(prompts) / t_built
    same = sum(a == b for a, b in zip(plain_greedy, built_greedy))
    print(f"plain generate loop : {t_plain:8.1f} s  {q_plain:.3f} questions/s  ({plain_tokens} tokens processed)")
    print(f"builder             : {t_built:8.1f} s  {q_built:.3f} questions/s  ({prefill} prompt + {decode} "
          f"decoded tokens; the answers have {work['answer_tokens']} tokens)")
    print(f"speed-up            : {q_built / q_plain:.2f}x   (target >= 8x)")
    print(f"dense matmul (torch): {peak / 1e9:.1f} GFLOP/s  (2048 x 2048 fp32, best timing)")
    print(f"builder model FLOP/s: {flops_simple / t_built / 1e9:.1f} GFLOP/s = {flops_simple / t_built / peak:.0%} "
          f"of matmul  (2 x {n_params / 1e6:.1f} M params x tokens; target >= 60 %)")
    print(f"  exact matmul count: {flops_exact / t_built / 1e9:.1f} GFLOP/s = {flops_exact / t_built / peak:.0%} "
          f"of matmul  (LM head only where logits are computed)")
    print(f"plain loop FLOP/s   : {2 * n_params * plain_tokens / t_plain / 1e9:.1f} GFLOP/s = "
          f"{2 * n_params * plain_tokens / t_plain / peak:.0%} of matmul; it processes "
          f"{plain_tokens / (prefill + decode):.2f}x the builder's tokens (the prompt once per row)")
    print(f"greedy answers identical in both: {same}/{len(prompts)}; load average at end = "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
