"""Tests for elical.judges: hand-computed values and the real all-MiniLM-L6-v2 (offline)."""

import numpy as np
import pytest

from elical.judges import (
    CorrectnessJudge,
    LexicalConsistency,
    SemanticEquivalenceJudge,
    contains_match,
    exact_match,
    mmlu_correct,
    normalize_answer,
    numbers_in,
    rouge_l,
    token_f1,
)

# ---------------------------------------------------------------- normalization and matching


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Capital of France is PARIS.", "capital of france is paris"),
        ("  A cat,  an owl & the dog! ", "cat owl dog"),
        ("U.S.A.", "usa"),
        ("1,000", "1000"),
        ("Zürich", "zurich"),
        ("Wilhelm Conrad Röntgen", "wilhelm conrad rontgen"),
        ("Straße", "strasse"),
        ("Saint-Étienne", "saint etienne"),
        ("AC/DC", "ac dc"),
        ("東京", "東京"),
        ("서울", "서울"),  # Hangul survives the NFKD fold
        ("Theater", "theater"),  # articles only as whole words
        ("The", ""),
        ("...", ""),
        ("", ""),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match():
    assert exact_match("The Eiffel Tower.", ["eiffel tower"])
    assert exact_match("paris", ["Lyon", "Paris!"])
    assert not exact_match("Paris, France", ["Paris"])
    assert not exact_match("The", ["the"])  # empty after normalization matches nothing
    assert not exact_match("", [""])


def test_contains_match_word_boundaries():
    assert contains_match("The capital of France is Paris.", ["Paris"])
    assert contains_match("It was 6 o'clock", ["6"])
    assert not contains_match("It was 16 o'clock", ["6"])
    assert not contains_match("Australia", ["Au"])
    assert contains_match("The symbol is Au.", ["Au"])
    assert contains_match("He was born in New York City", ["new york"])
    assert not contains_match("York, New", ["New York"])  # tokens must be contiguous and in order
    assert contains_match("Röntgen won it", ["Wilhelm Conrad Röntgen", "Rontgen"])


def test_contains_match_empty_never_matches():
    assert not contains_match("anything at all", [""])
    assert not contains_match("the answer", ["The", "?"])
    assert not contains_match("", ["Paris"])
    assert not contains_match("...", ["Paris", ""])
    assert not contains_match("Paris", [])


def test_correctness_judge():
    responses = ["Paris", "The capital is Paris.", "Lyon", "", "Parisian"]
    np.testing.assert_array_equal(CorrectnessJudge()(responses, ["Paris"]), [1, 1, 0, 0, 0])
    exact = CorrectnessJudge(mode="exact")(responses, "Paris")
    np.testing.assert_array_equal(exact, [1, 0, 0, 0, 0])
    assert exact.dtype.kind == "i" and exact.shape == (5,)
    assert CorrectnessJudge()([], ["Paris"]).shape == (0,)
    with pytest.raises(ValueError, match="mode"):
        CorrectnessJudge(mode="fuzzy")


# ---------------------------------------------------------------- token F1 and ROUGE-L


def test_token_f1_hand_computed():
    # [cat, sat, on, mat] vs [cat, on, mat]: overlap 3, P = 3/4, R = 1 -> F1 = 6/7
    assert token_f1("The cat sat on the mat", "a cat on a mat") == pytest.approx(6 / 7)
    # repeated tokens count with multiplicity: overlap 1, P = 1/2, R = 1 -> 2/3
    assert token_f1("paris paris", "Paris") == pytest.approx(2 / 3)
    assert token_f1("Paris", "paris.") == 1.0
    assert token_f1("Paris", "Lyon") == 0.0
    assert token_f1("", "") == 0.0
    assert token_f1("the", "Paris") == 0.0


def test_rouge_l_hand_computed():
    # LCS of [the cat sat on the mat] and [the cat lay on the mat] is 5 of 6 tokens: P = R = F = 5/6
    assert rouge_l("the cat sat on the mat", "the cat lay on the mat") == pytest.approx(5 / 6)
    # [paris is the capital] vs [the capital of france is paris]: LCS "the capital" = 2,
    # P = 2/4, R = 2/6 -> F = 2PR/(P+R) = 0.4; symmetric
    assert rouge_l("Paris is the capital", "The capital of France is Paris") == pytest.approx(0.4)
    assert rouge_l("The capital of France is Paris", "Paris is the capital") == pytest.approx(0.4)
    # one token inside three: P = 1, R = 1/3 -> F = 0.5
    assert rouge_l("Paris", "It is Paris.") == pytest.approx(0.5)
    assert rouge_l("Zürich is big", "Zurich is big") == 1.0  # letters beyond ASCII are kept
    assert rouge_l("", "Paris") == 0.0
    assert rouge_l("", "") == 0.0


def test_lexical_consistency():
    samples = ["the cat lay on the mat", "the cat sat on the mat", ""]
    scores = LexicalConsistency()("the cat sat on the mat", samples)
    np.testing.assert_allclose(scores, [5 / 6, 1.0, 0.0])
    assert scores.dtype == float
    assert LexicalConsistency()("x", []).shape == (0,)


# ---------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    "text, expected",
    [
        ("He was born in 1920.", {"1920"}),
        ("About 1,000 people, not 1000.5", {"1000", "1000.5"}),
        ("It costs 3.50 dollars", {"3.5"}),
        ("2 million", {"2000000"}),
        ("six wives", {"6"}),
        ("twenty-one guns", {"21"}),
        ("in the 1920s and 1930s", {"1920", "1930"}),
        ("1920,1921", {"1920", "1921"}),
        ("one of the largest cities", set()),  # "one" alone is a pronoun
        ("Paris", set()),
    ],
)
def test_numbers_in(text, expected):
    assert numbers_in(text) == expected


# ---------------------------------------------------------------- semantic equivalence (real MiniLM)


@pytest.fixture(scope="module")
def judge():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        j = SemanticEquivalenceJudge()
        j.model  # load now, offline
    return j


def test_semantic_rules_without_model():
    j = SemanticEquivalenceJudge(model_path="/nonexistent")  # no pair below needs the model
    pairs = [
        ("Paris", "paris."),  # normalized exact
        ("Paris", "The capital of France is Paris."),  # short answer inside a sentence
        ("The", "the cat"),  # empty after normalization
        ("", ""),
        ("He was born in 1920.", "He was born in 1921."),  # number guard
        ("1920", "He was born in 1920 or 1921."),  # extra number: hedged answer
        ("It is", "It is Paris."),  # only stop words contained: not enough
    ]
    assert j._rule(*pairs[-1]) is None
    np.testing.assert_array_equal(j.judge_many(pairs[:-1]), [1, 1, 0, 0, 0, 0])
    assert j._model is None  # decided by rules, model never loaded


