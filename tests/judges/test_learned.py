"""The extraction, the "normalized" floor judge, the features and the learned judges, on invented examples of the
six kinds of error of issue 20; expected values are hand computations (or scikit-learn, for the tree export)."""

import math

import numpy as np
import pytest

from elical.judges import make_correctness_judge, make_equivalence_judge
from elical.judges.extract import alias_contained, extract, listed_options, options_named
from elical.judges.features import (CORRECTNESS_FEATURES, EQUIVALENCE_FEATURES, SOFT_FEATURES, TokenEncoder,
                                    bertscore, correctness_features, equivalence_features, is_open, overlap,
                                    salient)
from elical.judges.learned import Scorer, export_model, load_weights


def test_extraction_echo_refusal_negation_numbers():
    q = "What is the capital of Brenland?"
    assert extract("The capital of Brenland", q).echo and not extract("The capital of Brenland", q).answers
    assert not extract("The capital of Brenland is Brenland City.", q).echo  # a word beyond the question
    assert not extract("Ted Marsh is older than Ann Kell.", "Who is older, Ann Kell or Ted Marsh?").echo  # a choice
    # a named option is an answer, though every word of it is the question's; a cut-off piece is not
    q2 = "Which came first, the Brenland Accord or the Treaty of Velmar?"
    assert extract("The Treaty of Velmar.", q2).answers and not extract("the Treaty of Velmar", q2).answers
    assert not extract("Which came first, the Brenland", q2).answers  # where the question starts
    # a listed option, bare or after its letter, answers even unclosed; a list of two or another piece does not
    q4 = "Which tool does a cooper use? Options: croze; burin; adze of Velmar; awl."
    assert extract("adze of Velmar", q4).answers and extract("C. adze of Velmar", q4).answers
    assert not extract("croze; burin", q4).answers and not extract("a cooper use", q4).answers
    q3 = "Which river flows past the old harbour town where the poet Ilse Varnholt was born?"
    assert extract("The old harbour town where the poet Ilse Varnholt was", q3).echo  # cut off inside the question
    assert extract("I don't know the capital.", q).refusal
    assert extract("The Verlan does not flow north.", "Does the Verlan flow north?").negated
    assert not extract("No, it flows south.", "Is there no river?").negated  # the question's own "no"
    e = extract("Built in 1,200 and rebuilt in 1950.", "Was it built in 1950?")
    assert e.numbers == {"1200", "1950"} and e.new_numbers == {"1200"}


def test_overlap_counts_repeats():
    assert overlap(["a", "b", "b"], ["b", "c"]) == (1 / 3, 1 / 2)
    assert overlap([], ["b"]) == (0.0, 0.0)


@pytest.mark.parametrize("answer, alias, question, want", [
    ("They speak the portuguese language.", "Portuguese Language", None, True),  # kind 6: case of aliases
    ("Fargo is in North Dakota.", "South Dakota", None, False),  # kind 6
    ("It is worth 100 cents.", "Cent", None, False),  # kind 6: "cents" is another token
    ("There were 1,000 of them.", "1000", None, True),  # numbers as values
    ("It is 3.5 metres.", "35", None, False),
    ("Mars has two moons.", "2", None, True),
    ("I don't know, maybe Oslo.", "Oslo", None, False),  # a refusal is never correct
    ("The capital of Oslo county", "Oslo", "Which city is the capital of Oslo county?", False),  # an echo
    ("It is in Indiana.", "IN", None, False),  # a short code only as an exact token
    ("Ann Kell.", "Ann Kell", "Who was born first, Ted Marsh or Ann Kell?", True),  # a named option answers
])
def test_alias_contained(answer, alias, question, want):
    assert alias_contained(answer, alias, question) is want
    judge = make_correctness_judge("normalized")
    assert judge.judge_many([(answer, [alias])], [question])[0] == int(want)


@pytest.fixture(scope="module")
def enc():
    return TokenEncoder()


def test_bertscore_of_a_text_with_itself_is_one(enc):
    t = enc.tokens("Skive is in Denmark.")
    p, r = bertscore(t, t)
    assert p == pytest.approx(1.0, abs=1e-5) and r == pytest.approx(1.0, abs=1e-5)
    assert bertscore(t, t, frozenset(t[0])) == (0.0, 0.0)  # every piece dropped


