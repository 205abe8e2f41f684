"""Tests for elical.evaluation.metrics against sklearn and hand-computed values."""

import math

import numpy as np

from elical.evaluation.spec import metric_names
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, roc_auc_score

from elical.data.groups import group_of
from elical.evaluation.aggregate import aggregate
from elical.evaluation.metrics import (
    accuracy_at_coverage, alignment, alignment_accuracy, aurc, auroc, best_threshold, bootstrap_ci, brier,
    ece, evaluate_confidence, reliability_bins, risk_coverage,
)
from elical.evaluation.metrics import _auroc_rank


def _random(n=500, seed=0, rounded=False):
    rng = np.random.default_rng(seed)
    c = rng.random(n)
    if rounded:  # many ties
        c = np.round(c, 1)
    y = (rng.random(n) < c).astype(int)
    return y, c


# ------------------------------------------------------------------------------------------------- AUROC, Brier
@pytest.mark.parametrize("rounded", [False, True])
def test_auroc_and_brier_match_sklearn(rounded):
    y, c = _random(rounded=rounded)
    assert auroc(y, c) == pytest.approx(roc_auc_score(y, c), abs=1e-12)
    assert _auroc_rank(y, c) == pytest.approx(roc_auc_score(y, c), abs=1e-12)
    assert brier(y, c) == pytest.approx(brier_score_loss(y, c), abs=1e-12)


def test_auroc_hand_and_one_class():
    # pairs (pos, neg): (0.9,0.1)=1, (0.9,0.9)=1/2, (0.4,0.1)=1, (0.4,0.9)=0 -> 2.5 / 4
    assert auroc([1, 1, 0, 0], [0.9, 0.4, 0.1, 0.9]) == pytest.approx(0.625)
    assert math.isnan(auroc([1, 1, 1], [0.2, 0.5, 0.9]))
    assert math.isnan(auroc([0, 0], [0.2, 0.5]))
    assert brier([1, 1], [1.0, 0.5]) == pytest.approx(0.125)
    assert brier([0, 0], [0.7, 0.7]) == pytest.approx(0.49)


# ---------------------------------------------------------------------------------------------------------- ECE
def test_ece_hand_two_bins_with_0_and_1():
    # bins [0, .5) and [.5, 1]: {0.0, 0.2} conf .1 acc .5 -> 2/5*.4; {.5, 1, 1} conf 5/6 acc 2/3 -> 3/5*1/6
    y, c = [0, 1, 1, 1, 0], [0.0, 0.2, 0.5, 1.0, 1.0]
    assert ece(y, c, n_bins=2) == pytest.approx(0.16 + 0.1)
    bins = reliability_bins(y, c, n_bins=2)
    np.testing.assert_array_equal(bins["count"], [2, 3])
    np.testing.assert_allclose(bins["lower"], [0.0, 0.5])
    np.testing.assert_allclose(bins["upper"], [0.5, 1.0])
    np.testing.assert_allclose(bins["mean_confidence"], [0.1, 5 / 6])
    np.testing.assert_allclose(bins["accuracy"], [0.5, 2 / 3])


def test_ece_confidence_one_stays_in_the_sum():
    assert ece([1, 1, 1, 0], [1.0, 1.0, 1.0, 1.0]) == pytest.approx(0.25)
    assert ece([0, 1], [0.0, 0.0]) == pytest.approx(0.5)
    assert reliability_bins([1, 0], [1.0, 0.0])["count"].tolist() == [1] + [0] * 8 + [1]


def test_reliability_bins_with_one_question_per_bin():
    # a bin holding a single question has that question's accuracy and confidence; empty bins are nan
    # (a mutant that required two questions per bin survived the suite before this test: docs/metrics.md)
    bins = reliability_bins([1, 0, 1], [0.05, 0.55, 0.95])
    expected_acc = [1.0] + [np.nan] * 4 + [0.0] + [np.nan] * 3 + [1.0]
    np.testing.assert_array_equal(bins["accuracy"], expected_acc)
    np.testing.assert_allclose(bins["mean_confidence"], [0.05] + [np.nan] * 4 + [0.55] + [np.nan] * 3 + [0.95])