def test_semantic_judge_real_minilm(judge):
    greedy = "The capital of France is Paris."
    samples = [
        "Paris is the capital of France.",  # paraphrase, cosine 0.99
        "The capital of France is Lyon.",  # different entity, cosine 0.75
        "Paris",  # contained
        "Lyon",
        "",
    ]
    np.testing.assert_array_equal(judge.judge(greedy, samples), [1, 0, 1, 0, 0])
    assert judge.similarity("Paris", "Lyon") < judge.threshold
    assert judge.similarity("William Shakespeare wrote Hamlet.", "Hamlet was written by Shakespeare.") > 0.9
    pairs = [
        ("Albert Einstein", "Isaac Newton"),
        ("He was born in 1920.", "He was born in 1921."),  # cosine is high; the guard says no
        ("Einstein developed relativity.", "Relativity was developed by Albert Einstein."),
        ("The Pacific Ocean", "The Atlantic Ocean"),
        ("Microsoft was founded by Bill Gates.", "Microsoft was founded by Paul Allen."),
    ]
    np.testing.assert_array_equal(judge.judge_many(pairs), [0, 0, 1, 0, 0])
    assert judge.similarity(*pairs[1]) > 0.8


# Recorded SmolLM2-135M-Instruct (Q4_1 GGUF via transformers) answers to NQ questions: greedy answer,
# five samples (temperature 1, top-p 0.95), the expected judgement, and MiniLM cosines with the greedy.
RECORDED = [
    (
        "The Dallas Cowboys won their last playoff game in 2022.",
        [
            "The Dallas Cowboys won their last playoff game at home on Saturday, October 29, 201",
            "The Dallas Cowboys won their last playoff game in 2021.",
        ],
        [0, 0],  # number guard, although the second pair has cosine 0.93
        [0.775, 0.932],
    ),
    (
        "The IRS imposes various monetary penalties on individuals and businesses, including those imposed "
        "by the Internal Revenue Service (IRS) to",
        [
            "The federal government implements monetary penalties imposed by the Internal Revenue Service "
            "(IRS) on individuals, including those with family balances",
            "When it comes to financial penalties imposed by the Internal Revenue Service (IRS), various "
            "individuals and businesses have been affected,",
        ],
        [0, 1],
        [0.827, 0.920],
    ),
    (
        "The director of Forever is a fictional character created by the creators of the film Forever.",
        ["The Director of Forever: Michael Statham", "Title: Who is the director of Forever?"],
        [0, 0],  # an echoed question is no answer; cosine 0.86 is why the threshold sits above it
        [0.731, 0.860],
    ),
    (
        "The Cuban Revolution against Spain was led by the Cuban People's Army (CPA) and the Cuban "
        "People's Army (",
        [
            "The Cuban Revolution against Spain was led by the International Brigade, a group of Cuban "
            "soldiers who defied the Spanish Empire to"
        ],
        [0],
        [0.825],
    ),
]


@pytest.mark.parametrize("greedy, samples, expected, cosines", RECORDED)
def test_semantic_judge_recorded_smollm2(judge, greedy, samples, expected, cosines):
    np.testing.assert_array_equal(judge.judge(greedy, samples), expected)
    np.testing.assert_allclose([judge.similarity(greedy, s) for s in samples], cosines, atol=2e-3)


def test_semantic_judge_encodes_each_string_once(judge, monkeypatch):
    fresh = SemanticEquivalenceJudge()
    fresh._model = judge.model
    seen = []
    real_encode = judge.model.encode

    def counting_encode(texts, **kw):
        seen.extend(texts)
        return real_encode(texts, **kw)

    monkeypatch.setattr(judge.model, "encode", counting_encode)
    pairs = [("Mars", "Venus"), ("Venus", "Mars"), ("Mars", "Jupiter"), ("Mars", "Venus"), ("Paris", "paris")]
    out = fresh.judge_many(pairs)
    np.testing.assert_array_equal(out, [0, 0, 0, 0, 1])
    assert sorted(seen) == ["Jupiter", "Mars", "Venus"]  # "Paris" pair decided by rule
    fresh.judge("Venus", ["Mars", "Jupiter"])
    assert sorted(seen) == ["Jupiter", "Mars", "Venus"]  # all cached
    assert fresh.judge("Venus", []).shape == (0,)


def test_semantic_judge_validates():
    with pytest.raises(ValueError, match="threshold"):
        SemanticEquivalenceJudge(threshold=1.5)
    with pytest.raises(ValueError, match="batch_size"):
        SemanticEquivalenceJudge(batch_size=0)


# ---------------------------------------------------------------- MMLU free-form

CHOICES = ["Paris", "Lyon", "Marseille", "Nice"]  # answer B = Lyon


@pytest.mark.parametrize(
    "response, expected",
    [
        ("B", True),
        ("(B)", True),
        ("B.", True),
        ("Answer: B", True),
        ("The answer is B because Lyon is right.", True),
        ("B) Lyon", True),
        ("(b)", True),
        ("Lyon", True),
        ("A city called Lyon.", True),  # "A" before a lowercase word is an article
        ("C", False),
        ("B or C", False),
        ("A and B", False),
        ("A", False),  # a lone letter is not a match for every answer
        ("B) Paris", False),  # letter and text disagree
        ("Lyon or Paris", False),
        ("Washington, D.C.", False),  # "D.C." is no letter
        ("A: Lyon", True),  # the Q/A prefix of chat models, not the letter A
        ("A: B", True),
        ("The answer is a city, Lyon.", True),  # lowercase "a" is no letter
        ("Answer: (C) Marseille", False),
        ("", False),
        ("   ", False),
        ("I don't know", False),
    ],
)
def test_mmlu_correct(response, expected):
    assert mmlu_correct(response, CHOICES, 1) is expected


def test_mmlu_correct_lone_letter_and_nested_choices():
    assert mmlu_correct("A", CHOICES, 0)
    assert mmlu_correct("A is correct.", CHOICES, 0)
    assert not mmlu_correct("A", CHOICES, 1)
    nested = [  # from MMLU anatomy: choice 0 is a prefix of choice 1
        "paralysis of the facial muscles.",
        "paralysis of the facial muscles and loss of taste.",
        "paralysis of the facial muscles, loss of taste and lacrimation.",
        "defective development of the maxillary air sinus.",
    ]
    response = "Paralysis of the facial muscles and loss of taste."
    assert mmlu_correct(response, nested, 1)
    assert not mmlu_correct(response, nested, 0)
    assert mmlu_correct("It causes paralysis of the facial muscles.", nested, 0)
    vitamins = ["Vitamin C", "Vitamin D", "Iron", "Zinc"]
    assert mmlu_correct("Vitamin C.", vitamins, 0)  # the "C" inside the choice is no letter
    assert mmlu_correct("A) Vitamin C", vitamins, 0)
    assert not mmlu_correct("Vitamin D", vitamins, 0)
    assert not mmlu_correct("C", vitamins, 0)
    with pytest.raises(ValueError, match="answer_index"):
        mmlu_correct("B", CHOICES, 4)
    with pytest.raises(ValueError, match="choices"):
        mmlu_correct("B", CHOICES + ["Lille"], 1)


