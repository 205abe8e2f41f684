"""End to end with the real SmolLM2: the smoke preset on facts (and again at another batch size), records that do not
depend on the batch, a run on 30 nq questions, bad input, resume."""
import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from elical.cli import main
from elical.generation.features import load_features
from elical.jobs.run import PRESETS, run
from elical.records import read_records
from elical.evaluation.metrics import auroc


@pytest.mark.slow  # loads and runs the real model without the smollm2 fixture
def test_smoke_run_on_facts(tmp_path):
    out = tmp_path / "run"
    cfg = PRESETS["smoke"]
    res = run(cfg, out, progress=False)
    recs = read_records(out / "records" / "annotations.jsonl")
    assert len(recs) == cfg.n_train + cfg.n_eval
    assert len({r["id"] for r in recs}) == len(recs)
    for r in recs:
        assert len(r["sampling_response"]) == cfg.n_samples == len(r["consistency_judgement"])
        assert r["greedy_correctness"] in (0, 1) and r["dataset"] == "facts"
        assert len(r["greedy_logprobs"]) == len(r["greedy_tokens"])
    # the model is right on some questions and wrong on others
    acc = np.mean([r["greedy_correctness"] for r in recs])
    assert 0.0 < acc < 1.0
    table = res["results"]["all"]
    for method in ["N-Prob", "Consis-Lex", "Consis-Sem", "Eli-Only", "Cal-Only(8)", "EliCal(8)", "EliCal(24)"]:
        m = table[method]
        assert 0 <= m["ece"] <= 1 and 0 <= m["alignment"] <= 1 and 0 <= m["brier"] <= 1
    # results.json agrees with an independent AUROC on the saved predictions
    saved = json.loads((out / "results.json").read_text())
    assert saved["config"]["preset"] == "smoke" and saved["versions"]["torch"]
    # issue 25 (12): greedy answers that used the whole token budget are counted (the smoke preset cuts most)
    cut = saved["sizes"]["greedy_at_max_new_tokens"]
    assert cut["max_new_tokens"] == cfg.max_new_tokens == 12
    assert cut["eval"] + cut["train_pool"] == sum(len(r["greedy_tokens"]) == 12 for r in recs) > len(recs) // 2
    preds = [json.loads(l) for l in (out / "predictions.jsonl").read_text().splitlines()]
    ns = [p for p in preds if p["method"] == "Consis-Sem"]
    y = np.array([p["greedy_correctness"] for p in ns])
    c = np.array([p["confidence"] for p in ns])
    assert all(0 <= p["confidence"] <= 1 for p in preds)
    if 0 < y.mean() < 1:
        assert saved["results"]["all"]["Consis-Sem"]["auroc"] == pytest.approx(auroc(y, c))
    # records say which decoder made them (and not the batch size: it changes no answer)
    assert recs[0]["meta"]["decoding"] == {"generator": "TransformersGenerator", "n_samples": cfg.n_samples,
                                           "temperature": 1.0, "top_p": 0.95, "top_k": 50,
                                           "max_new_tokens": cfg.max_new_tokens}
    # --resume on a finished run recomputes nothing new
    first = json.loads((out / "results.json").read_text())["results"]
    run(cfg, out, resume=True, progress=False)
    assert read_records(out / "records" / "annotations.jsonl") == recs
    assert json.loads((out / "results.json").read_text())["results"] == first
    # a second real run with another batch size: the same records, and the same prefill hidden states
    other = run(replace(cfg, batch_size=5, model_estimators=False), tmp_path / "bs5", progress=False)
    assert_same_records(read_records(tmp_path / "bs5" / "records" / "annotations.jsonl"), recs)
    ids, feats, _ = load_features(out / "features" / "hidden_states.safetensors")
    ids5, feats5, _ = load_features(tmp_path / "bs5" / "features" / "hidden_states.safetensors")
    assert ids == ids5 == [r["id"] for r in recs]
    np.testing.assert_allclose(feats5, feats, atol=1e-4, rtol=0)
    assert other["results"]["all"]["Consis-Sem"] == table["Consis-Sem"]


