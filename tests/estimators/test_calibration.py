"""Tests for elical.estimators.calibration: Platt scaling and isotonic regression against hand values and scipy/sklearn."""

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from elical.estimators.calibration import CALIBRATORS, IsotonicCalibrator, PlattCalibrator, calibrated_baselines


def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    y = (rng.random(n) < 0.2 + 0.6 * s).astype(int)
    return s, y


# --------------------------------------------------------------------------------------------------------- Platt
def test_platt_two_points_hand():
    # Platt targets with one question per class: t- = 1/(1+2) = 1/3, t+ = (1+1)/(1+2) = 2/3; two points, two parameters:
    # the fit is exact, sigmoid(0.8 a + b) = 2/3 and sigmoid(0.2 a + b) = 1/3, i.e. 0.8 a + b = ln 2 = -(0.2 a + b).
    cal = PlattCalibrator().fit([0.2, 0.8], [0, 1])
    a = 2 * math.log(2) / 0.6
    assert cal.coef_ == pytest.approx(a, rel=1e-4)
    assert cal.intercept_ == pytest.approx(-math.log(2) - 0.2 * a, rel=1e-4)
    np.testing.assert_allclose(cal.predict([0.2, 0.8, 0.5]), [1 / 3, 2 / 3, 0.5], atol=1e-5)