# ---------------------------------------------------------------- registry, lexical equivalence, bad input

from elical.judges import (  # noqa: E402
    JUDGE_NAMES,
    AliasCorrectnessJudge,
    LexicalEquivalenceJudge,
    make_correctness_judge,
    make_equivalence_judge,
)

LEXICAL_PAIRS = [
    ("Paris", "paris."),  # F1 1, ROUGE-L 1
    ("Paris", "The capital is Paris."),  # token F1: [paris] in [capital is paris]: 2(1)(1/3)/(4/3) = 0.5
    ("the cat sat on the mat", "the cat lay on the mat"),  # F1: [cat sat on mat] vs [cat lay on mat] = 0.75
    ("It is", "It is Paris."),  # contained but only stop words
    ("Paris", "Lyon"),
    ("...", "?!"),
    ("", "Paris"),
]


@pytest.mark.parametrize(
    "name, expected",
    [
        ("exact", [1, 0, 0, 0, 0, 0, 0]),
        ("contains", [1, 1, 0, 0, 0, 0, 0]),
        ("token-f1", [1, 1, 1, 1, 0, 0, 0]),  # "it is" vs "it is paris": P 1, R 2/3 -> F1 0.8
        ("rouge-l", [1, 0, 1, 1, 0, 0, 0]),  # ROUGE-L keeps "the": [paris] in 4 tokens -> F 0.4
    ],
)
def test_lexical_equivalence_judges(name, expected):
    judge = make_equivalence_judge(name)
    assert judge.name == name
    np.testing.assert_array_equal(judge.judge_many(LEXICAL_PAIRS), expected)
    np.testing.assert_array_equal(judge.judge("Paris", ["paris", "Lyon"]), [1, 0])
    assert judge.judge_many([]).shape == (0,)


def test_lexical_thresholds_hand_computed():
    f1 = LexicalEquivalenceJudge("token-f1")
    assert f1.threshold == 0.5
    assert f1.score("the cat sat on the mat", "the cat lay on the mat") == pytest.approx(0.75)
    assert f1.score("Paris", "The capital is Paris.") == pytest.approx(0.5)
    strict = make_equivalence_judge("token-f1", threshold=0.6)
    np.testing.assert_array_equal(strict.judge_many(LEXICAL_PAIRS[:3]), [1, 0, 1])
    rl = make_equivalence_judge("rouge-l", threshold=0.85)
    assert rl.score(*LEXICAL_PAIRS[2]) == pytest.approx(5 / 6)
    np.testing.assert_array_equal(rl.judge_many(LEXICAL_PAIRS[:3]), [1, 0, 0])
    with pytest.raises(ValueError, match="threshold"):
        LexicalEquivalenceJudge("exact", threshold=0.5)
    with pytest.raises(ValueError, match="threshold"):
        LexicalEquivalenceJudge("rouge-l", threshold=0.0)


def test_registry_names_and_errors():
    assert JUDGE_NAMES == ("exact", "contains", "token-f1", "rouge-l", "embedding", "span", "normalized",
                           "span-contains", "learned", "nli", "llm")
    with pytest.raises(ValueError, match="unknown equivalence judge 'bleu'.*exact, contains"):
        make_equivalence_judge("bleu")
    with pytest.raises(ValueError, match="unknown correctness judge"):
        make_correctness_judge("bleu")
    with pytest.raises(ValueError, match="unknown equivalence judge 'span-contains'"):
        make_equivalence_judge("span-contains")  # a correctness judge only
    with pytest.raises(ValueError, match=r"equivalence judge 'exact' takes no 'model_path' \(it takes: threshold\)"):
        make_equivalence_judge("exact", threshold=0.5, model_path="x")
    with pytest.raises(ValueError, match="correctness judge 'span' takes no 'model_path'"):
        make_correctness_judge("span", model_path="x")  # was a raw TypeError from the class
    assert isinstance(make_equivalence_judge("embedding", threshold=0.9), SemanticEquivalenceJudge)
    assert make_equivalence_judge("embedding", threshold=0.9).threshold == 0.9
    with pytest.raises(ValueError, match="model_path"):
        make_equivalence_judge("nli")
    with pytest.raises(ValueError, match="needs complete"):
        make_equivalence_judge("llm")  # needs a completion backend


def test_correctness_registry():
    responses = ["The capital of France is Paris.", "Paris", "Lyon", "", "...", "City of Paris"]
    aliases = ["Paris", "", "City of Paris"]
    expected = {
        "contains": [1, 1, 0, 0, 0, 1],
        "exact": [0, 1, 0, 0, 0, 1],
        # [capital of france is paris] vs [city of paris]: overlap 2, P 2/5, R 2/3 -> F1 0.5 (vs [paris]: 1/3)
        "token-f1": [1, 1, 0, 0, 0, 1],
        # ROUGE-L keeps "the": best is [city of paris] in [the capital of france is paris], LCS 2: P 1/3, R 2/3
        # -> F 4/9 < 0.5
        "rouge-l": [0, 1, 0, 0, 0, 1],
    }
    for name, want in expected.items():
        judge = make_correctness_judge(name)
        np.testing.assert_array_equal(judge(responses, aliases), want, err_msg=name)
        np.testing.assert_array_equal(judge.judge_many([(r, aliases) for r in responses]), want, err_msg=name)
    assert isinstance(make_correctness_judge("token-f1"), AliasCorrectnessJudge)
    assert make_correctness_judge("contains").judge_many([("Paris", "Paris")]).tolist() == [1]  # bare alias


def test_alias_correctness_batches_one_call():
    calls = []

    class Recorder:
        name = "rec"

        def judge_many(self, pairs, questions=None):
            calls.append((list(pairs), questions))
            return np.array([int(a == b) for a, b in pairs])

    judge = AliasCorrectnessJudge(Recorder())
    out = judge.judge_many([("x", ["y", "x"]), ("z", ["", "..."]), ("y", ["y"])], ["q1", "q2", "q3"])
    np.testing.assert_array_equal(out, [1, 0, 1])
    assert calls == [([("x", "y"), ("x", "x"), ("y", "y")], ["q1", "q1", "q3"])]  # empty aliases skipped