LOGPROB_FIELDS = ("greedy_logprobs", "greedy_cumulative_logprobs", "sampling_cumulative_logprobs")


def assert_same_records(got: list[dict], expected: list[dict]) -> None:
    """Record by record (matched by id): every field equal (texts, tokens, judgements, meta), log-probs within
    1e-4."""
    by_id = {r["id"]: r for r in got}
    assert sorted(by_id) == sorted(r["id"] for r in expected)
    for e in expected:
        g = by_id[e["id"]]
        assert {k: v for k, v in g.items() if k not in LOGPROB_FIELDS} == \
            {k: v for k, v in e.items() if k not in LOGPROB_FIELDS}, e["id"]
        for k in LOGPROB_FIELDS:
            np.testing.assert_allclose(np.array(g[k], dtype=float), np.array(e[k], dtype=float), atol=1e-4)


def test_records_do_not_depend_on_the_batch_size_or_on_resuming(tmp_path, smollm2):
    """8 questions, N = 3, through elical run's generation path (annotate with the transformers decoder) at batch
    sizes 1, 4 and 16, and a run resumed after a partial file: the same records."""
    from elical.data.facts import load_facts
    from elical.generation.base import DecodingConfig
    from elical.generation.prefix_sharing import TransformersGenerator
    from elical.jobs.annotate import Annotator, annotate

    model, tok = smollm2
    questions = load_facts()[:8]
    annotator = Annotator.default()
    runs = {}
    for bs in (1, 4, 16):
        gen = TransformersGenerator(model, tok, DecodingConfig(n_samples=3, max_new_tokens=8, batch_size=bs))
        runs[bs] = annotate(questions, gen, annotator, tmp_path / f"bs{bs}.jsonl", seed=7, meta={"model": "m"},
                            progress=False)
    assert_same_records(runs[1], runs[16])
    assert_same_records(runs[4], runs[16])
    assert len({s for r in runs[16] for s in r["sampling_response"]}) > 8  # the samples do vary
    # resume: three scattered questions already done; the five others are generated in batches of their own
    partial = tmp_path / "resumed.jsonl"
    partial.write_text("".join(json.dumps(runs[4][i]) + "\n" for i in (0, 3, 6)))
    gen = TransformersGenerator(model, tok, DecodingConfig(n_samples=3, max_new_tokens=8, batch_size=4))
    fresh = {}
    resumed = annotate(questions, gen, annotator, partial, seed=7, meta={"model": "m"}, progress=False,
                       hidden_layers=(-1,), hidden_states=fresh)
    assert_same_records(resumed, runs[16])
    assert sorted(fresh) == sorted(questions[i]["id"] for i in (1, 2, 4, 5, 7))  # only the generated ones


def test_run_on_30_nq_questions(tmp_path, shared_data):
    cfg = replace(PRESETS["smoke"], datasets=("nq",), data_dir=str(shared_data / "honestybench-qa"),
                  n_train=18, n_eval=12, k_values=(8,))
    res = run(cfg, tmp_path / "nq", progress=False)
    recs = read_records(tmp_path / "nq" / "records" / "annotations.jsonl")
    assert len(recs) == 30 and {r["dataset"] for r in recs} == {"nq"}
    assert res["sizes"] == {**res["sizes"], "train_pool": 18, "eval": 12}
    assert {"Eli-Only", "Cal-Only(8)", "EliCal(8)"} <= set(res["results"]["all"])


