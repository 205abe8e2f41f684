import json

import pytest

from elical.records import (InputError, greedy_text, open_append, read_qa_file, read_records, sample_accuracy,
                            self_consistency)


def _write(tmp_path, text, name="nq/test.jsonl"):
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def test_read_qa_file_ok(tmp_path):
    p = _write(tmp_path, '{"question": "q1?", "answer": ["a", ""]}\n\n{"question": " q2 ", "answer": ["b"]}\n')
    items = read_qa_file(p)
    assert [i["id"] for i in items] == ["nq/1", "nq/3"]
    assert items[0]["answer"] == ["a"]  # empty alias dropped
    assert items[1]["question"] == "q2" and items[1]["dataset"] == "nq"


@pytest.mark.parametrize("line, field, words", [
    ('{"question": "q", "answer": ["a"', None, "malformed JSON"),
    ('{"question": "q"}', "answer", "missing"),
    ('{"question": "", "answer": ["a"]}', "question", "empty"),
    ('{"question": "q", "answer": "a"}', "answer", "list of strings"),
    ('["q", "a"]', None, "JSON object"),
])
def test_read_qa_file_errors_name_file_line_field(tmp_path, line, field, words):
    p = _write(tmp_path, '{"question": "fine?", "answer": ["x"]}\n' + line + "\n")
    with pytest.raises(InputError) as exc:
        read_qa_file(p)
    assert exc.value.line == 2 and exc.value.field == field
    msg = str(exc.value)
    assert str(p) in msg and "line 2" in msg and words in msg


def test_append_repairs_torn_tail(tmp_path):
    p = tmp_path / "r.jsonl"
    with open_append(p) as w:
        w.write([{"id": "a"}, {"id": "b"}])
    with open(p, "a") as fh:  # a write killed half-way
        fh.write('{"id": "c", "que')
    assert [r["id"] for r in read_records(p)] == ["a", "b"]
    with open_append(p) as w:
        w.write([{"id": "c"}])
    assert [json.loads(l)["id"] for l in p.read_text().splitlines()] == ["a", "b", "c"]


def test_read_records_rejects_bad_middle_line(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text('{"id": "a"}\n{oops\n{"id": "b"}\n')
    with pytest.raises(InputError, match="line 2"):
        read_records(p)


def test_derived_quantities_and_released_layout():
    rec = {"id": "x", "greedy_response": ["Paris"], "consistency_judgement": [1, 1, 0, 1],
           "sampling_correctness": [1, 0, 0, 0]}
    assert greedy_text(rec) == "Paris"
    assert self_consistency(rec) == 0.75
    assert sample_accuracy(rec) == 0.25
    with pytest.raises(ValueError, match="record x"):
        self_consistency({"id": "x", "consistency_judgement": []})


def test_read_qa_file_encodings_and_sizes(tmp_path, capsys):
    line = '{"question": "Où est Paris ?", "answer": ["France"]}\n'
    bom = tmp_path / "bom" / "test.jsonl"
    bom.parent.mkdir()
    bom.write_bytes(b"\xef\xbb\xbf" + line.encode("utf-8"))
    assert read_qa_file(bom)[0]["question"] == "Où est Paris ?"
    latin = _write(tmp_path, "", "latin/test.jsonl")
    latin.write_bytes(line.encode("utf-8") + line.encode("latin-1"))
    # '{"question": "O' is 15 characters, so the Latin-1 byte of "ù" is the 16th
    with pytest.raises(InputError, match=r"line 2: not UTF-8 text \(byte 0xf9 at column 16\)"):
        read_qa_file(latin)
    with pytest.raises(InputError, match="no questions") as exc:
        read_qa_file(_write(tmp_path, "\n  \n", "empty/test.jsonl"))
    assert exc.value.path.endswith("empty/test.jsonl") and exc.value.line is None
    long = _write(tmp_path, line + json.dumps({"question": "x" * 20_001, "answer": ["y"]}) + "\n", "long/a.jsonl")
    with pytest.raises(InputError, match="line 2: field 'question': 20,001 characters"):
        read_qa_file(long)
    dup = _write(tmp_path, line + '{"question": "q2?", "answer": ["b"]}\n' + line.replace("France", "Texas"),
                 "dup/test.jsonl")
    assert [(q["question"], q["answer"], q["source"]["line"]) for q in read_qa_file(dup)] == [
        ("Où est Paris ?", ["France"], 1), ("q2?", ["b"], 2)]
    assert "line 3 repeats line 1" in capsys.readouterr().err


def test_read_records_skips_a_tail_torn_inside_a_character(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_bytes(b'{"id": "a"}\n' + '{"id": "é'.encode("utf-8")[:-1])  # killed mid-way through "é"
    assert read_records(p) == [{"id": "a"}]
    with pytest.raises(InputError, match="line 2: not UTF-8"):
        read_records(p, skip_torn_tail=False)


def test_a_question_without_a_gold_answer_is_skipped_with_a_warning(tmp_path, capsys):
    p = _write(tmp_path, '{"question": "fine?", "answer": ["x"]}\n{"question": "q", "answer": [""]}\n'
                         '{"question": "empty list?", "answer": []}\n')
    got = read_qa_file(p)
    assert [q["question"] for q in got] == ["fine?"]
    err = capsys.readouterr().err
    assert "2 question(s) without a non-empty gold answer skipped" in err and "line(s) 2, 3" in err
    only = _write(tmp_path / "b", '{"question": "q", "answer": [" "]}\n')
    with pytest.raises(InputError, match="no questions with a gold answer"):
        read_qa_file(only)