@pytest.mark.parametrize("name", ["exact", "contains", "token-f1", "rouge-l"])
def test_bad_input_is_defined_or_rejected_at_the_boundary(name):
    judge = make_equivalence_judge(name)
    odd = [("", ""), ("...", "..."), ("?!", "Paris"), ("   ", " "), ("The", "the"), ("—", "–")]
    np.testing.assert_array_equal(judge.judge_many(odd), np.zeros(len(odd), dtype=int))
    with pytest.raises(TypeError, match=r"pairs\[1\]\[1\] must be str"):
        judge.judge_many([("a cat", "a dog"), ("a cat", None)])
    with pytest.raises(TypeError, match=r"pairs\[0\] must be a pair"):
        judge.judge_many(["Paris"])
    with pytest.raises(TypeError, match=r"pairs\[0\]\[1\]\[1\] must be str, got NoneType"):
        make_correctness_judge(name).judge_many([("Paris", ["Paris", None])])
    with pytest.raises(TypeError, match=r"pairs\[0\]\[0\] must be str, got int"):
        make_correctness_judge(name)([3], ["3"])


def test_semantic_judge_bad_input_without_model():
    j = SemanticEquivalenceJudge(model_path="/nonexistent")
    np.testing.assert_array_equal(j.judge_many([("", ""), ("...", "?"), ("!!", "Paris")], ["q"] * 3), [0, 0, 0])
    with pytest.raises(TypeError, match=r"pairs\[0\]\[0\]"):
        j.judge_many([(3, "Paris")])
    assert j._model is None


def test_embedding_correctness_real_minilm(judge):
    corr = make_correctness_judge("embedding")
    corr.equivalence._model = judge.model
    out = corr(["The capital of France is Paris.", "Lyon", "Paris is the capital.", ""], ["Paris", "City of Paris"])
    np.testing.assert_array_equal(out, [1, 0, 1, 0])


# ---------------------------------------------------------------- "Signals you can trust": one test per finding
# Expected values are written by hand from the meaning of the answers, not recomputed by the judges.

import ast  # noqa: E402
from pathlib import Path  # noqa: E402

from elical.judges import SpanCorrectnessJudge, SpanEquivalenceJudge, answer_span  # noqa: E402
from elical.judges.span import span_correct, span_equivalent  # noqa: E402


def test_judge_modules_have_no_import_cycle_and_stay_short():
    """Finding 1: no judge module imports a sibling that imports it back; none over ~400 lines."""
    root = Path(__file__).resolve().parents[2] / "src" / "elical" / "judges"
    deps = {}
    for f in root.glob("*.py"):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        deps[f.stem] = {m.rsplit(".", 1)[1] for m in names if m.startswith("elical.judges.")}
        assert len(f.read_text(encoding="utf-8").splitlines()) <= 400, f.name
    for mod, uses in deps.items():
        if mod in ("__init__", "core"):
            continue
        for other in uses:
            assert mod not in deps.get(other, set()), f"cycle {mod} <-> {other}"
        assert "core" not in uses and "__init__" not in uses, mod


def test_cli_choices_read_the_registry():
    from elical.cli import _parser
    from elical.judges import EQUIVALENCE_JUDGES

    run = _parser()._subparsers._group_actions[0].choices["run"]
    acts = {a.dest: a for a in run._actions}
    assert set(acts["equivalence_judge"].choices) == set(EQUIVALENCE_JUDGES)
    assert "span-contains" in acts["correctness_judge"].choices and "span" in acts["equivalence_judge"].choices


class _Recorder:
    """A judge that records the questions it receives."""

    name = "rec"

    def __init__(self):
        self.questions = []

    def judge(self, first, second, question=None):
        self.questions.append(question)
        return np.ones(len(second) if isinstance(first, str) else len(first), dtype=int)

    __call__ = judge


def test_judges_receive_the_question_at_annotation():
    """Finding 2: make_record hands the question to the correctness and the equivalence judge."""
    from elical.generation.base import Generation
    from elical.jobs.annotate import Annotator, make_record

    corr, eq = _Recorder(), _Recorder()
    ann = Annotator(corr, LexicalConsistency(), eq)
    q = {"id": "x/1", "dataset": "x", "question": "What is the capital of France?", "answer": ["Paris"]}
    gen = Generation("Paris", ["Paris"], [-0.1], ["Paris", "Lyon"], [-0.2, -0.3], [1, 1])
    make_record(q, "prompt", gen, ann, {})
    assert corr.questions == [q["question"]] * 2 and eq.questions == [q["question"]]


def test_a_judge_given_the_question_uses_it():
    """Finding 2: the same pair is judged differently once the question says what is asked."""
    corr = SpanCorrectnessJudge()
    resp, aliases = "The capital of Mexico is Mexico City.", ["Mexico"]
    assert corr([resp], aliases).tolist() == [1]  # without the question "Mexico" is in the answer
    assert corr([resp], aliases, question="What is the capital of Mexico?").tolist() == [0]  # an echo
    eq = SpanEquivalenceJudge(model_path="/nonexistent")
    echo = "The capital of France is"
    assert eq.judge_many([(echo, "The capital of France is Paris.")]).tolist() == [1]  # contained
    assert eq.judge_many([(echo, "The capital of France is Paris.")], ["What is the capital of France?"]).tolist() == [0]


@pytest.mark.parametrize("a, b, same", [
    ("3.5", "35", False), ("1.5 million", "15 million", False), ("1,000", "1000", True), ("three", "3", True),
    ("The answer is 3.5 metres.", "35 metres", False), ("2,500", "2500", True),
])
def test_numbers_first(a, b, same):
    """Finding 3: numbers are compared as values before any text rule."""
    assert exact_match(a, [b]) is same
    assert contains_match(a, [b]) is same
    assert SemanticEquivalenceJudge._rule(a, b) == (1 if same else 0)
    assert span_equivalent(a, b, "How many are there?") == int(same)
    assert span_correct(a, b, "How many are there?") is same


def test_short_aliases_match_as_exact_tokens():
    """Finding 4: codes and symbols match only as exact tokens, case kept; an echo of the question is no answer."""
    assert not contains_match("Fort Wayne is located in Ohio.", ["Indiana", "IN"])
    assert contains_match("Fort Wayne is in IN.", ["Indiana", "IN"])
    assert contains_match("Fort Wayne is in Indiana.", ["Indiana", "IN"])
    assert not contains_match("The currency is the euro in Europe.", ["EU"])
    assert contains_match("It is a member of the EU.", ["EU"])
    assert not contains_match("This is it.", [".is"])
    assert contains_match("The domain is .is", [".is"])
    assert contains_match("Its symbol is Fe.", ["Fe"]) and not contains_match("fe fi fo", ["Fe"])
    assert contains_match("He lived in the U.S. for years.", ["US"])
    q = "In which state is Fort Wayne?"
    assert not span_correct("Fort Wayne is located in Ohio.", "IN", q)
    assert span_correct("Fort Wayne is located in IN.", "IN", q)
    assert not span_correct("Fort Wayne.", "Fort Wayne", q)  # an alias found only in the question
    assert not span_correct("The capital of Mexico is Mexico City.", "Mexico", "What is the capital of Mexico?")
    assert span_correct("The capital of Mexico is Mexico City.", "Mexico City", "What is the capital of Mexico?")
    # "Mexico" inside the longer name "Mexico City" of the question does not hide the answer "Mexico"
    assert span_correct("Mexico City is the capital of Mexico.", "Mexico", "In which country is Mexico City?")
    assert not span_correct("Mexico City is a big city.", "Mexico", "In which country is Mexico City?")


