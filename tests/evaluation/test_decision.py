"""Decision metrics (elical.evaluation.decision) on hand-computed cases."""

import numpy as np
import pytest

from elical.evaluation.decision import coverage_at, pr_auc, risk_threshold, utility_at, utility_threshold
from elical.evaluation.spec import score_all
from elical.evaluation.metrics import evaluate_confidence

# ranked by confidence: correct, correct, wrong, correct, wrong, wrong, correct, wrong
Y = np.array([1, 1, 0, 1, 0, 0, 1, 0])
C = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2])


def test_pr_auc_by_hand():
    # precision at each correct answer's rank: 1/1, 2/2, 3/4, 4/7; their mean
    assert pr_auc(Y, C) == pytest.approx((1 + 1 + 3 / 4 + 4 / 7) / 4)
    assert np.isnan(pr_auc([1, 1], [0.2, 0.9]))


def test_risk_threshold_by_hand():
    # answering from the top: errors 0/1, 0/2, 1/3, 1/4, 2/5, 3/6, 3/7, 4/8
    assert risk_threshold(Y, C, 0.1) == 0.8
    assert risk_threshold(Y, C, 0.25) == 0.6
    assert risk_threshold(Y, C, 0.5) == 0.2  # everything answered
    assert risk_threshold([0, 0], [0.3, 0.6], 0.1) > 0.6  # no threshold reaches the risk: answer nothing


def test_answer_nothing_on_dev_keeps_abstaining_on_test():
    # dev: both questions wrong, so no threshold reaches risk 0.1 and utility is best answering nothing (0 > -cost)
    t_risk = risk_threshold([0, 0], [0.3, 0.6], 0.1)
    t_util = utility_threshold([0, 0], [0.3, 0.6], 1.0)
    assert t_risk > 1.0 and t_util > 1.0
    # a test question more confident than any dev one (0.9, even 1.0) is still not answered
    assert coverage_at([1, 1], [0.9, 1.0], t_risk) == 0.0 and utility_at([1, 1], [0.9, 1.0], t_util, 1.0) == 0.0


def test_utility_threshold_by_hand():
    # cost 1: utility from the top 1, 2, 1, 2, 1, 0, 1, 0 (and 0 for none): the largest coverage among the maxima
    assert utility_threshold(Y, C, 1.0) == 0.6
    assert utility_threshold(Y, C, 9.0) == 0.8  # one wrong answer costs 9
    assert utility_threshold(Y, C, 1 / 9) == 0.3  # 4 - 3/9 beats 4 - 4/9 and 3 - 3/9
    assert utility_threshold([0, 0], [0.3, 0.6], 1.0) > 0.6  # abstaining on everything


def test_thresholds_from_dev_scored_on_test():
    y = np.r_[Y, [1, 0, 1, 0]]
    c = np.r_[C, [0.85, 0.75, 0.65, 0.1]]
    point, chosen, ci = score_all(y, c, np.arange(8), np.arange(8, 12), n_bins=10, n_resamples=50, seed=0,
                                  level=0.95)
    assert {k: chosen[k] for k in ("cov@risk10", "cov@risk20", "util@1/9", "util@1", "util@9")} == \
        {"cov@risk10": 0.8, "cov@risk20": 0.8, "util@1/9": 0.3, "util@1": 0.6, "util@9": 0.8}
    assert chosen["util_mean"] == [0.3, 0.6, 0.8]
    assert point["cov@risk10"] == 0.25  # only 0.85 of the test part is answered
    assert point["util@1"] == pytest.approx((1 - 1 + 1) / 4)
    assert point["util@9"] == pytest.approx(1 / 4)
    assert point["util@1/9"] == pytest.approx((1 - 1 / 9 + 1) / 4)
    assert point["util_mean"] == pytest.approx((0.25 + 0.25 + (2 - 1 / 9) / 4) / 3)
    assert all(lo <= hi for lo, hi in (ci[k] for k in ("cov@risk10", "util@1", "util_mean")))


def test_evaluate_confidence_reports_them_with_intervals():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    c = np.clip(0.5 * y + 0.5 * rng.random(200), 0, 1)
    out = evaluate_confidence(y, c, n_resamples=100)
    for key in ("pr_auc", "cov@risk10", "cov@risk20", "util@1/9", "util@1", "util@9", "util_mean"):
        assert key in out and key in out["ci"], key
    from sklearn.metrics import average_precision_score

    assert out["pr_auc"] == pytest.approx(average_precision_score(y, c))


def test_vectorized_pr_auc_equals_sklearn_with_ties():
    from sklearn.metrics import average_precision_score

    from elical.evaluation.decision import pr_auc_rows

    rng = np.random.default_rng(3)
    Y = rng.integers(0, 2, (40, 25))
    C = np.round(rng.random((40, 25)), 1)  # many ties
    Y[0] = 1  # one class: nan
    got = pr_auc_rows(Y, C, chunk_elements=100)  # several chunks
    want = [average_precision_score(y, c) if 0 < y.sum() < len(y) else np.nan for y, c in zip(Y, C)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