def test_equivalence_features_by_hand(enc):
    q = "Where is Skive?"
    a, b = "Skive is in Denmark, a Scandinavian country.", "Skive is in Denmark."
    f = dict(zip(EQUIVALENCE_FEATURES, equivalence_features(a, b, q, enc)))
    # tokens: skive is in denmark scandinavian country (6) / skive is in denmark (4): F1 = 2*(4/6)*1/(4/6+1) = 0.8
    assert f["f1"] == pytest.approx(0.8)
    # content words: {skive, denmark, scandinavian, country} vs {skive, denmark}
    assert (f["cover_min"], f["cover_max"]) == (0.5, 1.0)
    # beyond the question: {denmark, scandinavian, country} vs {denmark}: 1/3 and 1, F1 0.5
    assert (f["beyond_min"], f["beyond_max"]) == (pytest.approx(1 / 3), 1.0) and f["beyond_f1"] == pytest.approx(0.5)
    assert f["contained"] == 1.0 and f["nonanswer_any"] == 0.0 and f["numbers_one_side"] == 0.0  # kind 1
    assert f["length_gap"] == pytest.approx(math.log(7) - math.log(5))
    # kind 3: a surname shared with the question is no shared answer
    g = dict(zip(EQUIVALENCE_FEATURES, equivalence_features("Clara Fennimore.", "Edith Fennimore.",
                                                            "Who was the wife of Albert Fennimore?", enc)))
    assert (g["cover_min"], g["beyond_max"], g["beyond_equal"]) == (0.5, 0.0, 0.0)
    # kind 5: two cut-off echoes (kind 4, negation, is read by `extract`: test_extraction_echo_refusal_negation_numbers)
    q5 = "When was the Old Mill of Brenhaven built"
    e = dict(zip(EQUIVALENCE_FEATURES, equivalence_features("The Old Mill of Brenhaven", "When was the Old Mill",
                                                            q5, enc)))
    assert e["nonanswer_both"] == 1.0 and e["beyond_max"] == 0.0


def test_salient_words_and_polarity_by_hand():
    q = "Which river flows through the capital of Egypt?"
    a, b = "The Nile flows through Cairo.", "It is the Nile River."
    # capitalised words beyond the question, stop words and the question's words ("river") left out
    assert salient(a, q) == ["nile", "cairo"] and salient(b, q) == ["nile"]
    f = dict(zip(EQUIVALENCE_FEATURES, equivalence_features(a, b, q, None)))
    # a's salient words in b: nile yes, cairo no -> 1/2; b's in a: 1/1; both first salient words shared
    assert (f["salient_min"], f["salient_max"], f["salient_first_both"], f["salient_disjoint"]) == (0.5, 1, 1, 0)
    # first content word beyond the question: "nile" on both sides ("flows" is the question's)
    assert (f["lead_both"], f["yesno_conflict"], f["negation_parity_differs"]) == (1, 0, 0)
    assert all(math.isnan(f[n]) for n in SOFT_FEATURES & set(f))  # no encoder: the soft features are NaN
    g = dict(zip(EQUIVALENCE_FEATURES, equivalence_features("No, Oslo is in Norway.", "Yes, Oslo is in Sweden.",
                                                            "Is Oslo in Sweden?", None)))
    # salient: ["norway"] vs [] ("oslo", "sweden" are the question's); "no" against "yes"; one negation against none
    assert (g["salient_min"], g["salient_disjoint"], g["yesno_conflict"], g["negation_parity_differs"]) == (-1, 0, 1, 1)


def test_cascade_encodes_only_where_the_cheap_model_is_unsure(monkeypatch):
    w = load_weights()
    for task in ("equivalence", "correctness"):
        assert not set(w[f"{task}_cheap"]["features"]) & SOFT_FEATURES
    assert w["equivalence_cheap"]["band"] == [0.1, 0.8] and w["correctness_cheap"]["band"] == [0.15, 0.8]
    assert w["equivalence"]["second_band"] == [0.1, 0.8] and w["equivalence"]["second_orders"] == 1
    assert "second_band" not in w["correctness"]
    judge = make_equivalence_judge("learned")
    encoded = []
    monkeypatch.setattr(judge.encoder, "encode_all", lambda texts: encoded.extend(texts))
    # the same answer twice: the cheap model is sure, so MiniLM never runs on it
    ex = judge.explain("The Nile.", "The Nile.", "Which river flows through Cairo?")
    assert ex["decided_by"] == "cheap" and ex["verdict"] == 1 and ex["features"]["cosine"] is None
    assert encoded == []