def test_answer_spans_by_hand():
    q = "What is the capital of New Zealand?"
    assert answer_span("The capital of New Zealand is Wellington.", q).words == ("wellington",)
    assert answer_span("The capital of New Zealand is", q).empty
    assert answer_span("I don't know.", q).empty and answer_span("", q).empty
    assert answer_span("It was founded in 1910 by Ann Lee.", "Who founded the club?").numbers == {"1910"}
    # a name of the answer that extends a question word is a new name: it stays whole ("Panama City" is not the
    # echo "Panama"), within its sentence only
    q = "What is the capital of Panama?"
    assert answer_span("The capital of Panama is Panama City.", q).words == ("panama", "city")
    assert answer_span("The capital of Panama is Panama.", q).empty
    assert answer_span("It is in the Persian Gulf. Panama is small.", q).words == ("persian", "gulf", "small")
    assert answer_span("The Nintendo DSi was developed by Nintendo of America.",
                       "Who developed Nintendo DSi?").words == ("nintendo", "america")


@pytest.mark.parametrize("q, a, b, same", [
    ("What is the capital of New Zealand?", "The capital of New Zealand is Wellington.", "Wellington", 1),
    ("Who founded the club?", "It was founded in 1910 by Ann Lee.", "Ann Lee", 1),
    ("What is the capital of France?", "The capital of France is", "The capital of France is", 0),  # echoes
    ("What is the capital of France?", "What is the capital of France?", "Paris", 0),
    ("What is the capital of France?", "I don't know.", "I don't know.", 0),
    ("When was Ann Lee born?", "Ann Lee was born in 1920.", "Ann Lee was born in 1921.", 0),
    ("When was Ann Lee born?", "She was born on July 18, 1861.", "She was born on July 21, 1861.", 0),
    ("In which country is Kyoto?", "Kyoto is in Japan.", "Kyoto is a Japanese city.", 1),
    ("What is the capital of Panama?", "The capital of Panama is Panama City.", "It is Panama City.", 1),
    ("What is the capital of Panama?", "The capital of Panama is Panama City.", "The capital of Panama is Panama.",
     0),  # a new name against an echo
    ("Where is the Indus River?", "It flows through Pakistan and India.", "India", 0),  # a hedge
])
def test_span_equivalence_by_hand(q, a, b, same):
    """Finding 5: the default equivalence judge compares what the answers say beyond the question."""
    judge = SpanEquivalenceJudge(model_path="/nonexistent")  # all of these are decided before any model
    assert judge.judge_many([(a, b), (b, a)], [q, q]).tolist() == [same, same]
    assert judge.embedder._model is None


# ---------------------------------------------------------------- slots: choice / typed questions, cut-off texts

from elical.judges.cutoff import uncut  # noqa: E402
from elical.judges.slots import asked_type, choice_options, first_entity, picked_option  # noqa: E402
from elical.judges.names import shared_region  # noqa: E402


@pytest.mark.parametrize("q, a, b, same", [
    # rule 13: the option the answer picks decides, whatever else the sentences say
    ("Who is younger, Ann Lee or Bo Li?", "Bo Li is younger than Ann Lee.",
     "Bo Li is about 20 years younger than Ann Lee.", 1),
    ("Who is younger, Ann Lee or Bo Li?", "Bo Li is younger than Ann Lee.", "Ann Lee is the younger one.", 0),
    ("Which film came out first, Blue Sky or Red Rain?", "Blue Sky came out first, while Red Rain came out later.",
     'The film "Blue Sky" was released first, in 1994.', 1),
    # a text that describes an option without the question's predicate picks nothing
    ("Which plant, the fern or the cactus, grows in deserts?", "The cactus grows in deserts.",
     "The fern is a kind of cactus with green leaves.", 0),
    # typed questions: the first country named (demonyms are their country), at the question's granularity
    ("In which country is the city of Nantes?", "Nantes is in France.", "Nantes is a French port city.", 1),
    ("In which country is the city of Xi'an?", "Xi'an is in the north of China's Shaanxi province.",
     "The city of Xi'an is located in China.", 1),
    ("In which country is the city of Arusha?", "Arusha is located in East Africa, in Tanzania.",
     "Arusha is in East Africa.", 0),  # "East Africa" names no country
    ("Lusaka is the capital of which country?", "Lusaka is the capital of Zambia.",
     "Lusaka is the capital of Malawi, which borders Zambia.", 0),  # the first country named
    ("In which country is the city of Liege?", "Liege is in France and Belgium.", "Liege is in Belgium.", 0),
    ("On which continent is Peru?", "Peru is in western South America.", "Peru lies on the South American "
     "continent.", 1),
    ("In which US state is the city of Tempe?", "Tempe is in Arizona.", "Tempe is a city in the Southwest.", 0),
    # rule 3: for "where was X born", a country alone is less than a city in that country
    ("Where was Ann Lee born?", "Ann Lee was born in the Netherlands.", "Ann Lee was born in Utrecht, Netherlands.", 0),
    # class nouns describe the answer, they do not name it
    ("Who produces the Ford Focus?", "The Ford Focus is a car made by Ford.",
     "The Ford Focus is produced by the Ford company.", 1),
])
def test_span_slot_rules_by_hand(q, a, b, same):
    judge = SpanEquivalenceJudge(model_path="/nonexistent")  # decided before any model
    assert judge.judge_many([(a, b), (b, a)], [q, q]).tolist() == [same, same]
    assert judge.embedder._model is None


