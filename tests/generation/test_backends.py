"""The generation backends: the endpoint client against a real local OpenAI-compatible server (``python -m
elical serve`` in a subprocess, and the same server in a thread for the no-log-probs and 503 cases), the factory,
the top-k-first inverse-CDF sampler and the vLLM glue (vLLM itself needs a GPU; its documented output objects are stubbed)."""

import importlib.util
import socket
import sys
import time
import types

import numpy as np
import pytest
import torch

from elical.generation.backends import EndpointError, OpenAIGenerator, make_generator
from elical.generation.base import DecodingConfig, build_prompt
from elical.generation.prefix_sharing import TransformersGenerator

QUESTIONS = ["What is the chemical symbol of gold?", "Who wrote Hamlet?"]


@pytest.fixture(scope="module")
def server_url(served):
    """``python -m elical serve`` on a free port, in its own process (tests/generation/conftest.py)."""
    return served.url


def _thread_server(smollm2, **kw):
    from elical.generation.serve import CompletionService
    from elical.generation.server_app import make_app, start_in_thread

    model, tok = smollm2
    return start_in_thread(make_app(CompletionService(model, tok, "smollm2", logprobs=kw.pop("logprobs", True)),
                                    **kw))


def test_endpoint_matches_the_transformers_backend_and_seeds_fix_samples(server_url, smollm2):
    model, tok = smollm2
    d = DecodingConfig(n_samples=3, max_new_tokens=10)
    prompts = [build_prompt(tok, q) for q in QUESTIONS]
    remote = OpenAIGenerator(server_url, "smollm2-135m-instruct", tok, d, max_concurrency=4)
    a = remote.generate(prompts, ["q1", "q2"], seed=0)
    b = remote.generate(prompts[1:], ["q2"], seed=0)
    c = remote.generate(prompts[1:], ["q2"], seed=1)
    local = [TransformersGenerator(model, tok, d).generate([p], ["q"], seed=0)[0] for p in prompts]
    for r, loc in zip(a, local):
        # greedy decoding is the model's own: same text, same tokens, same log-probs as the in-process backend
        assert r.greedy_response == loc.greedy_response
        assert "".join(r.greedy_tokens) == tok.convert_tokens_to_string(loc.greedy_tokens)
        np.testing.assert_allclose(r.greedy_logprobs, loc.greedy_logprobs, atol=2e-3)
        assert len(r.sampling_response) == 3 and all(1 <= n <= 10 for n in r.sampling_num_tokens)
        assert all(lp < 0 for lp in r.sampling_cumulative_logprobs)
    assert "Au" in a[0].greedy_response
    assert a[1].sampling_response == b[0].sampling_response  # same seed and key, another batch: same samples
    assert a[1].sampling_response != c[0].sampling_response
    # N single-sample requests instead of one request with n (servers without n): same shape of record
    single = OpenAIGenerator(server_url, "smollm2-135m-instruct", tok, d, samples_per_request="single")
    s = single.generate(prompts[:1], ["q1"], seed=0)[0]
    assert s.greedy_response == a[0].greedy_response and len(s.sampling_response) == 3
    assert len(s.sampling_cumulative_logprobs) == 3


def test_chat_endpoint_and_judge_completions(server_url):
    chat = OpenAIGenerator(server_url, "smollm2-135m-instruct", None, DecodingConfig(n_samples=2, max_new_tokens=10),
                           endpoint="chat")
    (g,) = chat.generate([build_prompt(None, "What is the capital of France?")], ["q"], seed=0)
    assert "Paris" in g.greedy_response and len(g.greedy_logprobs) == len(g.greedy_tokens) > 0
    assert len(g.sampling_response) == 2
    judge = OpenAIGenerator(server_url, "smollm2-135m-instruct", endpoint="chat")
    out = judge.complete(["Is Paris the capital of France? Answer yes or no.", "Say hello."], max_tokens=4)
    assert len(out) == 2 and all(isinstance(t, str) and t for t in out)


