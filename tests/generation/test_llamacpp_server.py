"""The OpenAI-compatible backend and the LLM judge against a server elical did not write: llama.cpp's, from
``llama-cpp-python[server]``, on the SmolLM2 GGUF file the transformers model is dequantized from.

Skipped (with the reason) when ``llama_cpp`` or its server extras are not installed: llama-cpp-python builds
llama.cpp from source, so CI does not install it (docs/backends.md says how to build it). The server runs as the
real command in its own process on 127.0.0.1 with one thread; each test is bounded by the server's start (60 s)
and a few short requests.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (built from source; docs/backends.md)")
pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] extras are not installed")

from elical.generation.backends import OpenAIGenerator  # noqa: E402
from elical.generation.base import DecodingConfig, build_prompt  # noqa: E402
from elical.generation.models import load_model, smollm2_gguf_path  # noqa: E402

QUESTIONS = ["What is the capital of France?", "Who wrote the play Romeo and Juliet?"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``python -m llama_cpp.server --model GGUF --host 127.0.0.1 --port P``; yields its base URL."""
    port = _free_port()
    log = open(tmp_path_factory.mktemp("llamacpp") / "server.log", "w+")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf_path()),
                             "--host", "127.0.0.1", "--port", str(port), "--n_threads", "1",
                             "--n_threads_batch", "1", "--n_ctx", "1024", "--verbose", "False"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 60
    try:
        while True:
            try:
                with urllib.request.urlopen(base + "/models", timeout=2) as resp:
                    json.loads(resp.read())
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    log.seek(0)
                    pytest.fail(f"llama.cpp's server did not start: {log.read()[-2000:]}")
                time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def local():
    model, tok = load_model()
    return model, tok


def test_greedy_answers_and_logprobs_match_the_same_weights_in_transformers(server, local):
    """The greedy answer and its per-token log-probs from llama.cpp's server equal those of the transformers
    model on the same (dequantized) weights: the log-prob block is parsed token by token, cut at the answer's
    end. Tolerance 0.15 nats: llama.cpp multiplies Q4_1 weights with 8-bit-quantized activations."""
    from elical.generation.prefix_sharing import TransformersGenerator

    model, tok = local
    d = DecodingConfig(n_samples=0, max_new_tokens=12)
    prompts = [build_prompt(tok, q) for q in QUESTIONS]
    remote = OpenAIGenerator(server, "smollm2", tokenizer=tok, decoding=d).generate(prompts, ["a", "b"])
    here = TransformersGenerator(model, tok, d).generate(prompts, ["a", "b"])
    for r, h in zip(remote, here):
        assert r.greedy_response == h.greedy_response
        assert r.greedy_response  # a real answer, not an empty line
        assert "".join(r.greedy_tokens).strip() == r.greedy_response
        assert len(r.greedy_logprobs) == len(h.greedy_logprobs)
        np.testing.assert_allclose(r.greedy_logprobs, h.greedy_logprobs, atol=0.15)


def test_samples_have_n_answers_with_logprobs_and_repeat_with_the_seed(server, local):
    """llama.cpp's server ignores ``n`` (one choice per request): the backend asks again one sample at a time and
    still returns N answers; each has its token count and summed log-prob; the same seed gives the same samples
    (the server seeds its sampler per request), another seed other ones."""
    _, tok = local
    d = DecodingConfig(n_samples=4, max_new_tokens=10)
    gen = OpenAIGenerator(server, "smollm2", tokenizer=tok, decoding=d, max_concurrency=1)
    prompts = [build_prompt(tok, QUESTIONS[1])]
    first = gen.generate(prompts, ["q1"], seed=0)[0]
    again = gen.generate(prompts, ["q1"], seed=0)[0]
    other = gen.generate(prompts, ["q1"], seed=1)[0]
    assert len(first.sampling_response) == 4
    assert all(0 < n <= 10 for n in first.sampling_num_tokens)
    assert all(lp < 0 for lp in first.sampling_cumulative_logprobs)
    assert first.sampling_response == again.sampling_response
    assert first.sampling_cumulative_logprobs == again.sampling_cumulative_logprobs
    assert other.sampling_cumulative_logprobs != first.sampling_cumulative_logprobs


def test_llm_judge_through_the_server(server):
    """The LLM judge's chat-completions client gets a yes/no completion from llama.cpp's chat template."""
    from elical.judges.llm import LLMJudge, OpenAICompletion, parse_yes_no

    complete = OpenAICompletion(server, "smollm2")
    out = complete(["Is Paris the capital of France? Answer yes or no."])
    assert len(out) == 1 and isinstance(out[0], str) and out[0].strip()
    judge = LLMJudge(complete, mode="equivalence")
    got = judge.judge_many([("Paris", "paris"), ("Paris", "Berlin")], ["What is the capital of France?"] * 2)
    assert got[0] == 1  # equal after normalization: decided before the model
    assert len(judge.raw_) == 1  # only the second pair went to the server
    (raw,) = judge.raw_.values()
    assert raw.strip() and got[1] == (parse_yes_no(raw) if parse_yes_no(raw) is not None else 0)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("ELICAL_LLAMACPP_E2E") != "1",
                    reason="about 20 minutes on 2 cores; set ELICAL_LLAMACPP_E2E=1 to run it")
def test_elical_run_smoke_through_the_server_with_the_llm_judge(server, tmp_path):
    """``elical run --preset smoke --backend openai --base-url URL --equivalence-judge llm --judge-base-url URL``
    end to end (model estimators off to bound the time): records with N = 3 samples and greedy log-probs from
    llama.cpp, equivalence from the LLM judge, and the results file."""
    from elical.cli import main

    out = tmp_path / "run"
    assert main(["run", "--preset", "smoke", "--backend", "openai", "--base-url", server,
                 "--equivalence-judge", "llm", "--judge-base-url", server, "--judge-model", "smollm2",
                 "--no-model-estimators", "--quiet", "--output", str(out)]) == 0
    records = [json.loads(line) for f in sorted(out.rglob("*.jsonl")) for line in open(f)
               if '"sampling_response"' in line]
    assert len(records) >= 80
    assert all(len(r["sampling_response"]) == 3 and len(r["consistency_judgement"]) == 3 for r in records)
    assert sum(bool(r["greedy_logprobs"]) for r in records) >= 0.9 * len(records)
    assert all(lp <= 0 for r in records for lp in r["greedy_logprobs"])
    assert (out / "results.json").exists()
