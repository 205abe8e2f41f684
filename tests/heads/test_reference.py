"""Reference-format checkpoints (elical.heads.reference, ConfidenceModel.from_reference, `elical export-head`) with
the real SmolLM2: our head -> export -> from_reference gives the same confidences, and the exported files give them
when read the way the reference code reads them (peft's PeftModel on the backbone, nn.Linear, sigmoid of position -1
of a single unpadded prompt), written out here with torch and peft directly."""

import json

import numpy as np
import pytest
import torch

from elical import cli
from elical.generation.base import QA_INSTRUCTION, build_prompt
from elical.generation.features import extract_hidden_states
from elical.heads.confidence import ConfidenceModel, write_model_json
from elical.heads.lora import LoRAConfig, LoRAHead
from elical.heads.probe import ProbeHead
from elical.heads.reference import EXPORT_JSON, REFERENCE_INSTRUCTION, load_head_file
from elical.records import InputError

QUESTIONS = ["What is the capital of France?", "What is the chemical symbol of gold?",
             "In which country is the city of Tampere?", "What is the calling code of Chile?",
             "Who wrote Hamlet?", "What is the atomic number of carbon?"]
TARGETS = [0.9, 0.8, 0.2, 0.1, 0.7, 0.6]
NEW = ["What is the capital of Peru?", "What is the chemical symbol of iron?", "Which state is Dallas in?"]


def _reference_confidence(model, tok, questions, head_state, backbone=None):
    """Confidence as the reference code computes it: last_hidden_state of the backbone at position -1 of one
    unpadded prompt, the saved head's Linear / Sequential layers, sigmoid; plain torch, one prompt at a time."""
    backbone = backbone if backbone is not None else model.model
    out = []
    for q in questions:
        ids = tok(build_prompt(tok, q, QA_INSTRUCTION), return_tensors="pt", add_special_tokens=False)
        with torch.no_grad():
            h = backbone(**ids).last_hidden_state[0, -1].double()
            if "weight" in head_state:
                z = head_state["weight"].double() @ h + head_state["bias"].double()
            else:
                z = h
                for i in (0, 2, 4):
                    z = head_state[f"{i}.weight"].double() @ z + head_state[f"{i}.bias"].double()
                    z = torch.relu(z) if i < 4 else z
        out.append(float(torch.sigmoid(z)))
    return np.array(out)


@pytest.fixture(scope="module")
def features(smollm2):
    model, tok = smollm2
    return extract_hidden_states(model, tok, [build_prompt(tok, q) for q in QUESTIONS])


