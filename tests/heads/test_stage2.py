"""Tests for elical.heads.stage2: EliCal's stage 2 never reverses or removes Eli-Only's ranking on weak labels."""

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import spearmanr

from elical.heads.probe import ProbeHead
from elical.heads.stage2 import DEFAULT_STAGE2_RULE, MAX_SLOPE, STAGE2_RULES, affine_parameters, affine_stage2
from elical.heads.stages import fit_eli_only, fit_elical


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


@pytest.fixture(scope="module")
def stage1():
    rng = np.random.default_rng(11)
    z = rng.standard_normal((700, 4))
    X = (z @ rng.standard_normal((4, 32)) + rng.normal(0, 3, 32) + 0.1 * rng.standard_normal((700, 32)))
    p = _sigmoid(1.5 * z[:, 0] - 2.0)  # ~18 % base rate
    c_cons = rng.binomial(10, _sigmoid(1.5 * z[:, 0])) / 10
    eli = fit_eli_only(X[:500].astype(np.float32), c_cons[:500], max_epochs=30, random_state=0)
    return X.astype(np.float32), p, eli


def _logit(head, X):
    q = np.clip(head.predict(X), 1e-12, 1 - 1e-12)
    return np.log(q / (1 - q))


@pytest.mark.parametrize("rule", STAGE2_RULES)
def test_zero_positives_leave_eli_only_unchanged(stage1, rule):
    # k = 8 labelled questions whose sample accuracy is 0 everywhere: no stage-2 step, whatever the rule.
    X, _, eli = stage1
    head = fit_elical(eli, X[500:508], np.zeros(8), random_state=3, rule=rule)
    np.testing.assert_array_equal(head.predict(X[600:]), eli.predict(X[600:]))
    assert head.stage2_["rule"] == "none" and head.n_epochs_ == 0


def test_default_rule_keeps_the_ranking_at_small_k(stage1):
    # One positive among 16 (soft targets): the default rule keeps Eli-Only's order of the held-out questions.
    X, _, eli = stage1
    y = np.zeros(16)
    y[5] = 0.6
    head = fit_elical(eli, X[500:516], y, random_state=0)
    assert DEFAULT_STAGE2_RULE == "affine<512" and head.stage2_["rule"] == "affine"
    assert spearmanr(head.predict(X[600:]), eli.predict(X[600:])).statistic == pytest.approx(1.0)


def test_affine_map_is_the_bernoulli_fit_on_the_stage1_logit(stage1):
    # Soft targets in [0, 1]: (a, b) maximise sum y log s(a z + b) + (1 - y) log(1 - s(a z + b)), computed here by
    # scipy on the stage-1 logit z read from the head's predictions.
    X, p, eli = stage1
    rng = np.random.default_rng(2)
    idx = np.arange(500, 540)
    y = rng.binomial(5, p[idx]) / 5
    z = _logit(eli, X[idx])

    def nll(ab):
        t = ab[0] * z + ab[1]
        return np.sum(np.logaddexp(0, t) - y * t)

    a, b = minimize(nll, [1.0, 0.0], method="BFGS", options={"gtol": 1e-9}).x
    assert a > 0
    head = affine_stage2(eli, X[idx], y)
    assert head.stage2_["slope"] == pytest.approx(a, rel=1e-3) and head.stage2_["intercept"] == pytest.approx(b, abs=1e-3)
    np.testing.assert_allclose(head.predict(X[600:]), _sigmoid(a * _logit(eli, X[600:]) + b), atol=1e-4)
    assert isinstance(head, ProbeHead) and not hasattr(eli, "stage2_")  # a new head; stage 1 untouched


def test_affine_negative_slope_keeps_stage1_slope_and_fits_the_intercept(stage1):
    # Labels that run against the stage-1 score: the slope would be negative, so a = 1 and only b moves; b solves
    # sum s(z + b) = sum t (the intercept-only likelihood equation).
    X, _, eli = stage1
    idx = np.arange(500, 520)
    z = _logit(eli, X[idx])
    y = (z <= np.sort(z)[2]).astype(float)  # the 3 lowest-scored questions are the positives
    head = affine_stage2(eli, X[idx], y)
    assert head.stage2_["slope"] == 1.0
    # Binary labels use Platt's prior-corrected targets: t+ = 4/5, t- = 1/19 -> sum t = 3 * 0.8 + 17 / 19.
    assert np.sum(_sigmoid(z + head.stage2_["intercept"])) == pytest.approx(3 * 0.8 + 17 / 19, rel=1e-6)
    assert spearmanr(head.predict(X[600:]), eli.predict(X[600:])).statistic == pytest.approx(1.0)


def test_unknown_rule(stage1):
    X, _, eli = stage1
    with pytest.raises(ValueError, match="rule must be one of"):
        fit_elical(eli, X[500:510], np.r_[np.ones(2), np.zeros(8)], rule="median")


def test_affine_slope_is_capped_so_confidences_do_not_saturate(stage1):
    # The real-pool case: 4 labels, 0.2 on the top-scored question and 0 elsewhere; the free fit drives the slope
    # far above MAX_SLOPE (~80 on the pool). Capped, b solves sum s(MAX_SLOPE z + b) = sum y and no two held-out
    # questions tie (a saturated float32 sigmoid tied half of them).
    X, _, eli = stage1
    idx = np.arange(500, 504)
    z = _logit(eli, X[idx])
    y = np.where(z == z.max(), 0.2, 0.0)
    assert affine_parameters(z, y)[0] == MAX_SLOPE == 4.0
    a, b = affine_parameters(z, y)
    assert np.sum(_sigmoid(a * z + b)) == pytest.approx(0.2, rel=1e-6)
    pred = affine_stage2(eli, X[idx], y).predict(X[500:])
    assert np.unique(pred).size == np.unique(eli.predict(X[500:])).size