def test_bad_input_exit_code_2_and_nothing_overwritten(tmp_path, capsys):
    data = tmp_path / "data" / "mine"
    data.mkdir(parents=True)
    (data / "test.jsonl").write_text('{"question": "ok?", "answer": ["x"]}\n{"question": "q", "answer": "x"}\n')
    rc = main(["run", "--data-dir", str(tmp_path / "data"), "--datasets", "mine", "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "test.jsonl, line 2" in err and "'answer'" in err
    assert not (tmp_path / "o").exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "results.json").write_text("keep me")
    rc = main(["run", "--preset", "smoke", "--output", str(existing)])
    assert rc == 2 and "--resume" in capsys.readouterr().err
    assert (existing / "results.json").read_text() == "keep me"


def test_console_script_help():
    out = subprocess.run([sys.executable, "-m", "elical.cli", "run", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--preset" in out.stdout


def test_run_backend_options_are_checked_before_anything_is_written(tmp_path, capsys, monkeypatch):
    out = tmp_path / "o"
    assert main(["run", "--preset", "smoke", "--backend", "openai", "--output", str(out)]) == 2
    assert "--base-url" in capsys.readouterr().err and not out.exists()
    monkeypatch.delenv("ELICAL_TEST_KEY", raising=False)
    assert main(["run", "--preset", "smoke", "--backend", "openai", "--base-url", "http://127.0.0.1:1/v1",
                 "--api-key-env", "ELICAL_TEST_KEY", "--output", str(out)]) == 2
    assert "ELICAL_TEST_KEY" in capsys.readouterr().err and not out.exists()


def test_a_judge_that_fails_loses_no_answer_and_resume_does_not_generate_again(tmp_path, smollm2):
    """Issue 25 (7): the judge fails at the 3rd question of a batch of 4: the answers of the batch are kept and the
    two judged records written; the resumed call judges the kept answers without calling the generator, and gives
    the records of an uninterrupted call."""
    from elical.data.facts import load_facts
    from elical.generation.base import DecodingConfig
    from elical.generation.prefix_sharing import TransformersGenerator
    from elical.jobs.annotate import Annotator, annotate
    from elical.records import read_records

    model, tok = smollm2
    questions = load_facts()[:4]
    gen = TransformersGenerator(model, tok, DecodingConfig(n_samples=2, max_new_tokens=6, batch_size=4))
    good = Annotator.default()
    whole = annotate(questions, gen, good, tmp_path / "whole.jsonl", seed=3, meta={}, progress=False)

    calls = {"n": 0}

    def failing(responses, aliases, question=None):
        calls["n"] += 1
        if calls["n"] == 5:  # 2 calls per question (greedy, samples): the 3rd question's first call
            raise RuntimeError("judge server timed out")
        return good.correctness(responses, aliases, question=question)

    path = tmp_path / "records.jsonl"
    with pytest.raises(RuntimeError, match="timed out"):
        annotate(questions, gen, Annotator(failing, good.lexical, good.semantic), path, seed=3, meta={},
                 progress=False)
    assert [r["id"] for r in read_records(path)] == [q["id"] for q in questions[:2]]
    assert (tmp_path / "records.generations.jsonl").exists()

    def no_generation(*a, **k):
        raise AssertionError("the kept answers were generated again")

    gen.generate = no_generation  # same decoder (its meta matches), but it must not run
    resumed = annotate(questions, gen, good, path, seed=3, meta={}, progress=False)
    assert_same_records(resumed, whole)
    assert not (tmp_path / "records.generations.jsonl").exists()


@pytest.mark.slow
def test_k_above_the_pool_warns_and_records_what_ran(tmp_path, capsys):
    """Issue 25 (10): --k 1000 with a pool of 12 ran k = 12 (and 4): the run says so and results.json records it,
    while config.json keeps what was asked."""
    out = tmp_path / "run"
    assert main(["run", "--preset", "smoke", "--n-train", "12", "--n-eval", "10", "--n-samples", "1", "--k", "4,1000",
                 "--no-model-estimators", "--output", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "more labels than the training pool has (12 questions)" in err and "k = 4, 12" in err
    res = json.loads((out / "results.json").read_text())
    assert res["k_values_run"] == [4, 12] and res["config"]["k_values"] == [4, 1000]
    assert "EliCal(12)" in res["results"]["all"] and "EliCal(1000)" not in res["results"]["all"]
