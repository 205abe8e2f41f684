"""The transformers decoder (elical.generation.prefix_sharing.TransformersGenerator) with the real SmolLM2: log-probs
against a teacher-forced pass, samples against an independent row-by-row reference sampler, and samples that do not
depend on the batch."""
import numpy as np
import pytest
import torch

from elical.generation.base import DecodingConfig, build_prompt, decoding_meta, seed_for
from elical.generation.prefix_sharing import TransformersGenerator
from elical.generation.prefix_sharing import question_uniforms

QUESTIONS = ["What is the chemical symbol of gold?", "Who wrote Hamlet?", "What is the capital of France?"]


def test_greedy_logprobs_match_teacher_forcing_and_seeds_fix_samples(smollm2):
    model, tok = smollm2
    gen = TransformersGenerator(model, tok, DecodingConfig(n_samples=3, max_new_tokens=12))
    prompts = [build_prompt(tok, q) for q in QUESTIONS[:2]]
    a = gen.generate(prompts, ["q1", "q2"], seed=0)
    b = gen.generate(prompts, ["q1", "q2"], seed=0)
    c = gen.generate(prompts, ["q1", "q2"], seed=1)
    assert [g.sampling_response for g in a] == [g.sampling_response for g in b]
    assert [g.sampling_response for g in a] != [g.sampling_response for g in c]
    assert [g.greedy_response for g in a] == [g.greedy_response for g in c]  # greedy ignores the seed
    for g in a:
        assert len(g.sampling_response) == 3 and len(g.sampling_cumulative_logprobs) == 3
        assert "\n" not in g.greedy_response and "<|" not in g.greedy_response
        assert all(lp <= 0 for lp in g.greedy_logprobs) and len(g.greedy_logprobs) == len(g.greedy_tokens)
    # independent check: score the greedy tokens with one teacher-forced forward pass of the unpadded prompt
    g = a[0]
    p_ids = tok(prompts[0], return_tensors="pt", add_special_tokens=False)["input_ids"]
    ans_ids = torch.tensor([tok.convert_tokens_to_ids(g.greedy_tokens)])
    ids = torch.cat([p_ids, ans_ids], dim=1)
    with torch.inference_mode():
        logp = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
    start = p_ids.shape[1]
    expected = [logp[start - 1 + i, t].item() for i, t in enumerate(ans_ids[0].tolist())]
    np.testing.assert_allclose(g.greedy_logprobs, expected, atol=2e-3)
    assert "Au" in g.greedy_response
    assert decoding_meta(gen) == {"generator": "TransformersGenerator", "n_samples": 3, "temperature": 1.0,
                                  "top_p": 0.95, "top_k": 50, "max_new_tokens": 12}


def _reference_rows(model, tok, prompt: str, key: str, seed: int, d: DecodingConfig, stop_ids):
    """Each sampled row decoded on its own, without a cache: the full prompt + tokens so far through the model,
    transformers' own Temperature -> TopK -> TopP warpers over the whole vocabulary, candidates sorted by
    probability, and the token where the row's uniform falls in their cumulative distribution."""
    from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                        TopPLogitsWarper)

    u = question_uniforms(seed, key, d.max_new_tokens, d.n_samples).numpy()
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    rows = []
    for j in range(d.n_samples):
        out = []
        for step in range(d.max_new_tokens):
            with torch.inference_mode():
                logits = model(torch.tensor([p_ids + out])).logits[:, -1, :].float()
            scores = logits
            for w in (TemperatureLogitsWarper(d.temperature), TopKLogitsWarper(d.top_k), TopPLogitsWarper(d.top_p)):
                scores = w(None, scores)
            probs = torch.softmax(scores.double(), dim=-1)[0].numpy()
            order = np.argsort(-probs, kind="stable")
            cdf = np.cumsum(probs[order])
            t = int(order[min(np.searchsorted(cdf, u[step, j] * cdf[-1], side="right"), len(order) - 1)])
            if t in stop_ids:
                break
            out.append(t)
        rows.append(tok.decode(out, skip_special_tokens=True).split("\n")[0].strip())
    return rows


def test_samples_are_those_of_an_independent_row_by_row_sampler(smollm2):
    model, tok = smollm2
    d = DecodingConfig(n_samples=4, max_new_tokens=10, batch_size=3)
    prompts = [build_prompt(tok, q) for q in QUESTIONS]
    keys = ["a", "b", "c"]
    gen = TransformersGenerator(model, tok, d)
    new = gen.generate(prompts, keys, seed=3)
    for p, k, g in zip(prompts[:2], keys, new):
        assert g.sampling_response == _reference_rows(model, tok, p, k, 3, d, set(gen._stop_ids))
    assert "Paris" in new[2].greedy_response
    # the rows of one question shared their histories: fewer tokens were decoded than the answers hold
    assert gen.stats_["decoded_tokens"] < gen.stats_["answer_tokens"]


def test_a_question_gives_the_same_answers_in_any_batch(smollm2):
    model, tok = smollm2
    # 24 new tokens: answers end at different steps, so cache rows are freed, reused and dropped
    d = DecodingConfig(n_samples=8, max_new_tokens=24)
    prompts = [build_prompt(tok, q) for q in QUESTIONS + ["Who painted the Mona Lisa?"]]
    keys = ["q1", "q2", "q3", "q4"]
    gen = TransformersGenerator(model, tok, d)
    together = gen.generate(prompts, keys, seed=5)
    alone = [gen.generate([p], [k], seed=5)[0] for p, k in zip(prompts, keys)]
    reordered = gen.generate(prompts[::-1][:3], keys[::-1][:3], seed=5)[::-1]  # other neighbours, other order
    for i, g in enumerate(together):
        for other in [alone[i]] + ([reordered[i - 1]] if i else []):
            assert other.greedy_response == g.greedy_response and other.greedy_tokens == g.greedy_tokens
            assert other.sampling_response == g.sampling_response
            assert other.sampling_num_tokens == g.sampling_num_tokens
            np.testing.assert_allclose(other.greedy_logprobs, g.greedy_logprobs, atol=1e-4)
            np.testing.assert_allclose(other.sampling_cumulative_logprobs, g.sampling_cumulative_logprobs, atol=1e-4)
    assert len(set(together[2].sampling_response)) < 8  # samples that repeat a history did share it


def test_question_uniforms_depend_on_seed_and_key_only():
    a = question_uniforms(0, "nq/1", 5, 3)
    assert a.shape == (5, 3) and a.dtype == torch.float64 and bool(((a >= 0) & (a < 1)).all())
    assert torch.equal(a, question_uniforms(0, "nq/1", 5, 3))
    assert not torch.equal(a, question_uniforms(1, "nq/1", 5, 3))
    assert not torch.equal(a, question_uniforms(0, "nq/2", 5, 3))
    expected = torch.rand((5, 3), generator=torch.Generator().manual_seed(seed_for(0, "nq/1")), dtype=torch.float64)
    assert torch.equal(a, expected)


def test_generate_checks_its_arguments(smollm2):
    model, tok = smollm2
    gen = TransformersGenerator(model, tok, DecodingConfig(n_samples=1, max_new_tokens=2))
    with pytest.raises(ValueError, match="keys"):
        gen.generate(["a", "b"], ["k"])
    with pytest.raises(ValueError, match="empty prompt"):
        gen.generate([""], ["k"])
    with pytest.raises(ValueError, match="layer"):
        gen.generate(["Hi"], ["k"], hidden_layers=(99,))
    assert gen.generate([], []) == []