@pytest.mark.parametrize("q, a, b, same", [
    # a choice question that neither answer picks: two descriptions are no answers (rules 5, 13)
    ("Which lake is deeper, Lake Ura or Lake Oma?", "Lake Ura is a lake in the hills near a small town.",
     "Lake Ura is a lake in the hills near a town.", 0),
    # a bare option as the whole first sentence picks it, no predicate needed
    ("Which band formed first, Grey Owls or The Pebbles?", "Grey Owls.", "Grey Owls - a folk band from Leeds.", 1),
    ("Which band formed first, Grey Owls or The Pebbles?", "The Pebbles.", "Grey Owls.", 0),
    # an answer that is itself a question answers nothing, even when it names a country
    ("Lusaka is the capital of which country?", "The capital of which country is Zambia?",
     "Lusaka is the capital of Zambia.", 0),
    # a city or currency asked, only a continent / country named: the slot stays empty
    ("What is the capital of Malawi?", "Malawi is a country in southern Africa.",
     "Malawi is a small country located in Africa.", 0),
    ("What is the currency of Peru?", "The currency of Peru comes from Spain.", "Peru's currency is from Spain.", 0),
    ("What is the capital of Luxembourg?", "The capital is the Belgian city of Monaco.", "It is Monaco.", 1),
    # "element" describes the answer ("a chemical element named X"), so an echo stays an echo
    ("What is the chemical symbol of tin?", "Tin is an element with the chemical symbol of tin.",
     "tin, the chemical symbol of the element tin.", 0),
    # a choice question without a comma before its options: the options are the trailing names
    ("Who has been painting longer Ann Lee or Bo Li?", "Ann Lee.", "Ann Lee - she started in 1970.", 1),
    ("Who has been painting longer Ann Lee or Bo Li?", "Bo Li has been painting longer.", "Ann Lee.", 0),
    # a language or a code asked, only a continent named: the slot stays empty
    ("What is the official language of Malawi?", "Malawi is a country in Africa.",
     "Malawi is a nation in southern Africa, where many speak English.", 0),
    ("What is the internet country code top-level domain of Peru?", "Peru is a country in South America.",
     "Peru is located in South America.", 0),
    # the official name of the question's own country is an echo, not a new name (unlike "Panama City")
    ("What is the capital of Uganda?", "Uganda is the capital of the Republic of Uganda.",
     "Kampala is the capital city of the Republic of Uganda.", 0),
    # a name that contains the answer's word is no second candidate ("X Labs and X" is not a list)
    ("Who developed the Zeta phone?", "The Zeta phone was developed by Acme.",
     "The Zeta phone was developed by Acme Labs and Acme.", 1),
    ("Who developed the Zeta phone?", "The Zeta phone was developed by Acme.",
     "The Zeta phone was developed by Orbis and Acme.", 0),
    # for "where", a longer answer is more specific only when it adds a name ("Utrecht"), not any word
    ("Where are the best oranges grown in Europe?", "The best oranges are grown in Spain.",
     "The best oranges are grown in Spain. Spain is widely regarded for its climate.", 1),
    ("Where are the best oranges grown in Europe?", "The best oranges are grown in Spain.",
     "The best oranges are grown in Valencia, Spain.", 0),
])
def test_span_new_slot_rules_by_hand(q, a, b, same):
    judge = SpanEquivalenceJudge(model_path="/nonexistent")  # decided before any model
    assert judge.judge_many([(a, b), (b, a)], [q, q]).tolist() == [same, same]


@pytest.mark.parametrize("q, a, b, same", [
    # the agent of "who produces X?": the organization's core, corporate words dropped, one core beginning the other
    ("Who produces the Zeta Roadster?", "The Zeta Roadster is produced by Orbis Motor Corp.",
     "The production of the Zeta Roadster is handled by the Orbis Corporation.", 1),
    ("Who produces the Zeta Roadster?", "Orbis produces the Roadster.", "It is made by Orbis Motors of Canada.", 1),
    ("Who developed the Zeta Phone?", "The Zeta Phone was developed by Orbis Labs.",
     "The Zeta Phone was developed by Vela Labs.", None),  # left to the spans
    # a list of agents is no single agent
    ("Who developed the Zeta Phone?", "The Zeta Phone was developed by Ann Lee and Bo Li.",
     "The Zeta Phone was developed by Ann Lee, a designer.", None),
    # a typed question that no answer fills with its type: the same region named twice is one answer (rule 12)
    ("On which continent is Ilha Verde?", "Ilha Verde is an island nation in the Caribbean.",
     "Ilha Verde is a small island located in the Caribbean.", 1),
    ("On which continent is Ilha Verde?", "Ilha Verde lies in the Pacific Ocean.",
     "Ilha Verde is a Pacific island of Micronesia.", None),  # two names, one word in common
    ("On which continent is Ilha Verde?", "Ilha Verde lies in the Pacific Ocean.",
     "Ilha Verde is a small island in the Pacific Ocean, far from any coast.", 1),
    # two currencies of two countries
    ("What is the currency of Ilha Verde?", "The currency of Ilha Verde is the US Dollar.",
     "The currency of Ilha Verde is the Australian Dollar.", 0),
    # "nation" asks for a country like "country"; a demonym names it
    ("Which nation whose capital is Kabul borders on Iran?", "The capital of the Afghan nation is Kabul.",
     "The capital of Afghanistan is Kabul.", 1),
    # a number cut off at the end counts when the other answer states it
    ("What is the atomic number of beryllium?", "Beryllium is a chemical element with the atomic number of 4.",
     "Beryllium is a light, silvery white element on the periodic table, and it has an atomic number of 4", 1),
    # "The answer (to this question) is:" before the option picked
    ("Which film came out first, Grey Owls or The Pebbles?", "The answer to this question is: The Pebbles.",
     "The answer is: The Pebbles.", 1),
])
def test_span_round5_rules_by_hand(q, a, b, same):
    """The rule verdict (None: left to the spans' embeddings) in both orders."""
    assert span_equivalent(a, b, q) == same and span_equivalent(b, a, q) == same


def test_shared_region_is_no_country():
    # a country shared for a US-state question is the slot's business, not a region both name
    q = "What state is Ann Lee from?"
    assert shared_region("Ann Lee is from the United States.", "In the United States, Ann Lee paints.", q,
                         "state") is None
    assert shared_region("Ann Lee is from the Midwest.", "Ann Lee grew up in the Midwest.", q, "state") == 1
    assert shared_region("Located in the Midwest.", "Located far away.", q, "state") is None  # no name shared


def test_question_word_inflections_are_question_words():
    q = "Where are the highest wages paid?"
    assert answer_span("The highest wage is paid in Norway.", q).words == ("norway",)
    assert answer_span("Wages are highest in Norway.", "Where is the best wage paid?").words == ("highest", "norway")