def test_ece_left_closed_edges():
    # 0.3 is the lower edge of bin [0.3, 0.4): same bin as 0.35 -> |0.5 - 0.325|
    assert ece([1, 0], [0.3, 0.35]) == pytest.approx(0.175)
    counts = reliability_bins([1, 0, 1], [0.1, 0.2, 0.7])["count"]
    assert counts.tolist() == [0, 1, 1, 0, 0, 0, 0, 1, 0, 0]


def test_ece_empty_bins_and_perfect():
    assert ece([0, 1], [0.0, 1.0]) == 0.0
    bins = reliability_bins([0, 1], [0.0, 1.0], n_bins=4)
    assert np.isnan(bins["accuracy"][1]) and np.isnan(bins["mean_confidence"][2])


def test_ece_quantile_ties_share_a_bin():
    # edges = quantile at 0, 1/3, 2/3, 1 = [.2, .2, .4, .9]: bin0 empty, bin1 the four 0.2s, bin2 {.8, .9}
    y, c = [1, 0, 0, 0, 1, 1], [0.2, 0.2, 0.2, 0.2, 0.8, 0.9]
    bins = reliability_bins(y, c, n_bins=3, strategy="quantile")
    assert bins["count"].tolist() == [0, 4, 2]
    assert ece(y, c, n_bins=3, strategy="quantile") == pytest.approx(4 / 6 * 0.05 + 2 / 6 * 0.15)
    # equal-mass bins without ties
    y, c = [1, 0, 1, 1], [0.1, 0.2, 0.6, 0.7]
    assert reliability_bins(y, c, n_bins=2, strategy="quantile")["count"].tolist() == [2, 2]
    assert ece(y, c, n_bins=2, strategy="quantile") == pytest.approx(0.5 * 0.35 + 0.5 * 0.35)


def test_ece_uniform_matches_sklearn_calibration_curve():
    y, c = _random(n=2000, seed=3)
    prob_true, prob_pred = calibration_curve(y, c, n_bins=10, strategy="uniform")
    counts, _ = np.histogram(c, bins=10, range=(0.0, 1.0))
    counts = counts[counts > 0]
    expected = float(np.sum(counts / len(c) * np.abs(prob_true - prob_pred)))
    assert ece(y, c) == pytest.approx(expected, abs=1e-12)
    bins = reliability_bins(y, c)
    np.testing.assert_allclose(bins["accuracy"][bins["count"] > 0], prob_true)


# ---------------------------------------------------------------------------------------------------- Alignment
def test_alignment_accuracy_and_best_threshold_hand():
    y, c = [1, 1, 0, 0], [0.9, 0.8, 0.7, 0.6]
    assert alignment_accuracy(y, c, 0.8) == 1.0
    assert alignment_accuracy(y, c, 0.65) == 0.75
    assert alignment_accuracy(y, c, 1.5) == 0.5  # abstain on all
    assert best_threshold(y, c) == 0.8
    # maximizers 0.4 and 0.8 (2/3 each): the smallest wins
    assert best_threshold([1, 0, 1], [0.8, 0.6, 0.4]) == 0.4
    assert best_threshold([1, 1], [0.3, 0.7]) == 0.3  # answer all
    t = best_threshold([0, 0], [0.3, 1.0])  # abstain on all: just above 1.0, every confidence's bound
    assert t > 1.0 and t == np.nextafter(1.0, 2.0)
    assert alignment_accuracy([0, 0], [0.3, 1.0], t) == 1.0


