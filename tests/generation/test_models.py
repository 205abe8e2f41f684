"""The offline model cache: a GGUF checkpoint dequantized once into a plain safetensors directory
(elical.generation.models.materialize_gguf, used for SmolLM2 and for Gemma-3-270M)."""

import pytest
import torch

from elical.generation.models import materialize_gguf, smollm2_gguf_path


@pytest.mark.slow
def test_materialized_checkpoint_gives_the_models_logits(tmp_path, smollm2):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = tmp_path / "models" / "smollm2"
    assert materialize_gguf(target, lambda tmp: smollm2_gguf_path()) == target
    assert sorted(p.name for p in tmp_path.joinpath("models").iterdir()) == ["smollm2"]  # no temporary left
    assert {"config.json", "model.safetensors", "generation_config.json"} <= {p.name for p in target.iterdir()}
    model = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(str(target))
    ref_model, ref_tok = smollm2
    text = "The capital of France is"
    assert tok(text)["input_ids"] == ref_tok(text)["input_ids"]
    ids = torch.tensor([tok(text)["input_ids"]])
    with torch.inference_mode():
        torch.testing.assert_close(model(ids).logits, ref_model(ids).logits, rtol=1e-5, atol=1e-4)
    mtime = (target / "model.safetensors").stat().st_mtime_ns
    assert materialize_gguf(target, lambda tmp: pytest.fail("a cached checkpoint is not made again")) == target
    assert (target / "model.safetensors").stat().st_mtime_ns == mtime


def test_a_failed_first_load_leaves_nothing_behind(tmp_path):
    def broken(tmp):
        (tmp / "gguf").mkdir()
        (tmp / "gguf" / "part").write_bytes(b"half a file")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        materialize_gguf(tmp_path / "models" / "m", broken)
    assert list((tmp_path / "models").iterdir()) == []
