import numpy as np
import torch

from elical.generation.base import DecodingConfig, TransformersGenerator, build_prompt


def test_greedy_logprobs_match_teacher_forcing_and_seeds_fix_samples(smollm2):
    model, tok = smollm2
    gen = TransformersGenerator(model, tok, DecodingConfig(n_samples=3, max_new_tokens=12))
    prompts = [build_prompt(tok, q) for q in ["What is the chemical symbol of gold?", "Who wrote Hamlet?"]]
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
