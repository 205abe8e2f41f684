"""``--honestybench``: a fixture in the released layout through ``elical study`` on the real SmolLM2 with no
generation (only one prefill pass per batch of prompts), then ``elical export --layout official`` read back with
the official scripts' own field rules, written here independently of the writer."""
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from elical.cli import main
from elical.data.honestybench import read_honestybench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
from released_fixture import FILES, N_SAMPLES, n_prob_of, write_released  # noqa: E402

N_LINES = sum(n for _, _, n in FILES)
BATCH = 32  # the smoke study preset's batch size


@pytest.fixture(scope="module")
def study(smollm2, tmp_path_factory):
    """One smoke study on the fixture; every forward pass of the model recorded; annotate and the generator
    replaced by functions that fail."""
    import elical.generation.models as models
    import elical.jobs.annotate as annotate
    import elical.jobs.run as run

    root = tmp_path_factory.mktemp("released")
    lines = write_released(root / "fx")
    model, tok = smollm2
    calls = []

    def record(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        calls.append({"shape": tuple(ids.shape) if ids is not None else None,
                      "past": kwargs.get("past_key_values") is not None})

    def no_decoding(*a, **k):
        raise AssertionError("a generator or annotate was called on a --honestybench run")

    mp = pytest.MonkeyPatch()
    mp.setattr(models, "load_model", lambda *a, **k: (model, tok))
    mp.setattr(annotate, "annotate", no_decoding)
    mp.setattr(run, "_make_generator", no_decoding)
    hook = model.get_decoder().register_forward_pre_hook(record, with_kwargs=True)
    out = root / "study"
    try:
        rc = main(["study", "--honestybench", str(root / "fx"), "--model", "smollm2-135m-instruct", "--preset",
                   "smoke", "--output", str(out), "--alignment-protocol", "paper", "--quiet"])
    finally:
        hook.remove()
        mp.undo()
    assert rc == 0
    return root, out, lines, calls


def test_study_runs_on_released_files_without_generation(study):
    root, out, lines, calls = study
    # hidden states only: one prefill pass per batch of prompts, no cached decoding step
    assert len(calls) == math.ceil(N_LINES / BATCH)
    assert [c["shape"][0] for c in calls] == [BATCH, BATCH, N_LINES - 2 * BATCH]
    assert not any(c["past"] for c in calls)
    res = json.loads((out / "study.json").read_text())
    assert res["sizes"]["pool"] == 28 and res["sizes"]["eval"] == N_LINES - 28
    assert res["sizes"]["pool_per_dataset"] == {"hq": 12, "nq": 16}  # in-domain training files only
    assert res["sizes"]["eval_per_dataset"] == {"complex_web_questions": 6, "hq": 8, "mmlu": 8, "nq": 8, "squad": 8}
    study_md = (out / "study.md").read_text()
    assert "EliCal" in study_md and "Cal-Only" in study_md
    assert (out / "report" / "index.html").is_file()
    # the verdicts are the files': the run's records equal the fixture's lines
    by_file = {rel: rows for rel, rows in lines.items()}
    tag_of = {"nq/train.jsonl": "nq/train", "nq/test.jsonl": "nq/test", "hq_train.jsonl": "hq/train",
              "hq_dev.jsonl": "hq/dev", "squad/dev.jsonl": "squad/dev", "mmlu/test.jsonl": "mmlu/test",
              "complex_web_questions/dev.jsonl": "complex_web_questions/dev"}
    raw = {f"{tag_of[rel]}/{i}": row for rel, rows in by_file.items() for i, row in enumerate(rows, start=1)}
    recs = [json.loads(x) for x in (out / "run" / "records" / "annotations.jsonl").read_text().splitlines()]
    assert len(recs) == N_LINES
    for r in recs:
        line = raw[r["id"]]
        assert r["greedy_correctness"] == line["greedy_correctness"]
        assert r["consistency_judgement"] == line["consistency_judgement"]
        assert r["sampling_correctness"] == line["sampling_correctness"]
        assert "Answer the following question.\nQuestion: " + line["question"] in r["prompt"]
    run_res = json.loads((out / "run" / "results.json").read_text())
    assert run_res["honestybench"]["judged_by"] == "released"
    assert set(run_res["estimators"]["training_free"]) == {"Prob", "N-Prob", "Consis-Lex", "Consis-Sem"}
    assert "Alignment, both protocols: squad" in (out / "run" / "table.md").read_text()


_NEGATIVE = ("sorry", "apologize", "apologies", "uncertain", "false", "no", "unsure", "cannot", "unknown",
             "no specific answer", "not provide", "cannot answer", "no information provided", "no answer",
             "not contain", "no definitive answer")


def _says_no(text):
    """The official ``deal_judge_new``: True when the normalized text holds one of the negative phrases as words."""
    words = " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "
    return any(f" {p} " in words for p in _NEGATIVE)


def _official_threshold(conf, acc):
    best_t, best = 0.5, 0
    for t in [i / 100 for i in range(1, 100)]:
        preds = [1 if c >= t else 0 for c in conf]
        if all(p == 0 for p in preds) or all(p == 1 for p in preds):
            continue
        a = sum(int(p == y) for p, y in zip(preds, acc)) / len(acc)
        if a > best:
            best, best_t = a, t
    return best_t


def _official_alignment(conf, acc):
    half = int(len(conf) * 0.2)
    t = _official_threshold(conf[:half], acc[:half])
    rest = list(zip(conf[half:], acc[half:]))
    return sum(int((1 if c >= t else 0) == y) for c, y in rest) / len(rest)


def _jsonl(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


def test_exported_run_reads_back_with_the_official_rules(study, tmp_path):
    root, out, lines, _ = study
    run_dir = out / "run"
    dest = tmp_path / "official"
    assert main(["export", str(run_dir), "--output", str(dest), "--layout", "official",
                 "--model-name", "SmolLM2"]) == 0
    results = json.loads((run_dir / "results.json").read_text())["results"]
    preds = {}
    for row in _jsonl(run_dir / "predictions.jsonl"):
        preds.setdefault((row["method"], row["dataset"]), []).append(row["confidence"])
    raw = {rel: rows for rel, rows in lines.items()}
    for dataset, rel in (("squad", "squad/dev.jsonl"), ("nq", "nq/test.jsonl"), ("mmlu", "mmlu/test.jsonl")):
        qa = "long_mc" if dataset == "mmlu" else "long"
        folder = dest / "SmolLM2" / dataset / "test_data" / f"{qa}_qa"
        stem = f"{dataset}_test_SmolLM2_{qa}_qa"
        qa_data = _jsonl(folder / f"{stem}_0.0_0.95_50_sample_1.jsonl")
        judge = _jsonl(folder / f"{stem}_0.0_0.95_50_sample_1_long_qa_judge.jsonl")
        consis = _jsonl(folder / f"{stem}_1.0_0.95_50_sample_{N_SAMPLES}_for_greedy_consistency_res.jsonl")
        acc = [int(1 - _says_no(item["response"][0])) for item in judge]
        prob = [math.exp(item["cumulative_logprobs"][0] / len(item["tokens"][0])) for item in qa_data]
        cons = [sum(1 - int(_says_no(x["response"][0])) for x in consis[i:i + N_SAMPLES]) / N_SAMPLES
                for i in range(0, len(consis), N_SAMPLES)]
        src = raw[rel]  # every evaluation line of the file, in file order (the smoke preset takes them all)
        assert [item["question"] for item in qa_data] == [x["question"] for x in src]
        assert acc == [x["greedy_correctness"] for x in src]
        np.testing.assert_allclose(prob, [n_prob_of(x) for x in src], rtol=1e-9)
        assert cons == [sum(x["consistency_judgement"]) / N_SAMPLES for x in src]
        for method in ("N-Prob", "Eli-Only", "EliCal(16)"):
            pred = [row["predicted"] for row in
                    _jsonl(dest / "SmolLM2" / "eval" / re.sub(r"[^A-Za-z0-9.+-]+", "_", method).strip("_")
                           / dataset / "evaluation_results_test.jsonl")]
            assert pred == preds[(method, dataset)]
            # the paper's Alignment computed the official way on the exported files equals the run's
            assert _official_alignment(pred, acc) == pytest.approx(results[dataset][method]["alignment_paper"])
        np.testing.assert_allclose(preds[("N-Prob", dataset)], prob, rtol=1e-9)
    manifest = json.loads((dest / "elical_official.json").read_text())
    assert manifest["n_samples"]["squad/test"] == [N_SAMPLES] and "N = 20" in manifest["note"]
    # the released layout too, read back as the run's records
    dest2 = tmp_path / "released"
    assert main(["export", str(run_dir), "--output", str(dest2)]) == 0
    recs = {r["id"]: r for r in _jsonl(run_dir / "records" / "annotations.jsonl")}
    back = read_honestybench(dest2 / "squad" / "test.jsonl")
    assert back and all(r == recs[r["id"]] for r in back)
    assert main(["export", str(run_dir), "--output", str(dest2)]) == 2  # never overwritten


def test_a_missing_field_stops_before_the_model_loads(tmp_path, monkeypatch, capsys):
    import elical.generation.models as models

    lines = write_released(tmp_path / "fx")["hq_dev.jsonl"]
    del lines[2]["sampling_correctness"]
    (tmp_path / "fx" / "hq_dev.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    out = tmp_path / "run"
    assert main(["run", "--honestybench", str(tmp_path / "fx"), "--preset", "smoke", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'fx' / 'hq_dev.jsonl'}, line 3: field 'sampling_correctness': missing" in err
    assert not out.exists()
    assert main(["run", "--rejudge", "--preset", "smoke", "--output", str(out)]) == 2
    assert "--honestybench" in capsys.readouterr().err


class _Judges:
    """Stand-in judges with known verdicts: correct iff the answer starts with "answer"; a sample agrees with
    the greedy answer iff they are equal."""

    def correctness(self, responses, aliases, question=None):
        return np.array([int(r.startswith("answer")) for r in responses])

    def lexical(self, greedy, samples):
        return np.zeros(len(samples))

    class semantic:  # noqa: N801 -- an object with judge()
        @staticmethod
        def judge(greedy, samples, question=None):
            return np.array([int(s == greedy) for s in samples])


def test_rejudge_keeps_the_released_verdicts_beside_its_own():
    from elical.jobs.released import _rejudge

    recs = [{"id": "a", "question": "q1", "answer": ["x"], "greedy_response": "answer 1", "greedy_correctness": 0,
             "sampling_response": ["answer 1", "other"], "sampling_correctness": [1, 1],
             "consistency_judgement": [1, 1], "meta": {}},
            {"id": "b", "question": "q2", "answer": [], "greedy_response": "guess", "greedy_correctness": 1,
             "sampling_response": ["guess"], "sampling_correctness": [1], "consistency_judgement": [1],
             "meta": {}}]
    agree = _rejudge(recs, _Judges(), progress=False)
    assert recs[0]["greedy_correctness"] == 1 and recs[0]["sampling_correctness"] == [1, 0]
    assert recs[0]["consistency_judgement"] == [1, 0]
    assert recs[0]["released"] == {"greedy_correctness": 0, "sampling_correctness": [1, 1],
                                   "consistency_judgement": [1, 1]}
    # no gold alias left: nothing to judge correctness against, the released verdicts stay
    assert recs[1]["greedy_correctness"] == 1 and recs[1]["sampling_correctness"] == [1]
    assert agree == {"greedy_correctness": [1, 2], "sampling_correctness": [2, 3], "consistency_judgement": [2, 3]}
    assert recs[0]["meta"]["judged_by"] == "elical"