def test_slot_helpers_by_hand():
    assert asked_type("In which country is the city of Nantes?") == "country"
    assert asked_type("On which continent is Peru?") == "continent"
    assert asked_type("In which US state is the city of Tempe?") == "state"
    assert asked_type("What is the capital of France?") is None
    assert first_entity("Kyoto is a Japanese city.", "country") == ("JP", False)
    assert first_entity("It is in the U.S. state of Ohio.", "country") == ("US", False)
    assert first_entity("It is in South Africa.", "continent") == (None, False)  # a country, not Africa
    assert first_entity("It is in the Democratic Republic of the Congo.", "country") == ("CD", False)
    assert first_entity("Nigerian food.", "country")[0] == "NG"  # not Niger
    assert first_entity("It is France or Spain.", "country") == ("FR", True)
    opts, pred = choice_options("Who was born first, Ann Lee or Bo Li?")
    assert opts == [("ann", "lee"), ("bo", "li")] and "first" in pred
    assert picked_option("Bo Li was born first.", opts, pred) == 1
    assert picked_option("Ann Lee was a painter.", opts, pred) is None
    assert choice_options("What is the capital of France?") is None


def test_cut_off_texts_lose_their_last_word():
    cut = "The focus of the film on June 17th was the final of the 1994 World"
    assert uncut(cut) == "The focus of the film on June 17th was the final of the 1994…"
    assert uncut("The actor died on the 22nd of January in the year of our Lord 2").endswith("our Lord…")
    assert uncut("Short and not cut") == "Short and not cut"  # too short to have hit the token limit
    done = "The capital of France is Paris, a city on the Seine in the north of France."
    assert uncut(done) == done
    kept = ["The decision to replace the rockets with the Saturn V was made on July 16, 1969",
            "In 2023, the small city of Milpitas was located in the state of California",
            "Nitrogen is a nonmetal element of the periodic table, and its symbol is N",
            "The date of birth of the director of the film is 2022-12-"]
    assert [uncut(t) for t in kept] == [t + "…" for t in kept[:3]] + ["The date of birth of the director of the film "
                                                                      "is 2022-12…"]
    assert uncut(uncut(cut)) == uncut(cut)
    q = "Which trophy did the team win in the 1998 season?"
    a = "The trophy the team did win in the 1998 season was the Premier"
    assert span_equivalent(a, a, q) == 0  # cut off right before the answer: no answer, not even to itself
    assert span_correct("In 2023, the small city of Milpitas was located in the state of California", "California",
                        "In which US state is the city of Milpitas?")


def test_span_correct_slot_rules_by_hand():
    q = "Who is younger, Ann Lee or Bo Li?"
    assert span_correct("Bo Li is younger than Ann Lee.", "Bo Li", q)
    assert not span_correct("Ann Lee is younger than Bo Li.", "Bo Li", q)
    assert not span_correct("Bo Li is a painter from Ohio.", "Bo Li", q)  # no pick
    q = "In which country is the city of Nantes?"
    assert span_correct("Nantes is located in the French region of Brittany.", "France", q)
    assert not span_correct("Nantes is in Belgium, near France.", "France", q)
    assert not span_correct("Nantes is in Belgium and France.", "France", q.replace("Nantes", "Liege"))


def test_span_equivalence_embeds_spans_not_sentences(judge):
    """Open pairs are decided by the cosine of the spans: a paraphrase beyond the question agrees."""
    span = SpanEquivalenceJudge()
    span.embedder._model = judge.model
    q = "What is Ann Lee's job?"
    # spans "physician" / "medical doctor" (cosine 0.90); "astrophysics" / "cooking baking" (0.13)
    out = span.judge_many([("Ann Lee's job is physician.", "Ann Lee is a medical doctor."),
                           ("Ann Lee works in astrophysics.", "Ann Lee works in cooking and baking.")], [q, q])
    assert out.tolist() == [1, 0]
    # same template, different entities: whole sentences have cosine 0.92, the spans "wellington" / "auckland" 0.78
    q = "What is the capital of New Zealand?"
    pairs = [("The capital of New Zealand is Wellington.", "The capital of New Zealand is Auckland."),
             ("Ann Lee founded it in 1910.", "Bo Li founded it in 1910.")]
    assert span.judge_many(pairs, [q, "Who founded the club?"]).tolist() == [0, 0]
    assert judge.judge_many(pairs[:1]).tolist() == [1]  # the old whole-sentence embedding judge


def test_mmlu_records_are_judged_by_their_choices():
    """Finding 6: an MMLU record is judged by the one choice named; several letters or nothing is wrong."""
    from elical.data.mmlu import MMLUAnswer
    from elical.generation.base import Generation
    from elical.jobs.annotate import Annotator, make_record

    choices = ["Paris", "Lyon", "Marseille", "Nice"]
    ann = Annotator(CorrectnessJudge("contains"), LexicalConsistency(), SpanEquivalenceJudge(model_path="/x"))
    q = {"id": "mmlu/geo/1", "dataset": "mmlu", "question": "Which city?\nA. Paris\nB. Lyon\nC. Marseille\nD. Nice",
         "answer": MMLUAnswer(choices, 1), "choices": choices, "answer_index": 1}
    gen = Generation("The answer is A, not B, C or D.", [], [], ["B", "", "Lyon", "(C)"], [0.0] * 4, [1] * 4)
    rec = make_record(q, "p", gen, ann, {})
    assert rec["greedy_correctness"] == 0  # the contains judge would have said 1: "B" is in the answer
    assert rec["sampling_correctness"] == [1, 0, 1, 0]
    assert rec["consistency_judgement"] == [0, 0, 0, 0]  # the greedy answer names no single choice
    for key in range(4):
        assert not mmlu_correct("The answer is A, not B, C or D.", choices, key)
        assert not mmlu_correct("", choices, key)
    # the span judges read lettered choices from the question text too
    assert SpanCorrectnessJudge()(["B", "A or B", ""], ["B", "Lyon"], question=q["question"]).tolist() == [1, 0, 0]


def test_llm_judge_is_never_the_qa_model_by_default():
    """Finding 7: no judge model, no llm judge; the explicit opt-in is recorded in the meta."""
    from elical.jobs.annotate import Annotator
    from elical.records import InputError

    with pytest.raises(InputError, match="--judge-model"):
        Annotator.default(correctness="llm", model=object(), tokenizer=object())
    with pytest.raises(InputError, match="judge-base-url"):
        Annotator.default(equivalence="llm", model=object(), tokenizer=object())
    ann = Annotator.default(equivalence="llm", judge_base_url="http://127.0.0.1:9/v1")
    assert ann.describe()["equivalence"] == "llm" and "judge_is_qa_model" not in ann.describe()


def test_llm_judge_with_the_qa_model_on_request(monkeypatch):
    import elical.judges.llm as llm
    from elical.jobs.annotate import Annotator

    monkeypatch.setattr(llm, "TransformersCompletion", lambda model, tok: (lambda prompts: ["yes"] * len(prompts)))
    with pytest.warns(UserWarning, match="QA model"):
        ann = Annotator.default(correctness="llm", model=object(), tokenizer=object(), judge_with_qa_model=True)
    assert ann.describe()["judge_is_qa_model"] is True