@pytest.mark.parametrize("kind", ["linear", "mlp"])
def test_probe_head_round_trip_through_the_reference_format(kind, features, smollm2, tmp_path, capsys):
    model, tok = smollm2
    head = ProbeHead(kind=kind, hidden_size=32, max_epochs=5, random_state=0).fit(features, TARGETS)
    head.save(tmp_path / "eli_only")
    write_model_json(tmp_path / "eli_only", "smollm2-135m-instruct")
    out = tmp_path / "exported"
    assert cli.main(["export-head", str(tmp_path / "eli_only"), "--output", str(out)]) == 0
    assert f"vector_head_{kind}.pt" in capsys.readouterr().out

    state = torch.load(out / f"vector_head_{kind}.pt", map_location="cpu", weights_only=True)
    if kind == "linear":
        assert sorted(state) == ["bias", "weight"] and state["weight"].shape == (1, 576)
    else:
        assert sorted(state) == ["0.bias", "0.weight", "2.bias", "2.weight", "4.bias", "4.weight"]
        assert state["0.weight"].shape == (32, 576) and state["4.weight"].shape == (1, 32)
    meta = json.loads((out / EXPORT_JSON).read_text())
    assert (meta["base_model"], meta["layer"], meta["instruction"], meta["lora_dir"]) == \
        ("smollm2-135m-instruct", -1, QA_INSTRUCTION, None)

    ours = ConfidenceModel.load(tmp_path / "eli_only", model=smollm2).predict(NEW)
    back = ConfidenceModel.from_reference(None, out / f"vector_head_{kind}.pt", smollm2)
    np.testing.assert_allclose(back.predict(NEW), ours, atol=1e-5)
    np.testing.assert_allclose(_reference_confidence(model, tok, NEW, state), ours, atol=1e-5)
    assert back.method == f"vector_head_{kind}" and back.instruction == QA_INSTRUCTION
    # the export directory is a head directory for `elical predict` / `serve` too
    np.testing.assert_allclose(ConfidenceModel.load(out, model=smollm2).predict(NEW), ours, atol=1e-5)
    assert len(set(np.round(ours, 4))) == 3 and 0 < ours.min() and ours.max() < 1

    # an existing, non-empty output is never overwritten
    assert cli.main(["export-head", str(tmp_path / "eli_only"), "--output", str(out)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert cli.main(["export-head", str(tmp_path / "nothing"), "--output", str(tmp_path / "o")]) == 2
    assert "head.json" in capsys.readouterr().err and not (tmp_path / "o").exists()
    # a head on mean-pooled states has no reference form (the reference reads the last prompt token)
    write_model_json(tmp_path / "eli_only", "smollm2-135m-instruct", layer=8, pooling="mean")
    assert cli.main(["export-head", str(tmp_path / "eli_only"), "--output", str(tmp_path / "m")]) == 2
    assert "field 'pooling'" in capsys.readouterr().err and not (tmp_path / "m").exists()


def test_lora_head_round_trip_and_the_reference_loading_path(smollm2, tmp_path):
    from peft import PeftModel

    from elical.generation.models import load_model

    model, tok = smollm2
    prompts = [build_prompt(tok, q) for q in QUESTIONS]
    head = LoRAHead(model, tok, LoRAConfig(max_epochs=1, batch_size=8, learning_rate=1e-3, head_learning_rate=1e-2),
                    base_model="smollm2-135m-instruct").fit(prompts, TARGETS)
    head.save(tmp_path / "elical_k6")
    ours = head.predict([build_prompt(tok, q) for q in NEW])
    head.release()
    out = tmp_path / "exported"
    assert cli.main(["export-head", str(tmp_path / "elical_k6"), "--output", str(out)]) == 0
    assert sorted(p.name for p in (out / "lora").iterdir()) == ["adapter_config.json", "adapter_model.safetensors"]

    cm = ConfidenceModel.from_reference(out / "lora", out / "vector_head_linear.pt", smollm2)
    np.testing.assert_allclose(cm.predict(NEW), ours, atol=1e-5)
    frozen = ConfidenceModel.from_reference(None, out / "vector_head_linear.pt", smollm2).predict(NEW)
    assert np.abs(frozen - ours).max() > 1e-3  # the adapter is really applied
    cm.head.release()

    # The reference code's own loading: PeftModel.from_pretrained(AutoModel backbone, lora_dir) + Linear + sigmoid.
    fresh, _ = load_model("smollm2-135m-instruct")
    backbone = PeftModel.from_pretrained(fresh.model, str(out / "lora"), adapter_name="default").eval()
    state = torch.load(out / "vector_head_linear.pt", map_location="cpu", weights_only=True)
    np.testing.assert_allclose(_reference_confidence(model, tok, NEW, state, backbone=backbone), ours, atol=1e-5)


def test_reference_defaults_prompt_and_base_model_from_the_adapter(smollm2, tmp_path):
    """A checkpoint as the reference code writes it (no elical JSON): the reference prompt, the final layer, and
    the base model named in adapter_config.json."""
    model, tok = smollm2
    torch.manual_seed(0)
    linear = torch.nn.Linear(576, 1)
    torch.save(linear.state_dict(), tmp_path / "vector_head_epoch_best.pt")
    cm = ConfidenceModel.from_reference(None, tmp_path / "vector_head_epoch_best.pt", smollm2)
    assert cm.instruction == REFERENCE_INSTRUCTION and cm.layer == -1 and cm.method == "vector_head_epoch_best"
    feats = extract_hidden_states(model, tok, [build_prompt(tok, q, REFERENCE_INSTRUCTION) for q in NEW])
    with torch.no_grad():
        expected = torch.sigmoid(torch.from_numpy(feats).double() @ linear.weight.double()[0] + linear.bias.double())
    np.testing.assert_allclose(cm.predict(NEW), expected.numpy(), atol=1e-6)
    with pytest.raises(InputError, match="base_model"):
        ConfidenceModel.from_reference(None, tmp_path / "vector_head_epoch_best.pt")
    gates = cm.gate(NEW, float(np.median(expected.numpy())))
    assert [g.answer for g in gates] == list(expected.numpy() >= np.median(expected.numpy()))


_EXECUTED = []


def _would_run():
    _EXECUTED.append(True)
    return {}


class Payload:
    """Unpickling this calls _would_run: an unrestricted torch.load would execute it."""

    def __reduce__(self):
        return (_would_run, ())


@pytest.mark.parametrize("content, match", [
    ({"weight": torch.zeros(1, 576), "bias": torch.zeros(1), "extra": Payload()}, "weights_only"),
    (Payload(), "weights_only"),
    (torch.zeros(1, 576), "expected a state dict"),
    ({"w": torch.zeros(1, 576), "b": torch.zeros(1)}, "expected the keys"),
    ({"weight": torch.zeros(2, 576), "bias": torch.zeros(2)}, "output 1 value"),
    ({"0.weight": torch.zeros(8, 576), "0.bias": torch.zeros(8), "2.weight": torch.zeros(1, 9),
      "2.bias": torch.zeros(1)}, "does not chain"),
    ({"weight": torch.full((1, 576), float("nan")), "bias": torch.zeros(1)}, "non-finite"),
])
def test_bad_head_files_are_refused_without_executing_anything(tmp_path, content, match):
    path = tmp_path / "vector_head_bad.pt"
    torch.save(content, path)
    with pytest.raises(InputError, match=match) as info:
        load_head_file(path)
    assert str(path) in str(info.value) and not _EXECUTED


def test_predict_cli_reads_a_reference_checkpoint(smollm2, tmp_path, capsys):
    model, tok = smollm2
    torch.manual_seed(1)
    linear = torch.nn.Linear(576, 1)
    torch.save(linear.state_dict(), tmp_path / "vector_head_epoch_best.pt")
    src = tmp_path / "q.jsonl"
    src.write_text("".join(json.dumps({"id": i, "question": q}) + "\n" for i, q in enumerate(NEW)))
    out = tmp_path / "conf.jsonl"
    assert cli.main(["predict", "--reference-head", str(tmp_path / "vector_head_epoch_best.pt"), "--model",
                     "smollm2-135m-instruct", "--input", str(src), "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    feats = extract_hidden_states(model, tok, [build_prompt(tok, q, REFERENCE_INSTRUCTION) for q in NEW])
    with torch.no_grad():
        expected = torch.sigmoid(torch.from_numpy(feats).double() @ linear.weight.double()[0] + linear.bias.double())
    np.testing.assert_allclose([r["confidence"] for r in rows], expected.numpy(), atol=1e-6)
    assert {r["method"] for r in rows} == {"vector_head_epoch_best"}

    torch.save({"weight": Payload()}, tmp_path / "vector_head_evil.pt")
    assert cli.main(["predict", "--reference-head", str(tmp_path / "vector_head_evil.pt"), "--model",
                     "smollm2-135m-instruct", "--input", str(src), "--output", str(tmp_path / "o2.jsonl")]) == 2
    assert "weights_only" in capsys.readouterr().err and not _EXECUTED
    assert cli.main(["predict", "--input", str(src), "--output", str(tmp_path / "o3.jsonl")]) == 2
