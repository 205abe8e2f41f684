import math

import numpy as np
import pytest
from scipy.stats import entropy

from elical.estimators import EstimatorContext, estimate, names_of_kind
from elical.estimators.training_free import (EstimatorInputError, consis_lex, consis_sem, n_prob, prob,
                               se_discrete, se_weighted, semantic_clusters, semantic_clusters_many,
                               semantic_entropy)
from elical.judges import normalize_answer

LN = math.log


def rec(rid="q1", greedy="Paris", lps=(-0.1, -0.2), samples=("Paris", "Paris", "Lyon"), slps=None, ntok=None,
        cons=(1, 1, 0), rouge=(1.0, 1.0, 0.0)):
    r = {"id": rid, "greedy_response": greedy, "greedy_logprobs": list(lps), "sampling_response": list(samples),
         "consistency_judgement": list(cons), "consistency_rougeL": list(rouge)}
    r["sampling_cumulative_logprobs"] = list(slps) if slps is not None else [-1.0] * len(samples)
    r["sampling_num_tokens"] = list(ntok) if ntok is not None else [1] * len(samples)
    return r


def same_normalized(a, b):
    return normalize_answer(a) == normalize_answer(b)


def H(*p):
    return float(-sum(x * math.log(x) for x in p if x > 0))


# ------------------------------------------------------------------------------------------ Prob, Consis
def test_prob_and_n_prob_hand_values():
    r = rec(lps=(-0.1, -0.2))
    assert prob([r])[0] == pytest.approx(math.exp(-0.3))
    assert n_prob([r])[0] == pytest.approx(math.exp(-0.15))
    released = dict(r, greedy_response=["Paris"], greedy_cumulative_logprobs=[-0.5])  # HonestyBench list form
    assert prob([released])[0] == pytest.approx(math.exp(-0.5))
    assert n_prob([released])[0] == pytest.approx(math.exp(-0.25))


@pytest.mark.parametrize("greedy,lps", [("", ()), ("...", (-0.4,)), ("  ?! ", (-0.1, -0.1))])
def test_empty_or_punctuation_greedy_answer_gets_zero_everywhere(greedy, lps):
    r = rec(greedy=greedy, lps=lps)
    for fn in (prob, n_prob, lambda rs: se_discrete(rs, same_normalized), lambda rs: se_weighted(rs, same_normalized)):
        assert fn([r])[0] == 0.0


def test_missing_or_nan_logprobs_name_the_record_and_field():
    bad = rec(rid="nq/7")
    del bad["greedy_logprobs"]
    with pytest.raises(EstimatorInputError, match=r"nq/7.*greedy_logprobs") as err:
        n_prob([rec(), bad])
    assert err.value.index == 1 and err.value.field == "greedy_logprobs"
    with pytest.raises(EstimatorInputError, match="NaN"):
        prob([rec(lps=(-0.1, float("nan")))])
    with pytest.raises(EstimatorInputError, match="greedy_cumulative_logprobs"):
        prob([dict(rec(), greedy_cumulative_logprobs=float("nan"))])
    # a backend without log-probs writes empty lists (and a cumulative 0.0): an error, not probability 1 or 0
    no_backend_lps = dict(rec(rid="api/1"), greedy_logprobs=[], greedy_cumulative_logprobs=0.0)
    for fn in (prob, n_prob):
        with pytest.raises(EstimatorInputError, match=r"api/1.*greedy_logprobs.*backend gave no log-probs"):
            fn([no_backend_lps])


def test_consistency_means_and_errors():
    r = rec(cons=(1, 0, 0, 1), rouge=(0.5, 0.25, 0.0, 1.0), samples=("a", "b", "c", "d"))
    assert consis_sem([r])[0] == pytest.approx(0.5)
    assert consis_lex([r])[0] == pytest.approx(0.4375)
    with pytest.raises(EstimatorInputError, match="consistency_rougeL"):
        consis_lex([rec(rouge=(0.5, float("nan"), 1.0))])
    with pytest.raises(EstimatorInputError, match=r"q9.*consistency_judgement"):
        consis_sem([rec(rid="q9", cons=())])