def test_defaults_are_the_learned_judges():
    from elical.jobs.annotate import Annotator
    from elical.jobs.run import RunConfig
    from elical.judges.learned import LearnedCorrectnessJudge, LearnedEquivalenceJudge

    ann = Annotator.default()
    assert ann.describe()["correctness"] == "learned" and ann.describe()["equivalence"] == "learned"
    assert isinstance(ann.correctness, LearnedCorrectnessJudge) and isinstance(ann.semantic, LearnedEquivalenceJudge)
    assert (RunConfig().correctness_judge, RunConfig().equivalence_judge) == ("learned", "learned")


# ---------------------------------------------------------------- round 6 (chosen on dev data incl. test4)

@pytest.mark.parametrize("q, a, b, same", [
    # a number alone does not answer a question that asks no number
    ("Who did the Zeta Owls play last week?", "The Zeta Owls played the Zeta Owls in 2022.",
     "Last week, the Zeta Owls hosted the 2022 Vela Cup in Orbis.", 0),
    # a text that ends with a colon stops before its answer
    ("Who was cast to play Ann Lee?", "The first cast of Ann Lee:", "The first cast to play Ann Lee are:", 0),
    # "Ann Ann Lee": a stuttered question name is the question's name
    ("What is the religion of Ann Lee?", "The religion of Ann Ann Lee is Buddhism.",
     "The religion of Ann Lee was Buddhism, which she kept all her life.", 1),
    # the agent of "who produces X?" after an apposition, in "is a ... company that makes", after "the ... company"
    ("Who produces the Zeta Roadster?", "Orbis, a leading auto manufacturer, produces the Zeta Roadster.",
     "Orbis is a major car company that produces the Zeta Roadster.", 1),
    ("Who produces the Zeta Roadster?", "The Zeta Roadster is made by the Swedish car company Orbis.",
     "Orbis makes the Zeta Roadster.", 1),
    # the question's product name with its number is no agent
    ("Who produces the Vela 5 Series Coupe?", "The Vela 5 Series Coupe is produced by the Vela 5 Series.",
     "Vela produces the 5 Series Coupe.", 0),
    # a currency question: an answer naming no currency is no answer; one country's same unit is one currency
    ("What is the currency of the country where the Vela Church is based?",
     "The Vela Church is part of the Orbis Orthodox Church.", "The Vela Church is an Orbis Orthodox church.", 0),
    ("What is the currency of Taiwan?", "The currency of Taiwan is the Taiwanese dollar (TWD), used everywhere.",
     "The currency of Taiwan is the Taiwanese dollar, also called the TIBAC.", 1),
    # "What is the R of X?" answered by describing X, without R: no answer
    ("What is the capital of Zetania?", "Zetania is a country located in Central Asia.",
     "Zetania is a nation in Central Asia.", 0),
    ("What is the capital of Zetania?", "Zetania's capital is Velaport.", "The capital of Zetania is Velaport.", 1),
    # where a city lies, answered with the capital of some country: an answer to another question
    ("In which country is the city of Velaport?", "The city of Velaport is located in Portugal.",
     "The capital of Portugal is Lisbon.", 0),
    # "What is X a subclass of?": the class after "is a type of", even when it is the question's word
    ("What is a fixed-gear velocipede a subclass of?",
     "A fixed-gear velocipede is a type of velocipede that uses a fixed gear.",
     "A fixed-gear velocipede is a type of velocipede designed with two wheels.", 1),
    ("What is a fixed-gear velocipede a subclass of?", "A fixed-gear velocipede is a type of bicycle.",
     "A fixed-gear velocipede is a kind of sculpture made of steel.", 0),
    # "the Indian Ocean" names no country
    ("In which country is the city of Velapur?", "The city of Velapur is located in the Indian state of Gujarat.",
     "The city of Velapur is situated on the Indian Ocean.", 0),
    # both options joined by "or" pick neither; a one-word label before the option picked
    ("Which game is a board game, Vela Quest or Roulette?", "Vela Quest is a board game.",
     'The game "Vela Quest" or Roulette is a classic card game.', 0),
    ("Which film was released more recently, Grey Owls or Blue Pebbles?", "Blue Pebbles.", "Title: Blue Pebbles", 1),
    ("Which film came out first, Perri or Blue Sky?", "Perri: a Disney film that came out first.",
     "Perri came out first.", 1),  # an option's own word before a colon is no label
    # "is found in" / "runs through" are answer frames: nothing beyond the question is no answer
    ("Where are the giant ferns located in Zetania?", "The giant ferns are found in Zetania.",
     "The giant ferns of Zetania are found in the Vela forest.", 0),
])
def test_span_round6_rules_by_hand(q, a, b, same):
    """The rule verdict in both orders (decided before any model)."""
    assert span_equivalent(a, b, q) == same and span_equivalent(b, a, q) == same


def test_round6_word_forms_by_hand():
    from elical.judges.relations import describes_subject, named_class
    from elical.judges.text import inflections, same_word_form

    assert answer_span("The original cast of Captain Vela.", "Who was originally cast as Captain Vela?").words == ()
    assert answer_span("The series focused on art.", "Which series is focusing on art?").words == ()
    assert {"focus", "focused", "focuses"} <= inflections("focusing") and "original" in inflections("originally")
    assert same_word_form("catholic", "catholicism") and not same_word_form("catholic", "catalonia")
    assert named_class("It is a type of contemporary contemporary art that focuses on place.") == (
        "contemporary", "art")
    assert named_class("It is a painting.") is None
    q = "What is the official language of Zetania?"
    assert describes_subject("Zetania is a small country in Europe.", q)
    assert not describes_subject("Zetania is a country whose official language is Velan.", q)  # says R
    assert not describes_subject("Velan is spoken in Zetania.", q)  # X is not the subject
    assert not describes_subject("Ann Lee is a Buddhist monk.", "What is the religion of Ann Lee?")  # answers
    assert not describes_subject("Zetania is a city of 1.2 million people.", "What is the population of Zetania?")


def test_names_currency_by_hand():
    from elical.judges.names import names_currency

    assert names_currency("The currency is the South Korean won.") and names_currency("the Deutsche Mark")
    assert names_currency("The Brazilian real.") and names_currency("It is the TWD.") and names_currency("hryvnias")
    assert not names_currency("It won the cup.") and not names_currency("a real change")
    assert not names_currency("The Vela Church is an Orthodox church.")
    from elical.judges.names import currency_verdict

    # only a question that asks for a currency needs one in its answers
    assert currency_verdict("South Africa.", "Namibia.", "Which country uses the rand as its currency?") is None
    assert currency_verdict("Ann Lee, the runner.", "Bo Li.", "Who is a famous athlete from the area that uses the "
                            "Kenyan shilling as currency?") is None
    assert currency_verdict("It is a church.", "The Kenyan shilling.", "What is the currency of Kenya?") == 0