def test_server_without_logprobs_is_an_error_unless_they_are_optional(smollm2):
    model, tok = smollm2
    server, url = _thread_server(smollm2, logprobs=False)
    try:
        with pytest.raises(EndpointError, match=r"127\.0\.0\.1.*without log-probs"):
            OpenAIGenerator(url, "smollm2", tok, DecodingConfig(n_samples=2, max_new_tokens=8)).generate(
                [build_prompt(tok, QUESTIONS[0])], ["q"], seed=0)
        gen = OpenAIGenerator(url, "smollm2", tok, DecodingConfig(n_samples=2, max_new_tokens=8),
                              require_logprobs=False)
        (g,) = gen.generate([build_prompt(tok, QUESTIONS[0])], ["q"], seed=0)
    finally:
        server.should_exit = True
    assert "Au" in g.greedy_response and len(g.sampling_response) == 2
    assert g.greedy_tokens == [] and g.greedy_logprobs == []
    assert g.sampling_cumulative_logprobs == [] and g.sampling_num_tokens == []


def test_transient_503_is_retried_and_persistent_failure_names_the_url(smollm2):
    prompt = build_prompt(smollm2[1], QUESTIONS[0])
    server, url = _thread_server(smollm2, fail_first=2)
    try:
        gen = OpenAIGenerator(url, "smollm2", max_retries=3, max_concurrency=1)
        assert "Au" in gen.complete([prompt], max_tokens=8)[0]  # two 503s, then the answer
    finally:
        server.should_exit = True
    server, url = _thread_server(smollm2, fail_first=10)
    try:
        gen = OpenAIGenerator(url, "smollm2", max_retries=1)
        with pytest.raises(EndpointError, match=r"127\.0\.0\.1.*HTTP 503.*2 attempts"):
            gen.complete([prompt], max_tokens=3)
    finally:
        server.should_exit = True


def test_bad_request_is_not_retried(server_url):
    gen = OpenAIGenerator(server_url, "smollm2-135m-instruct", max_retries=5)
    t = time.perf_counter()
    with pytest.raises(EndpointError, match=r"rejected the request: HTTP 400.*max_tokens"):
        gen.complete(["x"], max_tokens=0)
    assert time.perf_counter() - t < 5


def test_server_down_fails_within_seconds_naming_the_url():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gen = OpenAIGenerator(f"http://127.0.0.1:{port}/v1", "m", max_retries=2)
    t = time.perf_counter()
    with pytest.raises(EndpointError, match=rf"127\.0\.0\.1:{port}/v1/completions: cannot connect.*server running"):
        gen.generate(["q"], ["k"])
    assert time.perf_counter() - t < 5


def test_make_generator_backends(smollm2):
    model, tok = smollm2
    assert isinstance(make_generator("transformers", model, tok), TransformersGenerator)
    remote = make_generator("openai", "m", base_url="http://127.0.0.1:1/v1/", max_concurrency=2)
    assert isinstance(remote, OpenAIGenerator) and remote.url == "http://127.0.0.1:1/v1/completions"
    with pytest.raises(ValueError, match="unknown backend"):
        make_generator("tgi", model, tok)
    with pytest.raises(ValueError, match="base_url"):
        make_generator("openai", "m")
    if importlib.util.find_spec("vllm") is None:  # importable without vllm; asking for it says how to get it
        with pytest.raises(ImportError, match=r"pip install .elical\[vllm\]"):
            make_generator("vllm", "smollm2-135m-instruct")


def test_growing_layer_matches_transformers_dynamic_layer():
    from transformers.cache_utils import DynamicLayer

    from elical.generation.prefix_sharing import GrowingLayer

    rng = torch.Generator().manual_seed(0)
    grow, ref = GrowingLayer(spare=2), DynamicLayer()

    def update(rows, new):
        k, v = torch.randn(rows, 2, new, 4, generator=rng), torch.randn(rows, 2, new, 4, generator=rng)
        for layer in (grow, ref):
            layer.update(k, v)
        check()

    def check():
        assert grow.get_seq_length() == ref.get_seq_length()
        torch.testing.assert_close(grow.keys, ref.keys, rtol=0, atol=0)
        torch.testing.assert_close(grow.values, ref.values, rtol=0, atol=0)

    update(3, 5)
    for _ in range(3):  # past the spare room: the buffer grows
        update(3, 1)
    for idx in ([0, 1], [1, 0, 0]):  # dropping the last row (a view), then a reordering copy
        grow.batch_select_indices(torch.tensor(idx))
        ref.batch_select_indices(torch.tensor(idx))
        check()
    grow.copy_rows(5, torch.tensor([3, 4]), torch.tensor([0, 2]))  # two new rows: copies of rows 0 and 2
    ref.batch_select_indices(torch.tensor([0, 1, 2, 0, 2]))
    check()
    update(5, 1)
    grow.batch_repeat_interleave(2)
    ref.batch_repeat_interleave(2)
    check()
    update(10, 1)


