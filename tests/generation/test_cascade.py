"""Shared-prefix attention (elical.generation.cascade) against plain attention over the concatenated keys."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from elical.generation import cascade
from elical.generation.base import DecodingConfig, build_prompt
from elical.generation.prefix_sharing import TransformersGenerator


@pytest.mark.parametrize("q", [1, 5])
def test_cascade_attention_equals_attention_over_prefix_and_rows(q):
    gen = torch.Generator().manual_seed(0)
    b, h, kvh, d, s, length = 4, 6, 2, 16, 7, 9
    query = torch.randn(b, h, q, d, generator=gen)
    key, value = torch.randn(2, b, kvh, length, d, generator=gen)
    kp, vp = torch.randn(2, 1, kvh, s, d, generator=gen)
    visible = torch.ones(b, 1, q, length, dtype=torch.bool)
    visible[1, :, :, :3] = False  # left padding of row 1
    if q > 1:
        visible &= torch.ones(q, length, dtype=torch.bool).tril(length - q)
        visible[2, :, :2] = False  # queries that see none of their row: the prefix only
    module = SimpleNamespace(layer_idx=0, num_key_value_groups=h // kvh, is_causal=True)
    with cascade.shared_prefix(SimpleNamespace(config=SimpleNamespace(_attn_implementation="sdpa")), [(kp, vp)]):
        out, _ = cascade.cascade_attention(module, query, key, value, visible, scaling=0.3)
    full_k = torch.cat([kp.expand(b, -1, -1, -1), key], dim=2).repeat_interleave(h // kvh, dim=1)
    full_v = torch.cat([vp.expand(b, -1, -1, -1), value], dim=2).repeat_interleave(h // kvh, dim=1)
    full_mask = torch.cat([torch.ones(b, 1, q, s, dtype=torch.bool), visible], dim=-1)
    ref = torch.nn.functional.scaled_dot_product_attention(query, full_k, full_v, attn_mask=full_mask, scale=0.3)
    torch.testing.assert_close(out, ref.transpose(1, 2), atol=1e-5, rtol=1e-5)


def test_shared_prefix_restores_the_attention_implementation():
    model = SimpleNamespace(config=SimpleNamespace(_attn_implementation="sdpa"))
    with pytest.raises(RuntimeError):
        with cascade.shared_prefix(model, []):
            assert model.config._attn_implementation == cascade.NAME
            raise RuntimeError
    assert model.config._attn_implementation == "sdpa"


def test_generator_gives_the_same_answers_with_and_without_shared_prefix_attention(smollm2, monkeypatch):
    model, tok = smollm2
    assert cascade.supports(model)
    questions = ["What is the capital of France?", "Who wrote Hamlet?", "How many legs does a spider have?"]
    prompts = [build_prompt(tok, q) for q in questions]
    gen = TransformersGenerator(model, tok, DecodingConfig(n_samples=6, max_new_tokens=12))
    split = gen.generate(prompts, ["a", "b", "c"], seed=3, hidden_layers=[-1])
    monkeypatch.setattr(cascade, "supports", lambda model: False)
    plain = gen.generate(prompts, ["a", "b", "c"], seed=3, hidden_layers=[-1])
    assert model.config._attn_implementation == "sdpa"
    for x, y in zip(split, plain):
        assert x.greedy_tokens == y.greedy_tokens and x.sampling_response == y.sampling_response
        np.testing.assert_allclose(x.greedy_logprobs, y.greedy_logprobs, atol=1e-4)
        np.testing.assert_allclose(x.sampling_cumulative_logprobs, y.sampling_cumulative_logprobs, atol=1e-4)
        np.testing.assert_allclose(x.hidden_states[-1], y.hidden_states[-1], atol=1e-4)


def test_cascade_attention_off_the_cpu_kernel_matches_it(monkeypatch):
    """The matmul path (GPUs) gives what the CPU flash kernel gives, fully masked queries included."""
    gen = torch.Generator().manual_seed(1)
    query = torch.randn(3, 4, 5, 8, generator=gen)
    key, value = torch.randn(2, 3, 2, 6, 8, generator=gen)
    kp, vp = torch.randn(2, 1, 2, 4, 8, generator=gen)
    visible = torch.ones(3, 1, 5, 6, dtype=torch.bool).tril(1)
    visible[0, :, :, :2] = False
    module = SimpleNamespace(layer_idx=0, num_key_value_groups=2, is_causal=True)
    model = SimpleNamespace(config=SimpleNamespace(_attn_implementation="sdpa"))
    with cascade.shared_prefix(model, [(kp, vp)]):
        cpu, _ = cascade.cascade_attention(module, query, key, value, visible, scaling=0.4)
        monkeypatch.setattr(cascade, "_attend", cascade._attend_matmul)
        other, _ = cascade.cascade_attention(module, query, key, value, visible, scaling=0.4)
    assert torch.isfinite(other).all()
    torch.testing.assert_close(other, cpu, atol=1e-5, rtol=1e-5)