def test_fuzzy_recall_compares_numbers_as_numbers():
    """Word forms match by their characters; a number only when the answer has it (issue 20, item 3)."""
    from elical.judges.features import _fuzzy_recall

    assert _fuzzy_recall(["1264"], ["is", "1234"], None) == 0.0  # 3 of 4 characters shared: still another number
    assert _fuzzy_recall(["1", "264"], ["1", "264"], None) == 1.0
    assert _fuzzy_recall(["1", "264"], ["1", "234"], None) == 0.5
    # "portugal" / "portuguese": difflib ratio 2 * 6 / 18
    assert _fuzzy_recall(["portugal"], ["portuguese", "1"], None) == pytest.approx(12 / 18)


def test_number_words_of_an_alias_are_compared_as_values():
    """An alias's number words are compared by value, not dropped as stop words: "twelve lamps" gives fuzzy_recall
    1 only with a twelve in the answer, where before it was scored on "lamps" alone (sixteenth round)."""
    from elical.judges.features import CORRECTNESS_FEATURES, correctness_features

    q = "How many lamps hang in the hall of Holm?"
    fuzzy = CORRECTNESS_FEATURES.index("fuzzy_recall")
    assert correctness_features("There are 18 lamps.", "twelve lamps", q, None)[fuzzy] == 0.0
    assert correctness_features("There are 12 lamps.", "twelve lamps", q, None)[fuzzy] == 1.0
    assert correctness_features("Twelve of them.", "12 lamps", q, None)[fuzzy] == 1.0


def test_fuzzy_recall_ignores_the_question_words():
    """The question's words are no evidence on either side while the alias has another word: "Velmoor Stadium"
    for "Which stadium in Holm ...?" is scored on "velmoor" alone, against the answer's words the question lacks."""
    from elical.judges.features import _fuzzy_recall

    q = "Which stadium in Holm is the home of rugby?"
    # without the question, "velmoor" is closest to the question's "holm" ("lm" shared: 2 * 2 / 11) and "stadium"
    # is matched; with it, "velmoor" is scored against "hartley" alone ("e" shared: 2 * 1 / 14)
    assert _fuzzy_recall(["velmoor", "stadium"], ["hartley", "stadium", "holm"], None) == pytest.approx(
        (2 * 2 / 11 + 1) / 2)
    assert _fuzzy_recall(["velmoor", "stadium"], ["hartley", "stadium", "holm"], q) == pytest.approx(2 * 1 / 14)
    assert _fuzzy_recall(["velmoor", "stadium"], ["velmoor", "stadium"], q) == 1.0
    # an alias made only of the question's words is scored on all its words, as before
    assert _fuzzy_recall(["holm", "stadium"], ["holm", "stadium"], q) == 1.0


@pytest.mark.parametrize("alias, answer, want", [
    ("Brenland", "It is in the Brenlandic state of Holm.", 1),  # the adjective: all but the last letter shared
    ("Velmar", "The Velmarese speak it.", 1),
    ("Velmar Republic", "The Velmarese speak it.", 0),  # every alias word is needed
    ("Austria", "It is in Australia.", 0),  # 5 of 7 letters shared: another name
    ("Iran", "It is in Iraq.", 0), ("Iran", "It is Iranian.", 1),  # a short word: all of it
    ("1264", "It is 12645.", 0),  # a number only as itself
    ("Brenland", "I don't know; maybe the Brenlandic state.", 0),  # a non-answer never
    ("IN", "Gary is in Ohio.", 0),  # a short code only as itself (the floor's rule): not the word "in"
    ("Velmar Rally", "The Velmar driver won the rally in Holm.", 0),  # every alias word is the question's
    ("Calimo", "The cloth named after Calimor is called", 0),  # its only match a word of the question's
    ("Calimo", "It is Calimor cloth, named after the port of Calimor.", 0),
    ("Calimo", "It is calimo, named after the port of Calimor.", 1),
    # number words (stop words to scikit-learn) by their value (sixteenth round): "three legs" is not "4 legs"
    ("three legs", "The Brenland stool stands on 4 legs.", 0), ("three legs", "It stands on 3 legs.", 1),
    ("3 legs", "It stands on three legs.", 1), ("first gate", "It is the gate of Holm.", 0),
    ("first gate", "It is the 1st gate.", 1),
])
def test_stem_floor_by_hand(alias, answer, want):
    """The correctness feature stem_floor: the alias's words in the answer, or their adjective / plural forms."""
    from elical.judges.features import CORRECTNESS_FEATURES, correctness_features

    q = {"Velmar Rally": "Which rally did the Velmar driver win?",
         "Calimo": "Which cloth is named after the port of Calimor?"}.get(alias)
    assert correctness_features(answer, alias, q, None)[CORRECTNESS_FEATURES.index("stem_floor")] == want