@pytest.mark.parametrize("top_k", [20, 0])
def test_inverse_cdf_draw_has_transformers_distribution(top_k):
    """Rows of two nodes, interleaved: each row's draws follow its own node's Temperature -> TopK -> TopP
    distribution (transformers' warpers over the full vocabulary); top_k = 0 samples the whole vocabulary."""
    from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                        TopPLogitsWarper)

    d = DecodingConfig(temperature=0.7, top_k=top_k, top_p=0.9)
    logits = torch.randn(2, 500, generator=torch.Generator().manual_seed(0)) * 3
    scores = logits
    for w in (TemperatureLogitsWarper(0.7), TopKLogitsWarper(top_k or 500), TopPLogitsWarper(0.9)):
        scores = w(None, scores)
    expected = torch.softmax(scores, dim=-1).numpy()  # transformers' own warpers over the full vocabulary
    fast = TransformersGenerator.__new__(TransformersGenerator)
    fast.decoding = d
    nodes = torch.arange(80000) % 2
    uniforms = torch.rand(80000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    draws = fast._draw(logits, nodes, uniforms).numpy()
    for node in (0, 1):
        freq = np.bincount(draws[nodes.numpy() == node], minlength=500) / 40000
        assert set(np.flatnonzero(freq)) <= set(np.flatnonzero(expected[node]))
        np.testing.assert_allclose(freq, expected[node], atol=0.01)
    # one uniform, one token: the draw is a function of the row's uniform and its node only
    assert torch.equal(fast._draw(logits, nodes[:6], uniforms[:6]), torch.from_numpy(draws[:6]))


def test_vllm_generator_glue_with_documented_output_objects(monkeypatch, smollm2):
    """vLLM needs a GPU; here its documented objects (SamplingParams, RequestOutput.outputs[i].text/token_ids/
    logprobs[{id: Logprob}]) are stand-ins, to check the requests built and how outputs become records."""
    _, tok = smollm2
    calls = []

    class SamplingParams:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    def completion(text_ids, lps, stop_id):
        ids = list(text_ids) + [stop_id]  # vLLM keeps the token that hit the stop string in token_ids
        return types.SimpleNamespace(text=tok.decode(text_ids), token_ids=ids, logprobs=[
            {t: types.SimpleNamespace(logprob=lp)} for t, lp in zip(ids, lps + [-0.01])])

    answer = tok("Au is gold", add_special_tokens=False)["input_ids"]
    newline = tok.encode("\n", add_special_tokens=False)[0]

    class LLM:
        def generate(self, prompts, params, use_tqdm=True):
            calls.append((prompts, params))
            outs = []
            for p, sp in zip(prompts, params):
                outs.append(types.SimpleNamespace(outputs=[completion(answer, [-0.5] * len(answer), newline)
                                                           for _ in range(sp.n)]))
            return outs

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=SamplingParams, LLM=LLM))
    from elical.generation.backends import VLLMGenerator

    gen = make_generator("vllm", "unused", tok, DecodingConfig(n_samples=3, max_new_tokens=9), llm=LLM())
    assert isinstance(gen, VLLMGenerator)
    (g,) = gen.generate(["p"], ["q1"], seed=0)
    prompts, params = calls[0]
    assert prompts == ["p", "p"]  # one call: greedy and sampled requests together
    assert (params[0].temperature, params[0].logprobs, params[0].n) == (0.0, 1, 1)
    assert (params[1].n, params[1].logprobs, params[1].top_k, params[1].max_tokens) == (3, 0, 50, 9)
    assert params[1].stop == ["\n"] and isinstance(params[1].seed, int)
    assert g.greedy_response == "Au is gold" and g.greedy_tokens == tok.convert_ids_to_tokens(answer)
    assert g.greedy_logprobs == [-0.5] * len(answer)  # the stop token's log-prob is not part of the answer
    assert g.sampling_num_tokens == [len(answer)] * 3
    np.testing.assert_allclose(g.sampling_cumulative_logprobs, [-0.5 * len(answer)] * 3)