@pytest.mark.parametrize("greedy", ["...", "", "  ?! ", ["."]])
def test_every_consistency_estimator_gives_empty_greedy_zero(greedy):
    # Hand-made: three samples that all "agree" with a punctuation-only greedy answer (the judge saw "..." in
    # each); the greedy answer says nothing, so every estimator must give 0.0 (the module's shared rule), as
    # N-Prob already did. Before the fix Consis-Sem gave 2/3 and Consis-Lex 2/3 here.
    r = rec(greedy=greedy, lps=(-0.1,), samples=("...", "...", "Paris"), cons=(1, 1, 0), rouge=(1.0, 1.0, 0.0))
    assert n_prob([r])[0] == 0.0 and prob([r])[0] == 0.0
    assert consis_sem([r])[0] == 0.0
    assert consis_lex([r])[0] == 0.0
    for name in names_of_kind("record", "semantic"):
        assert estimate(name, [r], EstimatorContext(equivalent=same_normalized)).confidence[0] == 0.0, name
    # a real answer next to it is unaffected: 2 of 3 samples agree
    assert consis_sem([r, rec()]).tolist() == [0.0, pytest.approx(2 / 3)]

# ------------------------------------------------------------------------------------------ clustering
def test_clusters_group_normalized_duplicates_and_empty_answers():
    first_letter = lambda a, b: a.strip().lower()[0] == b.strip().lower()[0]  # noqa: E731
    ids = semantic_clusters(["Paris", "paris.", "Prague", "Lyon", "", " ..."], first_letter)
    assert ids.tolist() == [0, 0, 0, 1, 2, 2]  # "" and "..." form one no-answer cluster


def test_clusters_need_equivalence_in_both_directions():
    entails = lambda a, b: normalize_answer(a) in normalize_answer(b)  # noqa: E731 (one-way, like NLI)
    assert semantic_clusters(["Paris", "Paris France", "Paris"], entails).tolist() == [0, 1, 0]


def test_clusters_compare_with_the_first_member_as_in_kuhn_et_al():
    # x~y and y~z but not x~z: z is compared with the first member x only, so it opens a new cluster
    links = {frozenset("xy"), frozenset("yz")}
    ids = semantic_clusters(["x", "y", "z"], lambda p, q: frozenset((p, q)) in links)
    assert ids.tolist() == [0, 0, 1]


class RecordingJudge:
    def __init__(self):
        self.calls = []

    def judge_many(self, pairs):
        self.calls.append(list(pairs))
        return np.array([int(same_normalized(a, b)) for a, b in pairs])


def test_judge_object_is_called_once_with_distinct_normalized_strings_only():
    judge = RecordingJudge()
    out = semantic_clusters_many([["Paris", "paris", "Lyon", "Paris."], ["A b", "", "C d"]], judge)
    assert [o.tolist() for o in out] == [[0, 0, 1, 0], [0, 1, 2]]
    assert len(judge.calls) == 1
    assert sorted(judge.calls[0]) == sorted([("Paris", "Lyon"), ("Lyon", "Paris"), ("A b", "C d"), ("C d", "A b")])


class QuestionJudge(RecordingJudge):
    def judge_many(self, pairs, questions=None):
        self.questions = questions
        return super().judge_many(pairs)


def test_judges_that_take_questions_get_each_records_question():
    judge = QuestionJudge()
    records = [dict(rec(rid="1", samples=("Rome", "Oslo")), question="Capital of Italy?"),
               dict(rec(rid="2", samples=("Bern", "Bern")), question="Capital of Switzerland?"),
               dict(rec(rid="3", samples=("Kyiv", "Riga", "Kyiv")), question="Capital of Ukraine?")]
    semantic_entropy(records, equivalent=judge)
    assert len(judge.calls) == 1 and len(judge.calls[0]) == 4
    assert judge.questions == ["Capital of Italy?"] * 2 + ["Capital of Ukraine?"] * 2


def test_default_semantic_judge_clusters_real_paraphrases():
    ids = semantic_clusters(["Paris", "The capital of France is Paris.", "Lyon", "It is Lyon"])
    assert ids.tolist() == [0, 0, 1, 1]


