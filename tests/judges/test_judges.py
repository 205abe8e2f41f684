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
        ("the sixteenth century", {"16"}),  # ordinals are their number, as "16th" is
        ("born in the 16th century", {"16"}),
        ("the twenty-first and the ninety ninth", {"21", "99"}),
        ("her fortieth birthday, a twelfth of it", {"40", "12"}),
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
    assert JUDGE_NAMES == ("exact", "contains", "token-f1", "rouge-l", "embedding", "normalized", "learned", "nli",
                           "llm", "learned-ce")
    with pytest.raises(ValueError, match="unknown equivalence judge 'bleu'.*exact, contains"):
        make_equivalence_judge("bleu")
    with pytest.raises(ValueError, match="unknown correctness judge"):
        make_correctness_judge("bleu")
    with pytest.raises(ValueError, match="unknown equivalence judge 'normalized'"):
        make_equivalence_judge("normalized")  # a correctness judge only
    with pytest.raises(ValueError, match=r"equivalence judge 'exact' takes no 'model_path' \(it takes: threshold\)"):
        make_equivalence_judge("exact", threshold=0.5, model_path="x")
    with pytest.raises(ValueError, match="correctness judge 'normalized' takes no 'model_path'"):
        make_correctness_judge("normalized", model_path="x")  # was a raw TypeError from the class
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
    assert "normalized" in acts["correctness_judge"].choices and "learned" in acts["equivalence_judge"].choices
    assert "span" not in acts["equivalence_judge"].choices  # removed (tests/jobs/test_run_options.py)


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
    corr = make_correctness_judge("learned")
    # (span-contains also rejected "The capital of Mexico is Mexico City." for the alias "Mexico", an alias made only
    # of question words; the third-round learned judge, without the lexical group, accepts it: an echo is the case
    # it still decides by the question, through the named "non-answer" rule)
    resp, aliases = "The capital of Mexico is", ["Mexico"]
    assert corr([resp], aliases).tolist() == [1]  # without the question "Mexico" is in the answer
    assert corr([resp], aliases, question="What is the capital of Mexico?").tolist() == [0]  # an echo
    eq = make_equivalence_judge("learned")
    pair = [("The capital of France is", "The capital of France is Paris.")]
    assert eq.judge_many(pair).tolist() == [1]  # contained
    # the question makes the first answer an echo: P(same) falls (fourth-round weights: 0.98 -> 0.67, still above the
    # cut: an echo against a real answer is left to the models, which call it "same" here, a known miss; two echoes
    # are decided by the named rule, tests/judges/test_learned.py)
    assert eq.scores(pair, ["What is the capital of France?"])[0] < eq.scores(pair)[0] - 0.2
    assert eq.explain(*pair[0], "What is the capital of France?")["features"]["nonanswer_any"] == 1.0


@pytest.mark.parametrize("a, b, same", [
    ("3.5", "35", False), ("1.5 million", "15 million", False), ("1,000", "1000", True), ("three", "3", True),
    ("The answer is 3.5 metres.", "35 metres", False), ("2,500", "2500", True),
])
def test_numbers_first(a, b, same):
    """Finding 3: numbers are compared as values before any text rule."""
    assert exact_match(a, [b]) is same
    assert contains_match(a, [b]) is same
    assert SemanticEquivalenceJudge._rule(a, b) == (1 if same else 0)
    assert make_correctness_judge("normalized")([a], [b], question="How many are there?").tolist() == [int(same)]


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
    q, floor = "In which state is Fort Wayne?", make_correctness_judge("normalized")
    assert floor(["Fort Wayne is located in Ohio.", "Fort Wayne is located in IN."], ["IN"], question=q).tolist() == \
        [0, 1]
    # an alias found only in the question: a cut-off piece of it is an echo, never correct; closed like a sentence
    # it names an option of the question ("Fort Wayne." to "Who is older, Ann Kell or Fort Wayne?"), so it answers
    assert floor(["Fort Wayne", "Fort Wayne."], ["Fort Wayne"], question=q).tolist() == [0, 1]


def test_mmlu_records_are_judged_by_their_choices():
    """Finding 6: an MMLU record is judged by the one choice named; several letters or nothing is wrong."""
    from elical.data.mmlu import MMLUAnswer
    from elical.generation.base import Generation
    from elical.jobs.annotate import Annotator, make_record

    choices = ["Paris", "Lyon", "Marseille", "Nice"]
    ann = Annotator(CorrectnessJudge("contains"), LexicalConsistency(), make_equivalence_judge("exact"))
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
