"""Throughput of the record builder against the anchors a user would pick instead, on the same questions.

    python benchmarks/build_throughput.py                # 32 NQ questions, N = 20, every anchor, torch's threads
    python benchmarks/build_throughput.py --quick        # 8 questions, N = 5: a short check that all run
    python benchmarks/build_throughput.py --anchors batched,llamacpp --n-questions 64

Same questions, prompts (the chat template around the QA instruction), N, ``max_new_tokens``, stop tokens (EOS,
end of turn, newline) and sampling settings (temperature 1, top-p 0.95, top-k 50) for all; each records the
raw-model log-prob of every answer token. The anchors (``anchors.py``):
(a) ``plain``: per question one greedy ``model.generate`` and one sampled ``generate(num_return_sequences=N)``;
(b) ``batched``: ``model.generate`` over 8 / 16 / 32 questions at once, left-padded, one greedy call and one
sampled call with ``num_return_sequences=N`` per batch, log-probs from ``output_logits`` (the best batch size is
the anchor);
(c) ``llamacpp``: llama.cpp (``llama-cpp-python``) on the GGUF file the transformers model is dequantized from,
greedy + N samples per question through ``Llama.generate`` (prompt KV cache reused between a question's rows),
log-probs from the last logits, with as many threads as torch; ``llamacpp-completion``: the same through
``Llama.create_completion(logprobs=1)``, the library's OpenAI-style call;
(d) the builder: ``make_generator("transformers", ...)`` (``elical.generation.prefix_sharing``) over batches of
``--batch-size`` prompts.
All run in turns, one chunk of questions at a time (the largest batch size), so that a change in the shared
machine's load weighs on all alike. Prints questions per second for each, the thread counts, the dense 2048^2 fp32
matmul rate, the builder's achieved model FLOP/s, and the builder's ratio to each anchor and to the best one.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

import anchors
from elical.generation.backends import make_generator
from elical.generation.base import DecodingConfig, build_prompt
from elical.generation.models import load_model, smollm2_gguf_path
from elical.records import read_qa_file
from matmul_rate import matmul_gflops

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "honestybench-qa" / "nq" / "test.jsonl"
ALL_ANCHORS = ("plain", "batched", "llamacpp", "llamacpp-completion")


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
    ap.add_argument("--n-questions", type=int, default=None, help="default 32 (8 with --quick)")
    ap.add_argument("--n-samples", type=int, default=None, help="N sampled answers per question (default 20, 5 "
                    "with --quick)")
    ap.add_argument("--max-new-tokens", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32, help="prompts per builder batch (elical run's default)")
    ap.add_argument("--gen-batches", default=None, help="questions per batched-generate call, comma-separated "
                    "(default 8,16,32; 4,8 with --quick)")
    ap.add_argument("--anchors", default=",".join(ALL_ANCHORS), help=f"comma-separated subset of {ALL_ANCHORS}; "
                    "llama.cpp ones are left out with a note when llama_cpp is not installed")
    ap.add_argument("--threads", type=int, default=None, help="torch and llama.cpp threads (default: torch's own "
                    "choice)")
    ap.add_argument("--quick", action="store_true", help="8 questions, N = 5, batches 4 and 8")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    n_q = args.n_questions or (8 if args.quick else 32)
    n_s = args.n_samples if args.n_samples is not None else (5 if args.quick else 20)
    gen_batches = [int(x) for x in (args.gen_batches or ("4,8" if args.quick else "8,16,32")).split(",")]
    batch = min(args.batch_size, 8) if args.quick else args.batch_size
    wanted = [a.strip() for a in args.anchors.split(",") if a.strip()]
    unknown = sorted(set(wanted) - set(ALL_ANCHORS))
    if unknown:
        ap.error(f"unknown anchors {unknown}; choose from {ALL_ANCHORS}")
    threads = torch.get_num_threads()

    model, tok = load_model()
    questions = read_qa_file(args.data)[:n_q]
    prompts = [build_prompt(tok, q["question"]) for q in questions]
    d = DecodingConfig(n_samples=n_s, max_new_tokens=args.max_new_tokens, batch_size=batch)
    gen = make_generator("transformers", model, tok, decoding=d)
    stop_ids = gen._stop_ids

    runners = {}  # name -> fn(chunk prompts, offset) -> (greedy texts, work count)
    if "plain" in wanted:
        runners["plain generate loop"] = lambda ch, off: anchors.plain_loop(model, tok, ch, d, stop_ids, args.seed)
    if "batched" in wanted:
        for b in gen_batches:
            runners[f"batched generate, {b} q"] = (lambda b: lambda ch, off: anchors.batched_generate(
                model, tok, ch, d, stop_ids, args.seed, b))(b)
    llama_note = ""
    if any(a.startswith("llamacpp") for a in wanted):
        try:
            import llama_cpp
            llama_note = f"llama-cpp-python {llama_cpp.__version__}, n_threads = n_threads_batch = {threads}"
        except ImportError:
            llama_note = "llama.cpp left out: llama_cpp is not installed (docs/backends.md: how to build it)"
            wanted = [a for a in wanted if not a.startswith("llamacpp")]
    gguf = smollm2_gguf_path()
    for name, completion in (("llamacpp", False), ("llamacpp-completion", True)):
        if name in wanted:
            llm = anchors.load_llama(gguf, threads, completion=completion, seed=args.seed)
            label = "llama.cpp create_completion" if completion else "llama.cpp generate loop"
            runners[label] = (lambda llm, c: lambda ch, off: anchors.llamacpp_loop(
                llm, ch, d, stop_ids, args.seed + off, completion=c))(llm, completion)
    runners["builder"] = lambda ch, off: builder(gen, ch, d, args.seed, offset=off)

    print(f"{len(prompts)} questions from {args.data}; N = {d.n_samples}, max_new_tokens = {d.max_new_tokens}, "
          f"builder batch = {d.batch_size} prompts ({type(gen).__name__}); torch threads = {threads}"
          f"{'; ' + llama_note if llama_note else ''}; load average at start = {os.getloadavg()[0]:.2f}")
    peak = matmul_gflops() * 1e9
    gen.generate(prompts[:2], ["w0", "w1"], seed=args.seed)  # warm-up (allocator, kernels)
    for name, fn in runners.items():
        if name != "builder":
            fn(prompts[:1], 0)

    chunk = max(gen_batches + [d.batch_size])
    times = {name: 0.0 for name in runners}
    greedy = {name: [] for name in runners}
    work = {"prompt_tokens": 0, "decoded_tokens": 0, "answer_tokens": 0}
    for i in range(0, len(prompts), chunk):
        part = prompts[i:i + chunk]
        for name, fn in runners.items():
            t = time.perf_counter()
            texts, w = fn(part, i)
            times[name] += time.perf_counter() - t
            print(f"  questions {i}-{i + len(part) - 1}: {name} {time.perf_counter() - t:.1f} s", flush=True)
            greedy[name] += texts
            if name == "builder":
                work = {k: work[k] + w[k] for k in work}
        peak = max(peak, matmul_gflops() * 1e9)

    rate = {name: len(prompts) / t for name, t in times.items()}
    q_built = rate["builder"]
    for name in runners:
        same = sum(a == b for a, b in zip(greedy[name], greedy["builder"]))
        tail = "" if name == "builder" else (f"  builder / this = {q_built / rate[name]:5.2f}x; greedy answers as "
                                             f"the builder's: {same}/{len(prompts)}")
        print(f"{name:30s}: {times[name]:8.1f} s  {rate[name]:7.3f} questions/s{tail}")
    anchor_rates = {k: v for k, v in rate.items() if k != "builder"}
    if anchor_rates:
        best = max(anchor_rates, key=anchor_rates.get)
        print(f"best anchor: {best} ({anchor_rates[best]:.3f} questions/s); builder / best anchor = "
              f"{q_built / anchor_rates[best]:.2f}x")
    prefill, decode = work["prompt_tokens"], work["decoded_tokens"]
    n_params = sum(p.numel() for p in model.parameters())
    flops = 2 * n_params * (prefill + decode)
    print(f"dense matmul (torch): {peak / 1e9:.1f} GFLOP/s  (2048 x 2048 fp32, best timing, {threads} threads)")
    print(f"builder model FLOP/s: {flops / times['builder'] / 1e9:.1f} GFLOP/s = {flops / times['builder'] / peak:.0%}"
          f" of matmul  (2 x {n_params / 1e6:.1f} M params x ({prefill} prompt + {decode} decoded tokens); the "
          f"answers have {work['answer_tokens']} tokens)")
    print(f"load average at end = {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
