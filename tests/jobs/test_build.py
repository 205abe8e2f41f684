"""`elical build` / `merge` / `export` with the real SmolLM2: a build killed with SIGKILL and resumed equals an
uninterrupted one; shards merge into the same files; merge refuses overlapping or missing ids; export round trip."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from elical.jobs.build import BuildConfig, parse_shard, plan_units, shard_part
from elical.jobs.reuse import reuse_build, reuse_features
from elical.cli import main
from elical.generation.features import load_features
from elical.data.honestybench import read_honestybench
from elical.records import InputError, read_records

# 24 facts questions of the evaluation side, 6 batches of 4, 2 samples of at most 6 tokens.
ARGS = ["build", "--datasets", "facts", "--split", "test", "--limit", "24", "--n-samples", "2",
        "--max-new-tokens", "6", "--batch-size", "4", "--quiet"]
CONFIG = "build.json"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _elical(*args):
    """Start `elical` in a fresh process (all builds compared line by line run alike, one thread each)."""
    return subprocess.Popen([sys.executable, "-m", "elical.cli", *args], env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _run(*args):
    proc = _elical(*args)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted build."""
    out = tmp_path_factory.mktemp("ref") / "build"
    _run(*ARGS, "--output", str(out))
    return out


def test_sigkill_midway_then_resume_equals_uninterrupted(reference, tmp_path):
    out = tmp_path / "killed"
    records = out / "facts" / "test.jsonl"
    proc = _elical(*ARGS, "--output", str(out))
    deadline = time.time() + 300
    while not (records.exists() and b"\n" in records.read_bytes()):  # the first batch is on disk
        assert proc.poll() is None and time.time() < deadline, "build ended before its first batch was seen"
        time.sleep(0.02)
    proc.kill()  # SIGKILL: no cleanup of any kind
    proc.wait()
    assert proc.returncode == -9
    n_lines = records.read_bytes().count(b"\n")
    assert 0 < n_lines < 24
    assert not (out / "facts" / "test.features.safetensors").exists()
    with open(records, "ab") as fh:  # a write torn by the kill
        fh.write(b'{"id": "facts/torn", "dataset": "fa')

    log = _run(*ARGS, "--output", str(out))
    assert f"{n_lines} of 24 records present" in log
    ref_lines = (reference / "facts" / "test.jsonl").read_text(encoding="utf-8").splitlines()
    got = [json.loads(line) for line in records.read_text(encoding="utf-8").splitlines()]
    ref = [json.loads(line) for line in ref_lines]
    assert [r["id"] for r in got] == [r["id"] for r in ref]  # no record lost, none duplicated, same order
    # answers generated but not yet judged at the kill are judged from test.generations.jsonl, so the resumed
    # batches start elsewhere: texts, tokens and judgements equal, log-probs within float noise of the batch shape
    logprob_fields = {"greedy_logprobs", "greedy_cumulative_logprobs", "sampling_cumulative_logprobs"}
    for g, e in zip(got, ref):
        assert {k: v for k, v in g.items() if k not in logprob_fields} == \
            {k: v for k, v in e.items() if k not in logprob_fields}, e["id"]
        for k in logprob_fields & set(e):
            np.testing.assert_allclose(np.array(g[k], dtype=float), np.array(e[k], dtype=float), atol=1e-4)
    assert len(ref_lines) == 24 and len({json.loads(l)["id"] for l in ref_lines}) == 24
    ids, X, meta = load_features(out / "facts" / "test.features.safetensors")
    ref_ids, ref_X, _ = load_features(reference / "facts" / "test.features.safetensors")
    assert ids == ref_ids == [json.loads(l)["id"] for l in ref_lines] and X.shape == (24, 576)
    # records generated before the kill get the separate feature pass, the others the decoder's prefill: float noise
    np.testing.assert_allclose(X, ref_X, atol=1e-4)
    assert meta == {"model": "smollm2-135m-instruct", "layer": -1, "token": "last prompt token"}

    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (out / "facts").iterdir()}
    log = _run(*ARGS, "--output", str(out))
    assert "nothing to do" in log
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (out / "facts").iterdir()} == before


