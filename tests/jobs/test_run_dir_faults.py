"""Run directories with faults (issue 25, finding 8): truncated safetensors files and an --output below a file give
a clear error naming the file, exit code 2, and leave what exists untouched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from elical.cli import main
from elical.records import InputError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "smoke_run"


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def test_truncated_hidden_states_name_the_file(tmp_path):
    from elical.generation.features import load_features

    src = tmp_path / "hidden_states.safetensors"
    shutil.copy(FIXTURE / "features" / "hidden_states.safetensors", src)
    ids, X, _ = load_features(src)
    assert len(ids) == X.shape[0] > 0  # the intact copy reads
    _truncate(src)
    with pytest.raises(InputError, match=r"hidden_states\.safetensors.*not a complete safetensors file"):
        load_features(src)


@pytest.fixture()
def probe_dir(tmp_path):
    from elical.heads.confidence import write_model_json
    from elical.heads.probe import ProbeHead

    rng = np.random.default_rng(0)
    head = ProbeHead(max_epochs=2, random_state=0).fit(rng.normal(size=(40, 576)).astype(np.float32),
                                                       rng.uniform(size=40))
    d = tmp_path / "heads" / "eli_only"
    head.save(d)
    write_model_json(d, "smollm2-135m-instruct")
    return d


@pytest.mark.slow  # predict and serve load the real model before the head
def test_truncated_head_is_exit_2_naming_the_file_for_predict_and_serve(probe_dir, tmp_path, capsys):
    from elical.heads.probe import ProbeHead

    _truncate(probe_dir / "head.safetensors")
    with pytest.raises(InputError, match=r"head\.safetensors"):
        ProbeHead.load(probe_dir)
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "a", "question": "What is the capital of Peru?"}) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["predict", str(probe_dir), "--input", str(questions), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "head.safetensors" in err and "Traceback" not in err and not out.exists()
    assert main(["serve", "--port", "0", "--confidence-head", str(probe_dir)]) == 2
    assert "head.safetensors" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["run", "--preset", "smoke", "--quiet"],
                                     ["build", "--datasets", "facts", "--limit", "2", "--quiet"],
                                     ["judge", str(FIXTURE)]])
def test_output_below_a_file_is_exit_2(tmp_path, capsys, command):
    blocker = tmp_path / "notes.txt"
    blocker.write_text("keep me\n")
    assert main([*command, "--output", str(blocker / "run")]) == 2
    err = capsys.readouterr().err
    assert str(blocker) in err and "is a file" in err and "Traceback" not in err
    assert blocker.read_text() == "keep me\n"


@pytest.mark.parametrize("flag, value", [("--concurrency", "0"), ("--max-retries", "-1"), ("--request-timeout", "0")])
def test_bad_client_options_are_exit_2_before_anything_is_written(tmp_path, capsys, flag, value):
    out = tmp_path / "run"
    assert main(["run", "--preset", "smoke", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                 flag, value, "--output", str(out), "--quiet"]) == 2
    assert flag in capsys.readouterr().err and not out.exists()
