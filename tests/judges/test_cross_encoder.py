"""The shipped MiniLM cross-encoder of the learned equivalence judge: small, symmetric, and the LoRA merge by hand
gives what peft's own LoRA forward gives with the same weights (an independent implementation)."""

import os

import numpy as np
import pytest
import torch

from elical.judges import make_equivalence_judge
from elical.judges.cross_encoder import CE_WEIGHTS_PATH, CrossEncoder, pair_inputs

Q = "Which country is the town of Skive in?"
ROWS = [("Skive is located in Denmark, a Scandinavian country in Northern Europe.", "Skive is in Denmark.", Q),
        ("Skive is in Denmark.", "Skive is in Sweden.", Q),
        ("It is in Denmark.", "Denmark", None)]


@pytest.fixture(scope="module")
def st():
    return make_equivalence_judge("learned").encoder.model


def test_shipped_file_is_small_and_loads(st):
    assert os.path.getsize(CE_WEIGHTS_PATH) < 2_000_000  # the issue: no file over a few MB in git
    ce = CrossEncoder(st)
    p = ce.proba(ROWS)
    assert p.shape == (3,) and ((p >= 0) & (p <= 1)).all()
    assert p[0] > 0.5 and p[0] > p[1]  # extra detail is the same answer, and more so than another country
    # "Denmark" / "Sweden" in one sentence frame: the cross-encoder alone flips on it from one retraining to the next
    # (fifth round 0.57, sixth 0.004, seventh 0.72), so it is never used alone; the judges that use it get it right
    judges = [make_equivalence_judge(n) for n in ("learned", "learned-ce")]
    assert [int(j.judge_many([ROWS[1][:2]], [Q])[0]) for j in judges] == [0, 0]


def test_symmetric_and_each_distinct_pair_once(st, monkeypatch):
    ce = CrossEncoder(st)
    swapped = [(b, a, q) for a, b, q in ROWS]
    np.testing.assert_allclose(ce.proba(ROWS), ce.proba(swapped), atol=1e-6)
    calls = []
    forward = ce.bert.forward
    monkeypatch.setattr(ce.bert, "forward", lambda **kw: calls.append(len(kw["input_ids"])) or forward(**kw))
    ce.proba(ROWS + swapped + ROWS)
    assert calls == [3, 3]  # 9 rows, 3 distinct pairs, one batch per order
    calls.clear()
    one = ce.proba(ROWS + swapped, orders=1)
    assert calls == [3]  # one order: half the forward passes
    np.testing.assert_allclose(one[:3], one[3:], atol=1e-6)  # still symmetric
    with pytest.raises(ValueError, match="orders must be 1 or 2"):
        ce.proba(ROWS, orders=3)


def test_merge_by_hand_matches_peft(st):
    """The same LoRA weights loaded into peft (LoRA kept apart from the base weights) give the same probabilities."""
    import copy

    from peft import LoraConfig, get_peft_model
    from safetensors import safe_open

    ce = CrossEncoder(st)
    with safe_open(str(CE_WEIGHTS_PATH), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    r = int(ce.meta["r"])
    adapted = sorted({k.removesuffix(".lora_A").rsplit(".", 1)[-1] for k in tensors if k.endswith(".lora_A")})
    assert adapted == ["dense", "key", "query", "value"]  # every linear layer of the encoder (fifth round)
    peft_model = get_peft_model(copy.deepcopy(st[0].auto_model),
                                LoraConfig(r=r, lora_alpha=int(ce.meta["alpha"]), target_modules=adapted))
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if ".lora_" in name and not name.startswith("base_model.model.pooler."):  # the pooler is not shipped
                module, which = name.removeprefix("base_model.model.").split(".lora_")
                param.copy_(tensors[f"{module}.lora_{which.split('.')[0]}"])
    peft_model.eval()
    with torch.no_grad():
        logits = [ce.head(peft_model(**pair_inputs(ce.tok, ROWS, s)).last_hidden_state[:, 0]).squeeze(-1)
                  for s in (False, True)]
    want = ((torch.sigmoid(logits[0]) + torch.sigmoid(logits[1])) / 2).numpy()
    np.testing.assert_allclose(ce.proba(ROWS), want, atol=1e-5)
    # one order: the pair with the smaller string first (row 1 is given that way round, rows 0 and 2 are not)
    first = [a <= b for a, b, _ in ROWS]
    assert first == [False, True, False]
    one = torch.where(torch.tensor(first), torch.sigmoid(logits[0]), torch.sigmoid(logits[1])).numpy()
    np.testing.assert_allclose(ce.proba(ROWS, orders=1), one, atol=1e-5)


def test_judge_without_the_cross_encoder():
    from elical.judges.learned import LearnedEquivalenceJudge

    judge = LearnedEquivalenceJudge(cross_encoder=False)
    assert judge._second_opinion([ROWS[0]]) is None
    assert judge.judge_many([("Skive is in Denmark.", "Skive is in Denmark.")], [Q]).tolist() == [1]
