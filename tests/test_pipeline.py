"""End to end with the real SmolLM2: the smoke preset on facts, a run on 30 nq questions, bad input, resume."""
import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from elical.cli import main
from elical.jobs.run import PRESETS, run
from elical.records import read_records
from elical.evaluation.metrics import auroc


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
    preds = [json.loads(l) for l in (out / "predictions.jsonl").read_text().splitlines()]
    ns = [p for p in preds if p["method"] == "Consis-Sem"]
    y = np.array([p["greedy_correctness"] for p in ns])
    c = np.array([p["confidence"] for p in ns])
    assert all(0 <= p["confidence"] <= 1 for p in preds)
    if 0 < y.mean() < 1:
        assert saved["results"]["all"]["Consis-Sem"]["auroc"] == pytest.approx(auroc(y, c))
    # the same seed gives the same records; --resume on a finished run recomputes nothing new
    first = json.loads((out / "results.json").read_text())["results"]
    run(cfg, out, resume=True, progress=False)
    assert read_records(out / "records" / "annotations.jsonl") == recs
    assert json.loads((out / "results.json").read_text())["results"] == first


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