def test_alignment_threshold_comes_from_dev_part_only():
    n, seed = 10, 7
    perm = np.random.default_rng(seed).permutation(n)
    dev, test = perm[:5], perm[5:]
    y, c = np.zeros(n, int), np.zeros(n)
    c[dev], y[dev] = [0.9, 0.8, 0.7, 0.6, 0.5], [1, 1, 1, 0, 0]  # dev alone picks 0.7 (5/5)
    c[test], y[test] = [0.9, 0.8, 0.7, 0.6, 0.5], [1, 0, 0, 0, 0]  # test alone would pick 0.9 (5/5)
    assert best_threshold(y[test], c[test]) == 0.9
    res = alignment(y, c, dev_fraction=0.5, seed=seed)
    assert res == {"alignment": pytest.approx(0.6), "threshold": 0.7, "n_dev": 5, "n_test": 5}
    assert alignment(y, c, dev_fraction=0.5, seed=seed) == res  # seeded


def test_alignment_keeps_abstain_all_on_the_test_part():
    # The dev part's questions are all wrong, so it chooses "abstain on all"; the test part holds confidences above
    # the dev part's largest. They must be abstained on too: 3 of the 5 test questions are wrong -> 3/5 right.
    n, seed = 10, 7
    perm = np.random.default_rng(seed).permutation(n)
    dev, test = perm[:5], perm[5:]
    y, c = np.zeros(n, int), np.zeros(n)
    c[dev], y[dev] = [0.5, 0.4, 0.3, 0.2, 0.1], [0, 0, 0, 0, 0]
    c[test], y[test] = [0.95, 0.9, 0.8, 0.6, 0.55], [1, 0, 0, 1, 0]
    res = alignment(y, c, dev_fraction=0.5, seed=seed)
    assert res["threshold"] > 1.0
    assert res["alignment"] == pytest.approx(3 / 5)  # answering the 5 above 0.5 would score 2/5
    assert evaluate_confidence(y, c, dev_fraction=0.5, seed=seed, n_resamples=10)["alignment"] == pytest.approx(0.6)


def test_alignment_split_sizes():
    y, c = _random(n=101)
    res = alignment(y, c, dev_fraction=0.2, seed=1)
    assert (res["n_dev"], res["n_test"]) == (20, 81)
    assert alignment([1, 0], [0.4, 0.6], dev_fraction=0.01)["n_dev"] == 1