def test_platt_matches_independent_maximum_likelihood():
    s, y = _data()
    n_pos, n_neg = y.sum(), (1 - y).sum()
    t = np.where(y == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

    def nll(ab):  # Platt (1999), Sec. 2.2: cross-entropy with the prior-corrected targets
        z = ab[0] * s + ab[1]
        return np.sum(np.logaddexp(0, z) - t * z)

    ref = minimize(nll, [0.0, 0.0], method="BFGS", options={"gtol": 1e-10}).x
    cal = PlattCalibrator().fit(s, y)
    assert (cal.coef_, cal.intercept_) == pytest.approx(tuple(ref), abs=1e-3)
    np.testing.assert_allclose(cal.predict(s), 1 / (1 + np.exp(-(ref[0] * s + ref[1]))), atol=1e-4)
    try:  # the same fit as scikit-learn's own sigmoid calibration (private helper; skip if it moved)
        from sklearn.calibration import _sigmoid_calibration
    except ImportError:
        return
    a, b = _sigmoid_calibration(s, y)  # sklearn's convention: P = 1 / (1 + exp(a f + b))
    assert (cal.coef_, cal.intercept_) == pytest.approx((-a, -b), abs=1e-3)


def test_platt_without_prior_correction_is_plain_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    s, y = _data(seed=1)
    ref = LogisticRegression(C=np.inf, tol=1e-10).fit(s[:, None], y)
    cal = PlattCalibrator(prior_correction=False).fit(s, y)
    assert cal.coef_ == pytest.approx(ref.coef_[0, 0], rel=1e-4)
    np.testing.assert_allclose(cal.predict(s), ref.predict_proba(s[:, None])[:, 1], atol=1e-5)


def test_platt_separable_labels_stay_finite():
    cal = PlattCalibrator().fit([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])
    p = cal.predict([0.0, 0.15, 0.85, 1.0])
    assert np.isfinite(cal.coef_) and 0.0 < p.min() < 0.3 and 0.7 < p.max() < 1.0  # targets 1/4 and 3/4
    assert np.all(np.diff(p) > 0)


def test_platt_label_draw_that_flips_the_slope_keeps_a_zero_slope():
    # One positive at the lowest score among four: the unconstrained fit has a negative slope (it would reverse the
    # score's ranking). Under a >= 0 the optimum is a = 0 and every question gets the mean prior-corrected target:
    # t+ = (1 + 1) / (1 + 2) = 2/3 once, t- = 1 / (3 + 2) = 1/5 three times -> (2/3 + 3/5) / 4 = 19/60.
    s, y = [0.1, 0.2, 0.8, 0.9], [1, 0, 0, 0]
    assert PlattCalibrator(monotone=False).fit(s, y).coef_ < 0
    cal = PlattCalibrator().fit(s, y)
    assert cal.slope_clipped_ and cal.coef_ == 0.0
    np.testing.assert_allclose(cal.predict([0.0, 0.5, 1.0]), 19 / 60, rtol=1e-9)
    t = np.array([2 / 3, 1 / 5, 1 / 5, 1 / 5])  # the same optimum from scipy under the bound a >= 0

    def nll(ab):
        z = ab[0] * np.array(s) + ab[1]
        return np.sum(np.logaddexp(0, z) - t * z)

    ref = minimize(nll, [0.5, 0.0], method="L-BFGS-B", bounds=[(0, None), (None, None)]).x
    assert ref[0] == pytest.approx(0.0, abs=1e-6) and cal.intercept_ == pytest.approx(ref[1], abs=1e-5)


def test_platt_never_reverses_a_ranking():
    # Small label draws on synthetic scores: 4 ... 16 labels at ~25 % positives make negative slopes common.
    rng = np.random.default_rng(3)
    clipped = 0
    for draw in range(300):
        k = (4, 8, 16)[draw % 3]
        s = rng.random(k)
        y = (rng.random(k) < 0.15 + 0.2 * s).astype(int)
        cal = PlattCalibrator().fit(s, y)
        grid = np.linspace(-1.0, 2.0, 61)
        assert np.all(np.diff(cal.predict(grid)) >= 0), (s, y)
        clipped += cal.slope_clipped_
    assert clipped > 10  # the draws did include slope flips


# ------------------------------------------------------------------------------------------------------ isotonic
def test_isotonic_pool_adjacent_violators_hand():
    cal = IsotonicCalibrator().fit([0.1, 0.2, 0.3, 0.4], [0, 1, 0, 1])
    # PAV: (1, 0) violate at 0.2/0.3 and pool to 0.5 -> steps 0, 0.5, 0.5, 1; linear between knots, clipped outside
    np.testing.assert_allclose(cal.predict([0.1, 0.2, 0.3, 0.4]), [0.0, 0.5, 0.5, 1.0])
    np.testing.assert_allclose(cal.predict([0.0, 0.25, 0.35, 0.9]), [0.0, 0.5, 0.75, 1.0])


def test_isotonic_ties_in_scores_are_averaged():
    cal = IsotonicCalibrator().fit([0.5, 0.5, 0.5, 0.9], [0, 1, 1, 1])
    np.testing.assert_allclose(cal.predict([0.5, 0.9]), [2 / 3, 1.0])


def _pav(scores, y):
    """Pool-adjacent-violators written out (Barlow et al., 1972): {distinct score: fitted value}, ties pooled
    first. An implementation independent of scikit-learn's."""
    blocks = []  # [sum of y, count, scores]
    for v in sorted(set(scores)):
        ys = [t for s_, t in zip(scores, y) if s_ == v]
        blocks.append([float(sum(ys)), len(ys), [v]])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, n, members = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += n
            blocks[-1][2] += members
    return {v: total / n for total, n, members in blocks for v in members}


def test_isotonic_is_monotone_and_in_unit_interval():
    s, y = _data(n=200, seed=2)
    cal = IsotonicCalibrator().fit(s, y)
    p = cal.predict(np.linspace(-1, 2, 301))
    assert np.all(np.diff(p) >= 0) and p.min() >= 0.0 and p.max() <= 1.0
    # at the training scores the fit is the pooled means of PAV, and it is far from constant
    expected = _pav(list(np.round(s, 12)), list(y))
    knots = np.array(sorted(expected))
    np.testing.assert_allclose(cal.predict(knots), [expected[v] for v in knots], atol=1e-9)
    assert p[0] < 0.2 and p[-1] > 0.8


# --------------------------------------------------------------------------------------------- one class, errors
@pytest.mark.parametrize("cls", [PlattCalibrator, IsotonicCalibrator])
@pytest.mark.parametrize("label", [0, 1])
def test_one_class_predicts_the_class_rate(cls, label):
    cal = cls().fit([0.2, 0.5, 0.9], [label] * 3)
    assert cal.constant_ == float(label)
    np.testing.assert_array_equal(cal.predict([0.0, 0.4, 1.0, 7.0]), [float(label)] * 4)


@pytest.mark.parametrize("cls", [PlattCalibrator, IsotonicCalibrator])
def test_calibrator_input_validation(cls):
    with pytest.raises(ValueError, match=r"y must lie in \[0, 1\]"):
        cls().fit([0.1, 0.2], [0, 1.5])
    with pytest.raises(ValueError, match=r"y must have shape \(2,\)"):
        cls().fit([0.1, 0.2], [0, 1, 1])
    with pytest.raises(ValueError, match="scores must be finite"):
        cls().fit([0.1, np.nan], [0, 1])
    with pytest.raises(ValueError, match="must not be empty"):
        cls().fit([], [])
    with pytest.raises(RuntimeError, match="not fitted"):
        cls().predict([0.5])
    with pytest.raises(ValueError, match="scores must be 1-D"):
        cls().fit([0.1, 0.9], [0, 1]).predict([[0.5]])


# ---------------------------------------------------------------------------------------------- the baselines
def test_calibrated_baselines_names_order_and_values():
    rng = np.random.default_rng(3)
    n_pool, n_eval = 40, 25
    train = {"N-Prob": rng.random(n_pool), "Consis-Sem": rng.integers(0, 6, n_pool) / 5}
    evals = {"N-Prob": rng.random(n_eval), "Consis-Sem": rng.integers(0, 6, n_eval) / 5}
    labels = (rng.random(n_pool) < 0.4).astype(int)
    order = rng.permutation(n_pool)
    sets = {16: order[:16], 4: order[:4]}
    out = calibrated_baselines(train, evals, labels, sets)
    assert list(out) == ["N-Prob+Platt(4)", "N-Prob+Platt(16)", "N-Prob+Isotonic(4)", "N-Prob+Isotonic(16)",
                         "Consis-Sem+Platt(4)", "Consis-Sem+Platt(16)", "Consis-Sem+Isotonic(4)",
                         "Consis-Sem+Isotonic(16)"]
    for name, conf in out.items():
        assert conf.shape == (n_eval,) and conf.min() >= 0.0 and conf.max() <= 1.0
    idx = order[:16]
    np.testing.assert_allclose(out["Consis-Sem+Isotonic(16)"],
                               IsotonicCalibrator().fit(train["Consis-Sem"][idx], labels[idx]).predict(
                                   evals["Consis-Sem"]))
    # only the labelled questions are read: changing the others changes nothing
    other = np.setdiff1d(np.arange(n_pool), idx)
    flipped = labels.copy()
    flipped[other] = 1 - flipped[other]
    again = calibrated_baselines(train, evals, flipped, {16: idx})
    np.testing.assert_array_equal(again["N-Prob+Platt(16)"], out["N-Prob+Platt(16)"])
    assert list(calibrated_baselines(train, evals, labels, sets, calibrators=("Isotonic",)))[0] == \
        "N-Prob+Isotonic(4)"
    assert set(CALIBRATORS) == {"Platt", "Isotonic"}


def test_calibrated_baselines_errors():
    s = {"N-Prob": np.linspace(0, 1, 10)}
    y = np.array([0, 1] * 5)
    with pytest.raises(ValueError, match="same estimators"):
        calibrated_baselines(s, {"Consis-Sem": np.ones(3)}, y, {4: np.arange(4)})
    with pytest.raises(ValueError, match="calibrators must be among"):
        calibrated_baselines(s, s, y, {4: np.arange(4)}, calibrators=("Beta",))
    with pytest.raises(ValueError, match=r"distinct indices in \[0, 10\)"):
        calibrated_baselines(s, s, y, {4: np.array([0, 1, 2, 10])})
    with pytest.raises(ValueError, match="distinct"):
        calibrated_baselines(s, s, y, {2: np.array([3, 3])})
    with pytest.raises(ValueError, match="integer pool indices"):
        calibrated_baselines(s, s, y, {2: np.array([0.5, 1.0])})
    with pytest.raises(ValueError, match=r"train_scores\['N-Prob'\] must have shape \(12,\)"):
        calibrated_baselines(s, s, np.zeros(12, int), {2: np.arange(2)})


def test_isotonic_on_soft_targets_pools_adjacent_violators():
    # PAV by hand: 0.8 > 0.2 violates the order, so the first two pool to 0.5; 0.5 <= 0.5 then holds.
    cal = IsotonicCalibrator().fit([0.1, 0.2, 0.3], [0.8, 0.2, 0.5])
    np.testing.assert_allclose(cal.predict([0.1, 0.2, 0.3]), [0.5, 0.5, 0.5])
    np.testing.assert_allclose(IsotonicCalibrator().fit([0.1, 0.2, 0.3], [0.2, 0.4, 0.9]).predict([0.2]), [0.4])


def test_platt_on_soft_targets_maximises_the_bernoulli_likelihood():
    # Independent fit: scipy minimises -sum(y log p + (1 - y) log(1 - p)) over (a, b).
    from scipy.optimize import minimize

    s = np.array([0.1, 0.3, 0.4, 0.6, 0.8, 0.9])
    y = np.array([0.0, 0.2, 0.6, 0.4, 0.8, 1.0])

    def loss(ab):
        p = np.clip(1 / (1 + np.exp(-(ab[0] * s + ab[1]))), 1e-12, 1 - 1e-12)
        return -np.sum(y * np.log(p) + (1 - y) * np.log(1 - p))

    a, b = minimize(loss, [0.0, 0.0], method="BFGS", options={"gtol": 1e-10}).x
    cal = PlattCalibrator().fit(s, y)
    assert cal.coef_ == pytest.approx(a, rel=1e-4) and cal.intercept_ == pytest.approx(b, rel=1e-4, abs=1e-6)
