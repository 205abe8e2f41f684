"""``elical serve``: 16 concurrent requests against the same 16 one after another, on the real SmolLM2 on 127.0.0.1.

    python benchmarks/serve_concurrency.py                 # starts `elical serve --port 0`, 16 NQ-style questions
    python benchmarks/serve_concurrency.py --url http://127.0.0.1:8000/v1 --requests 32 --max-tokens 24

Each request is one chat question (greedy, ``max_tokens`` tokens, like the greedy requests of
``elical run --backend openai``). The questions are sent one after another (each waits for the previous reply),
then all at once from as many threads, with the official ``openai`` client; the two passes alternate ``--rounds``
times and the best time of each is kept (robust to a busy machine). Prints both wall times, the ratio
sequential / concurrent (issue 22's target: > 1), and whether both passes gave the same answers (they must: a
question's answer does not depend on its batch).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

QUESTIONS = ["What is the capital of France?", "Who wrote Hamlet?", "What is the chemical symbol of gold?",
             "In which country is Tampere?", "What is the largest planet of the solar system?",
             "Who painted the Mona Lisa?", "What is the boiling point of water in Celsius?",
             "Which ocean lies between Africa and Australia?", "Who discovered penicillin?",
             "What is the capital of Peru?", "What is the atomic number of carbon?", "Which state is Dallas in?",
             "What language is spoken in Brazil?", "Who was the first president of the United States?",
             "What is the currency of Japan?", "How many continents are there?"]


def _start_server() -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    proc = subprocess.Popen([sys.executable, "-m", "elical", "serve", "--port", "0"], stdout=subprocess.PIPE,
                            text=True, env=env)
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    return proc, line.split()[-1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running server (default: start `elical serve --port 0`)")
    ap.add_argument("--model", default="smollm2-135m-instruct", help="the served model name")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    from openai import OpenAI

    proc, url = (None, args.url) if args.url else _start_server()
    try:
        client = OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=600)
        questions = [QUESTIONS[i % len(QUESTIONS)] + (f" ({i // len(QUESTIONS)})" if i >= len(QUESTIONS) else "")
                     for i in range(args.requests)]

        def ask(q):
            r = client.chat.completions.create(model=args.model, messages=[{"role": "user", "content": q}],
                                               temperature=0, max_tokens=args.max_tokens)
            return r.choices[0].message.content

        ask(questions[0])  # warm-up: first-call costs out of both timings
        seq_s, con_s = [], []
        for _ in range(args.rounds):
            t = time.perf_counter()
            sequential = [ask(q) for q in questions]
            seq_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            with ThreadPoolExecutor(len(questions)) as pool:
                concurrent = list(pool.map(ask, questions))
            con_s.append(time.perf_counter() - t)
        print(f"{args.requests} requests, max_tokens {args.max_tokens}, best of {args.rounds} rounds "
              f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
        print(f"one after another: {min(seq_s):.1f} s   concurrent: {min(con_s):.1f} s   "
              f"ratio {min(seq_s) / min(con_s):.2f}x   (all rounds: {[round(x, 1) for x in seq_s]} vs "
              f"{[round(x, 1) for x in con_s]})")
        print(f"same answers both ways: {sequential == concurrent}")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