# -------------------------------------------------------------------------------------------- risk-coverage, AURC
def test_risk_coverage_and_aurc_hand():
    y, c = [0, 1, 0, 1], [0.8, 0.9, 0.6, 0.7]
    cov, risk = risk_coverage(y, c)
    np.testing.assert_allclose(cov, [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(risk, [0.0, 0.5, 1 / 3, 0.5])
    assert aurc(y, c) == pytest.approx((0 + 0.5 + 1 / 3 + 0.5) / 4)
    assert accuracy_at_coverage(y, c, 0.5) == pytest.approx(0.5)
    assert accuracy_at_coverage(y, c, 0.25) == 1.0
    assert accuracy_at_coverage(y, c, 0.3) == pytest.approx(0.5)  # ceil(1.2) = 2
    assert accuracy_at_coverage(y, c, 1.0) == pytest.approx(0.5)


def test_risk_coverage_ties_are_order_independent():
    # tie group {0.9: one right, one wrong} -> expected risk 1/2 at k = 1 and 2, then 1/3
    for y, c in (([1, 0, 1], [0.9, 0.9, 0.5]), ([0, 1, 1], [0.9, 0.9, 0.5])):
        np.testing.assert_allclose(risk_coverage(y, c)[1], [0.5, 0.5, 1 / 3])
        assert aurc(y, c) == pytest.approx(4 / 9)
    assert aurc([1, 0, 0, 1], [0.5] * 4) == pytest.approx(0.5)  # all equal: the error rate everywhere
    assert accuracy_at_coverage([1, 0, 0, 1], [0.5] * 4, 0.25) == pytest.approx(0.5)


def test_accuracy_at_coverage_float_rounding():
    y = [1] * 7 + [0] * 3
    c = np.linspace(1.0, 0.1, 10)
    assert accuracy_at_coverage(y, c, 0.7) == 1.0  # 0.7 * 10 must give k = 7, not 8


# ------------------------------------------------------------------------------------------------------ bootstrap
def test_bootstrap_reproducible_and_matches_definition():
    y, c = _random(n=200, seed=5)
    ci = bootstrap_ci(brier, y, c, n_resamples=200, seed=0)
    assert ci == bootstrap_ci(brier, y, c, n_resamples=200, seed=0)
    assert ci != bootstrap_ci(brier, y, c, n_resamples=200, seed=1)
    rng = np.random.default_rng(0)
    values = []
    for _ in range(200):
        idx = rng.integers(0, 200, size=200)
        values.append(brier_score_loss(y[idx], c[idx]))
    np.testing.assert_allclose(ci, np.quantile(values, [0.025, 0.975]), atol=1e-12)
    assert ci[0] < brier(y, c) < ci[1]


def test_bootstrap_drops_nan_resamples():
    y, c = np.array([1, 0, 0, 0]), np.array([0.9, 0.2, 0.4, 0.6])
    rng = np.random.default_rng(3)
    values = []
    for _ in range(300):
        idx = rng.integers(0, 4, size=4)
        if 0 < y[idx].sum() < 4:
            values.append(roc_auc_score(y[idx], c[idx]))
    assert len(values) < 300
    np.testing.assert_allclose(bootstrap_ci(auroc, y, c, n_resamples=300, confidence_level=0.9, seed=3),
                               np.quantile(values, [0.05, 0.95]))
    lo, hi = bootstrap_ci(auroc, [1, 1, 1], [0.1, 0.5, 0.9], n_resamples=10)
    assert math.isnan(lo) and math.isnan(hi)


# ---------------------------------------------------------------------------------------------------- evaluation
def test_evaluate_confidence_consistent():
    y, c = _random(n=1000, seed=11)
    res = evaluate_confidence(y, c, seed=2)
    assert res["auroc"] == pytest.approx(roc_auc_score(y, c))
    assert res["ece"] == pytest.approx(ece(y, c))
    assert res["ece_quantile"] == pytest.approx(ece(y, c, strategy="quantile"))
    assert res["brier"] == pytest.approx(brier_score_loss(y, c))
    split = alignment(y, c, seed=2)
    assert (res["alignment"], res["threshold"], res["n_dev"], res["n_test"]) == tuple(split.values())
    assert res["aurc"] == pytest.approx(aurc(y, c))
    assert res["acc@50"] == pytest.approx(accuracy_at_coverage(y, c, 0.5))
    assert res["acc@80"] == pytest.approx(accuracy_at_coverage(y, c, 0.8))
    assert res["accuracy"] == pytest.approx(y.mean()) and res["n"] == 1000
    assert (res["n_bins"], res["n_resamples"], res["ci_level"]) == (10, 1000, 0.95)
    assert res["strategy"] == {"ece": "uniform", "ece_quantile": "quantile"}
    assert set(res["ci"]) == set(metric_names("interval")) == {"auroc", "ece", "ece_quantile", "brier", "alignment", "aurc",
                                                 "acc@50", "acc@80", "pr_auc", "cov@risk10", "cov@risk20",
                                                 "util@1/9", "util@1", "util@9", "util_mean"}
    # not ECE: its bootstrap is biased upward for a well-calibrated score, the point can sit below the interval
    for name in ("auroc", "brier", "aurc", "alignment", "acc@50", "acc@80"):
        low, high = res["ci"][name]
        assert low <= res[name] <= high
    assert evaluate_confidence(y, c, seed=2) == res  # seeded
    assert evaluate_confidence(y, c, seed=3)["ci"] != res["ci"]


def _loop_metrics(n_bins):
    return {"auroc": auroc, "ece": lambda a, b: ece(a, b, n_bins), "brier": brier, "aurc": aurc,
            "ece_quantile": lambda a, b: ece(a, b, n_bins, strategy="quantile"),
            "acc@50": lambda a, b: accuracy_at_coverage(a, b, 0.5),
            "acc@80": lambda a, b: accuracy_at_coverage(a, b, 0.8)}


@pytest.mark.parametrize("n, rounded, n_bins", [(200, False, 10), (57, True, 10), (31, True, 7)])
def test_evaluate_confidence_intervals_equal_bootstrap_ci(n, rounded, n_bins):
    # The vectorized bootstrap must give exactly the intervals of bootstrap_ci's per-resample loop on the public
    # functions, including ties (rounded confidences), tiny one-class resamples (n = 31) and chunking.
    y, c = _random(n=n, seed=n, rounded=rounded)
    res = evaluate_confidence(y, c, seed=4, n_bins=n_bins, n_resamples=150)
    for name, fn in _loop_metrics(n_bins).items():
        np.testing.assert_allclose(res["ci"][name], bootstrap_ci(fn, y, c, n_resamples=150, seed=4), atol=1e-12,
                                   err_msg=name)
    split = alignment(y, c, seed=4)
    perm = np.random.default_rng(4).permutation(n)
    test = perm[split["n_dev"]:]
    np.testing.assert_allclose(
        res["ci"]["alignment"],
        bootstrap_ci(lambda a, b: alignment_accuracy(a, b, split["threshold"]), y[test], c[test], 150, seed=4))


def test_evaluate_confidence_chunked_resamples_match(monkeypatch):
    import elical.evaluation.decision as d
    y, c = _random(n=90, seed=8, rounded=True)
    whole = evaluate_confidence(y, c, n_resamples=64)
    monkeypatch.setattr(d, "CHUNK_ELEMENTS", 90 * 5)  # 5 resamples per chunk, the last chunk partial
    assert evaluate_confidence(y, c, n_resamples=64) == whole


def test_evaluate_confidence_one_class_and_constant():
    res = evaluate_confidence([1, 1, 1, 1], [0.2, 0.9, 0.9, 0.5], n_resamples=50)
    assert math.isnan(res["auroc"]) and all(math.isnan(v) for v in res["ci"]["auroc"])
    assert res["brier"] == pytest.approx(brier_score_loss([1, 1, 1, 1], [0.2, 0.9, 0.9, 0.5]))
    assert res["aurc"] == 0.0 and res["ci"]["aurc"] == [0.0, 0.0]
    res = evaluate_confidence([1, 0, 1, 0, 0], [0.5] * 5, n_resamples=50)
    assert res["ece"] == res["ece_quantile"] == pytest.approx(0.1)  # one bin: |0.4 - 0.5|
    assert res["auroc"] == 0.5 and res["aurc"] == pytest.approx(0.6) and res["acc@50"] == pytest.approx(0.4)
    # a confidence of exactly 1.0 counts in the top bin: ECE = (|1 - 1| + |0 - 0.05|) / 2
    assert evaluate_confidence([1, 0], [1.0, 0.05], n_resamples=20)["ece"] == pytest.approx(0.025)


def test_dataset_group_matches_the_paper_and_the_released_folder_names():
    # HonestyBench (Ni et al., Sec. 4): in-domain NQ, TriviaQA, HotpotQA, 2Wiki, ParaRel; out-of-domain SQuAD,
    # WebQuestions, CWQ, MuSiQue, PopQA; MMLU unseen. Folder names as in the released files (TriviaQA is "tq").
    paper = {"nq": "in_domain", "tq": "in_domain", "triviaqa": "in_domain", "hq": "in_domain",
             "2wikimultihopqa": "in_domain", "pararel_patterns": "in_domain", "squad": "out_of_domain",
             "web_questions": "out_of_domain", "complex_web_questions": "out_of_domain", "musique": "out_of_domain",
             "popqa": "out_of_domain", "mmlu": "unseen", "mmlu_test": "unseen", "NQ": "in_domain",
             "TQ": "in_domain", "my_own_set": None}
    assert {d: group_of(d) for d in paper} == paper


def test_aggregate_weighted_by_size():
    per = {"nq": {"auroc": 0.8, "ece": 0.1, "threshold": 0.5, "n": 100, "ci": {}},
           "hq": {"auroc": 0.6, "ece": 0.3, "threshold": 0.7, "n": 300, "ci": {}},
           "squad": {"auroc": 0.7, "ece": 0.2},
           "mmlu": {"auroc": 0.9, "ece": 0.05}}
    sizes = {"nq": 100, "hq": 300, "squad": 50, "mmlu": 10}
    out = aggregate(per, sizes, {"nq": "in_domain", "hq": "in_domain", "squad": "out_of_domain", "mmlu": "unseen"})
    assert out["in_domain"] == {"auroc": pytest.approx(0.65), "ece": pytest.approx(0.25), "n": 400,
                                "datasets": ["hq", "nq"]}
    assert out["out_of_domain"]["auroc"] == pytest.approx(0.7)
    assert out["unseen"] == {"auroc": pytest.approx(0.9), "ece": pytest.approx(0.05), "n": 10, "datasets": ["mmlu"]}
    assert aggregate(per, sizes) == out  # groups=None uses the HonestyBench groups
    real = {d: evaluate_confidence(*_random(n=n, seed=n), n_resamples=20) for d, n in (("nq", 40), ("hq", 60))}
    agg = aggregate(real, {"nq": 40, "hq": 60})["in_domain"]
    assert set(agg) == {"auroc", "ece", "ece_quantile", "brier", "alignment", "aurc", "acc@50", "acc@80",
                        "pr_auc", "cov@risk10", "cov@risk20", "util@1/9", "util@1", "util@9", "util_mean",
                        "accuracy", "n", "datasets"}  # settings (n_bins, ci_level, thresholds) are not averaged
    assert agg["brier"] == pytest.approx(0.4 * real["nq"]["brier"] + 0.6 * real["hq"]["brier"])
    with pytest.raises(ValueError, match="sizes"):
        aggregate(per, {"nq": 100}, None)
    with pytest.raises(ValueError, match="groups"):
        aggregate(per, sizes, {"nq": "in_domain"})


# ---------------------------------------------------------------------------------------------------- validation
@pytest.mark.parametrize("y, c, match", [
    ([1, 0], [0.5], "same length"),
    ([[1, 0]], [[0.5, 0.5]], "y must be 1-D"),
    ([1, 0], [[0.5, 0.5]], "confidence must be 1-D"),
    ([1, 2], [0.5, 0.5], "y must contain only 0 and 1"),
    ([1, 0], [0.5, 1.5], r"confidence must lie in \[0, 1\]"),
    ([1, 0], [-0.1, 0.5], r"confidence must lie in \[0, 1\]"),
    ([1, 0], [np.nan, 0.5], "confidence must be finite"),
    ([], [], "must not be empty"),
    ([1, 0], ["a", "b"], "confidence must be numeric"),
])
def test_input_validation(y, c, match):
    for fn in (auroc, ece, brier, aurc, best_threshold, evaluate_confidence):
        with pytest.raises(ValueError, match=match):
            fn(y, c)


def test_argument_validation():
    y, c = [1, 0, 1], [0.2, 0.5, 0.9]
    with pytest.raises(ValueError, match="n_bins"):
        ece(y, c, n_bins=0)
    with pytest.raises(ValueError, match="strategy"):
        ece(y, c, strategy="equal")
    with pytest.raises(ValueError, match="coverage"):
        accuracy_at_coverage(y, c, 0.0)
    with pytest.raises(ValueError, match="dev_fraction"):
        alignment(y, c, dev_fraction=1.0)
    with pytest.raises(ValueError, match="at least 2"):
        alignment([1], [0.5])
    with pytest.raises(ValueError, match="threshold"):
        alignment_accuracy(y, c, float("nan"))
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_ci(auroc, y, c, n_resamples=0)
    with pytest.raises(ValueError, match="confidence_level"):
        bootstrap_ci(auroc, y, c, confidence_level=95)
    assert ece(np.array([True, False]), np.array([1, 0])) == 0.0  # bool y and int confidence are fine
