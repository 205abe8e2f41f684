"""Alignment under elical's protocol and the paper's (``--alignment-protocol paper``), on hand-computed cases; the
official ECE's edge cases that docs/metrics.md documents."""
import numpy as np
import pytest

from elical.evaluation.metrics import alignment, best_threshold, ece
from elical.evaluation.paper import paper_alignment_grouped, paper_threshold
from elical.evaluation.scoring import score_methods

# Case A: n = 10, dev = the first int(0.2 * 10) = 2 questions (c 0.9 correct, 0.2 wrong). On the grid, t <= 0.20
# answers both and t > 0.90 neither (both skipped); t = 0.21 is the first with accuracy 1.0, so it wins.
# Test part (8): answered where c >= 0.21, i.e. all but 0.1; right: 0.75(1) 0.6(1) 0.8(1) 0.7(1) = 4 of 8.
Y_A = [1, 0, 1, 0, 1, 1, 0, 0, 1, 1]
C_A = [0.9, 0.2, 0.75, 0.4, 0.6, 0.8, 0.3, 0.55, 0.7, 0.1]
# Case B: n = 5, dev = the first question alone: every grid value answers it or nobody -> the 0.5 fall-back.
# Test part: 0.6(1) answered right, 0.4(0) abstained right, 0.5(1) answered right (>=), 0.9(0) answered wrong: 3/4.
Y_B = [0, 1, 0, 1, 0]
C_B = [0.7, 0.6, 0.4, 0.5, 0.9]


def test_paper_protocol_case_a():
    res = alignment(Y_A, C_A, protocol="paper")
    assert res == {"alignment": 0.5, "threshold": 0.21, "n_dev": 2, "n_test": 8}


def test_paper_protocol_fall_back_case_b():
    assert alignment(Y_B, C_B, protocol="paper") == {"alignment": 0.75, "threshold": 0.5, "n_dev": 1, "n_test": 4}
    assert paper_threshold([], []) == 0.5  # an empty dev part (n < 5)
    assert alignment([1, 0, 1, 1], [0.9, 0.1, 0.8, 0.2], protocol="paper")["threshold"] == 0.5


def test_grid_against_every_distinct_value():
    # t in (0.45, 0.5] gets all four right; the grid's first such value is 0.46, elical's candidate is 0.5 itself
    y, c = [0, 1, 0, 1], [0.2, 0.5, 0.45, 0.9]
    assert paper_threshold(y, c) == 0.46 and best_threshold(y, c) == 0.5
    # confidences that order the questions perfectly but all lie below 0.01: the grid cannot separate them
    y, c = [0, 1, 0, 1], [0.001, 0.005, 0.002, 0.008]
    assert paper_threshold(y, c) == 0.5 and best_threshold(y, c) == 0.005


def test_paper_protocol_reads_the_given_order_and_ignores_the_seed():
    a = alignment(Y_A, C_A, protocol="paper", seed=1)
    assert a == alignment(Y_A, C_A, protocol="paper", seed=7)
    # reversed, the dev part is (0.1 correct, 0.7 correct): answering both (t <= 0.1) or neither (t > 0.7) is
    # skipped, so the first grid value of (0.1, 0.7] wins with accuracy 1/2: t = 0.11.
    r = alignment(Y_A[::-1], C_A[::-1], protocol="paper")
    assert r["threshold"] == 0.11 and r["n_dev"] == 2
    # test part reversed[2:] = c (0.55,0.3,0.8,0.6,0.4,0.75,0.2,0.9), y (0,0,1,1,0,1,0,1): all answered -> 4/8
    assert r["alignment"] == 0.5
    with pytest.raises(ValueError, match="protocol"):
        alignment(Y_A, C_A, protocol="official")


def test_grouped_paper_protocol_pools_the_test_parts():
    y, c = np.array(Y_A + Y_B), np.array(C_A + C_B)
    groups = np.array(["a"] * 10 + ["b"] * 5)
    r = paper_alignment_grouped(y, c, groups)
    assert r == {"alignment": pytest.approx(7 / 12), "n_dev": 3, "n_test": 12, "thresholds": {"a": 0.21, "b": 0.5}}


def test_score_methods_reports_both_protocols():
    records = [{"id": f"a/{i}", "dataset": "a", "greedy_correctness": v} for i, v in enumerate(Y_A)]
    records += [{"id": f"b/{i}", "dataset": "b", "greedy_correctness": v} for i, v in enumerate(Y_B)]
    conf = {"m": np.array(C_A + C_B)}
    both = score_methods(records, conf, n_resamples=10, alignment_protocol="paper")
    plain = score_methods(records, conf, n_resamples=10)
    assert both["a"]["m"]["alignment_paper"] == 0.5 and both["a"]["m"]["threshold_paper"] == 0.21
    assert both["b"]["m"]["alignment_paper"] == 0.75 and both["b"]["m"]["n_dev_paper"] == 1
    assert both["all"]["m"]["alignment_paper"] == pytest.approx(7 / 12)
    assert both["all"]["m"]["thresholds_paper"] == {"a": 0.21, "b": 0.5}
    for group in ("a", "b", "all"):  # elical's own Alignment is unchanged beside it
        assert both[group]["m"]["alignment"] == plain[group]["m"]["alignment"]
        assert "alignment_paper" not in plain[group]["m"]


def _official_ece(c, y, n_bins=10):
    """The official ``compute_ece`` formula, written out: np.digitize on np.linspace(0, 1, 11)."""
    c, y = np.asarray(c, float), np.asarray(y, float)
    idx = np.digitize(c, np.linspace(0, 1, n_bins + 1)) - 1
    return sum(abs(c[idx == b].mean() - y[idx == b].mean()) * (idx == b).sum() / len(y)
               for b in range(n_bins) if (idx == b).any())


def test_official_ece_edge_cases_that_elical_does_not_copy():
    # a confidence of exactly 1.0 falls past the last bin there and counts for nothing
    assert _official_ece([1.0, 1.0], [1, 0]) == 0.0
    assert ece([1, 0], [1.0, 1.0]) == pytest.approx(0.5)
    # 0.3 lies below linspace's 0.30000000000000004 and lands one bin low there, apart from 0.35
    assert _official_ece([0.3, 0.35], [1, 0]) == pytest.approx(0.35 + 0.175)
    assert ece([1, 0], [0.3, 0.35]) == pytest.approx(abs(0.325 - 0.5))