def test_logistic_scorer_by_hand():
    s = Scorer({"kind": "logistic", "features": ["x", "y"], "mean": [1, 0], "scale": [2, 1], "coef": [1, -1],
                "intercept": 0.5, "threshold": 0.5})
    # z = (3 - 1) / 2 * 1 + (1 - 0) / 1 * (-1) + 0.5 = 0.5
    assert s.proba(np.array([[3.0, 1.0]]))[0] == pytest.approx(1 / (1 + math.exp(-0.5)))


def test_mean_scorer_is_the_mean_of_its_parts_by_hand():
    """Kind "mean" (the soft vote judge_cv.py ships): the plain mean of its models' probabilities."""
    logistic = {"kind": "logistic", "features": ["x"], "mean": [0], "scale": [1], "coef": [2], "intercept": 0.0,
                "threshold": 0.4}
    # one stump: x <= 0.5 -> -1.0, else +3.0; raw = init 0.25 + 0.5 * leaf
    trees = {"kind": "trees", "features": ["x"], "init": 0.25, "learning_rate": 0.5, "threshold": 0.4,
             "trees": [{"feature": [0, -2, -2], "threshold": [0.5, -2, -2], "left": [1, -1, -1],
                        "right": [2, -1, -1], "value": [0.0, -1.0, 3.0]}]}
    s = Scorer({"kind": "mean", "features": ["x"], "models": [logistic, trees], "threshold": 0.4})
    sig = lambda z: 1 / (1 + math.exp(-z))  # noqa: E731
    got = s.proba(np.array([[0.0], [1.0]]))
    assert got[0] == pytest.approx((sig(0.0) + sig(0.25 - 0.5)) / 2)
    assert got[1] == pytest.approx((sig(2.0) + sig(0.25 + 1.5)) / 2)
    assert s.decision(np.array([[1.0]]))[0] == pytest.approx(math.log(got[1] / (1 - got[1])))
    with pytest.raises(ValueError, match="'mean' model"):
        Scorer({"kind": "mean", "features": ["x"], "models": [], "threshold": 0.5})
    with pytest.raises(ValueError, match="'mean' model"):
        Scorer({"kind": "mean", "features": ["x"], "models": [{**logistic, "features": ["y"]}], "threshold": 0.5})


def test_tree_export_matches_sklearn():
    from sklearn.ensemble import GradientBoostingClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    est = GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0).fit(X, y)
    got = Scorer(export_model(est, ["a", "b", "c"])).proba(X)
    np.testing.assert_allclose(got, est.predict_proba(X)[:, 1], atol=1e-5)
    # a list exports as their soft vote (kind "mean"), as scikit-learn's VotingClassifier(voting="soft") averages
    from sklearn.ensemble import VotingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    vote = VotingClassifier([("lr", make_pipeline(StandardScaler(), LogisticRegression())),
                             ("gb", GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0))],
                            voting="soft").fit(X, y)
    got = Scorer(export_model(list(vote.estimators_), ["a", "b", "c"])).proba(X)
    np.testing.assert_allclose(got, vote.predict_proba(X)[:, 1], atol=1e-5)


def test_shipped_weights_are_small_and_match_the_features(load_script):
    """Each shipped model reads its task's features outside the groups judge_cv.py --drop left out (weights meta
    ``groups_left_out``); the cheap stage none of the soft features either."""
    import os
    from pathlib import Path

    from elical.judges.features import CORRECTNESS_FEATURES
    from elical.judges.learned import WEIGHTS_PATH

    assert os.path.getsize(WEIGHTS_PATH) < 2_000_000
    w = load_weights()
    groups = load_script(Path(__file__).parents[2] / "benchmarks" / "judge_cv.py").GROUPS
    for task, names in (("equivalence", EQUIVALENCE_FEATURES), ("correctness", CORRECTNESS_FEATURES)):
        gone = {f for g in w["meta"][task].get("groups_left_out", []) for f in groups[task][g]}
        assert w[task]["features"] == [n for n in names if n not in gone]
        assert w[f"{task}_cheap"]["features"] == [n for n in names if n not in gone and n not in SOFT_FEATURES]