# ------------------------------------------------------------------------------------------ semantic entropy
def test_discrete_semantic_entropy_hand_values():
    r = rec(samples=("Paris", "Paris", "Lyon"))
    se = semantic_entropy([r], equivalent=same_normalized)[0]
    assert se == pytest.approx(H(2 / 3, 1 / 3))
    assert se_discrete([r], same_normalized)[0] == pytest.approx(1 - H(2 / 3, 1 / 3) / LN(3))
    assert se_discrete([rec(samples=("Rome",) * 4)], same_normalized)[0] == 1.0
    assert se_discrete([rec(samples=("Rome", "Oslo", "Bern", "Kyiv"))], same_normalized)[0] == pytest.approx(0.0)
    assert se_discrete([rec(samples=("Rome",))], same_normalized)[0] == 1.0  # N = 1: nothing to disagree with


def test_discrete_entropy_matches_scipy_on_random_answers():
    rng = np.random.default_rng(0)
    records = [rec(samples=[str(v) for v in rng.integers(0, 4, size=7)]) for _ in range(20)]
    ours = semantic_entropy(records, equivalent=same_normalized)
    ref = [entropy(np.unique(r["sampling_response"], return_counts=True)[1]) for r in records]
    np.testing.assert_allclose(ours, ref, atol=1e-12)


def test_weighted_entropy_counts_duplicate_samples_once():
    # Paris sampled twice with p = 0.5, Lyon once with p = 0.25: distinct sequences 0.5 and 0.25 -> 2/3, 1/3
    # (double counting would give 0.8, 0.2).
    r = rec(samples=("Paris", "Paris", "Lyon"), slps=(LN(0.5), LN(0.5), LN(0.25)))
    se = semantic_entropy([r], weighted=True, equivalent=same_normalized)[0]
    assert se == pytest.approx(H(2 / 3, 1 / 3))
    assert se != pytest.approx(H(0.8, 0.2))
    assert se_weighted([r], same_normalized)[0] == pytest.approx(1 - H(2 / 3, 1 / 3) / LN(3))


def test_weighted_cluster_probability_never_exceeds_one():
    # naive sum over samples would give the Paris cluster 0.6 + 0.6 + 0.3 = 1.5; here it is exactly 1
    r = rec(samples=("Paris", "Paris", "Paris."), slps=(LN(0.6), LN(0.6), LN(0.3)))
    assert semantic_entropy([r], weighted=True, equivalent=same_normalized)[0] == pytest.approx(0.0)
    assert se_weighted([r], same_normalized)[0] == pytest.approx(1.0)
    # different sequences of one cluster add up: Paris 0.4 + "Paris." 0.2 vs Lyon 0.2 -> 0.75, 0.25
    r = rec(samples=("Paris", "Paris.", "Lyon"), slps=(LN(0.4), LN(0.2), LN(0.2)))
    assert semantic_entropy([r], weighted=True, equivalent=same_normalized)[0] == pytest.approx(H(0.75, 0.25))


def test_weighted_zero_token_sample_keeps_its_sampling_share():
    r = rec(samples=("", "Paris", "Lyon"), slps=(0.0, LN(0.3), LN(0.1)), ntok=(0, 1, 1))
    assert semantic_entropy([r], weighted=True, equivalent=same_normalized)[0] == pytest.approx(H(1 / 3, 1 / 2, 1 / 6))


def test_weighted_length_normalized_uses_mean_token_logprob():
    r = rec(samples=("Paris", "Lyon France"), slps=(LN(0.5), 2 * LN(0.5)), ntok=(1, 2))
    assert semantic_entropy([r], weighted=True, length_normalized=True,
                            equivalent=same_normalized)[0] == pytest.approx(LN(2))
    assert semantic_entropy([r], weighted=True, equivalent=same_normalized)[0] == pytest.approx(H(2 / 3, 1 / 3))
    assert se_weighted([r], same_normalized, length_normalized=True)[0] == pytest.approx(0.0)  # ln 2 / ln 2


