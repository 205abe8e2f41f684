"""`elical serve --confidence-head`: confidence before answering over the OpenAI API, with the real SmolLM2 and a
probe head fitted here on its real hidden states. The server runs as the real command in its own process; the
no-generation and no-head cases run the same service in a thread."""

import json
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from elical.generation.base import build_prompt
from elical.generation.features import extract_hidden_states
from elical.heads.confidence import ConfidenceModel, write_model_json
from elical.heads.probe import ProbeHead

QUESTIONS = ["What is the capital of France?", "What is the chemical symbol of gold?",
             "In which country is the city of Tampere?", "What is the calling code of Chile?",
             "Who wrote Hamlet?", "What is the atomic number of carbon?"]
NEW = ["What is the capital of Peru?", "What is the chemical symbol of iron?", "Which state is Dallas in?",
       "What is the calling code of Fiji?"]
LONG = "Tell me about the history of the Roman Empire in detail."  # a long first line: generation takes a while
ABSTAIN = "Not sure; ask someone else."
RAW = [f"Q: {q}\nA:" for q in NEW[:2]]  # completions prompts: each one is scored as the question


@pytest.fixture(scope="module")
def head_dir(smollm2, tmp_path_factory):
    model, tok = smollm2
    X = extract_hidden_states(model, tok, [build_prompt(tok, q) for q in QUESTIONS])
    head = ProbeHead(max_epochs=5, random_state=0).fit(X, np.array([0.9, 0.8, 0.2, 0.1, 0.7, 0.6]))
    d = tmp_path_factory.mktemp("heads") / "eli_only"
    head.save(d)
    write_model_json(d, "smollm2-135m-instruct")
    return d


@pytest.fixture(scope="module")
def expected(head_dir, smollm2):
    """Confidences computed in this process (the server computes its own in another)."""
    cm = ConfidenceModel.load(head_dir, model=smollm2)
    return dict(zip(NEW + [LONG] + RAW, cm.predict(NEW + [LONG] + RAW)))


def _post(url, body, timeout=120):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read()), time.perf_counter() - start


def _chat(url, question, **extra):
    return _post(f"{url}/chat/completions", {"model": "m", "messages": [{"role": "user", "content": question}],
                                             "temperature": 0, "max_tokens": 40, **extra})


@pytest.fixture(scope="module")
def server(head_dir, expected, start_server):
    """`python -m elical serve --confidence-head ... --abstain-below T` with T between two questions' confidences."""
    ranked = sorted(NEW, key=expected.get)
    low, high = ranked[0], ranked[-1]
    assert expected[high] - expected[low] > 0.05
    threshold = (expected[low] + expected[high]) / 2
    served = start_server("--served-model-name", "m", "--confidence-head", str(head_dir),
                          "--abstain-below", str(threshold), "--abstention-text", ABSTAIN)
    return served.url, low, high, threshold


def test_served_confidence_answers_above_and_abstains_below_the_threshold(server, expected):
    url, low, high, threshold = server
    answered, _ = _chat(url, high)
    choice = answered["choices"][0]
    assert choice["elical"]["abstained"] is False and choice["elical"]["method"] == "eli_only"
    assert 0.0 <= choice["elical"]["confidence"] <= 1.0 and choice["elical"]["threshold"] == threshold
    assert abs(choice["elical"]["confidence"] - expected[high]) < 1e-5
    assert choice["message"]["content"].strip() and choice["message"]["content"] != ABSTAIN
    assert answered["usage"]["completion_tokens"] > 0

    abstained, _ = _chat(url, low)
    choice = abstained["choices"][0]
    assert choice["elical"]["abstained"] is True and abs(choice["elical"]["confidence"] - expected[low]) < 1e-5
    assert choice["message"]["content"] == ABSTAIN and choice["finish_reason"] == "stop"
    assert abstained["usage"]["completion_tokens"] == 0

    # completions: each prompt is a question of its own; only the confident one is generated
    raw_low, raw_high = sorted(RAW, key=expected.get)
    mid = (expected[raw_low] + expected[raw_high]) / 2
    mixed, _ = _post(f"{url}/completions", {"model": "m", "prompt": [raw_low, raw_high], "temperature": 0,
                                            "max_tokens": 8, "elical": {"abstain_below": mid}})
    first, second = mixed["choices"]
    assert (first["text"], first["elical"]["abstained"], second["elical"]["abstained"]) == (ABSTAIN, True, False)
    assert second["text"].strip() and second["text"] != ABSTAIN and mixed["usage"]["completion_tokens"] > 0
    assert abs(second["elical"]["confidence"] - expected[raw_high]) < 1e-5 and first["elical"]["threshold"] == mid

    # a request may set its own threshold: 0 answers everything
    forced, _ = _chat(url, low, elical={"abstain_below": 0})
    assert forced["choices"][0]["elical"]["abstained"] is False and forced["usage"]["completion_tokens"] > 0


def test_abstaining_is_faster_than_answering(server):
    url = server[0]
    answer_s, abstain_s = [], []
    for _ in range(3):  # interleaved, best of three: robust to a busy machine
        reply, seconds = _chat(url, LONG, max_tokens=16, elical={"abstain_below": 0.0})
        assert reply["usage"]["completion_tokens"] >= 8
        answer_s.append(seconds)
        reply, seconds = _chat(url, LONG, max_tokens=16, elical={"abstain_below": 1.0})
        assert reply["choices"][0]["message"]["content"] == ABSTAIN
        abstain_s.append(seconds)
    assert min(abstain_s) < min(answer_s), (abstain_s, answer_s)


