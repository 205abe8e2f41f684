import json
import math

import numpy as np
import pytest

from elical.cli import main
from elical.estimators import names_of_kind
from elical.estimators.training_free import n_prob, prob, se_discrete

ESTIMATORS = names_of_kind("record", "semantic")
from elical.evaluation.metrics import auroc, evaluate_confidence

CONFIG = {"preset": "smoke", "model": "smollm2-135m-instruct", "datasets": ["facts"], "seed": 3, "device": "cpu",
          "semantic_model": None, "dev_fraction": 0.25, "n_bootstrap": 50, "batch_size": 4}
# Answers the semantic judge decides by its rules alone (normalized equality, the number guard), so no
# embedding model is loaded: the values below are exact.
SAMPLES = [["1990", "1990", "1990"], ["1990", "1991", "1990"], ["1990", "1991", "1992"], ["7", "7", "8"]]


def record(i, split="test"):
    samples = SAMPLES[i % 4]
    return {"id": f"facts/q{i}", "dataset": "facts", "split": split, "question": f"In which year did {i} happen?",
            "answer": ["1990"], "greedy_response": samples[0], "greedy_tokens": ["1", "9"],
            "greedy_logprobs": [-0.1 * (i + 1), -0.05 * i], "greedy_correctness": int(i % 3 != 1),
            "sampling_response": samples, "sampling_cumulative_logprobs": [-0.5, -1.0 - i / 10, -2.0],
            "sampling_num_tokens": [2, 2, 2], "sampling_correctness": [int(s == "1990") for s in samples],
            "consistency_judgement": [int(s == samples[0]) for s in samples],
            "consistency_rougeL": [float(s == samples[0]) for s in samples]}


def make_run(path, n_test=8, records=None):
    records = records or [record(i) for i in range(n_test)] + [record(100 + i, "train") for i in range(4)]
    (path / "records").mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(CONFIG))
    with open(path / "records" / "annotations.jsonl", "w") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    test = [r for r in records if r["split"] == "test"]
    trained = np.linspace(0.1, 0.9, len(test))
    with open(path / "predictions.jsonl", "w") as fh:
        for r, c in zip(test, trained):
            for method, conf in (("N-Prob", 0.123), ("EliCal(8)", float(c))):
                fh.write(json.dumps({"id": r["id"], "dataset": "facts", "method": method, "confidence": conf,
                                     "greedy_correctness": r["greedy_correctness"]}) + "\n")
    old = {"config": CONFIG, "versions": {"elical": "x"}, "timings": {"total_s": 1.0}, "sizes": {"eval": len(test)},
           "results": {"all": {"Removed-Method": {"auroc": 0.5}}}}
    (path / "results.json").write_text(json.dumps(old))
    return test, trained


def test_evaluate_adds_every_estimator_and_keeps_trained_methods(tmp_path, capsys):
    test, trained = make_run(tmp_path)
    assert main(["evaluate", str(tmp_path), "--quiet"]) == 0
    preds = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    methods = list(dict.fromkeys(p["method"] for p in preds))
    assert methods == list(ESTIMATORS) + ["EliCal(8)"]
    assert all(len([p for p in preds if p["method"] == m]) == len(test) for m in methods)
    assert [p["confidence"] for p in preds if p["method"] == "EliCal(8)"] == pytest.approx(trained.tolist())
    # the stale N-Prob lines were replaced by recomputed ones
    assert [p["confidence"] for p in preds if p["method"] == "N-Prob"] == pytest.approx(n_prob(test).tolist())

    res = json.loads((tmp_path / "results.json").read_text())
    assert res["versions"] == {"elical": "x"} and res["timings"] == {"total_s": 1.0}  # nothing lost
    table = res["results"]["all"]
    assert list(table) == list(ESTIMATORS) + ["EliCal(8)", "Removed-Method"]
    y = np.array([r["greedy_correctness"] for r in test])
    assert table["Prob"]["auroc"] == pytest.approx(auroc(y, prob(test)))
    ref = evaluate_confidence(y, prob(test), dev_fraction=0.25, seed=3, n_resamples=50)  # the run's settings
    for key in ("auroc", "ece", "brier", "alignment", "threshold", "aurc", "n_dev"):
        assert table["Prob"][key] == pytest.approx(ref[key])
    assert table["Prob"]["ci"]["auroc"] == pytest.approx(ref["ci"]["auroc"])
    assert table["EliCal(8)"]["auroc"] == pytest.approx(auroc(y, trained))
    # SE-Discrete by hand: samples (1990 x3) -> 1; (1990, 1991, 1990) -> 1 - H(2/3, 1/3)/log 3; all different -> 0
    h = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    se = [p["confidence"] for p in preds if p["method"] == "SE-Discrete"]
    assert se[:4] == pytest.approx([1.0, 1 - h / math.log(3), 0.0, 1 - h / math.log(3)])
    assert se == pytest.approx(se_discrete(test).tolist())
    assert res["estimators"]["Consis-Sem"] == {"kind": "record"} and res["evaluate"]["skipped"] == []
    assert "| SE-Weighted |" in (tmp_path / "table.md").read_text()
    assert "| EliCal(8) |" in capsys.readouterr().out

    assert res["estimators"]["SE-Discrete"]["judge"] == "learned"  # the default equivalence judge

    # a second run is idempotent: same lines, nothing duplicated (another judge, same clusters on these answers)
    before = (tmp_path / "predictions.jsonl").read_text()
    assert main(["evaluate", str(tmp_path), "--quiet", "--estimators", "Prob,SE-Weighted", "--se-judge",
                 "exact"]) == 0
    after = (tmp_path / "predictions.jsonl").read_text()
    assert sorted(before.splitlines()) == sorted(after.splitlines())
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["estimators"]["SE-Weighted"]["judge"] == "exact"
    assert res["estimators"]["SE-Weighted"]["se_length_normalized"] is False
    assert res["estimators"]["SE-Discrete"]["judge"] == "learned"  # from the first call, kept


