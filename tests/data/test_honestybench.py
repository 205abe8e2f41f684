"""Released HonestyBench files in and out: both forms of the greedy fields, validation, round trip."""
import json
import math

import pytest

from elical.estimators.training_free import n_prob
from elical.data.honestybench import from_released, read_honestybench, to_released, write_honestybench
from elical.records import InputError, self_consistency, sample_accuracy

# A line in the released layout (authors' README): greedy fields wrapped in one-element lists.
RELEASED = {"question": "who wrote hamlet", "answer": ["William Shakespeare", "Shakespeare", ""],
            "greedy_response": ["Shakespeare"], "greedy_correctness": 1, "greedy_tokens": [["Sh", "akespeare"]],
            "greedy_cumulative_logprobs": [-0.5], "greedy_logprobs": [[-0.25, -0.25]],
            "sampling_response": ["Shakespeare", "Marlowe", "William Shakespeare", "Bacon"],
            "sampling_correctness": [1, 0, 1, 0], "consistency_judgement": [1, 0, 1, 0]}

RECORD = {"id": "nq/7", "dataset": "nq", "split": "train", "question": "who wrote hamlet",
          "answer": ["William Shakespeare"], "prompt": "<|im_start|>user\nwho wrote hamlet<|im_end|>\n",
          "greedy_response": "Shakespeare", "greedy_tokens": ["Sh", "akespeare"], "greedy_logprobs": [-0.1, -0.2],
          "greedy_cumulative_logprobs": -0.3, "greedy_correctness": 1, "sampling_response": ["Marlowe", ""],
          "sampling_cumulative_logprobs": [-3.0, -0.5], "sampling_num_tokens": [2, 0],
          "sampling_correctness": [0, 0], "consistency_judgement": [0, 0], "consistency_rougeL": [0.0, 0.0],
          "meta": {"model": "m", "seed": 0}, "choices": None}


def test_released_line_becomes_a_record(tmp_path):
    rec = from_released(RELEASED, tmp_path / "nq" / "test.jsonl", 3)
    assert rec["id"] == "nq/3" and rec["dataset"] == "nq" and rec["split"] == "test"
    assert rec["answer"] == ["William Shakespeare", "Shakespeare"]  # the empty alias is dropped
    assert rec["greedy_response"] == "Shakespeare" and rec["greedy_tokens"] == ["Sh", "akespeare"]
    assert rec["greedy_logprobs"] == [-0.25, -0.25] and rec["greedy_cumulative_logprobs"] == -0.5
    assert rec["prompt"] is None and rec["meta"] == {"source": "test.jsonl"} and rec["consistency_rougeL"] == []
    assert self_consistency(rec) == 0.5 and sample_accuracy(rec) == 0.5
    assert n_prob([rec])[0] == pytest.approx(math.exp(-0.25))
    bare = {**RELEASED, "greedy_response": "Shakespeare", "greedy_tokens": ["Sh", "akespeare"],
            "greedy_logprobs": [-0.25, -0.25], "greedy_cumulative_logprobs": -0.5, "greedy_correctness": True}
    assert from_released(bare, tmp_path / "nq" / "test.jsonl", 3) == rec
    no_cum = {k: v for k, v in RELEASED.items() if k != "greedy_cumulative_logprobs"}
    assert from_released(no_cum, "f", 1, dataset="nq")["greedy_cumulative_logprobs"] == -0.5


@pytest.mark.parametrize("change, field", [
    ({"greedy_response": ["a", "b"]}, "greedy_response"),
    ({"greedy_response": None}, "greedy_response"),
    ({"greedy_correctness": 2}, "greedy_correctness"),
    ({"sampling_correctness": [1, 0]}, "sampling_correctness"),
    ({"consistency_judgement": [1, 0, 1, "yes"]}, "consistency_judgement"),
    ({"greedy_logprobs": [[-0.1]]}, "greedy_logprobs"),
    ({"answer": "Shakespeare"}, "answer"),
    ({"question": ""}, "question"),
])
def test_bad_lines_name_file_line_field(tmp_path, change, field):
    path = tmp_path / "nq.jsonl"
    path.write_text(json.dumps(RELEASED) + "\n\n" + json.dumps({**RELEASED, **change}) + "\n")
    with pytest.raises(InputError) as exc:
        read_honestybench(path)
    assert (exc.value.path, exc.value.line, exc.value.field) == (str(path), 3, field)


def test_malformed_json_and_duplicate_ids(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(RELEASED) + "\n{not json\n")
    with pytest.raises(InputError, match="line 2"):
        read_honestybench(path)
    path.write_text(json.dumps({**RELEASED, "id": "a"}) + "\n" + json.dumps({**RELEASED, "id": "a"}) + "\n")
    with pytest.raises(InputError, match="duplicate id 'a'"):
        read_honestybench(path)


def test_write_then_read_round_trip(tmp_path):
    released = to_released(RECORD)
    assert released["greedy_response"] == ["Shakespeare"] and released["greedy_tokens"] == [["Sh", "akespeare"]]
    assert released["greedy_logprobs"] == [[-0.1, -0.2]] and released["greedy_cumulative_logprobs"] == [-0.3]
    assert list(released)[-1] == "choices" and released["id"] == "nq/7"
    empty = {**RECORD, "id": "nq/8", "greedy_response": "", "greedy_tokens": [], "greedy_logprobs": [],
             "greedy_cumulative_logprobs": 0.0}
    path = tmp_path / "out" / "nq" / "train.jsonl"
    assert write_honestybench(path, [RECORD, empty]) == 2
    assert read_honestybench(path) == [RECORD, empty]
    assert not list(path.parent.glob("*.tmp*"))
