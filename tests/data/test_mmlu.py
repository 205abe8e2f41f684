"""MMLU as the unseen task: reading the CSV files, the free-form question with lettered choices, its judge, and a
small build with the real SmolLM2."""
import json
from collections import Counter

import pytest

from elical.jobs.build import BuildConfig, build
from elical.judges import mmlu_correct
from elical.data.mmlu import MMLUAnswer, format_question, load_mmlu, record_choices
from elical.judges.choices import MMLUCorrectness
from elical.records import InputError, read_records


def test_load_mmlu_test_split(shared_data):
    qs = load_mmlu(shared_data / "mmlu")
    assert len(qs) == 14042 and len({q["id"] for q in qs}) == 14042
    assert len({q["subject"] for q in qs}) == 57
    first = qs[0]
    assert first["id"] == "mmlu/abstract_algebra/1" and first["dataset"] == "mmlu" and first["split"] == "test"
    assert first["question"] == ("Find the degree for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) "
                                 "over Q.\nA. 0\nB. 4\nC. 2\nD. 6")
    assert first["answer"] == ["B", "4"] and first["choices"] == ["0", "4", "2", "6"] and first["answer_index"] == 1
    assert json.loads(json.dumps(first["answer"])) == ["B", "4"]  # serializes as the plain list
    # the answer column's distribution (index 0-3) as counted independently with the csv module
    assert Counter(q["answer_index"] for q in qs) == {3: 3776, 2: 3582, 1: 3462, 0: 3222}
    # the choices come back from the question text of every record that lacks the fields
    for q in qs:
        assert record_choices({"question": q["question"], "answer": list(q["answer"])}) == \
            (q["choices"], q["answer_index"])
    assert len(load_mmlu(shared_data / "mmlu", "dev")) == 285
    assert {q["subject"] for q in load_mmlu(shared_data / "mmlu", subjects=["anatomy"])} == {"anatomy"}


def _csv(tmp_path, text, name="demo_test.csv"):
    (tmp_path / "test").mkdir(exist_ok=True)
    (tmp_path / "test" / name).write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("body, line, field", [
    ("question,choice0,choice1,choice2,choice3,answer\nQ?,a,b,c,d,1\nQ2?,a,b,c,4\n", 3, None),
    ("question,choice0,choice1,choice2,choice3,answer\nQ?,a, ,c,d,1\n", 2, "choice1"),
    ("question,choice0,choice1,choice2,choice3,answer\n\"multi\nline\",a,b,c,d,E\n", 2, "answer"),
    ("question,choice0,choice1,choice2,choice3,answer\n  ,a,b,c,d,0\n", 2, "question"),
])
def test_bad_rows_name_file_line_field(tmp_path, body, line, field):
    root = _csv(tmp_path, body)
    with pytest.raises(InputError) as exc:
        load_mmlu(root)
    e = exc.value
    assert e.path.endswith("demo_test.csv") and e.line == line and e.field == field
    with pytest.raises(InputError, match="no MMLU CSV files"):
        load_mmlu(tmp_path / "nowhere")


def test_original_release_without_header_and_letter_answers(tmp_path):
    root = _csv(tmp_path, "What is 2+2?,3,4,5,6,B\n\"Pick, one\",x,y,z,w,d\n")
    qs = load_mmlu(root)
    assert [(q["id"], q["answer_index"], list(q["answer"])) for q in qs] == [
        ("mmlu/demo/1", 1, ["B", "4"]), ("mmlu/demo/2", 3, ["D", "w"])]
    assert qs[1]["question"] == "Pick, one\nA. x\nB. y\nC. z\nD. w"
    assert format_question(" Q ", ["a", "b"]) == "Q\nA. a\nB. b"


def test_mmlu_correctness_judge():
    choices = ["Paris", "London", "Rome", "Berlin"]
    gold = MMLUAnswer(choices, 2)
    judge = MMLUCorrectness()
    responses = ["C", "(C) Rome", "Rome", "The answer is C.", "A", "A B C D", "Rome or Paris", "", "B. London",
                 "A city in Italy"]
    assert judge(responses, gold).tolist() == [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    # independent of the judge class: the same as mmlu_correct one by one
    assert judge(responses, gold).tolist() == [int(mmlu_correct(r, choices, 2)) for r in responses]
    with pytest.raises(ValueError, match="MMLUAnswer"):
        judge(["C"], ["C", "Rome"])
    with pytest.raises(ValueError, match="choice line"):
        record_choices({"question": "no choices", "answer": ["A"]})
    # the authors' own layout: "A.<choice>" lines and a trailing newline
    assert record_choices({"question": "Q?\nA.x\nB.y\nC.z\nD.w\n", "answer": ["C"]}) == (["x", "y", "z", "w"], 2)


def test_build_mmlu_with_the_real_model(smollm2, shared_data, tmp_path):
    model, tok = smollm2
    cfg = BuildConfig(datasets=("mmlu",), mmlu_dir=str(shared_data / "mmlu"), split="test", limit=4, n_samples=2,
                      max_new_tokens=8, batch_size=4)
    res = build(cfg, tmp_path / "b", model=model, tokenizer=tok, progress=False, log=lambda *_: None)
    assert [u["n"] for u in res["units"]] == [4]
    recs = read_records(tmp_path / "b" / "mmlu" / "test.jsonl")
    assert len(recs) == 4
    for r in recs:
        choices, index = record_choices(r)
        assert r["answer"] == ["ABCD"[index], choices[index]]
        assert "\nA. " in r["prompt"] and "\nD. " in r["prompt"]
        assert r["greedy_correctness"] == int(mmlu_correct(r["greedy_response"], choices, index))
        assert r["sampling_correctness"] == [int(mmlu_correct(s, choices, index)) for s in r["sampling_response"]]
        assert r["meta"]["judges"]["correctness"] == "mmlu_correct"