def test_a_run_judged_by_a_removed_judge_clusters_with_the_default(tmp_path, capsys):
    make_run(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "equivalence_judge": "span"}))  # removed after 3e9e417
    assert main(["evaluate", str(tmp_path), "--estimators", "SE-Discrete", "--quiet"]) == 0
    assert "equivalence_judge 'span' was removed" in capsys.readouterr().err
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["estimators"]["SE-Discrete"]["judge"] == "learned"
    assert main(["evaluate", str(tmp_path), "--se-judge", "span", "--quiet"]) == 2  # named: an error
    assert "was removed" in capsys.readouterr().err


def test_records_without_logprobs(tmp_path, capsys):
    records = [record(i) for i in range(6)]
    for r in records[3:5]:  # fields absent, or empty lists as a backend without log-probs writes them
        r.pop("greedy_logprobs")
        r.pop("sampling_cumulative_logprobs")
    records[5].update(greedy_logprobs=[], greedy_cumulative_logprobs=0.0, sampling_cumulative_logprobs=[],
                      sampling_num_tokens=[])
    test, _ = make_run(tmp_path, records=records)
    snapshot = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    # named explicitly: exit 2, the error names file, line and field, nothing is written
    assert main(["evaluate", str(tmp_path), "--estimators", "Consis-Sem,N-Prob", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "annotations.jsonl, line 4: field 'greedy_logprobs'" in err and "facts/q3" in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == snapshot
    # by default: the estimators that need log-probs are skipped with a warning, the others are reported
    assert main(["evaluate", str(tmp_path), "--quiet"]) == 0
    assert "skipped SE-Weighted" in capsys.readouterr().err
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["evaluate"]["skipped"] == ["N-Prob", "Prob", "SE-Weighted"]
    assert "line 4" in res["estimators"]["Prob"]["skipped"]
    assert {"Consis-Lex", "Consis-Sem", "SE-Discrete", "EliCal(8)"} <= set(res["results"]["all"])
    preds = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [p["confidence"] for p in preds if p["method"] == "N-Prob"] == [0.123] * 6  # old lines kept


@pytest.mark.parametrize("problem", ["no_dir", "unknown", "bad_label", "nan", "bad_judge"])
def test_bad_input_exits_2(tmp_path, capsys, problem):
    run = tmp_path / "run"
    if problem == "no_dir":
        assert main(["evaluate", str(run)]) == 2
        assert "not a directory" in capsys.readouterr().err
        return
    records = [record(i) for i in range(5)]
    if problem == "bad_label":
        records[2]["greedy_correctness"] = 0.5
    if problem == "nan":
        records[1]["consistency_rougeL"][0] = float("nan")
    make_run(run, records=records)
    args = ["evaluate", str(run), "--quiet", "--estimators", "Nope" if problem == "unknown" else "Consis-Lex"]
    if problem == "bad_judge":
        args = ["evaluate", str(run), "--se-judge", "oracle"]
    assert main(args) == 2
    err = capsys.readouterr().err
    expected = {"unknown": "unknown estimator(s) Nope", "bad_label": "line 3: field 'greedy_correctness'",
                "nan": "line 2: field 'consistency_rougeL': Consis-Lex: record facts/q1: contains NaN",
                "bad_judge": "unknown equivalence judge 'oracle'"}[problem]
    assert expected in err


def test_end_to_end_all_estimators_on_real_smollm2_output(tmp_path, smollm2, capsys):
    """Real SmolLM2 answers (greedy + 3 samples) on 8 facts questions, then every estimator, model-based ones too."""
    from elical.jobs.annotate import Annotator, annotate
    from elical.data.sources import select_run_questions
    from elical.data.facts import load_facts
    from elical.generation.base import DecodingConfig
    from elical.generation.prefix_sharing import TransformersGenerator

    model, tok = smollm2
    questions = select_run_questions({"facts": load_facts()}, n_train=4, n_eval=8, seed=1)
    gen = TransformersGenerator(model, tok, DecodingConfig(n_samples=3, max_new_tokens=8, batch_size=12))
    annotate(questions, gen, Annotator.default(), tmp_path / "records" / "annotations.jsonl", seed=1, meta={},
             progress=False)
    (tmp_path / "config.json").write_text(json.dumps({**CONFIG, "seed": 1}))
    assert main(["evaluate", str(tmp_path), "--model-estimators", "--k-shot", "2", "--quiet"]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    names = list(ESTIMATORS) + ["Verbal-0", "Verbal-k", "P(True)"]
    assert list(res["results"]["all"]) == names
    assert res["evaluate"]["skipped"] == []
    preds = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 8 * len(names) and all(0.0 <= p["confidence"] <= 1.0 for p in preds)
    assert res["estimators"]["Verbal-k"]["k"] == 2 and len(res["estimators"]["Verbal-k"]["example_ids"]) == 2
    assert all(i.split("/")[0] == "facts" for i in res["estimators"]["Verbal-k"]["example_ids"])
    assert 0 <= res["estimators"]["Verbal-0"]["n_unparseable"] <= 8
    assert "| P(True) |" in capsys.readouterr().out


def test_stored_methods_are_aligned_by_record_id(tmp_path):
    # predictions.jsonl in reverse question order: the scores must be those of the method in record order
    # (same Alignment dev part), computed here straight from evaluate_confidence.
    test, trained = make_run(tmp_path, n_test=12)
    lines = (tmp_path / "predictions.jsonl").read_text().splitlines()
    (tmp_path / "predictions.jsonl").write_text("\n".join(reversed(lines)) + "\n")
    assert main(["evaluate", str(tmp_path), "--quiet", "--estimators", "Prob"]) == 0
    res = json.loads((tmp_path / "results.json").read_text())["results"]["all"]["EliCal(8)"]
    y = np.array([r["greedy_correctness"] for r in test])
    want = evaluate_confidence(y, trained, dev_fraction=CONFIG["dev_fraction"], seed=CONFIG["seed"], n_resamples=50)
    assert res["alignment"] == pytest.approx(want["alignment"]) and res["threshold"] == pytest.approx(want["threshold"])
    assert res["auroc"] == pytest.approx(want["auroc"])


def test_a_stored_method_on_other_questions_is_refused(tmp_path, capsys):
    make_run(tmp_path)
    lines = (tmp_path / "predictions.jsonl").read_text().splitlines()
    (tmp_path / "predictions.jsonl").write_text("\n".join(lines[2:]) + "\n")  # one question's lines gone
    before = (tmp_path / "results.json").read_text()
    assert main(["evaluate", str(tmp_path), "--quiet", "--estimators", "Prob"]) == 2
    assert "predictions.jsonl" in capsys.readouterr().err
    assert (tmp_path / "results.json").read_text() == before


def test_semantic_entropy_clusters_with_the_runs_own_judge_by_default(tmp_path):
    make_run(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "equivalence_judge": "exact"}))
    assert main(["evaluate", str(tmp_path), "--quiet", "--estimators", "SE-Discrete"]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["estimators"]["SE-Discrete"]["judge"] == "exact"


@pytest.mark.parametrize("deleted", ["predictions.jsonl", "results.json"])
def test_a_run_missing_predictions_or_results_is_refused_and_untouched(tmp_path, capsys, deleted):
    """Issue 25 (9): evaluating would drop the trained heads (predictions deleted) or the run's versions, timings
    and sizes (results deleted): exit 2 naming the missing file, nothing written."""
    make_run(tmp_path)
    (tmp_path / deleted).unlink()
    snapshot = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert main(["evaluate", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / deleted}: missing while" in err and "--resume" in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == snapshot