def test_weights_over_some_of_the_features_read_those_columns(tmp_path):
    """A model trained with feature groups left out (judge_cv.py --drop) reads its own columns of the full feature
    matrix; a model naming a feature this version lacks is refused, naming the file."""
    import json

    from elical.judges.learned import WEIGHTS_PATH, LearnedEquivalenceJudge

    shipped = json.loads(WEIGHTS_PATH.read_text(encoding="utf-8"))
    shipped["equivalence"] = {"kind": "logistic", "features": ["cosine", "f1"], "mean": [0, 0], "scale": [1, 1],
                              "coef": [-1.0, 2.0], "intercept": 0.5, "threshold": 0.5}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(shipped), encoding="utf-8")
    judge = LearnedEquivalenceJudge(weights=path)
    X = np.zeros((2, len(EQUIVALENCE_FEATURES)))
    X[:, EQUIVALENCE_FEATURES.index("f1")] = [1.0, 0.0]
    X[:, EQUIVALENCE_FEATURES.index("cosine")] = [0.5, 2.0]
    sig = lambda z: 1 / (1 + math.exp(-z))  # noqa: E731
    np.testing.assert_allclose(judge.scorer.proba(X), [sig(2.0 - 0.5 + 0.5), sig(-2.0 + 0.5)])
    shipped["equivalence"]["features"] = ["cosine", "not_a_feature"]
    path.write_text(json.dumps(shipped), encoding="utf-8")
    with pytest.raises(ValueError, match="w.json.*not_a_feature"):
        LearnedEquivalenceJudge(weights=path)


def test_learned_judges_on_invented_pairs():
    """Invented pairs of the issue's kinds 1-5. The default cascade decides kinds 1, 3, 4, 5 right; kind 2 (a
    paraphrase sharing no word, "Islam" / "Muslims") only the full stage gets (seventh-round weights: the feature
    model 0.38, the cross-encoder 0.95, their mean 0.66): the lexical first stage is sure (0.034) the answers differ
    and never asks MiniLM, a known miss of the cascade (docs/benchmarks.md, with "North Dakota" / "South Dakota" and
    numbers written as words); "learned-ce" gets it (test_learned_ce_...). Kind 5 is decided by the named rule (two
    cut-off echoes: both non-answers)."""
    eq = [("Which country is the town of Skive in?", "Skive is located in Denmark, a Scandinavian country in "
           "Northern Europe.", "Skive is located in Denmark.", 1),  # kind 1
          ("What religion do most people in Tunisia follow?", "Most people in Tunisia follow Islam.",
           "Most Tunisians are Muslims.", 1),  # kind 2
          ("Who was the wife of Albert Fennimore?", "Albert Fennimore's wife was Clara Fennimore.",
           "His wife was Edith Fennimore.", 0),  # kind 3
          ("Does the Verlan river flow into the sea?", "The Verlan river flows into the sea.",
           "The Verlan river does not flow into the sea.", 0),  # kind 4
          ("When was the Old Mill of Brenhaven on the river Lenne built", "The Old Mill of Brenhaven on the river "
           "Lenne was built in the", "When was the Old Mill of Brenhaven on the river Lenne built, and", 0)]  # kind 5
    judge = make_equivalence_judge("learned")
    got = judge.judge_many([(a, b) for _, a, b, _ in eq], [q for q, *_ in eq])
    assert [got[i] for i in (0, 2, 3, 4)] == [1, 0, 0, 0]  # kinds 1, 3, 4, 5 (kind 2: see the docstring)
    full = judge.scorer.proba(judge.features([(a, b) for _, a, b, _ in eq], [q for q, *_ in eq]))
    both = (full + judge._second_opinion([(a, b, q) for q, a, b, _ in eq])) / 2
    assert (both[:4] >= 0.5).astype(int).tolist() == [1, 1, 0, 0]  # the full stage (features + cross-encoder)
    corr = make_correctness_judge("learned")
    got = corr.judge_many([("Portuguese is spoken in Brazil.", ["Portuguese Language"]),  # kind 6
                           ("I don't know the capital of Norway.", ["Oslo"])],
                          ["What language is spoken in Brazil?", "What is the capital of Norway?"])
    assert got.tolist() == [1, 0]
    ex = judge.explain("Skive is in Denmark.", "Skive is in Denmark.", "Where is Skive?")
    assert ex["verdict"] == 1 and ex["features"]["f1"] == 1.0 and ex["a"]["beyond"] == ("denmark",)


