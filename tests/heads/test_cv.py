"""Tests for elical.heads.cv: the epoch rule on hand-made CV curves, the class-balanced weights, the folds."""

import numpy as np
import pytest

from elical.heads.cv import choose_epoch, cv_splits, question_weights


def _fold_curves_to_questions(fold_curves, per_fold=1):
    # One question per fold (leave-one-out): the question's loss curve is its fold's curve.
    return np.repeat(np.asarray(fold_curves, dtype=float).T, per_fold, axis=1)


def test_mean_curve_not_median_of_fold_optima():
    # The case: eight folds whose own optima are {0, 0, 0, 0, 50, 50, 53, 61}; the median of those is 25, an
    # epoch no fold chose. Hand-made curves over 0..61 epochs: the first four folds rise slowly from epoch 0, the
    # other four fall until their optimum (slope -0.004) and rise slowly after (+0.001).
    e = np.arange(62, dtype=float)
    rising = 0.10 + 0.001 * e  # optimum 0

    def falling(opt):
        return np.where(e <= opt, 0.5 - 0.004 * e, 0.5 - 0.004 * opt + 0.001 * (e - opt))

    curves = [rising] * 4 + [falling(50), falling(50), falling(53), falling(61)]
    assert [int(np.argmin(c)) for c in curves] == [0, 0, 0, 0, 50, 50, 53, 61]
    # Slope of the summed curve: epochs 0-50: 4 * 0.001 - 4 * 0.004 < 0; 50-53: 6 * 0.001 - 2 * 0.004 < 0;
    # 53-61: 7 * 0.001 - 0.004 > 0. So the mean curve's minimum is at epoch 53.
    assert choose_epoch(_fold_curves_to_questions(curves)) == 53
    assert int(np.median([0, 0, 0, 0, 50, 50, 53, 61])) == 25  # what the old rule chose


def test_first_epoch_among_ties_and_epoch_zero():
    L = np.array([[0.3, 0.3], [0.2, 0.2], [0.2, 0.2], [0.25, 0.25]])
    assert choose_epoch(L) == 1
    assert choose_epoch(L[[0]]) == 0  # no epoch trained: the starting weights


def test_one_standard_error_rule_against_epoch_zero():
    # Four questions; epoch 1 lowers the mean loss by 0.01 with per-question gains [0.04, 0.04, -0.02, -0.02]
    # (mean 0.01, sample std 0.034641, SE 0.017321 > 0.01): not enough evidence, stay at epoch 0.
    L = np.array([[0.20, 0.20, 0.20, 0.20], [0.16, 0.16, 0.22, 0.22]])
    assert choose_epoch(L, "min") == 1
    assert choose_epoch(L, "one_se") == 0
    # Gains [0.04, 0.04, 0.03, 0.03]: mean 0.035, SE 0.002887: leave epoch 0.
    L2 = np.array([[0.20, 0.20, 0.20, 0.20], [0.16, 0.16, 0.17, 0.17]])
    assert choose_epoch(L2, "one_se") == 1


def test_balanced_weights_hand():
    # y = [1, 0, 0, 0]: the positive side gets half the weight -> 4 * 0.5 = 2 for it, 4 * 0.5 / 3 for each negative.
    np.testing.assert_allclose(question_weights([1, 0, 0, 0], "balanced"), [2.0, 2 / 3, 2 / 3, 2 / 3])
    np.testing.assert_allclose(question_weights([0.5, 0.0], "balanced"), [2 * (0.5 + 0.25 / 1.5), 2 * 0.5 / 1.5])
    # (y = 0.5 counts half positive, half negative: sum(y) = 0.5, sum(1 - y) = 1.5)
    np.testing.assert_allclose(question_weights([0, 0, 0], "balanced"), [1, 1, 1])  # one side empty
    np.testing.assert_allclose(question_weights([1, 0, 0], "mse"), [1, 1, 1])
    with pytest.raises(ValueError, match="cv_loss"):
        question_weights([1, 0], "hinge")
    with pytest.raises(ValueError, match="cv_rule"):
        choose_epoch([[0.1]], "median")


def test_cv_splits_leave_one_out_below_ten_then_folds():
    assert [len(va) for _, va in cv_splits(4, 5, 0)] == [1, 1, 1, 1]
    splits = cv_splits(16, 5, 0)
    assert sorted(len(va) for _, va in splits) == [3, 3, 3, 3, 4]
    assert sorted(np.concatenate([va for _, va in splits]).tolist()) == list(range(16))
