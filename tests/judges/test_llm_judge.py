"""Tests for elical.judges.llm: answer parsing and batching with a deterministic fake backend, an
OpenAI-compatible server on localhost, and the real SmolLM2 through TransformersCompletion."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest

from elical.judges import make_correctness_judge, make_equivalence_judge
from elical.judges.llm import (
    CORRECTNESS_PROMPT,
    EQUIVALENCE_PROMPT,
    LLMJudge,
    OpenAICompletion,
    TransformersCompletion,
    parse_yes_no,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Yes", 1), ("yes.", 1), ("**YES**", 1), (" Yes, they are the same.", 1), ("True", 1), ("Same", 1),
        ("No", 0), ("no, the answer", 0), ("NO.", 0), ("Not the same.", 0), ("Different answers", 0),
        ("false", 0), ("I think yes", 1), ("Answer: no", 0), ("The answer is yes.", 1),
        ("", None), ("   ", None), ("Maybe", None), ("Answer 1", None), ("nobody knows", None), ("yesterday", None),
    ],
)  # fmt: skip
def test_parse_yes_no(text, expected):
    assert parse_yes_no(text) == expected


class FakeBackend:
    """Answers from a lookup on the pair shown in the prompt; records every call."""

    def __init__(self, replies):
        self.replies, self.calls = replies, []

    def __call__(self, prompts):
        self.calls.append(list(prompts))
        out = []
        for p in prompts:
            line = next(ln for ln in p.splitlines() if ln.startswith(("Answer 2:", "Proposed answer:")))
            out.append(self.replies.get(line.split(": ", 1)[1], "hmm"))
        return out


def test_equivalence_batched_cached_and_parsed():
    backend = FakeBackend({"Lyon": "No.", "Paris, France": "Yes, the same city.", "1921": "I cannot tell"})
    judge = LLMJudge(backend, batch_size=2)
    pairs = [("Paris", "Lyon"), ("Paris", "Paris, France"), ("1920", "1921"), ("Paris", "paris!"), ("", "Lyon"),
             ("?!", "..."), ("Paris", "Lyon")]
    out = judge.judge_many(pairs, ["Capital of France?"] * 7)
    np.testing.assert_array_equal(out, [0, 1, 0, 1, 0, 0, 0])
    assert [len(c) for c in backend.calls] == [2, 1]  # 3 distinct prompts in batches of 2; rules decide the rest
    assert judge.n_unparsed_ == 1
    assert backend.calls[0][0] == EQUIVALENCE_PROMPT.format(question="Capital of France?", a="Paris", b="Lyon")
    judge.judge("Paris", ["Lyon", "Paris, France"], question="Capital of France?")
    assert len(backend.calls) == 2  # cached by prompt
    assert judge.n_unparsed_ == 1
    lenient = LLMJudge(backend, unparsed_value=1)
    assert lenient.judge_many([("1920", "1921")]).tolist() == [1]
    assert lenient.n_unparsed_ == 1
    assert backend.calls[-1][0].startswith("We are evaluating answers to a question.\nAnswer 1: 1920\n")


def test_correctness_prompt_and_registry():
    backend = FakeBackend({"Paris": "yes", "Lyon": "no"})
    judge = make_correctness_judge("llm", complete=backend)
    out = judge(["Paris", "Lyon", "..."], ["Paris", "", "City of Paris"], question="Capital of France?")
    np.testing.assert_array_equal(out, [1, 0, 0])
    assert backend.calls[0][0] == CORRECTNESS_PROMPT.format(
        question="Capital of France?", aliases="Paris | City of Paris", response="Paris")
    assert judge.judge_many([("Paris", ["", "..."])]).tolist() == [0]  # no usable alias: nothing to match
    eq = make_equivalence_judge("llm", complete=backend)
    assert eq.mode == "equivalence" and eq.judge("Paris", []).shape == (0,)


def test_bad_input_and_bad_backend():
    judge = LLMJudge(lambda ps: ["yes"] * len(ps))
    with pytest.raises(TypeError, match=r"pairs\[1\]\[0\]"):
        judge.judge_many([("a cat", "a dog"), (None, "x")])
    with pytest.raises(ValueError, match="questions"):
        judge.judge_many([("a cat", "a dog")], ["q1", "q2"])
    with pytest.raises(ValueError, match="2 completions for 1 prompts"):
        LLMJudge(lambda ps: ["yes", "no"]).judge_many([("cat", "dog")])
    with pytest.raises(ValueError, match="mode"):
        LLMJudge(lambda ps: ps, mode="grading")
    with pytest.raises(TypeError, match="callable"):
        LLMJudge(42)


def test_backend_kinds(smollm2):
    from elical.generation.prefix_sharing import TransformersGenerator

    class Server:  # like elical.generation.backends.OpenAIGenerator: an object with .complete(prompts)
        def complete(self, prompts):
            return ["Yes"] * len(prompts)

    assert LLMJudge(Server()).judge_many([("cat", "dog")]).tolist() == [1]
    wrapped = LLMJudge(TransformersGenerator(*smollm2)).complete
    assert isinstance(wrapped, TransformersCompletion)


class _ChatHandler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((body, self.headers.get("Authorization")))
        prompt = body["messages"][0]["content"]
        reply = "Yes." if "Answer 2: Paris, France" in prompt else "No."
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_openai_compatible_server():
    server = HTTPServer(("127.0.0.1", 0), _ChatHandler)
    server.requests = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/v1"
        judge = LLMJudge(OpenAICompletion(url, model="judge-model", api_key="sk-test", concurrency=2))
        out = judge.judge_many([("Paris", "Paris, France"), ("Paris", "Lyon")], ["Capital?", "Capital?"])
        np.testing.assert_array_equal(out, [1, 0])
        body, auth = server.requests[0]
        assert body["model"] == "judge-model" and body["temperature"] == 0 and auth == "Bearer sk-test"
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(RuntimeError, match="127.0.0.1"):
        OpenAICompletion(url, model="m", timeout=2, max_retries=0)(["hello"])  # the server is gone


def test_smollm2_adapter_is_the_models_greedy_answer(smollm2):
    """The adapter's completion equals an independent greedy decode (transformers' generate) of the same
    chat-templated prompt, and the judgement is the parse of it."""
    import torch

    from elical.generation.base import build_prompt

    model, tok = smollm2
    complete = TransformersCompletion(model, tok, max_new_tokens=4)
    judge = LLMJudge(complete, batch_size=3)
    pairs = [("Paris", "The capital of France is Paris."), ("Paris", "Lyon"), ("Au", "gold")]
    questions = ["What is the capital of France?"] * 2 + ["What is the chemical symbol of gold?"]
    out = judge.judge_many(pairs, questions)
    for (a, b), q, verdict in zip(pairs, questions, out):
        prompt = judge.prompt(a, b, q)
        ids = tok(build_prompt(tok, prompt, instruction="{question}"), return_tensors="pt",
                  add_special_tokens=False)["input_ids"]
        with torch.inference_mode():
            gen = model.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=tok.eos_token_id)
        expected = tok.decode(gen[0, ids.shape[1]:], skip_special_tokens=True).split("\n")[0].strip()
        assert judge.raw_[prompt] == expected
        parsed = parse_yes_no(expected)
        assert verdict == (0 if parsed is None else parsed)
    # SmolLM2-135M answers "No, ..." to all three: a 135M model is no judge (docs/benchmarks.md)
    assert judge.n_unparsed_ == 0


def test_a_long_llm_judge_pass_shows_a_count(monkeypatch):
    """Issue 25 (11): semantic clustering with the LLM judge showed nothing for minutes; it shows prompts done."""
    import io
    import sys

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    import time

    def slow_yes(prompts):  # a batch takes a while, as a server's does: tqdm redraws at most every 0.1 s
        time.sleep(0.15)
        return ["Yes"] * len(prompts)

    judge = LLMJudge(slow_yes, batch_size=8)
    out = judge.judge_many([(f"answer {i}", f"other {i}") for i in range(40)])
    assert out.tolist() == [1] * 40
    assert "llm judge (equivalence)" in screen.getvalue() and "40/40" in screen.getvalue()
    assert "16/40" in screen.getvalue()  # counted batch by batch, not one bar step at the end


def test_verbal_and_p_true_bars_count_questions(capsys):
    from elical.estimators.model_based import _batches

    parts = list(_batches(32, 32, True, "verbal"))  # the smoke preset: 32 questions, batch 32
    assert len(parts) == 8 and parts[0] == slice(0, 4) and parts[-1] == slice(28, 32)
    err = capsys.readouterr().err
    assert "verbal" in err and "32/32" in err


@pytest.mark.slow  # the correctness judge loads its embedding model
def test_elical_judge_sends_the_llm_judge_to_a_server(tmp_path):
    """`elical judge --equivalence-judge llm --judge-base-url URL`: every prompt goes to the server (with the
    model name and the client options given), and the verdicts are the server's."""
    from pathlib import Path

    from elical.cli import main
    from elical.records import read_records

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "smoke_run"
    server = HTTPServer(("127.0.0.1", 0), _ChatHandler)
    server.requests = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/v1"
        assert main(["judge", str(fixture), "--equivalence-judge", "llm", "--judge-base-url", url,
                     "--judge-model", "judge-model", "--concurrency", "2", "--max-retries", "0",
                     "--output", str(tmp_path / "out"), "--quiet"]) == 0
    finally:
        server.shutdown()
        server.server_close()
    records = read_records(tmp_path / "out" / "records" / "annotations.jsonl")
    assert len(records) == len(read_records(fixture / "records" / "annotations.jsonl"))
    assert server.requests and {body["model"] for body, _ in server.requests} == {"judge-model"}
    assert records[0]["meta"]["judges"]["equivalence"] == "llm"
    # the server says "No." to every pair it is asked about; equal answers never reach it (rule: 1)
    for r in records:
        for s, v in zip(r["sampling_response"], r["consistency_judgement"]):
            same = s.strip().lower().rstrip(".") == r["greedy_response"].strip().lower().rstrip(".")
            assert v == 1 or not same