def test_judge_explain_command(capsys):
    import json

    from elical import cli

    assert cli.main(["judge-explain", "--question", "Where is Skive?", "It is in Denmark.", "--aliases", "Denmark",
                     "--judges", "normalized,learned"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["normalized"] == {"verdict": 1}
    assert out["learned"]["aliases"][0]["features"]["floor"] == 1.0
    assert out["learned"]["answer"]["beyond"] == ["denmark"]
    assert cli.main(["judge-explain", "A", "B", "--aliases", "A"]) == 2  # equivalence and correctness at once
    assert cli.main(["judge-explain", "A", "B", "--judges", "bleu"]) == 2


@pytest.mark.parametrize("alias", ["Portuguese Language", "Portuguese language", "portuguese language"])
def test_correctness_ignores_the_case_of_an_alias(alias):
    """Kind 6: the earlier default correctness judge (span-contains, removed) gave "Portuguese" for "Portuguese
    language" but not for "Portuguese Language" (a capitalised alias kept the question's word "language" as part of
    a name); the learned judge gives it for all three."""
    judge = make_correctness_judge("learned")
    q = "What language is spoken in Brazil?"
    got = judge.judge_many([("Portuguese is spoken in Brazil.", [alias]), ("Spanish is spoken there.", [alias])],
                           [q, q])
    assert got.tolist() == [1, 0]


def test_named_non_answer_rules_decide_before_any_model():
    """Two non-answers are never the same answer, however alike their wording (GUIDELINE.md rule 5: cut-off echoes of
    one question share nearly every word), and a non-answer is never correct; `explain` names the rule."""
    q = "Which river flows past the old harbour town where the poet Ilse Varnholt was born?"
    echo_a = "The old harbour town where the poet Ilse Varnholt was"  # two cut-off pieces of the question
    echo_b = "Which river flows past the old harbour town where the poet"
    judge = make_equivalence_judge("learned")
    assert judge.judge_many([(echo_a, echo_b), (echo_a, "The Weser."), ("It is the Weser.", "The Weser.")],
                            [q, q, q]).tolist() == [0, 0, 1]
    ex = judge.explain(echo_a, echo_b, q)
    assert ex["decided_by"] == "rule: both-non-answers" and ex["probability"] == 0.0
    corr = make_correctness_judge("learned")
    got = corr.judge_many([("I'm sorry, I do not know which river, maybe the Weser.", ["Weser"]),
                           ("It is the Weser.", ["Weser"])], [q, q])
    assert got.tolist() == [0, 1]
    assert corr.explain("I do not know.", ["Weser"], q)["aliases"][0]["decided_by"] == "rule: non-answer"


def test_open_ended_and_unmatched_salient_features_by_hand():
    """"Naples, Italy" / "Milan, Italy": each side names a place the other lacks (a slot filled twice), though they
    share "Italy"; a long text without closing punctuation is open (cut off), a short bare phrase is not; "1,000" is
    one number."""
    q = "Where was Carla Bensi born?"
    f = dict(zip(EQUIVALENCE_FEATURES, equivalence_features("She was born in Naples, Italy.",
                                                            "Carla Bensi was born in Milan, in Italy, in the", q,
                                                            None)))
    assert (f["salient_unmatched_both"], f["salient_disjoint"], f["open_any"], f["open_both"]) == (1.0, 0.0, 1.0, 0.0)
    assert not is_open("It is Lyon") and is_open("Carla Bensi was born in the city of Milan, in")
    g = dict(zip(EQUIVALENCE_FEATURES, equivalence_features("Naples, Italy.", "In Naples, in southern Italy.", q,
                                                            None)))
    assert (g["salient_unmatched_both"], g["open_any"]) == (0.0, 0.0)
    assert salient("It cost 1,000 lire in Naples.", q) == ["1000", "naples"]


def test_option_features_by_hand():
    """A question that lists options: which option each answer names is what it claims (every word and number of
    "14 hours" and "19 hours" is the question's, so no other feature tells them apart); options are found
    token-bounded ("9 hours" is not in "19 hours"), and a question without an "Options:" list has none."""
    q = "How long does the Velmar ferry take to cross? Options: 9 hours; 14 hours; 19 hours; two days."
    assert listed_options(q) == ("9 hours", "14 hours", "19 hours", "two days")
    assert options_named("The crossing takes 19 hours.", q) == {2}
    assert options_named("It is 14 hours, not two days.", q) == {1, 3}
    assert options_named("It takes about half a day.", q) == frozenset()
    assert options_named("It takes 19 hours.", "How long does the crossing take?") == frozenset()

    def eq(a, b, question=q):
        f = dict(zip(EQUIVALENCE_FEATURES, equivalence_features(a, b, question, None)))
        return f["options_question"], f["option_same"], f["option_conflict"], f["option_one_side"]

    assert eq("The crossing takes 14 hours.", "19 hours") == (1.0, 0.0, 1.0, 0.0)
    assert eq("The crossing takes 14 hours.", "14 hours.") == (1.0, 1.0, 0.0, 0.0)
    assert eq("It is 14 hours, not two days.", "14 hours") == (1.0, 0.0, 0.0, 0.0)  # one names two: not the same one
    assert eq("The crossing takes 14 hours.", "It is a long crossing.") == (1.0, 0.0, 0.0, 1.0)
    assert eq("14 hours", "19 hours", "How long is the crossing?") == (0.0, 0.0, 0.0, 0.0)

    def corr(answer, alias, question=q):
        f = dict(zip(CORRECTNESS_FEATURES, correctness_features(answer, alias, question, None)))
        return f["option_alias"], f["option_alone"], f["option_other"]

    assert corr("The crossing takes 14 hours.", "14 hours") == (1.0, 1.0, 0.0)
    assert corr("It is 14 hours, not two days.", "14 Hours") == (1.0, 0.0, 1.0)
    assert corr("The crossing takes 19 hours.", "14 hours") == (1.0, 0.0, 1.0)
    assert corr("The crossing takes 14 hours.", "fourteen hours") == (0.0, 0.0, 0.0)  # the alias is no listed option


def test_learned_judges_read_the_option_an_answer_picks():
    """Invented questions that list options: two answers naming different options differ, though every word of each
    is the question's, and an answer naming the keyed option and another is not correct. The twentieth-round judges
    (no option features) called the oxygen / carbon dioxide pair the same (P = 0.59) and "oxygen, not carbon
    dioxide" correct."""
    q = "How long does the Velmar ferry take to cross the strait? Options: 9 hours; 14 hours; 19 hours; two days."
    q2 = "Which gas do plants mostly take in for photosynthesis? Options: oxygen; nitrogen; carbon dioxide; helium."
    pairs = [("The Velmar ferry takes 14 hours to cross the strait.", 'The answer is "19 hours."', q, 0),
             ("The Velmar ferry takes 14 hours to cross the strait.", "14 hours", q, 1),
             ("The Velmar ferry takes 14 hours to cross the strait.", "It takes two days.", q, 0),
             ("Plants mostly take in carbon dioxide for photosynthesis.", "Carbon dioxide.", q2, 1),
             ("Plants mostly take in carbon dioxide for photosynthesis.",
              "Plants mostly take in oxygen for photosynthesis.", q2, 0)]
    got = make_equivalence_judge("learned").judge_many([(a, b) for a, b, *_ in pairs], [p[2] for p in pairs])
    assert got.tolist() == [p[3] for p in pairs]
    corr = make_correctness_judge("learned")
    answers = ["Plants mostly take in carbon dioxide.", "Plants take in oxygen, not carbon dioxide.",
               "Plants take in oxygen."]
    assert corr.judge_many([(a, ["carbon dioxide"]) for a in answers], [q2] * 3).tolist() == [1, 0, 0]


def test_learned_ce_averages_the_cross_encoder_wherever_the_cheap_stage_is_not_sure_of_same():
    """"learned-ce": the cheap stage decides only where it is sure the answers are the same (identical answers);
    every other pair no rule decides gets the mean of the full feature model's P(same) and the cross-encoder's (each
    computed here on its own), a ruled pair 0; `explain` names the stage; the CLI takes the name. The paraphrase
    sharing no word ("Islam" / "Muslims", kind 2), which the default cascade's cheap stage gets wrong, is "same"."""
    q = "Which river flows past the old harbour town where the poet Ilse Varnholt was born?"
    q2 = "What religion do most people in Tunisia follow?"
    rows = [("The Weser.", "The Weser.", q),
            ("Most people in Tunisia follow Islam.", "Most Tunisians are Muslims.", q2),
            ("It is the Weser.", "It is the Elbe.", q),
            ("The old harbour town where the poet Ilse Varnholt was",
             "Which river flows past the old harbour town where the poet", q)]
    judge = make_equivalence_judge("learned-ce")
    assert judge.name == "learned-ce" and judge.everywhere
    got = judge.scores([r[:2] for r in rows], [r[2] for r in rows])
    X = judge.features([r[:2] for r in rows], [r[2] for r in rows])
    cheap = judge.cheap.proba(X[:, [judge.names.index(f) for f in judge.cheap.features]])
    mean = (judge.scorer.proba(X) + judge._second_opinion(rows)) / 2
    assert cheap[0] >= judge.band[1] > cheap[1] and cheap[2] < judge.band[1]  # only identical answers are sure
    np.testing.assert_allclose(got, [cheap[0], mean[1], mean[2], 0.0], atol=1e-9)
    assert (got >= 0.5).astype(int).tolist() == [1, 1, 0, 0]
    assert [judge.explain(*r)["decided_by"] for r in rows] == ["cheap", "full + cross-encoder",
                                                               "full + cross-encoder", "rule: both-non-answers"]
    from elical.cli import _parser

    args = _parser().parse_args(["judge", "r", "--output", "o", "--equivalence-judge", "learned-ce"])
    assert args.equivalence_judge == "learned-ce"


def test_second_band_chooses_where_the_cross_encoder_is_averaged_in(tmp_path):
    """The default cascade: a row the cheap stage is unsure of (inside ``band``) gets the full model's P(same), and
    the mean with the cross-encoder's only where that is inside ``second_band`` (shipped in the weights file; the
    cheap band when absent); a second band that is no interval is a ValueError naming the file."""
    import json

    from elical.judges.learned import WEIGHTS_PATH, LearnedEquivalenceJudge

    q = "What religion do most people in Tunisia follow?"
    rows = [("Most people in Tunisia follow Islam.", "Most Tunisians are Muslims.", q),
            ("Most people in Tunisia follow Islam.", "Islam is followed by most people in Tunisia.", q),
            ("Tunisians are mostly Muslims.", "Most people there follow Christianity.", q)]
    shipped = json.loads(WEIGHTS_PATH.read_text(encoding="utf-8"))
    for second, stage in (([0.0, 1.0], "full + cross-encoder"), ([0.499, 0.501], "full")):
        shipped["equivalence"]["second_band"] = second
        shipped["equivalence_cheap"]["band"] = [0.0, 1.0]  # every row to the full stage
        path = tmp_path / "w.json"
        path.write_text(json.dumps(shipped), encoding="utf-8")
        judge = LearnedEquivalenceJudge(weights=path)
        X = judge.features([r[:2] for r in rows], [r[2] for r in rows])
        full, ce = judge.scorer.proba(X), judge._second_opinion(rows)
        got = judge.scores([r[:2] for r in rows], [r[2] for r in rows])
        if stage == "full":
            assert not any(0.499 < p < 0.501 for p in full)
        np.testing.assert_allclose(got, (full + ce) / 2 if stage != "full" else full, atol=1e-9)
        assert [judge.explain(*r)["decided_by"] for r in rows] == [stage] * 3
    # second_orders: how many orders of (a, b) the cross-encoder reads (learned-ce always both)
    from elical.judges.learned import LearnedCrossEncoderEquivalenceJudge

    for orders in (1, 2):
        shipped["equivalence"]["second_orders"] = orders
        path.write_text(json.dumps(shipped), encoding="utf-8")
        judge = LearnedEquivalenceJudge(weights=path)
        np.testing.assert_allclose(judge._second_opinion(rows), judge._cross.proba(rows, orders), atol=1e-9)
        np.testing.assert_allclose(LearnedCrossEncoderEquivalenceJudge(weights=path)._second_opinion(rows),
                                   judge._cross.proba(rows, 2), atol=1e-9)
    assert not np.allclose(judge._cross.proba(rows, 1), judge._cross.proba(rows, 2))
    shipped["equivalence"]["second_orders"] = 3
    path.write_text(json.dumps(shipped), encoding="utf-8")
    with pytest.raises(ValueError, match="w.json: equivalence second_orders 3"):
        LearnedEquivalenceJudge(weights=path)
    shipped["equivalence"]["second_orders"] = 2
    shipped["equivalence"]["second_band"] = [0.9, 0.1]
    path.write_text(json.dumps(shipped), encoding="utf-8")
    with pytest.raises(ValueError, match="w.json: equivalence second_band"):
        LearnedEquivalenceJudge(weights=path)
