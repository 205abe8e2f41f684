"""Integrity of the frozen final test set benchmarks/judge_pairs/final.jsonl (issue 20, item 4).

No judge runs here: the set is scored once, at the end, by benchmarks/judge_agreement.py. These tests only check
that the file is what its README section says: every candidate labelled, labels merged as written, new questions
(in no earlier set, in no HonestyBench QA file, in no embedded `facts` question), the sizes the issue asked for.
"""

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "judge_pairs"
sys.path.insert(0, str(DIR))
from make_final import SETS as FINAL_SETS  # noqa: E402

LATER = [name for name in FINAL_SETS if name != "final"]  # final2, final3, ...: each set make_final.py lists
CATEGORIES = {"names", "numbers", "dates", "partial", "paraphrase", "echo", "non-answer", "other"}
STYLES = {"multihop", "web", "options", "mmlu", "long", "yesno", "negation", "date", "quantity", "person", "list"}


def read(name):
    with open(DIR / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def final():
    return read("final.jsonl"), read("final_candidates.jsonl"), read("final_labels.jsonl")


@pytest.fixture(scope="module")
def norm():
    from draw_pairs import norm  # benchmarks/judge_pairs is on sys.path (above)
    return norm


def earlier_questions(norm, shared_data, name):
    """Normalised questions of every outputs file here but set NAME's, the fixture, the HonestyBench QA files and
    `facts`."""
    from elical.data.facts import load_facts
    earlier = {norm(q["question"]) for q in load_facts()}
    for path in [*DIR.glob("*outputs.jsonl"), DIR.parents[1] / "tests" / "fixtures" / "judge_pairs.jsonl",
                 *(shared_data / "honestybench-qa").glob("*/*.jsonl")]:
        if path.name != f"{name}_outputs.jsonl":
            lines = path.read_text(encoding="utf-8").splitlines()
            earlier |= {norm(json.loads(x)["question"]) for x in lines if x.strip()}
    return earlier


def test_every_candidate_labelled_and_merged(final):
    rows, cands, labels = final
    by_id = {d["pair_id"]: d for d in labels}
    assert [c["pair_id"] for c in cands] == [d["pair_id"] for d in labels]  # one label per candidate, in order
    kept = [c for c in cands if by_id[c["pair_id"]]["label"] is not None]
    assert [r["pair_id"] for r in rows] == [c["pair_id"] for c in kept]
    for r in rows:
        lab = by_id[r["pair_id"]]
        assert r["label"] == lab["label"] in (0, 1) and r["category"] == lab["category"] in CATEGORIES
        assert r["part"] == "test" and r["style"] in STYLES
        if r["kind"] == "answer-gold":
            assert r["b"] in r["aliases"]
        else:
            assert r["kind"] == "greedy-sample" and r["a"] != r["b"]  # identical texts give no pair


def test_sizes_the_issue_asked_for(final):
    rows, _, _ = final
    counts = Counter((r["kind"], r["label"]) for r in rows)
    assert counts[("greedy-sample", 0)] + counts[("greedy-sample", 1)] >= 500
    assert counts[("greedy-sample", 1)] >= 80
    assert counts[("answer-gold", 0)] + counts[("answer-gold", 1)] >= 250
    assert {r["style"] for r in rows} == STYLES
    assert len({r["question"] for r in rows}) >= 200


def test_questions_are_new(final, norm, shared_data):
    rows, _, _ = final
    mine = {norm(q["question"]) for q in read("final_questions.jsonl")}
    assert {norm(r["question"]) for r in rows if r["dataset"] == "written"} <= mine
    assert len(mine) == 181 and not mine & earlier_questions(norm, shared_data, "final")


@pytest.mark.parametrize("name", LATER)
def test_later_frozen_sets_every_candidate_labelled_and_merged(name):
    rows, cands, labels = read(f"{name}.jsonl"), read(f"{name}_candidates.jsonl"), read(f"{name}_labels.jsonl")
    by_id = {d["pair_id"]: d for d in labels}
    assert [c["pair_id"] for c in cands] == [d["pair_id"] for d in labels]
    assert [r["pair_id"] for r in rows] == [c["pair_id"] for c in cands if by_id[c["pair_id"]]["label"] is not None]
    for r in rows:
        assert r["label"] == by_id[r["pair_id"]]["label"] in (0, 1) and r["category"] in CATEGORIES
        assert r["kind"] != "answer-gold" or r["b"] in r["aliases"]


@pytest.mark.parametrize("name", LATER[2:])  # from final4 on: 150 written questions each
def test_later_written_questions_are_new(name, norm, shared_data):
    """The 150 written questions of each set from final4 on (15 styles x 10) are in no earlier set's outputs,
    no fixture, no HonestyBench QA file and no `facts` question; their MMLU rows are drawn by no set make_final.py
    lists as earlier (its SETS[name]["after"])."""
    qs = read(f"{name}_questions.jsonl")
    assert len(qs) == 150 and set(Counter(q["style"] for q in qs).values()) == {10}
    mine = {norm(q["question"]) for q in qs}
    assert len(mine) == 150 and not mine & earlier_questions(norm, shared_data, name)
    mmlu = {o["id"] for o in read(f"{name}_outputs.jsonl") if o["dataset"] == "mmlu"}
    before = {o["id"] for n in FINAL_SETS[name]["after"] for o in read(f"{n}_outputs.jsonl") if o["dataset"] == "mmlu"}
    assert len(mmlu) == 25 and not mmlu & before


@pytest.mark.parametrize("name, size", [("study_random", 1500), ("run_random", 600)])
def test_random_samples_split_by_question(name, size):
    """study_random and run_random (and study_disagree): every question in one part, by the hash rule of
    draw_study.py; labels 0/1; the blind file holds no label; the merged set is the blind file less the dropped
    pairs."""
    from draw_study import part_of

    blind, rows = read(f"{name}_blind.jsonl"), read(f"{name}.jsonl")
    assert not any("label" in b for b in blind) and len(blind) == size
    dropped = {d["pair_id"] for d in read(f"{name}_labels.jsonl") if d["label"] is None}
    assert [r["pair_id"] for r in rows] == [b["pair_id"] for b in blind if b["pair_id"] not in dropped]
    for r in rows + (read("study_disagree.jsonl") if name == "study_random" else []):
        assert r["label"] in (0, 1) and r["part"] == part_of(r["question"])
    assert all(r["b"] in r["aliases"] for r in rows if r["kind"] == "answer-gold")
    parts = {}
    for r in rows:
        parts.setdefault(r["question"], set()).add(r["part"])
    assert all(len(p) == 1 for p in parts.values())
    if name == "study_random":
        assert Counter(r["part"] for r in rows) == Counter({"dev": 911, "test": 563})
