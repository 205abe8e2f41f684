"""Bad input through the command line: each case gives exit code 2 and a message naming file, line and field,
before the model is loaded (where the error does not need it) and before anything is written."""

from __future__ import annotations

import json

import pytest

from elical.cli import main
from elical.data.sources import hash_split
from elical.records import read_qa_file


def _qa_dir(tmp_path, payload: bytes, name: str = "nq"):
    folder = tmp_path / "qa" / name
    folder.mkdir(parents=True)
    (folder / "test.jsonl").write_bytes(payload)
    return tmp_path / "qa", folder / "test.jsonl"


def _lines(items) -> bytes:
    return "".join(json.dumps(it) + "\n" for it in items).encode("utf-8")


def _run(tmp_path, data_dir, *extra):
    out = tmp_path / "out"
    argv = ["run", "--preset", "smoke", "--data-dir", str(data_dir), "--datasets", "nq", "--output", str(out),
            "--quiet", *extra]
    return main(argv), out


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_byte_order_mark_is_read(tmp_path, capsys):
    data_dir, path = _qa_dir(tmp_path, b"\xef\xbb\xbf" + _lines([{"question": "Who wrote Hamlet?",
                                                                  "answer": ["Shakespeare"]}]))
    items = read_qa_file(path)
    assert [(i["question"], i["answer"]) for i in items] == [("Who wrote Hamlet?", ["Shakespeare"])]
    # Through the CLI the file is read; the run then stops on its sizes (one question), not on the file.
    rc, out = _run(tmp_path, data_dir, "--n-train", "1000")
    err = _error(capsys)
    assert rc == 2 and "1000 asked" in err and "malformed" not in err and not out.exists()


def test_bytes_that_are_not_utf8_name_file_and_line(tmp_path, capsys):
    payload = _lines([{"question": "Who wrote Hamlet?", "answer": ["Shakespeare"]}])
    payload += b'{"question": "Caf\xe9 owner?", "answer": ["x"]}\n'  # Latin-1, not UTF-8
    data_dir, path = _qa_dir(tmp_path, payload)
    rc, out = _run(tmp_path, data_dir)
    err = _error(capsys)
    assert rc == 2 and str(path) in err and "line 2" in err and "not UTF-8" in err and "0xe9" in err
    assert not out.exists()


@pytest.mark.parametrize("command", ["run", "build"])
def test_empty_file_names_the_file(tmp_path, capsys, command):
    data_dir, path = _qa_dir(tmp_path, b"\n\n")
    out = tmp_path / "out"
    if command == "run":
        rc, _ = _run(tmp_path, data_dir)
    else:
        rc = main(["build", "--datasets", "nq", "--data-dir", str(data_dir), "--output", str(out), "--quiet"])
    err = _error(capsys)
    assert rc == 2 and str(path) in err and "no questions" in err
    assert "--n-train" not in err and "nothing to do" not in capsys.readouterr().out
    assert not out.exists()


def test_absurdly_long_question_is_refused_at_read_time(tmp_path, capsys):
    items = [{"question": "Who wrote Hamlet?", "answer": ["Shakespeare"]},
             {"question": "Why? " * 5000, "answer": ["because"]}]  # 25,000 characters
    data_dir, path = _qa_dir(tmp_path, _lines(items))
    rc, out = _run(tmp_path, data_dir)
    err = _error(capsys)
    assert rc == 2 and str(path) in err and "line 2" in err and "field 'question'" in err and "25,000" in err
    assert not out.exists()


