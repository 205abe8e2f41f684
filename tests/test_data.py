from collections import Counter

import pytest

from elical.data.sources import hash_split, load_dataset, select_run_questions
from elical.records import InputError


def test_hash_split_is_stable_and_balanced(shared_data):
    qs = load_dataset("nq", shared_data / "honestybench-qa")
    sides = Counter(hash_split(q["question"]) for q in qs)
    assert 0.45 < sides["train"] / len(qs) < 0.55
    # case and spacing do not move a question across the cut
    assert hash_split("Who  wrote Hamlet?") == hash_split("who wrote hamlet?")


def test_select_run_questions_disjoint_seeded(shared_data):
    by = {"nq": load_dataset("nq", shared_data / "honestybench-qa")}
    a = select_run_questions(by, n_train=40, n_eval=30, seed=1)
    b = select_run_questions(by, n_train=40, n_eval=30, seed=1)
    c = select_run_questions(by, n_train=40, n_eval=30, seed=2)
    assert a == b and a != c
    train = {q["question"] for q in a if q["split"] == "train"}
    test = {q["question"] for q in a if q["split"] == "test"}
    assert len(train) == 40 and len(test) == 30 and not train & test


def test_missing_dataset_and_too_many(tmp_path, shared_data):
    with pytest.raises(InputError, match="no dataset 'nope'"):
        load_dataset("nope", shared_data / "honestybench-qa")
    by = {"nq": load_dataset("nq", shared_data / "honestybench-qa")}
    with pytest.raises(InputError, match="--n-eval"):
        select_run_questions(by, n_train=10, n_eval=10**6, seed=0)
