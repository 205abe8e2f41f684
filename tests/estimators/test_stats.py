"""Estimators declare what they read (elical.estimators.stats): shared statistics are computed once, and the
run's estimator cache fingerprint follows the declarations."""

import numpy as np
import pytest

from elical.estimators import ESTIMATORS, EstimatorContext, estimate, kind_of
from elical.estimators.stats import STATS, declared_inputs
from elical.estimators.training_free import se_discrete, se_weighted


def _record(i, samples, lps):
    return {"id": f"q{i}", "question": f"What is {i}?", "greedy_response": samples[0], "sampling_response": samples,
            "sampling_cumulative_logprobs": lps, "sampling_num_tokens": [2] * len(samples)}


RECORDS = [_record(0, ["Paris", "paris", "Lyon"], [-0.1, -0.2, -2.0]),
           _record(1, ["1990", "1991", "1990"], [-0.5, -0.7, -0.4])]


class CountingJudge:
    """Exact-match equivalence that counts its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, a, b):
        self.calls += 1
        return a.strip().lower() == b.strip().lower()


def test_se_discrete_and_weighted_share_one_clustering():
    judge = CountingJudge()
    ctx, shared = EstimatorContext(equivalent=judge), {}
    discrete = estimate("SE-Discrete", RECORDS, ctx, shared).confidence
    after_first = judge.calls
    weighted = estimate("SE-Weighted", RECORDS, ctx, shared).confidence
    assert after_first > 0 and judge.calls == after_first  # the second estimator clustered nothing again
    assert list(shared) == ["semantic_clusters"]
    # the same values as each estimator clustering on its own
    np.testing.assert_allclose(discrete, se_discrete(RECORDS, CountingJudge()))
    np.testing.assert_allclose(weighted, se_weighted(RECORDS, CountingJudge()))
    # by hand: record 0 has clusters {Paris, paris} and {Lyon}: SE = -(2/3 ln 2/3 + 1/3 ln 1/3), over ln 3
    p = np.array([2 / 3, 1 / 3])
    assert discrete[0] == pytest.approx(1 - float(-(p * np.log(p)).sum()) / np.log(3))


def test_declarations_give_kinds_and_fingerprint_inputs():
    assert kind_of("N-Prob") == "record" and kind_of("SE-Weighted") == "semantic" and kind_of("P(True)") == "model"
    reads = declared_inputs(["N-Prob", "SE-Weighted"])
    # the semantic clustering is question-aware, and SE-Weighted reads the token counts: both in the fingerprint
    assert {"question", "sampling_num_tokens", "greedy_cumulative_logprobs"} <= set(reads["fields"])
    assert reads["context"] == ["equivalent", "se_length_normalized"]
    assert "sampling_correctness" in declared_inputs(["Verbal-k"])["pool_fields"]
    for name in ESTIMATORS:  # every declared statistic exists
        for stat in ESTIMATORS[name].info.get("stats", ()):
            assert stat in STATS


def test_model_estimator_without_model_is_a_clear_error():
    with pytest.raises(ValueError, match="queries the model"):
        estimate("P(True)", RECORDS, EstimatorContext())