def _thread_server(service):
    from elical.generation.server_app import make_app, start_in_thread

    return start_in_thread(make_app(service))


def test_abstention_generates_nothing_and_no_head_means_no_elical_field(head_dir, smollm2, expected, monkeypatch):
    from elical.generation import serve

    model, tok = smollm2
    cm = ConfidenceModel.load(head_dir, model=smollm2)
    srv, url = _thread_server(serve.CompletionService(model, tok, "m", confidence=cm, abstain_below=1.0))
    from elical.generation import batching

    real = batching.rows_generator
    try:
        monkeypatch.setattr(batching, "rows_generator", lambda *a, **k: pytest.fail("an abstention generated"))
        reply, _ = _post(f"{url}/completions", {"prompt": NEW[:2], "n": 2, "logprobs": 1})
        assert [c["text"] for c in reply["choices"]] == [serve.ABSTENTION_TEXT] * 4
        assert [c["elical"]["confidence"] for c in reply["choices"]] == pytest.approx(
            [expected[NEW[0]]] * 2 + [expected[NEW[1]]] * 2, abs=1e-6)
        assert reply["choices"][0]["logprobs"]["tokens"] == []
        for body in ({"messages": [{"role": "system", "content": "hi"}]},
                     {"messages": [{"role": "user", "content": "q?"}], "elical": {"abstain_below": 2}}):
            with pytest.raises(urllib.error.HTTPError) as info:
                _post(f"{url}/chat/completions", body)
            assert info.value.code == 400
        monkeypatch.setattr(batching, "rows_generator", real)
        # list content parts (OpenAI's newer message format) give the question too
        parts = {"role": "user", "content": [{"type": "text", "text": NEW[2]}]}
        reply, _ = _post(f"{url}/chat/completions", {"messages": [parts], "max_tokens": 4,
                                                     "elical": {"abstain_below": None}})
        assert reply["choices"][0]["elical"]["confidence"] == pytest.approx(expected[NEW[2]], abs=1e-6)
        assert reply["choices"][0]["elical"]["abstained"] is False
    finally:
        srv.should_exit = True

    srv, url = _thread_server(serve.CompletionService(model, tok, "m"))
    try:
        reply, _ = _chat(url, NEW[0], elical={"abstain_below": 1.0})
        assert "elical" not in reply["choices"][0] and reply["choices"][0]["message"]["content"].strip()
    finally:
        srv.should_exit = True


def test_gate_returns_confidence_and_decision_per_question(head_dir, smollm2, expected):
    cm = ConfidenceModel.load(head_dir, model=smollm2)
    threshold = float(np.median([expected[q] for q in NEW]))
    gates = cm.gate(NEW, threshold)
    assert [g.question for g in gates] == NEW
    # `expected` came from a batch of 7 prompts, this from a batch of 4: another padded width, so fp32 sums in another
    # order on some CPUs (6e-7 seen on one machine; bitwise equal on others); 1e-6, as the server tests above
    assert [g.confidence for g in gates] == pytest.approx([expected[q] for q in NEW], abs=1e-6)
    assert [g.answer for g in gates] == [expected[q] >= threshold for q in NEW]
    assert all(g.answer for g in cm.gate(NEW, 0.0)) and not any(g.answer for g in cm.gate(NEW, 1.0))
    for bad in (-0.1, 1.5, True):
        with pytest.raises(ValueError, match="threshold"):
            cm.gate(NEW, bad)


def test_a_remote_run_against_an_abstaining_server_fails_before_writing(head_dir, smollm2, tmp_path):
    """Issue 25 (6): an abstention is no answer of the model: the endpoint backend raises, the records file gets
    nothing, and the LLM judge's client raises too."""
    from elical.generation import serve
    from elical.generation.backends import EndpointError, OpenAIGenerator
    from elical.generation.base import DecodingConfig
    from elical.jobs.annotate import Annotator, annotate
    from elical.judges.llm import OpenAICompletion
    from elical.records import read_records

    model, tok = smollm2
    cm = ConfidenceModel.load(head_dir, model=smollm2)
    srv, url = _thread_server(serve.CompletionService(model, tok, "m", confidence=cm, abstain_below=1.0))
    try:
        gen = OpenAIGenerator(url, "m", tok, DecodingConfig(n_samples=2, max_new_tokens=6), max_retries=0)
        questions = [{"id": f"q{i}", "question": q, "answer": ["x"]} for i, q in enumerate(NEW[:2])]
        path = tmp_path / "records.jsonl"
        with pytest.raises(EndpointError, match="abstained"):
            annotate(questions, gen, Annotator.default(), path, seed=0, meta={}, progress=False)
        assert read_records(path) == []
        with pytest.raises(EndpointError, match="abstained"):
            OpenAICompletion(url, "m", max_retries=0)(["Are these the same? Answer yes or no."])
    finally:
        srv.should_exit = True


def test_stream_sends_the_confidence_in_the_first_chunk(server, expected):
    from openai import OpenAI

    url, low, high, threshold = server
    client = OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
    chunks = iter(client.chat.completions.create(model="m", messages=[{"role": "user", "content": high}],
                                                 temperature=0, max_tokens=8, stream=True))
    first = next(chunks)  # before any token of the answer
    gate = first.choices[0].model_extra["elical"]
    assert gate["abstained"] is False and abs(gate["confidence"] - expected[high]) < 1e-5
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).strip()
