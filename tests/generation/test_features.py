import numpy as np
import pytest
import torch

from elical.generation.features import extract_hidden_states, last_token_index, load_features, save_features
from elical.generation.base import build_prompt


def test_last_token_index_left_and_right_padding():
    right = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    left = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]])
    assert last_token_index(right).tolist() == [2, 4, 0]
    assert last_token_index(left).tolist() == [4, 4, 4]
    with pytest.raises(ValueError):
        last_token_index(torch.tensor([[0, 0]]))


@pytest.mark.parametrize("side", ["left", "right"])
def test_padded_batch_matches_single_rows(smollm2, side):
    model, tok = smollm2
    prompts = [build_prompt(tok, q) for q in ["What is the capital of France?",
                                              "In which country is the city of Tampere, the third largest city?"]]
    old = tok.padding_side
    tok.padding_side = side
    try:
        batch = extract_hidden_states(model, tok, prompts, batch_size=2)
    finally:
        tok.padding_side = old
    single = np.concatenate([extract_hidden_states(model, tok, [p], batch_size=1) for p in prompts])
    assert batch.shape == (2, model.config.hidden_size)
    np.testing.assert_allclose(batch, single, atol=2e-4, rtol=1e-3)
    # the two questions give different states (the index is not stuck on a pad position)
    assert np.abs(batch[0] - batch[1]).max() > 1e-2


def test_layer_choice_and_roundtrip(smollm2, tmp_path):
    model, tok = smollm2
    p = [build_prompt(tok, "Who wrote Hamlet?")]
    final = extract_hidden_states(model, tok, p, layer=-1)
    middle = extract_hidden_states(model, tok, p, layer=model.config.num_hidden_layers // 2)
    assert not np.allclose(final, middle)
    with pytest.raises(ValueError, match="layer"):
        extract_hidden_states(model, tok, p, layer=999)
    save_features(tmp_path / "f.safetensors", ["q1"], final, meta={"layer": -1})
    ids, feats, meta = load_features(tmp_path / "f.safetensors")
    assert ids == ["q1"] and meta == {"layer": -1} and np.array_equal(feats, final)


def test_prefill_hidden_states_equal_the_separate_pass(smollm2):
    """The decoder's prefill (shared prompt prefix run once, then each prompt's left-padded rest) gives the states
    of the separate right-padded pass, for several layers at once, in a batch and alone."""
    from elical.generation.base import DecodingConfig
    from elical.generation.prefix_sharing import TransformersGenerator

    model, tok = smollm2
    questions = ["What is the capital of France?", "In which country is the city of Tampere, the third largest city?",
                 "Who wrote Hamlet?"]
    prompts = [build_prompt(tok, q) for q in questions]
    layers = (-1, 8, 15)
    gen = TransformersGenerator(model, tok, DecodingConfig(n_samples=2, max_new_tokens=3))
    batch = gen.generate(prompts, ["a", "b", "c"], seed=0, hidden_layers=layers)
    alone = gen.generate(prompts[2:], ["c"], seed=0, hidden_layers=(15,))[0]
    assert gen.generate(prompts[:1], ["a"])[0].hidden_states is None  # only when asked for
    for layer in layers:
        expected = extract_hidden_states(model, tok, prompts, layer=layer, batch_size=3)
        got = np.stack([g.hidden_states[layer] for g in batch])
        assert got.dtype == np.float32 and got.shape == (3, model.config.hidden_size)
        np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)
    np.testing.assert_allclose(alone.hidden_states[15], batch[2].hidden_states[15], atol=1e-4, rtol=0)
    assert set(alone.hidden_states) == {15}
