"""Tests for elical.heads.lora: the paper's LoRA + linear head, on the real SmolLM2-135M-Instruct (kept tiny)."""

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from elical.data.facts import load_facts
from elical.generation.features import extract_hidden_states
from elical.generation.base import build_prompt
from elical.heads.validation import holdout_split
from elical.heads.lora import LoRAConfig, LoRAHead, detect_target_modules
from elical.heads.stages import fit_lora_cal_only, fit_lora_eli_only, fit_lora_elical

LLAMA_PROJECTIONS = ("down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj")
# Small steps would not move a head in 2 optimiser steps per epoch; these learn the toy target in 3 epochs.
FAST = dict(batch_size=8, learning_rate=5e-4, head_learning_rate=5e-3, random_state=0)


def mse(a, b):
    return float(np.mean((np.asarray(a, float) - np.asarray(b, float)) ** 2))


@pytest.fixture(scope="module")
def data(smollm2):
    """Capital questions (target 0.9) vs chemical-symbol questions (target 0.1): the relation is plainly readable
    from the prompt, so a head that learns anything separates held-out questions of the two kinds."""
    _, tok = smollm2
    facts = load_facts()
    caps = sorted((f for f in facts if f["relation"] == "country_capital"), key=lambda f: f["id"])[::16][:14]
    syms = sorted((f for f in facts if f["relation"] == "element_symbol"), key=lambda f: f["id"])[::7][:14]
    prompts = [build_prompt(tok, f["question"]) for f in caps[:10] + syms[:10]]
    y = np.array([0.9] * 10 + [0.1] * 10)
    test = [build_prompt(tok, f["question"]) for f in caps[10:] + syms[10:]]
    y_test = np.array([0.9] * 4 + [0.1] * 4)
    return prompts, y, test, y_test


@pytest.fixture(scope="module")
def stage1(smollm2, data):
    model, tok = smollm2
    prompts, y, test, _ = data
    rng_before = torch.random.get_rng_state()
    states_before = extract_hidden_states(model, tok, test[:3])
    head = fit_lora_eli_only(model, tok, prompts, y, config=LoRAConfig(max_epochs=3, patience=3, **FAST),
                             base_model="smollm2-135m-instruct")
    return head, rng_before, states_before


def test_detect_target_modules_finds_every_attention_and_mlp_projection(smollm2):
    model, _ = smollm2
    assert detect_target_modules(model) == LLAMA_PROJECTIONS


def test_stage1_fits_a_learnable_target_better_than_a_constant(stage1, data):
    head, _, _ = stage1
    prompts, y, test, y_test = data
    pred = head.predict(test)
    assert pred.shape == (8,) and pred.min() >= 0 and pred.max() <= 1
    constant = mse(np.full(8, y.mean()), y_test)  # 0.16
    assert mse(pred, y_test) < 0.25 * constant
    assert pred[:4].min() > pred[4:].max()
    # validation: 4 of the 20 pool prompts held out (seeded), the best epoch's weights restored
    train_idx, val_idx = holdout_split(20, 0.2, 0)
    assert head.best_val_loss_ == min(v for _, _, v in head.history_)
    assert mse(head.predict([prompts[i] for i in val_idx]), y[val_idx]) == pytest.approx(head.best_val_loss_,
                                                                                        rel=1e-5)
    assert len(head.history_) == 4 and head.target_modules_ == LLAMA_PROJECTIONS
    assert len(head._adapter_params()) == 2 * 7 * 30  # lora_A and lora_B on 7 projections of 30 layers


def test_fit_leaves_the_shared_model_and_global_rng_alone(stage1, smollm2, data):
    model, tok = smollm2
    head, rng_before, states_before = stage1
    assert torch.equal(torch.random.get_rng_state(), rng_before)
    after = extract_hidden_states(model, tok, data[2][:3])
    np.testing.assert_array_equal(after, states_before)  # adapters are off outside the head's own passes
    assert all(not p.requires_grad for p in model.parameters())


@pytest.mark.parametrize("side", ["left", "right"])
def test_last_real_token_is_read_under_left_and_right_padding(stage1, smollm2, data, side):
    _, tok = smollm2
    head, _, _ = stage1
    prompts = [data[2][0], build_prompt(tok, "What is the capital of the Democratic Republic of the Congo, in Africa?"),
               data[2][5]]
    lengths = {len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts}
    assert len(lengths) == 3  # padding really happens in the batch
    old = tok.padding_side
    tok.padding_side = side
    try:
        batch = head.predict(prompts)
    finally:
        tok.padding_side = old
    single = np.array([head.predict([p])[0] for p in prompts])
    np.testing.assert_allclose(batch, single, atol=2e-5)