def test_build_with_the_openai_backend_gives_the_transformers_backends_greedy_records(server_url, tmp_path):
    """`elical build --backend openai` against a real `elical serve` process and `elical build` in process: the
    same greedy answers, judgements and log-probs; records name their decoder; hidden states from the local model
    (a separate pass) equal those of the transformers decoder's prefill."""
    from elical.cli import main
    from elical.generation.features import load_features
    from elical.records import read_records

    args = ["build", "--datasets", "facts", "--split", "test", "--limit", "5", "--n-samples", "2",
            "--max-new-tokens", "8", "--batch-size", "4", "--quiet"]
    assert main([*args, "--output", str(tmp_path / "local")]) == 0
    assert main([*args, "--backend", "openai", "--base-url", server_url, "--output", str(tmp_path / "remote")]) == 0
    local = read_records(tmp_path / "local" / "facts" / "test.jsonl")
    remote = read_records(tmp_path / "remote" / "facts" / "test.jsonl")
    assert [r["id"] for r in remote] == [r["id"] for r in local] and len(local) == 5
    for a, b in zip(remote, local):
        assert (a["greedy_response"], a["greedy_correctness"]) == (b["greedy_response"], b["greedy_correctness"])
        np.testing.assert_allclose(a["greedy_logprobs"], b["greedy_logprobs"], atol=2e-3)
        assert len(a["sampling_response"]) == 2 == len(a["consistency_judgement"])
    assert remote[0]["meta"]["decoding"]["generator"] == "OpenAIGenerator"
    assert local[0]["meta"]["decoding"]["generator"] == "TransformersGenerator"
    ids_r, X_r, _ = load_features(tmp_path / "remote" / "facts" / "test.features.safetensors")
    ids_l, X_l, _ = load_features(tmp_path / "local" / "facts" / "test.features.safetensors")
    assert ids_r == ids_l
    np.testing.assert_allclose(X_r, X_l, atol=1e-4, rtol=0)
    # a build of one decoder is not resumed with another
    assert main([*args, "--backend", "openai", "--base-url", server_url, "--output", str(tmp_path / "local")]) == 2


def test_run_with_the_openai_backend_takes_features_from_the_local_model(server_url, tmp_path):
    """`elical run --backend openai`: answers from the server, hidden states from a separate local pass (the
    endpoint gives none), equal to the transformers decoder's prefill states of the same prompts."""
    from dataclasses import replace

    from elical.generation.features import load_features
    from elical.jobs.run import PRESETS, run
    from elical.records import read_records

    cfg = replace(PRESETS["smoke"], n_train=8, n_eval=10, k_values=(4,), n_samples=2, max_new_tokens=6,
                  model_estimators=False, n_bootstrap=20)
    run(replace(cfg, backend="openai", base_url=server_url), tmp_path / "remote", progress=False)
    run(cfg, tmp_path / "local", progress=False)
    remote = read_records(tmp_path / "remote" / "records" / "annotations.jsonl")
    local = read_records(tmp_path / "local" / "records" / "annotations.jsonl")
    assert [r["greedy_response"] for r in remote] == [r["greedy_response"] for r in local]
    assert {r["meta"]["decoding"]["generator"] for r in remote} == {"OpenAIGenerator"}
    ids_r, X_r, _ = load_features(tmp_path / "remote" / "features" / "hidden_states.safetensors")
    ids_l, X_l, _ = load_features(tmp_path / "local" / "features" / "hidden_states.safetensors")
    assert ids_r == ids_l == [r["id"] for r in local]
    np.testing.assert_allclose(X_r, X_l, atol=1e-4, rtol=0)