def test_shards_merge_into_the_unsharded_build(reference, tmp_path, capsys):
    out = tmp_path / "sharded"
    procs = [_elical(*ARGS, "--shard", s, "--output", str(out)) for s in ("1/2", "2/2")]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    shard1 = read_records(out / "facts" / "test.shard-1-of-2.jsonl")
    shard2 = read_records(out / "facts" / "test.shard-2-of-2.jsonl")
    ref = read_records(reference / "facts" / "test.jsonl")
    ref_ids = [r["id"] for r in ref]
    # shard 1 holds batches 0, 2, 4 and shard 2 batches 1, 3, 5 of the 4-question batches
    assert [r["id"] for r in shard1] == ref_ids[0:4] + ref_ids[8:12] + ref_ids[16:20]
    assert [r["id"] for r in shard2] == ref_ids[4:8] + ref_ids[12:16] + ref_ids[20:24]
    assert main(["merge", str(out)]) == 0
    assert (out / "facts" / "test.jsonl").read_bytes() == (reference / "facts" / "test.jsonl").read_bytes()
    ids, X, _ = load_features(out / "facts" / "test.features.safetensors")
    ref_f = load_features(reference / "facts" / "test.features.safetensors")
    assert ids == ref_f[0]
    np.testing.assert_allclose(X, ref_f[1], atol=1e-4)  # shards pad different batches: float noise only
    capsys.readouterr()
    assert main(["merge", str(out)]) == 0 and "nothing to do" in capsys.readouterr().out
    assert _run(*ARGS, "--output", str(out)).startswith("nothing to do")  # the merged build is complete


