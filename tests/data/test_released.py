"""The released HonestyBench directory as a run's records: the quirks of the released files, strict checks, the
dataset groups, the seeded choice that keeps file order."""
import json
import sys
from pathlib import Path

import pytest

from elical.data.honestybench import REQUIRED_FIELDS, iter_released
from elical.data.released import discover, select_released
from elical.records import InputError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
from released_fixture import FILES, n_prob_of, write_released  # noqa: E402


@pytest.fixture()
def released(tmp_path):
    return tmp_path / "fx", write_released(tmp_path / "fx")


def test_quirks_are_read_as_the_file_means_them(released, capsys):
    root, lines = released
    recs = dict(iter_released(root / "nq" / "train.jsonl", "nq", strict=True))
    raw = lines["nq/train.jsonl"]
    # line 1 (i=0): token ids written as integers; line 2 (i=1): the bare form of the greedy fields
    assert raw[0]["greedy_tokens"] == [[1000, 1001]] and recs[1]["greedy_tokens"] == ["1000", "1001"]
    assert isinstance(raw[1]["greedy_response"], str) and recs[2]["greedy_response"] == raw[1]["greedy_response"]
    assert isinstance(raw[2]["greedy_response"], list) and recs[3]["greedy_response"] == raw[2]["greedy_response"][0]
    assert recs[3]["greedy_cumulative_logprobs"] == raw[2]["greedy_cumulative_logprobs"][0]
    # i=2 and i=9 hold an empty alias: dropped, and one warning for the whole file
    assert raw[2]["answer"] == ["", "answer 2", "alias 2"] and recs[3]["answer"] == ["answer 2", "alias 2"]
    assert raw[9]["answer"][0] == "" and recs[10]["answer"] == ["answer 9", "alias 9"]
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "on 2 line(s), first line 3" in err
    for i, line in enumerate(raw, start=1):  # correctness and consistency are the file's
        assert recs[i]["greedy_correctness"] == line["greedy_correctness"]
        assert recs[i]["consistency_judgement"] == line["consistency_judgement"]
        assert recs[i]["sampling_correctness"] == line["sampling_correctness"]


def test_a_line_with_only_an_empty_alias_is_kept(released, capsys):
    root, lines = released
    recs = dict(iter_released(root / "complex_web_questions" / "dev.jsonl", strict=True))
    assert lines["complex_web_questions/dev.jsonl"][3]["answer"] == [""] and recs[4]["answer"] == []
    assert recs[4]["greedy_correctness"] == lines["complex_web_questions/dev.jsonl"][3]["greedy_correctness"]
    assert capsys.readouterr().err.count("warning") == 1


@pytest.mark.parametrize("field", REQUIRED_FIELDS)
def test_a_missing_required_field_names_file_line_and_field(tmp_path, field):
    root = tmp_path / "fx"
    lines = write_released(root)["squad/dev.jsonl"]
    del lines[4][field]
    path = root / "squad" / "dev.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    with pytest.raises(InputError) as exc:
        select_released(root, n_train=8, n_eval=4, seed=0)
    assert (exc.value.path, exc.value.line, exc.value.field, exc.value.problem) == (str(path), 5, field, "missing")


def test_a_missing_field_is_only_an_error_for_the_strict_reader(tmp_path):
    path = tmp_path / "nq.jsonl"
    line = write_released(tmp_path / "fx")["nq/test.jsonl"][0]
    path.write_text(json.dumps({k: v for k, v in line.items() if k != "consistency_judgement"}) + "\n")
    assert next(iter_released(path))[1]["consistency_judgement"] == []
    with pytest.raises(InputError, match="line 1: field 'consistency_judgement': missing"):
        list(iter_released(path, strict=True))


def test_discover_reads_both_layouts(released):
    root, _ = released
    found = {(f.path.relative_to(root).as_posix(), f.dataset, f.side, f.tag) for f in discover(root)}
    assert found == {("nq/train.jsonl", "nq", "train", "train"), ("nq/test.jsonl", "nq", "test", "test"),
                     ("hq_train.jsonl", "hq", "train", "train"), ("hq_dev.jsonl", "hq", "test", "dev"),
                     ("squad/dev.jsonl", "squad", "test", "dev"), ("mmlu/test.jsonl", "mmlu", "test", "test"),
                     ("complex_web_questions/dev.jsonl", "complex_web_questions", "test", "dev")}
    assert [f.dataset for f in discover(root, ["squad"])] == ["squad"]
    with pytest.raises(InputError, match="no released file of popqa"):
        discover(root, ["popqa"])
    with pytest.raises(InputError, match="not a directory"):
        discover(root / "absent")


def test_selection_keeps_groups_sizes_and_file_order(released):
    root, lines = released
    records, summary = select_released(root, n_train=20, n_eval=5, seed=3)
    pool = [r for r in records if r["split"] == "train"]
    test = [r for r in records if r["split"] == "test"]
    # in-domain training files only feed the pool: ceil(20 / 2) = 10 per pool dataset
    assert {r["dataset"] for r in pool} == {"nq", "hq"} and len(pool) == 20
    assert summary["nq"] == {"group": "in_domain", "train": [10, 16], "test": [5, 8]}
    assert summary["squad"] == {"group": "out_of_domain", "test": [5, 8]}
    assert summary["mmlu"] == {"group": "unseen", "test": [5, 8]}
    assert summary["complex_web_questions"]["test"] == [5, 6]
    for name in ("nq", "hq", "squad", "complex_web_questions", "mmlu"):  # evaluation records keep file order
        got = [int(r["id"].rsplit("/", 1)[1]) for r in test if r["dataset"] == name]
        assert len(got) == 5 and got == sorted(got)
    by_id = {r["id"]: r for r in records}
    raw = lines["squad/dev.jsonl"]
    for rid, rec in by_id.items():
        if rec["dataset"] == "squad":
            line = raw[int(rid.rsplit("/", 1)[1]) - 1]
            assert rec["question"] == line["question"] and rec["meta"]["judged_by"] == "released"
            assert rec["greedy_correctness"] == line["greedy_correctness"]
    again, _ = select_released(root, n_train=20, n_eval=5, seed=3)
    assert [r["id"] for r in again] == [r["id"] for r in records]
    # more asked than held: all of them (the paper's protocol reads whole files)
    records, summary = select_released(root, n_train=1000, n_eval=1000, seed=0)
    assert len(records) == sum(n for _, _, n in FILES)
    assert sum(1 for r in records if r["split"] == "train") == 28
    mmlu = [r["question"] for r in records if r["dataset"] == "mmlu"]
    assert mmlu == [x["question"] for x in lines["mmlu/test.jsonl"]]


def test_no_pool_dataset_or_an_ood_pool_dataset_is_refused(released):
    root, _ = released
    with pytest.raises(InputError, match="no training lines of an in-domain dataset"):
        select_released(root, n_train=8, n_eval=4, seed=0, datasets=["squad", "mmlu"])
    with pytest.raises(InputError, match="evaluation only"):
        select_released(root, n_train=8, n_eval=4, seed=0, extra_pool=["squad"])


def test_fixture_n_prob_helper_is_the_papers_formula():
    line = {"greedy_cumulative_logprobs": [-1.0], "greedy_tokens": [["a", "b"]]}
    assert n_prob_of(line) == pytest.approx(0.6065306597)  # exp(-0.5)
