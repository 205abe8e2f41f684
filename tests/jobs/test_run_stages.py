"""The run as declared stages (elical.jobs.pipeline, elical.jobs.run_stages) and the one resume rule."""

import json
import shutil
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np
import pytest

from elical.jobs.pipeline import MANIFEST, RunState, Stage, resume_stage, run_stages

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "smoke_run"


def test_resume_stage_reuses_exactly_when_inputs_are_unchanged(tmp_path):
    store, calls = {}, []

    def stage(inputs, legacy=False):
        return resume_stage(tmp_path, "s", inputs, load=lambda: store.get("out"), legacy=legacy,
                            compute=lambda: calls.append(1) or len(calls), save=lambda out: store.update(out=out))

    assert stage({"a": [1, 2]}) == 1
    assert stage({"a": [1, 2]}) == 1 and len(calls) == 1  # unchanged inputs: loaded, not computed
    assert stage({"a": [1, 3]}) == 2  # one input changed: computed again
    assert json.loads((tmp_path / MANIFEST).read_text())["s"]
    store.clear()
    assert stage({"a": [1, 3]}) == 3  # the recorded output is gone: computed again
    (tmp_path / MANIFEST).unlink()
    assert stage({"a": [9]}, legacy=True) == 3  # a directory from before stages.json: its output is checked, kept
    assert stage({"a": [9]}) == 3 and len(calls) == 3


def test_run_stages_checks_declarations_and_skips():
    def first(s):
        return {"x": 2}

    state = run_stages([Stage("one", first, writes=("x",), timing="one_s", all_ranks=True),
                        Stage("two", lambda s: {"y": s.x + 1}, reads=("x",), writes=("y",), all_ranks=True),
                        Stage("off", lambda s: {"z": 1}, writes=("z",), when=lambda s: False),
                        Stage("rank0", lambda s: {"w": 1}, writes=("w",))], RunState(timings={}), is_main=False)
    assert (state.x, state.y, state.z, state.w) == (2, 3, None, None)  # only all-rank stages ran off rank 0
    assert "one_s" in state.timings
    with pytest.raises(RuntimeError, match="reads \\['nothing'\\]"):
        run_stages([Stage("bad", first, reads=("nothing",), writes=("x",))], RunState(timings={}))
    with pytest.raises(RuntimeError, match="declared"):
        run_stages([Stage("liar", first, writes=("y",))], RunState(timings={}))


def test_the_run_stages_read_only_what_earlier_stages_write():
    from elical.jobs.run_stages import RUN_STAGES

    start = {"cfg", "run_dir", "progress", "reps", "model", "tok", "questions", "released", "generator", "annotator",
             "extra_sets", "control_model", "timings", "probe", "versions"}
    known = set(start)
    for stage in RUN_STAGES:
        assert set(stage.reads) <= known, stage.name
        known |= set(stage.writes)


@pytest.mark.slow
def test_resume_skips_estimators_and_features_when_unchanged(tmp_path, monkeypatch):
    from elical.jobs import evaluate
    from elical.jobs.run import RunConfig, run

    out = tmp_path / "run"
    shutil.copytree(RECORDED, out)
    saved = json.loads((RECORDED / "config.json").read_text())
    known = {f.name for f in fields(RunConfig)}
    cfg = RunConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items() if k in known})
    (out / "config.json").write_text(json.dumps(asdict(cfg)))
    first = run(cfg, out, resume=True, progress=False)
    manifest = json.loads((out / MANIFEST).read_text())
    assert {"features", "estimators"} <= set(manifest)
    calls = []
    real = evaluate.record_estimates
    monkeypatch.setattr(evaluate, "record_estimates", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = run(cfg, out, resume=True, progress=False)
    assert calls == [] and json.loads((out / MANIFEST).read_text()) == manifest
    assert again["results"]["all"]["EliCal(8)"]["auroc"] == first["results"]["all"]["EliCal(8)"]["auroc"]
    # a field an estimator declares (SE clusters read the question) changes: the estimators run again
    path = out / "records" / "annotations.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[-1]["question"] = rows[-1]["question"] + " (edited)"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run(cfg, out, resume=True, progress=False)
    assert len(calls) == 2  # test and pool
    assert json.loads((out / MANIFEST).read_text())["estimators"] != manifest["estimators"]
    assert np.isfinite(again["results"]["all"]["N-Prob"]["auroc"])