def _shard_dir(reference, tmp_path, parts):
    out = tmp_path / "fake"
    (out / "facts").mkdir(parents=True)
    shutil.copy(reference / CONFIG, out / CONFIG)
    lines = (reference / "facts" / "test.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    for i, (a, b) in enumerate(parts, start=1):
        (out / "facts" / f"test.shard-{i}-of-{len(parts)}.jsonl").write_text("".join(lines[a:b]), encoding="utf-8")
    return out, [json.loads(l)["id"] for l in lines]



def test_merge_refuses_overlap_and_missing(reference, tmp_path, capsys):
    out, ids = _shard_dir(reference, tmp_path / "overlap", [(0, 12), (8, 24)])
    assert main(["merge", str(out)]) == 2
    err = capsys.readouterr().err
    assert "4 ids in more than one shard" in err and all(i in err for i in ids[8:12])
    assert not (out / "facts" / "test.jsonl").exists()

    out, ids = _shard_dir(reference, tmp_path / "missing", [(0, 12), (16, 24)])
    assert main(["merge", str(out)]) == 2
    err = capsys.readouterr().err
    assert "4 ids missing" in err and all(i in err for i in ids[12:16]) and ids[11] not in err
    assert not (out / "facts" / "test.jsonl").exists()

    out, ids = _shard_dir(reference, tmp_path / "absent", [(0, 12), (24, 24), (12, 24)])
    (out / "facts" / "test.shard-2-of-3.jsonl").unlink()
    assert main(["merge", str(out)]) == 0  # a shard with no batches leaves no file; nothing is missing


def test_export_round_trip(reference, tmp_path, capsys):
    dest = tmp_path / "released"
    assert main(["export", str(reference), "--output", str(dest)]) == 0
    lines = [json.loads(l) for l in (dest / "facts" / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    recs = read_records(reference / "facts" / "test.jsonl")
    assert len(lines) == 24
    first = lines[0]
    assert list(first)[:10] == ["question", "answer", "greedy_response", "greedy_correctness", "greedy_tokens",
                                "greedy_cumulative_logprobs", "greedy_logprobs", "sampling_response",
                                "sampling_correctness", "consistency_judgement"]
    assert first["greedy_response"] == [recs[0]["greedy_response"]]
    assert first["greedy_tokens"] == [recs[0]["greedy_tokens"]]
    assert first["greedy_cumulative_logprobs"] == [recs[0]["greedy_cumulative_logprobs"]]
    assert read_honestybench(dest / "facts" / "test.jsonl") == recs
    # an existing destination is not overwritten
    before = (dest / "facts" / "test.jsonl").read_bytes()
    assert main(["export", str(reference), "--output", str(dest)]) == 2
    assert "exists" in capsys.readouterr().err and (dest / "facts" / "test.jsonl").read_bytes() == before


def test_export_official_layout_of_a_build(reference, tmp_path):
    dest = tmp_path / "official"
    assert main(["export", str(reference), "--output", str(dest), "--layout", "official", "--model-name", "M"]) == 0
    recs = read_records(reference / "facts" / "test.jsonl")
    folder = dest / "M" / "facts" / "test_data" / "long_qa"
    stem = "facts_test_M_long_qa"
    greedy = [json.loads(x) for x in (folder / f"{stem}_0.0_0.95_50_sample_1.jsonl").read_text().splitlines()]
    judge = [json.loads(x) for x in (folder / f"{stem}_0.0_0.95_50_sample_1_long_qa_judge.jsonl").read_text()
             .splitlines()]
    n = len(recs[0]["sampling_response"])
    consis = (folder / f"{stem}_1.0_0.95_50_sample_{n}_for_greedy_consistency_res.jsonl").read_text().splitlines()
    assert [g["response"] for g in greedy] == [[r["greedy_response"]] for r in recs]
    assert [j["response"] for j in judge] == [["Yes" if r["greedy_correctness"] else "No"] for r in recs]
    assert len(consis) == n * len(recs) and not (dest / "M" / "eval").exists()  # a build has no confidences


def test_config_mismatch_and_foreign_directory(reference, tmp_path, capsys):
    before = (reference / "facts" / "test.jsonl").read_bytes()
    args = [a if a != "2" else "3" for a in ARGS]  # --n-samples 3
    assert main([*args, "--output", str(reference)]) == 2
    err = capsys.readouterr().err
    assert "build.json" in err and "n_samples" in err
    assert (reference / "facts" / "test.jsonl").read_bytes() == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    assert main([*ARGS, "--output", str(other)]) == 2
    assert "not a build directory" in capsys.readouterr().err and os.listdir(other) == ["keep.txt"]
    assert main([*ARGS, "--shard", "3/2", "--output", str(tmp_path / "x")]) == 2
    assert main(["build", "--datasets", "mmlu", "--output", str(tmp_path / "y")]) == 2
    assert "--mmlu-dir" in capsys.readouterr().err and not (tmp_path / "y").exists()


def test_run_reuses_the_build(reference, tmp_path):
    cfg = BuildConfig(datasets=("facts",), split="test", limit=24, n_samples=2, max_new_tokens=6, batch_size=4)
    (unit,) = plan_units(cfg)
    recs = read_records(reference / "facts" / "test.jsonl")
    questions = [*unit.questions[:10], {"id": "facts/new", "dataset": "facts", "split": "test",
                                        "question": "What is the capital of Peru?", "answer": ["Lima"]}]
    path = tmp_path / "run" / "annotations.jsonl"
    meta = {**recs[0]["meta"], "seed": 7, "decoding": {**recs[0]["meta"]["decoding"], "batch_size": 16}}
    assert reuse_build(reference, questions, path, meta=meta) == 10
    assert read_records(path) == recs[:10]
    assert reuse_build(reference, questions, path, meta=meta) == 0  # already there
    other = {**meta, "decoding": {**meta["decoding"], "n_samples": 5}}
    with pytest.raises(InputError, match="n_samples"):
        reuse_build(reference, questions, tmp_path / "other.jsonl", meta=other)
    X = reuse_features(reference, recs[5:9], None, None, model_name="smollm2-135m-instruct", layer=-1)
    _, ref_X, _ = load_features(reference / "facts" / "test.features.safetensors")
    np.testing.assert_array_equal(X, ref_X[5:9])


def test_plan_units_pools_are_disjoint_and_shards_partition(shared_data):
    cfg = BuildConfig(datasets=("nq",), data_dir=str(shared_data / "honestybench-qa"))
    train, test = plan_units(cfg)
    assert (train.split, test.split) == ("train", "test")
    assert len(train.questions) + len(test.questions) == 3610
    # an independent normalization (not the split's own): runs of [a-z0-9] as words, articles dropped
    words = lambda q: " ".join(w for w in re.findall(r"[a-z0-9]+", q["question"].lower())  # noqa: E731
                               if w not in ("a", "an", "the"))
    assert not set(map(words, train.questions)) & set(map(words, test.questions))
    small = plan_units(BuildConfig(datasets=("nq",), data_dir=cfg.data_dir, split="train", limit=50))[0]
    larger = plan_units(BuildConfig(datasets=("nq",), data_dir=cfg.data_dir, split="train", limit=80))[0]
    assert len(small.questions) == 50 and {q["id"] for q in small.questions} < {q["id"] for q in larger.questions}
    ids = [q["id"] for q in small.questions]
    assert ids == [q["id"] for q in train.questions if q["id"] in set(ids)]  # file order kept
    parts = [shard_part(small.questions, 8, (i, 3)) for i in (1, 2, 3)]
    assert sorted(q["id"] for p in parts for q in p) == sorted(ids)
    assert [len(p) for p in parts] == [18, 16, 16]  # batches 0,3,6 | 1,4 | 2,5 of 8, 8, 8, 8, 8, 8, 2
    assert parse_shard("2/5") == (2, 5)
    for bad in ("0/2", "3/2", "x"):
        with pytest.raises(InputError, match="--shard"):
            parse_shard(bad)
    notes = []
    assert plan_units(BuildConfig(datasets=("mmlu",), mmlu_dir=str(shared_data / "mmlu"), split="train"),
                      log=notes.append) == []
    assert notes == ["mmlu/train: no questions on this side; skipped"]