def test_semantic_entropy_bad_input_names_the_record():
    no_lps = rec(rid="web/3")
    del no_lps["sampling_cumulative_logprobs"]
    assert se_discrete([no_lps], same_normalized)[0] == pytest.approx(1 - H(2 / 3, 1 / 3) / LN(3))
    with pytest.raises(EstimatorInputError, match=r"web/3.*sampling_cumulative_logprobs.*missing"):
        se_weighted([rec(), no_lps], same_normalized)
    with pytest.raises(EstimatorInputError, match=r"api/2.*sampling_cumulative_logprobs.*missing or empty"):
        se_weighted([dict(rec(rid="api/2"), sampling_cumulative_logprobs=[], sampling_num_tokens=[])],
                    same_normalized)
    with pytest.raises(EstimatorInputError, match="NaN"):
        se_weighted([rec(slps=(-1.0, float("nan"), -2.0))], same_normalized)
    with pytest.raises(EstimatorInputError, match="2 values for 3"):
        se_weighted([rec(slps=(-1.0, -2.0))], same_normalized)
    with pytest.raises(EstimatorInputError, match="sampling_response"):
        se_discrete([rec(samples=())], same_normalized)


def test_registry_names_and_ranges():
    assert names_of_kind("record", "semantic") == ["Prob", "N-Prob", "Consis-Lex", "Consis-Sem", "SE-Discrete",
                                                   "SE-Weighted"]
    records = [rec(rid=str(i), samples=s, slps=(-0.5, -3.0, -1.0)) for i, s in
               enumerate([("Rome", "Rome", "Rome"), ("Rome", "Oslo", "Bern"), ("", "Oslo", "oslo")])]
    got = {name: estimate(name, records, EstimatorContext(equivalent=same_normalized)).confidence
           for name in names_of_kind("record", "semantic")}
    for name, c in got.items():
        assert c.shape == (3,) and ((c >= 0) & (c <= 1)).all(), name
    # by hand. Record 0: one cluster (SE 0, confidence 1); record 1: three singletons (SE = log 3, confidence 0);
    # record 2: clusters {""} and {Oslo, oslo}, discrete p = (1/3, 2/3). Weighted (every sample has 1 token, so
    # none is a 0-token stop): sequence probabilities e^-0.5, e^-3, e^-1 normalized; record 1 keeps three
    # clusters with those weights, record 2 pools e^-3 + e^-1. Greedy "Paris" is not empty: no zeroing.
    np.testing.assert_allclose(got["SE-Discrete"], [1.0, 0.0, 1 - H(1 / 3, 2 / 3) / LN(3)], atol=1e-12)
    w = np.exp([-0.5, -3.0, -1.0])
    w = w / w.sum()
    np.testing.assert_allclose(got["SE-Weighted"], [1.0, 1 - H(*w) / LN(3), 1 - H(w[0], w[1] + w[2]) / LN(3)],
                               atol=1e-12)
    np.testing.assert_allclose(got["Prob"], [math.exp(-0.3)] * 3)
    np.testing.assert_allclose(got["Consis-Sem"], [2 / 3] * 3)


def test_estimators_on_recorded_real_records():
    # The recorded SmolLM2 records of tests/fixtures/smoke_run, scored by the definitions of DESIGN.md computed
    # here with numpy: Prob = exp(sum of greedy log-probs), N-Prob = exp(mean), Consis-Sem = mean judgement,
    # Consis-Lex = mean ROUGE-L; an answer without a letter or digit says nothing and gets 0.
    from pathlib import Path

    from elical.records import read_records

    recs = read_records(Path(__file__).resolve().parents[1] / "fixtures" / "smoke_run" / "records"
                        / "annotations.jsonl")
    assert len(recs) == 48
    says = np.array([any(ch.isalnum() for ch in r["greedy_response"]) for r in recs])
    lp = [np.array(r["greedy_logprobs"], dtype=float) for r in recs]
    want = {
        "Prob": np.array([np.exp(x.sum()) for x in lp]),
        "N-Prob": np.array([np.exp(x.mean()) if len(x) else 0.0 for x in lp]),
        "Consis-Sem": np.array([np.mean(r["consistency_judgement"]) for r in recs]),
        "Consis-Lex": np.array([np.mean(r["consistency_rougeL"]) for r in recs]),
    }
    for name, expected in want.items():
        got = estimate(name, recs).confidence
        # (the stored sum is rounded to 6 decimals like each log-prob, hence rtol 1e-5)
        np.testing.assert_allclose(got, np.where(says, expected, 0.0), rtol=1e-5, atol=1e-9, err_msg=name)
    assert 0 < np.mean([r["greedy_correctness"] for r in recs]) < 1  # real answers, some right, some wrong
