import numpy as np
import pytest

from elical.estimators.training_free import EstimatorInputError
from elical.estimators import EstimatorContext, estimate, names_of_kind
from elical.estimators.model_based import (P_TRUE_PREFIX, UNPARSEABLE_CONFIDENCE, p_true,
                                     p_true_prompt, parse_confidence, select_examples, verbal, verbal_k,
                                     verbal_prompt)


@pytest.mark.parametrize("text,value", [
    ("0.7", 0.7), (" 0.85 ", 0.85), (".8", 0.8), ("70%", 0.7), ("70 percent sure", 0.7), ("7/10", 0.7),
    ("about 3 out of 5", 0.6), ("70", 0.7), ("1", 1.0), ("0", 0.0), ("0.0000000", 0.0), ("150", 1.0),
    ("-0.2", 0.0), ("Confidence is 0.9, maybe 0.1", 0.9), ("high", 0.8), ("Very low", 0.1),
    ("I am almost certain", 0.93), ("unlikely", 0.3), ("The answer is 1.", 1.0), ("1/0", 1.0),
])  # fmt: skip
def test_parse_confidence(text, value):
    assert parse_confidence(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "I don't know", "Paris", "v2.0", None])
def test_parse_confidence_unparseable(text):
    assert parse_confidence(text) is None


def pool_records(n=6):
    return [{"id": f"t{i}", "split": "train", "question": f"Question number {i}?",
             "sampling_correctness": [1] * i + [0] * (n - i)} for i in range(n)]


def test_select_examples_uses_the_pipelines_permutation_and_sample_accuracy():
    pool = pool_records()
    chosen = select_examples(pool, k=3, seed=5)
    order = np.random.default_rng(5).permutation(len(pool))[:3]
    assert [c[2] for c in chosen] == [pool[i]["id"] for i in order]
    assert [c[1] for c in chosen] == pytest.approx([int(pool[i]["id"][1:]) / 6 for i in order])
    assert len(select_examples(pool, k=50)) == 6


def test_select_examples_refuses_evaluation_records():
    pool = pool_records()
    with pytest.raises(ValueError, match="training pool"):
        select_examples(pool + [{"id": "e1", "split": "test", "question": "q?", "sampling_correctness": [1]}], 2)
    with pytest.raises(ValueError, match="also an evaluation record"):
        select_examples(pool, 2, exclude_ids=["t3"])
    with pytest.raises(ValueError, match="needs training-pool records"):
        select_examples([], 2)
    with pytest.raises(EstimatorInputError, match="sampling_correctness"):
        select_examples([{"id": "t", "question": "q?"}], 1)


def test_prompts(smollm2):
    _, tok = smollm2
    zero = verbal_prompt(tok, "What is the capital of Peru?")
    assert zero.endswith("Question: What is the capital of Peru?<|im_end|>\n<|im_start|>assistant\nConfidence:")
    assert "Examples" not in zero
    few = verbal_prompt(tok, "Q?", [("Capital of Peru?", 2 / 3), ("Capital of Chad?", 1)])
    assert "Question: Capital of Peru?\nConfidence: 0.67\nQuestion: Capital of Chad?\nConfidence: 1.00" in few
    pt = p_true_prompt(tok, "Capital of Peru?", "Lima")
    assert "Question: Capital of Peru?\nProposed Answer: Lima\nIs the proposed answer:\n (A) True\n (B) False" in pt
    assert pt.endswith(P_TRUE_PREFIX)


def eval_records():
    return [
        {"id": "e1", "question": "What is the capital of France?", "greedy_response": "Paris"},
        {"id": "e2", "question": "Which chemical element has the symbol Tc?", "greedy_response": "Technetium"},
        {"id": "e3", "question": "What is the capital of France?", "greedy_response": "The capital is Berlin."},
        {"id": "e4", "question": "In which country is Kisumu?", "greedy_response": ["..."]},
    ]


def test_p_true_batched_equals_one_prompt_at_a_time(smollm2):
    import torch

    model, tok = smollm2
    records = eval_records()
    out = p_true(model, tok, records, batch_size=3)
    a, b = tok.convert_tokens_to_ids("A"), tok.convert_tokens_to_ids("B")
    for r, c in zip(records[:3], out.confidence[:3]):
        ids = tok(p_true_prompt(tok, r["question"], r["greedy_response"]), return_tensors="pt",
                  add_special_tokens=False)
        with torch.inference_mode():
            logits = model(**ids).logits[0, -1].double()
        assert c == pytest.approx(torch.softmax(logits[[a, b]], -1)[0].item(), abs=1e-4)
    assert out.confidence[3] == 0.0  # punctuation-only answer: no model call, defined 0
    assert out.confidence[0] > out.confidence[2]  # Paris is judged truer than Berlin


def test_verbal_greedy_matches_transformers_generate(smollm2):
    model, tok = smollm2
    records = eval_records()[:3]
    out = verbal(model, tok, records, batch_size=2, max_new_tokens=6)
    for r, text in zip(records, out.outputs):
        enc = tok(verbal_prompt(tok, r["question"]), return_tensors="pt", add_special_tokens=False)
        ref = model.generate(**enc, do_sample=False, max_new_tokens=6)[0, enc["input_ids"].shape[1]:]
        assert text == tok.decode(ref, skip_special_tokens=True).split("\n")[0].strip()
    parsed = [parse_confidence(o) for o in out.outputs]
    assert out.confidence.tolist() == [UNPARSEABLE_CONFIDENCE if p is None else p for p in parsed]
    assert out.n_unparseable == sum(p is None for p in parsed)


def test_model_registry_uniform_call(smollm2):
    model, tok = smollm2
    records, pool = eval_records()[:2], pool_records()
    assert names_of_kind("model") == ["Verbal-0", "Verbal-k", "P(True)"]
    ctx = EstimatorContext(model=model, tokenizer=tok, train_records=pool, k=2, seed=0, batch_size=2)
    for name in names_of_kind("model"):
        est = estimate(name, records, ctx)
        assert est.confidence.shape == (2,) and ((est.confidence >= 0) & (est.confidence <= 1)).all()
        assert est.info["n"] == 2 and est.info["kind"] == "model"
    with pytest.raises(ValueError, match="queries the model"):
        estimate("P(True)", records)
    est = verbal_k(model, tok, records, train_records=pool, k=2, seed=0)
    assert est.meta["example_ids"] == [c[2] for c in select_examples(pool, 2, 0)]
    with pytest.raises(EstimatorInputError, match="question"):
        p_true(model, tok, [{"id": "x", "greedy_response": "Paris"}])