def test_save_load_gives_identical_predictions_and_a_peft_adapter(stage1, smollm2, data, tmp_path):
    from peft import PeftModel

    from elical.generation.features import last_token_index
    from elical.generation.models import load_model

    model, tok = smollm2
    head, _, _ = stage1
    test = data[2]
    head.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "adapter_config.json", "adapter_model.safetensors", "head.json", "head.safetensors"]
    meta = json.loads((tmp_path / "head.json").read_text())
    assert meta["base_model"] == "smollm2-135m-instruct" and meta["config"]["rank"] == 8
    assert json.loads((tmp_path / "adapter_config.json").read_text())["r"] == 8
    loaded = LoRAHead.load(tmp_path, model=smollm2)
    np.testing.assert_array_equal(loaded.predict(test), head.predict(test))
    loaded.release()

    # Independently: peft's own loader on a fresh copy of the model, and the head applied by hand.
    fresh, _ = load_model()
    fresh = PeftModel.from_pretrained(fresh, str(tmp_path))
    h = load_file(str(tmp_path / "head.safetensors"))
    enc = tok(test[:2], return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        hidden = fresh.base_model.model.model(**enc).last_hidden_state
    last = hidden[torch.arange(2), last_token_index(enc["attention_mask"])]
    z = (last - h["mean"]) / h["scale"]
    by_hand = torch.sigmoid(z @ h["head.weight"][0] + h["head.bias"][0]).numpy()
    np.testing.assert_allclose(by_hand, head.predict(test[:2]), atol=1e-5)


def test_stage2_trains_the_lora_weights_unless_frozen(stage1, data):
    eli, _, _ = stage1
    prompts, _, _, _ = data
    k_prompts = prompts[:4] + prompts[10:14]
    y_k = np.array([0.5, 1.0, 0.25, 0.75, 0.0, 0.5, 0.25, 0.0])  # sample accuracy of 4 samples
    before = {k: v.clone() for k, v in eli._adapter_params().items()}

    def adapter_change(new):
        src, dst = f".{eli.adapter_name_}.", f".{new.adapter_name_}."
        ours = new._adapter_params()
        return max(float((ours[k.replace(src, dst)] - v).abs().max()) for k, v in before.items())

    # "holdout" with k < 10: no held-out part, exactly max_epochs epochs (the CV default may choose 0)
    cal = fit_lora_elical(eli, k_prompts, y_k, max_epochs=1, validation="holdout")
    assert cal.n_epochs_ == 1 and cal.best_val_loss_ is None
    assert adapter_change(cal) > 1e-6
    frozen = fit_lora_elical(eli, k_prompts, y_k, max_epochs=1, freeze_lora=True, validation="holdout")
    assert adapter_change(frozen) == 0.0
    assert not torch.equal(frozen.head_.weight, eli.head_.weight)  # the head still trained
    assert all(torch.equal(before[k], v) for k, v in eli._adapter_params().items())  # stage 1 untouched
    assert torch.equal(cal.mean_, eli.mean_)  # stage 2 keeps stage 1's standardisation
    for h in (cal, frozen):
        h.release()


def test_cal_only_is_seeded_and_release_removes_the_adapter(smollm2, data):
    model, tok = smollm2
    prompts, y, _, _ = data
    k_prompts, y_k = prompts[:3] + prompts[10:13], np.array([1.0, 0.8, 0.6, 0.0, 0.2, 0.4])
    cfg = LoRAConfig(max_epochs=1, **FAST)
    a = fit_lora_cal_only(model, tok, k_prompts, y_k, config=cfg, validation="holdout")
    b = fit_lora_cal_only(model, tok, k_prompts, y_k, config=cfg, validation="holdout")
    np.testing.assert_array_equal(a.predict(k_prompts), b.predict(k_prompts))
    assert torch.equal(a.head_.weight, b.head_.weight)
    # gradient accumulation: 2 passes of 4 + 2 prompts make the same optimiser step as one pass of 6
    c = fit_lora_cal_only(model, tok, k_prompts, y_k, config=LoRAConfig(max_epochs=1, **{**FAST, "batch_size": 4},
                                                                     grad_accumulation=2), validation="holdout")
    np.testing.assert_allclose(c.predict(k_prompts), a.predict(k_prompts), atol=1e-5)
    c.release()
    n_params = len(list(model.parameters()))
    name = a.adapter_name_
    a.release()
    assert len(list(model.parameters())) == n_params - 2 * 7 * 30
    assert not any(f".{name}." in n for n, _ in model.named_parameters())
    with pytest.raises(ValueError, match="not fitted"):
        a.predict(k_prompts)
    b.release()


def test_cal_only_and_stage2_cross_validate_inside_k_like_the_probe_heads(stage1, smollm2, data):
    # k = 6 < 10: leave-one-out, one fold per labelled prompt; the final head trains on all 6 for the argmin of the
    # mean CV curve (no held-out part), and every fold's adapter is removed from the shared model again.
    model, tok = smollm2
    eli = stage1[0]
    prompts = data[0]
    k_prompts, y_k = prompts[:3] + prompts[10:13], np.array([1.0, 0.8, 0.6, 0.0, 0.2, 0.4])
    n_params = len(list(model.parameters()))
    cal = fit_lora_cal_only(model, tok, k_prompts, y_k, config=LoRAConfig(max_epochs=2, **FAST))
    elical = fit_lora_elical(eli, k_prompts, y_k, max_epochs=2, rule="full")
    for head in (cal, elical):
        assert len(head.cv_best_epochs_) == 6 and head.best_val_loss_ is None
        assert head.n_epochs_ == head.cv_epochs_ == int(np.argmin(head.cv_curve_)) and 0 <= head.n_epochs_ <= 2
    assert len(list(model.parameters())) == n_params + 2 * 2 * 7 * 30  # only the two final adapters remain
    cal.release()
    elical.release()


def test_stage2_takes_no_step_on_one_valued_labels(stage1, data):
    # k = 4 labels all 0: nothing to calibrate against; EliCal(k) predicts exactly as Eli-Only.
    eli = stage1[0]
    prompts, _, test, _ = data
    elical = fit_lora_elical(eli, prompts[:2] + prompts[10:12], np.zeros(4), max_epochs=2)
    assert elical.n_epochs_ == 0
    np.testing.assert_allclose(elical.predict(test), eli.predict(test), atol=1e-6)
    elical.release()


def test_stage2_affine_rule_keeps_the_lora_ranking(stage1, data):
    # The default LoRA stage 2 rescales the stage-1 logit: sigmoid(a z + b) with a >= 0, the same (a, b) the probe
    # heads' affine rule fits (elical.heads.stage2.affine_parameters) on the stage-1 logit of the k prompts.
    from elical.heads.stage2 import affine_parameters

    eli = stage1[0]
    prompts, _, test, _ = data
    k_prompts, y_k = prompts[:3] + prompts[10:13], np.array([1.0, 0.8, 0.6, 0.0, 0.2, 0.4])
    head = fit_lora_elical(eli, k_prompts, y_k)
    q = eli.predict(k_prompts)
    a, b = affine_parameters(np.log(q / (1 - q)), y_k)
    assert head.stage2_ == {"rule": "affine", "slope": a, "intercept": b} and a > 0
    q_test = eli.predict(test)
    np.testing.assert_allclose(head.predict(test), 1 / (1 + np.exp(-(a * np.log(q_test / (1 - q_test)) + b))),
                               atol=1e-5)
    head.release()


def test_bad_input_is_refused_before_any_training(smollm2, data):
    model, tok = smollm2
    prompts = data[0][:4]
    head = LoRAHead(model, tok)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        head.fit(prompts, [0.1, 0.2, 1.5, 0.0])
    with pytest.raises(ValueError, match="shape"):
        head.fit(prompts, [0.1, 0.2])
    with pytest.raises(ValueError, match="non-empty strings"):
        head.fit(prompts[:3] + [""], [0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match="not fitted"):
        head.predict(prompts)
    with pytest.raises(ValueError, match="positive integer"):
        LoRAConfig(rank=0)
    with pytest.raises(ValueError, match="fitted LoRAHead"):
        head.fit(prompts, [0.1, 0.2, 0.3, 0.4], init=LoRAHead(model, tok))
    assert not hasattr(head, "adapter_name_")
