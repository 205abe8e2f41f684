"""The hand-labelled judge-agreement sets: shape, provenance and agreement floors.

tests/fixtures/judge_pairs.jsonl (416 pairs) is dev data: rules and thresholds were chosen on it. Its floors are the
accuracies measured by benchmarks/judge_agreement.py less 0.05. benchmarks/judge_pairs/pairs.jsonl (parts "dev"
and "test") is the held-out set, and test2 ... test5.jsonl beside it are later held-out sets: the default (learned)
judges must stay above their measured values less 0.03. (The floors of the removed rule judges span /
span-contains went with them; their numbers stay in docs/benchmarks.md.)
"""

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from elical.judges import make_correctness_judge, make_equivalence_judge

PAIRS_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "judge_pairs.jsonl"
CATEGORIES = {"numbers", "dates", "names", "partial", "paraphrase", "other"}
SOURCES = {"facts", "nq", "squad", "popqa", "pararel_patterns", "web_questions", "hq", "2wikimultihopqa"}
MEASURED = {"exact": 0.594, "contains": 0.820, "token-f1": 0.582, "rouge-l": 0.565, "embedding": 0.810}
MEASURED_CORRECTNESS = {"contains": 0.911, "embedding": 0.822}


@pytest.fixture(scope="module")
def rows():
    with open(PAIRS_FILE, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_shape_balance_and_categories(rows):
    assert len(rows) >= 300
    for i, r in enumerate(rows):
        assert set(r) == {"question", "a", "b", "label", "category", "source", "kind", "aliases"}, i
        assert isinstance(r["a"], str) and isinstance(r["b"], str) and r["question"].strip(), i
        assert r["label"] in (0, 1) and r["category"] in CATEGORIES and r["source"] in SOURCES, i
        assert r["kind"] in ("greedy-sample", "answer-gold") and r["aliases"], i
        if r["kind"] == "answer-gold":
            assert r["b"] in r["aliases"], i
    share_same = np.mean([r["label"] for r in rows])
    assert 0.4 <= share_same <= 0.6
    cats = Counter(r["category"] for r in rows)
    assert set(cats) == CATEGORIES and min(cats.values()) >= 20, cats
    assert len({(r["question"], r["a"], r["b"]) for r in rows}) == len(rows)  # no duplicate pairs
    assert len({r["source"] for r in rows}) == len(SOURCES)


def test_questions_are_real(rows, shared_data):
    """Every HonestyBench question and its aliases come from its QA file. The facts rows were recorded before
    the facts set dropped echoed and English-word aliases (and the questions they gave away), so for them the
    question alone must still be in the set, for all but a few."""
    from elical.data.sources import load_dataset

    by_source = {}
    for name in {r["source"] for r in rows}:
        qs = load_dataset(name, None if name == "facts" else shared_data / "honestybench-qa")
        by_source[name] = {}
        for q in qs:  # a question can occur more than once (PopQA: several films called "Halloween")
            by_source[name].setdefault(q["question"], []).append(list(q["answer"]))
    facts = [r for r in rows if r["source"] == "facts"]
    for r in rows:
        if r["source"] != "facts":
            assert r["aliases"] in by_source[r["source"]].get(r["question"], []), r["question"]
    assert sum(r["question"] in by_source["facts"] for r in facts) >= 0.9 * len(facts)


@pytest.mark.parametrize("name", ["exact", "contains", "token-f1", "rouge-l"])
def test_lexical_judges_accuracy_floor(rows, name):
    y = np.array([r["label"] for r in rows])
    pred = make_equivalence_judge(name).judge_many([(r["a"], r["b"]) for r in rows])
    assert (pred == y).mean() >= MEASURED[name] - 0.05


def test_embedding_judge_accuracy_floor(rows):
    """The default Consis-Sem judge (all-MiniLM-L6-v2 + rules) on all pairs and as a correctness judge."""
    y = np.array([r["label"] for r in rows])
    eq = make_equivalence_judge("embedding")
    acc = (eq.judge_many([(r["a"], r["b"]) for r in rows]) == y).mean()
    assert acc >= MEASURED["embedding"] - 0.05
    gold = [r for r in rows if r["kind"] == "answer-gold"]
    yg = np.array([r["label"] for r in gold])
    corr = make_correctness_judge("embedding")
    corr.equivalence._model = eq.model
    pred = corr.judge_many([(r["a"], [r["b"]]) for r in gold])
    assert (pred == yg).mean() >= MEASURED_CORRECTNESS["embedding"] - 0.05
    contains = make_correctness_judge("contains").judge_many([(r["a"], [r["b"]]) for r in gold])
    assert (contains == yg).mean() >= MEASURED_CORRECTNESS["contains"] - 0.05


# ---------------------------------------------------------------- defaults on the older (dev) set

# balanced accuracy, benchmarks/judge_agreement.py --part all: the learned judges (trained on it with every other
# labelled set but final2: in-sample, a regression guard only). Correctness measured again in the sixteenth round:
# 0.932 when first measured, 0.906 in the fourteenth and fifteenth, 0.900 now (one pair moved: "07 222" for the
# calling code "+7", labelled wrong, is called correct since an alias's numbers count by value, as the `normalized`
# floor counts them)
DEV_MEASURED = {("equivalence", "learned"): 0.912, ("correctness", "learned"): 0.900}


def _balanced(y, pred):
    y, pred = np.asarray(y), np.asarray(pred)
    return ((pred[y == 1] == 1).mean() + (pred[y == 0] == 0).mean()) / 2


def _judged(task: str, name: str, rows: list[dict]) -> float:
    """Balanced accuracy of judge ``name`` on the rows of ``task``'s kind."""
    if task == "equivalence":
        rows = [r for r in rows if r["kind"] == "greedy-sample"]
        pred = make_equivalence_judge(name).judge_many([(r["a"], r["b"]) for r in rows], [r["question"] for r in rows])
    else:
        rows = [r for r in rows if r["kind"] == "answer-gold"]
        pred = make_correctness_judge(name).judge_many([(r["a"], r.get("aliases") or [r["b"]]) for r in rows],
                                                        [r["question"] for r in rows])
    return _balanced([r["label"] for r in rows], pred)


@pytest.mark.parametrize("task, name", sorted(DEV_MEASURED))
def test_judges_on_the_dev_set(rows, task, name):
    assert _judged(task, name, rows) >= DEV_MEASURED[(task, name)] - 0.03



# ---------------------------------------------------------------- the held-out set (benchmarks/judge_pairs)

NEW_FILE = Path(__file__).resolve().parents[2] / "benchmarks" / "judge_pairs" / "pairs.jsonl"
# Measured on the test part by `python benchmarks/judge_agreement.py` (docs/benchmarks.md); a judge change that
# loses more than 0.03 of balanced accuracy there fails this test.
# (the learned judges: in-sample, trained on it; learned correctness is a logistic regression since the third
# round, chosen on pooled grouped CV, and fits this set less closely in-sample than the trees did: 0.854, was 0.965)
TEST_MEASURED = {("equivalence", "learned"): 0.904, ("correctness", "learned"): 0.854}


@pytest.fixture(scope="module")
def new_rows():
    if not NEW_FILE.exists():
        pytest.skip(f"{NEW_FILE} not there yet")
    with open(NEW_FILE, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_new_set_integrity(new_rows):
    fields = {"pair_id", "part", "kind", "dataset", "question", "a", "b", "aliases", "label", "category"}
    assert len(new_rows) >= 600
    assert len({r["pair_id"] for r in new_rows}) == len(new_rows)
    for r in new_rows:
        assert fields <= set(r), r.get("pair_id")
        assert r["part"] in ("dev", "test") and r["kind"] in ("greedy-sample", "answer-gold") and r["label"] in (0, 1)
    parts = {p: {r["question"] for r in new_rows if r["part"] == p} for p in ("dev", "test")}
    assert parts["dev"] and parts["test"] and not parts["dev"] & parts["test"]  # no question in both parts
    for p in ("dev", "test"):
        for kind in ("greedy-sample", "answer-gold"):
            labels = {r["label"] for r in new_rows if r["part"] == p and r["kind"] == kind}
            assert labels == {0, 1}, (p, kind)


@pytest.mark.parametrize("task, name", sorted(TEST_MEASURED))
def test_judges_on_the_test_part(new_rows, task, name):
    assert _judged(task, name, [r for r in new_rows if r["part"] == "test"]) >= TEST_MEASURED[(task, name)] - 0.03


# ---------------------------------------------------------------- the later held-out sets (make_dev2.py --set testN)

PAIRS_DIR = NEW_FILE.parent
# the learned (default) equivalence judge's balanced accuracy on each (in-sample: trained on them)
LATER_LEARNED = {"test2": 0.919, "test3": 0.884, "test4": 0.903, "test5": 0.883}


@pytest.mark.parametrize("name", sorted(LATER_LEARNED))
def test_later_test_sets(name):
    """Each set: real labelled test-side pairs with no question in any dev data or earlier set; the default
    (learned) equivalence judge keeps (within 0.03) the balanced accuracy it was measured at."""
    sys.path.insert(0, str(PAIRS_DIR))
    from draw_pairs import part_of  # the split's own hash of the normalized question

    with open(PAIRS_DIR / f"{name}.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    assert len(rows) >= 300 and {r["label"] for r in rows} == {0, 1}
    assert all(r["part"] == "test" and r["kind"] == "greedy-sample" and part_of(r["question"]) == "test" for r in rows)
    dev_questions = set()
    for dev in ("dev2.jsonl", "dev3.jsonl", "pairs.jsonl"):
        with open(PAIRS_DIR / dev, encoding="utf-8") as f:
            dev_questions |= {json.loads(x)["question"] for x in f if x.strip() and json.loads(x).get("part") == "dev"}
    assert not dev_questions & {r["question"] for r in rows}
    for earlier in sorted(LATER_LEARNED)[:sorted(LATER_LEARNED).index(name)]:  # each set's questions are new
        with open(PAIRS_DIR / f"{earlier}.jsonl", encoding="utf-8") as f:
            assert not {json.loads(x)["question"] for x in f if x.strip()} & {r["question"] for r in rows}
    assert _judged("equivalence", "learned", rows) >= LATER_LEARNED[name] - 0.03