def test_question_longer_than_the_model_context_is_refused_before_writing(tmp_path, capsys):
    # 19,000 digits: under the read-time cap, but SmolLM2's tokenizer makes one token per digit, more than its
    # 8,192-token context (config.json of the model: max_position_embeddings).
    long_q = "What follows " + "1234567890" * 1900 + "?"
    items = [{"question": f"What is {i} plus {i}?", "answer": [str(2 * i)]} for i in range(40)]
    items.insert(5, {"question": long_q, "answer": ["nothing"]})  # line 6
    sides = [hash_split(it["question"]) for it in items]
    data_dir, path = _qa_dir(tmp_path, _lines(items))
    # sizes that take every question of both sides, so the long one is in the run whichever side it is on
    rc, out = _run(tmp_path, data_dir, "--n-train", str(sides.count("train")), "--n-eval", str(sides.count("test")))
    err = _error(capsys)
    assert rc == 2 and str(path) in err and "line 6" in err and "context of 8,192 tokens" in err
    assert not out.exists()


def test_duplicate_questions_warn_and_keep_the_first(tmp_path, capsys):
    items = [{"question": "Who wrote Hamlet?", "answer": ["Shakespeare"]},
             {"question": "Capital of Peru?", "answer": ["Lima"]},
             {"question": "who  wrote Hamlet?", "answer": ["Marlowe"]}]
    data_dir, path = _qa_dir(tmp_path, _lines(items))
    rc, out = _run(tmp_path, data_dir, "--n-train", "1000")  # stops on sizes, after reading the file
    err = _error(capsys)
    assert "warning" in err and str(path) in err and "line 3 repeats line 1" in err and rc == 2
    kept = read_qa_file(path)
    assert [(q["question"], q["answer"]) for q in kept] == [("Who wrote Hamlet?", ["Shakespeare"]),
                                                            ("Capital of Peru?", ["Lima"])]


def test_n_eval_below_the_minimum_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["run", "--preset", "smoke", "--n-eval", "1", "--output", str(out), "--quiet"])
    err = _error(capsys)
    assert rc == 2 and "--n-eval" in err and "at least 10" in err and not out.exists()


def test_output_that_is_a_file_is_refused_and_kept(tmp_path, capsys):
    out = tmp_path / "results.txt"
    out.write_text("keep me\n")
    rc = main(["run", "--preset", "smoke", "--output", str(out), "--quiet"])
    err = _error(capsys)
    assert rc == 2 and str(out) in err and "--output" in err and "is a file" in err
    assert out.read_text() == "keep me\n"


def test_out_of_domain_dataset_cannot_be_named_for_the_pool(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["run", "--preset", "smoke", "--pool-datasets", "squad", "--output", str(out), "--quiet"])
    err = _error(capsys)
    assert rc == 2 and "'squad' is out-of-domain" in err and not out.exists()


@pytest.mark.slow
def test_quiet_silences_every_progress_bar(tmp_path, capfd):
    # a tiny real run (the model loads, generates, judges, extracts states, fits heads): nothing on stderr
    out = tmp_path / "out"
    rc = main(["run", "--preset", "smoke", "--n-train", "16", "--n-eval", "10", "--k", "4", "--n-samples", "2",
               "--output", str(out), "--quiet"])
    captured = capfd.readouterr()
    assert rc == 0, captured.err
    bars = [line for line in captured.err.splitlines() if "%|" in line or "it/s" in line or "s/it" in line]
    assert bars == [], captured.err[-2000:]
    assert (out / "results.json").exists()


def test_resume_may_change_the_batch_size_but_not_what_is_computed(tmp_path):
    """A run directory written with batch 16 resumes with batch 32 and --stream-features (neither changes an answer
    or a head beyond float rounding); a changed sample count is refused, naming the field, and nothing is written."""
    from dataclasses import asdict, replace

    from elical.jobs.run import RunConfig, check_run_dir
    from elical.records import InputError

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    saved = asdict(RunConfig(batch_size=16))
    (run_dir / "config.json").write_text(json.dumps(saved))
    check_run_dir(run_dir, RunConfig(batch_size=32, stream_features=True), resume=True)
    with pytest.raises(InputError, match="n_samples: 5 in the directory, 7 now"):
        check_run_dir(run_dir, replace(RunConfig(), n_samples=7), resume=True)
    assert (run_dir / "config.json").read_text() == json.dumps(saved) and len(list(run_dir.iterdir())) == 1
