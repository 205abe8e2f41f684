"""`elical judge`: stored generations judged again with other judges, into a new directory, without generating."""

import json

from elical.cli import main
from elical.records import read_records


def _record(i, greedy, samples, aliases, question):
    return {"id": f"nq/q{i}", "dataset": "nq", "split": "test", "question": question, "answer": aliases,
            "prompt": "p", "greedy_response": greedy, "greedy_tokens": ["x"], "greedy_logprobs": [-0.1],
            "greedy_cumulative_logprobs": -0.1, "greedy_correctness": 1 - int(greedy == aliases[0]),
            "sampling_response": samples, "sampling_cumulative_logprobs": [-1.0] * len(samples),
            "sampling_num_tokens": [1] * len(samples), "sampling_correctness": [0] * len(samples),
            "consistency_judgement": [0] * len(samples), "consistency_rougeL": [0.0] * len(samples),
            "meta": {"model": "m", "judges": {"correctness": "old", "equivalence": "old"}}}


RECORDS = [
    _record(0, "Paris", ["Paris", "Lyon", "paris"], ["Paris"], "What is the capital of France?"),
    _record(1, "1990", ["1990", "1991"], ["1991"], "When did it happen?"),
    _record(2, "Paris", ["Paris", "Lyon", "paris"], ["Paris"], "What is the capital of France?"),  # same input
]


def _run_dir(path):
    (path / "records").mkdir(parents=True)
    (path / "features").mkdir()
    (path / "features" / "hidden_states.safetensors").write_bytes(b"stand-in")
    # a run judged by the removed rule judges: `elical judge` is how it moves to other judges
    (path / "config.json").write_text(json.dumps({"equivalence_judge": "span", "correctness_judge": "span-contains"}))
    with open(path / "records" / "annotations.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in RECORDS)
    return path


def test_rejudges_a_run_directory_into_a_new_one(tmp_path, capsys):
    src = _run_dir(tmp_path / "run")
    before = (src / "records" / "annotations.jsonl").read_text()
    out = tmp_path / "rejudged"
    assert main(["judge", str(src), "--output", str(out), "--quiet", "--correctness-judge", "exact",
                 "--equivalence-judge", "exact"]) == 0
    recs = read_records(out / "records" / "annotations.jsonl")
    # exact match after normalization (case folded), by hand:
    assert [r["greedy_correctness"] for r in recs] == [1, 0, 1]
    assert recs[0]["sampling_correctness"] == [1, 0, 1] and recs[1]["sampling_correctness"] == [0, 1]
    assert recs[0]["consistency_judgement"] == [1, 0, 1] and recs[1]["consistency_judgement"] == [1, 0]
    assert all(r["meta"]["judges"]["equivalence"] == "exact" and r["meta"]["model"] == "m" for r in recs)
    assert [r["sampling_response"] for r in recs] == [r["sampling_response"] for r in RECORDS]  # not generated
    assert json.loads((out / "config.json").read_text()) == {"equivalence_judge": "exact",
                                                             "correctness_judge": "exact"}
    assert (out / "features" / "hidden_states.safetensors").read_bytes() == b"stand-in"
    # record 2 repeats record 0: its greedy correctness, sample correctness and consistency calls hit the cache
    assert "3 repeated inputs answered from the cache" in capsys.readouterr().out
    assert (src / "records" / "annotations.jsonl").read_text() == before
    # an existing output is never overwritten; --resume keeps what is there
    assert main(["judge", str(src), "--output", str(out), "--quiet"]) == 2
    assert main(["judge", str(src), "--output", str(out), "--quiet", "--resume", "--correctness-judge", "exact",
                 "--equivalence-judge", "exact"]) == 0
    assert len(read_records(out / "records" / "annotations.jsonl")) == 3


def test_rejudges_a_build_directory_and_refuses_other_folders(tmp_path):
    src = tmp_path / "build"
    (src / "nq").mkdir(parents=True)
    (src / "build.json").write_text("{}")
    (src / "nq" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS[:2]))
    (src / "nq" / "test.features.safetensors").write_bytes(b"f")
    out = tmp_path / "new"
    assert main(["judge", str(src), "--output", str(out), "--quiet", "--correctness-judge", "exact",
                 "--equivalence-judge", "exact"]) == 0
    assert [r["greedy_correctness"] for r in read_records(out / "nq" / "test.jsonl")] == [1, 0]
    assert (out / "nq" / "test.features.safetensors").read_bytes() == b"f" and (out / "build.json").exists()
    (tmp_path / "empty").mkdir()
    assert main(["judge", str(tmp_path / "empty"), "--output", str(tmp_path / "x"), "--quiet"]) == 2
    assert not (tmp_path / "x").exists()
