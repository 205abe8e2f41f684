"""Tests for elical.heads.confidence (ConfidenceModel) and elical.jobs.predict (`elical predict`), with the real SmolLM2."""

import json

import numpy as np
import pytest

from elical import cli
from elical.heads.confidence import MODEL_JSON, ConfidenceModel, read_model_json, write_model_json
from elical.generation.features import extract_hidden_states
from elical.generation.base import QA_INSTRUCTION, build_prompt
from elical.heads.probe import ProbeHead
from elical.heads.lora import LoRAConfig, LoRAHead
from elical.records import InputError

QUESTIONS = ["What is the capital of France?", "What is the chemical symbol of gold?",
             "In which country is the city of Tampere?", "What is the calling code of Chile?",
             "Who wrote Hamlet?", "What is the atomic number of carbon?"]
NEW = ["What is the capital of Peru?", "What is the chemical symbol of iron?", "Which state is Dallas in?"]
LAYER = 15  # not the final layer: the sidecar's layer must really be the one read


@pytest.fixture(scope="module")
def probe_dir(smollm2, tmp_path_factory):
    model, tok = smollm2
    X = extract_hidden_states(model, tok, [build_prompt(tok, q) for q in QUESTIONS], layer=LAYER)
    head = ProbeHead(max_epochs=5, random_state=0).fit(X, np.array([0.9, 0.8, 0.2, 0.1, 0.7, 0.6]))
    d = tmp_path_factory.mktemp("heads") / "elical_k6"
    head.save(d)
    write_model_json(d, "smollm2-135m-instruct", layer=LAYER)
    return d


def test_probe_head_directory_scores_new_questions_from_the_sidecar_layer(probe_dir, smollm2, monkeypatch):
    model, tok = smollm2
    monkeypatch.setattr(model, "generate", lambda *a, **k: pytest.fail("confidence before answering generated"))
    cm = ConfidenceModel.load(probe_dir, model=smollm2)
    conf = cm.predict(NEW)
    head = ProbeHead.load(probe_dir)
    prompts = [build_prompt(tok, q) for q in NEW]
    np.testing.assert_array_equal(conf, head.predict(extract_hidden_states(model, tok, prompts, layer=LAYER)))
    assert not np.allclose(conf, head.predict(extract_hidden_states(model, tok, prompts, layer=-1)))
    assert cm.method == "elical_k6" and cm.prompts(NEW) == prompts
    assert conf.shape == (3,) and 0 <= conf.min() and conf.max() <= 1
    assert read_model_json(probe_dir) == {"model": "smollm2-135m-instruct", "layer": LAYER,
                                          "instruction": QA_INSTRUCTION, "pooling": "last"}


def test_missing_or_malformed_sidecar_is_a_clear_error(probe_dir, tmp_path):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(probe_dir, bare)
    (bare / MODEL_JSON).unlink()
    with pytest.raises(InputError, match="model.json.*missing.*base model"):
        ConfidenceModel.load(bare)
    (bare / MODEL_JSON).write_text(json.dumps({"model": "smollm2-135m-instruct", "layer": "last"}))
    with pytest.raises(InputError, match="field 'layer'"):
        ConfidenceModel.load(bare)
    (bare / MODEL_JSON).write_text(json.dumps({"model": "smollm2-135m-instruct", "layer": 8, "pooling": "max"}))
    with pytest.raises(InputError, match="field 'pooling'"):
        ConfidenceModel.load(bare)
    with pytest.raises(InputError, match="head.json.*not found"):
        ConfidenceModel.load(tmp_path / "nothing")
    with pytest.raises(ValueError, match="question"):
        write_model_json(bare, "m", instruction="no placeholder")
    with pytest.raises(ValueError, match="pooling"):
        write_model_json(bare, "m", pooling="max")


def test_lora_head_directory_scores_like_the_head_itself(smollm2, tmp_path):
    model, tok = smollm2
    prompts = [build_prompt(tok, q) for q in QUESTIONS]
    head = LoRAHead(model, tok, LoRAConfig(max_epochs=1, batch_size=8, learning_rate=1e-3, head_learning_rate=1e-2),
                    base_model="smollm2-135m-instruct").fit(prompts, [0.9, 0.8, 0.2, 0.1, 0.7, 0.6])
    head.save(tmp_path / "eli_only")
    cm = ConfidenceModel.load(tmp_path / "eli_only", model=smollm2)
    np.testing.assert_array_equal(cm.predict(NEW), head.predict([build_prompt(tok, q) for q in NEW]))
    assert cm.method == "eli_only"
    cm.head.release()
    head.release()


def _write(path, lines):
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_elical_predict_writes_one_line_per_question(probe_dir, smollm2, tmp_path, capsys):
    src = _write(tmp_path / "q.jsonl", [{"id": "a", "question": NEW[0]}, {"question": NEW[1]}, "",
                                        {"id": 7, "question": NEW[2]}])
    out = tmp_path / "out" / "conf.jsonl"
    assert cli.main(["predict", str(probe_dir), "--input", str(src), "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", 2, 7]
    assert {r["method"] for r in rows} == {"elical_k6"} and [r["question"] for r in rows] == NEW
    expected = ConfidenceModel.load(probe_dir, model=smollm2).predict(NEW)
    np.testing.assert_allclose([r["confidence"] for r in rows], expected, atol=1e-6)
    assert "wrote 3 confidences" in capsys.readouterr().out

    # an existing output is never overwritten
    before = out.read_text()
    assert cli.main(["predict", str(probe_dir), "--input", str(src), "--output", str(out)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err and out.read_text() == before


@pytest.mark.parametrize("lines, where", [
    ([{"question": "ok?"}, {"q": "typo"}], "line 2: field 'question'"),
    ([{"question": "ok?"}, "{not json"], "line 2: malformed JSON"),
    ([{"question": "  "}], "line 1: field 'question'"),
    ([{"question": "a?", "id": 1}, {"question": "b?", "id": 1}], "line 2: field 'id'"),
    ([{"question": "a?", "id": [1]}], "line 1: field 'id'"),
    (["[1, 2]"], "line 1: expected a JSON object"),
])
def test_elical_predict_bad_input_names_file_line_and_field(probe_dir, tmp_path, capsys, lines, where):
    src = _write(tmp_path / "bad.jsonl", lines)
    out = tmp_path / "out.jsonl"
    assert cli.main(["predict", str(probe_dir), "--input", str(src), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{src}, {where}" in err and not out.exists()


def test_elical_predict_without_a_head_is_exit_2(tmp_path, capsys):
    src = _write(tmp_path / "q.jsonl", [{"question": "a?"}])
    assert cli.main(["predict", str(tmp_path), "--input", str(src), "--output", str(tmp_path / "o.jsonl")]) == 2
    assert "head.json" in capsys.readouterr().err


def test_a_head_directory_with_missing_weights_is_exit_2(probe_dir, tmp_path, capsys):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(probe_dir, broken)
    (broken / "head.safetensors").unlink()
    src = _write(tmp_path / "q.jsonl", [{"question": "a?"}])
    assert cli.main(["predict", str(broken), "--input", str(src), "--output", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert str(broken / "head.safetensors") in err and "missing" in err
