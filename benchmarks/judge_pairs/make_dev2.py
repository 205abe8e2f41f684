"""More sets for the EQUIVALENCE judgement (kind "greedy-sample"): dev2.jsonl, dev3.jsonl (development),
test2.jsonl ... test5.jsonl (more held-out test sets; README.md says which were later read as dev).

Run from the repository root (SET is dev2, the default, dev3, test2, test3, test4 or test5):

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/judge_pairs/make_dev2.py gen \
        ../shared/data/honestybench-qa --set SET
    python benchmarks/judge_pairs/make_dev2.py draw --set SET   # SET_outputs.jsonl -> SET_candidates.jsonl (unlabelled)
    python benchmarks/judge_pairs/make_dev2.py merge --set SET  # SET_candidates.jsonl + SET_labels.jsonl -> SET.jsonl

Each set has its own seed (SETS: dev2 random.Random(7), dev3 11, test2 13, test3 17, test4 19, test5 23), used both
to draw the questions and to draw the pairs, its share of the PLAN (dev2 and test2 the whole PLAN, 123 questions;
dev3 half of every count, rounded up, 65 questions; test3 and test4 1.5 times every count, rounded up; test5 twice,
246 questions) and its side of the split; without --set the commands make dev2 exactly as before. Questions: the
same PLAN of datasets, filters and relations for every set, NEW questions (in none of pairs.jsonl,
tests/fixtures/judge_pairs.jsonl and the outputs of the sets before it in SETS: dev3 leaves out dev2's questions)
from seven HonestyBench sets and the embedded `facts` set, keeping only questions that draw_pairs.part_of puts on
the set's side of the split: dev for dev2 and dev3 (so none of their questions can ever be a test question), test
for test2 ... test5 (each made after a round of dev changes and scored once with the judges frozen; nothing is
chosen on them, and they are labelled without any judge's verdict). Generation is the same as make_candidates.py
(real SmolLM2-135M-Instruct, QA prompt, greedy + 8 samples, T=1.0, top-p 0.95, top-k 50, 24 new tokens, seed 0,
batch 8). Pairs: up to 3 greedy-sample pairs per question chosen by text features only (shared words with the greedy
answer, same last word, random), never by a judge's verdict; labels are by hand (GUIDELINE.md) in SET_labels.jsonl.
Every pair has `part` "dev" or "test" (the set's side, as in pairs.jsonl) and `pair_id` "SET-NNNN".
"""

import argparse
import json
import math
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from draw_pairs import jaccard, last_word, norm, part_of  # noqa: E402

# set name -> (seed, share of every PLAN count rounded up, side of the split), in the order the sets were made; a
# set leaves out the questions of every set before it
SETS = {"dev2": (7, 1, "dev"), "dev3": (11, 0.5, "dev"), "test2": (13, 1, "test"), "test3": (17, 1.5, "test"),
        "test4": (19, 1.5, "test"), "test5": (23, 2, "test")}
OLD_PAIRS = (HERE / "pairs.jsonl", HERE.parents[1] / "tests" / "fixtures" / "judge_pairs.jsonl")


def paths(name):
    """The set's files: outputs, candidates, labels, merged pairs."""
    return (HERE / f"{name}_outputs.jsonl", HERE / f"{name}_candidates.jsonl", HERE / f"{name}_labels.jsonl",
            HERE / f"{name}.jsonl")


# dataset -> [(how many, filter name or None)]; filters from make_candidates.py
PLAN = {
    "nq": [(8, None)],
    "hq": [(6, "comparison"), (4, None)],
    "2wikimultihopqa": [(6, "comparison"), (4, None)],
    "pararel_patterns": [(6, "alias_in_question"), (6, None)],
    "web_questions": [(3, "alias_in_question"), (6, None)],
    "popqa": [(4, "capital"), (6, None)],
    "complex_web_questions": [(7, None)],
}
FACTS_PLAN = {
    "country_capital": 8, "capital_country": 7, "country_currency": 3, "country_continent": 6,
    "country_language": 6, "country_calling_code": 3, "city_country": 7, "us_city_state": 4,
    "element_symbol": 4, "symbol_element": 4, "element_number": 3, "number_element": 2,
}


def choose(name, data_dir):
    """The set's questions: PLAN then FACTS_PLAN, drawn with the set's own seed, from its side of the split only,
    none seen before."""
    import make_candidates as mc
    from elical.data.facts import load_facts
    tests = {"comparison": mc.comparison, "alias_in_question": mc.alias_in_question, None: None,
             "capital": lambda q: q["question"].startswith("What is the capital of")}
    earlier = list(SETS)[:list(SETS).index(name)]  # dev3 leaves out dev2's questions; dev2 only the two old sets
    old = set()
    for p in (*OLD_PAIRS, *(paths(e)[0] for e in earlier)):
        old |= {norm(json.loads(x)["question"]) for x in p.read_text(encoding="utf-8").splitlines() if x.strip()}
    seed, share, side = SETS[name]
    rng, chosen, taken = random.Random(seed), [], set(old)

    def pick(pool, n, test):
        n = math.ceil(n * share)
        pool = [q for q in pool if norm(q["question"]) not in taken and part_of(q["question"]) == side
                and (test is None or test(q))]
        got = rng.sample(pool, min(n, len(pool)))
        taken.update(norm(q["question"]) for q in got)
        return got

    for dataset, plan in PLAN.items():
        qs = mc.read_questions(dataset, data_dir)
        for n, t in plan:
            chosen += pick(qs, n, tests[t])
    by = {}
    for q in load_facts():
        by.setdefault(q["relation"], []).append(q)
    for rel, n in FACTS_PLAN.items():
        chosen += pick(by[rel], n, None)
    return chosen


def gen(name, data_dir):
    from elical.generation.base import DecodingConfig, build_prompt
    from elical.generation.models import load_model
    from elical.generation.prefix_sharing import TransformersGenerator
    chosen = choose(name, data_dir)
    print(len(chosen), "questions", flush=True)
    model, tok = load_model()
    g = TransformersGenerator(model, tok, DecodingConfig(n_samples=8, max_new_tokens=24, batch_size=8))
    with open(paths(name)[0], "w", encoding="utf-8") as out:
        for i in range(0, len(chosen), 8):
            batch = chosen[i:i + 8]
            gens = g.generate([build_prompt(tok, q["question"]) for q in batch],
                              [f"{q['dataset']}|{q['question']}" for q in batch], seed=0)
            for q, r in zip(batch, gens):
                out.write(json.dumps({"dataset": q["dataset"], "relation": q.get("relation"),
                                      "question": q["question"], "answer": q["answer"],
                                      "greedy": r.greedy_response, "samples": r.sampling_response},
                                     ensure_ascii=False) + "\n")
            print(i + len(batch), "/", len(chosen), flush=True)


def draw(name):
    """Up to 3 distinct samples per question: the two nearest the greedy answer (word Jaccard, not identical),
    then one ending in the same word, else one at random."""
    outputs, cand, _, _ = paths(name)
    rng, n = random.Random(SETS[name][0]), 0
    with open(cand, "w", encoding="utf-8") as out:
        for line in outputs.read_text(encoding="utf-8").splitlines():
            o = json.loads(line)
            a = o["greedy"]
            distinct = list(dict.fromkeys(s for s in o["samples"] if s.strip() and s != a))
            near = sorted(distinct, key=lambda s: -jaccard(a, s))
            picks = near[:2]
            rest = [s for s in distinct if s not in picks]
            same_end = [s for s in rest if last_word(s) == last_word(a)]
            if same_end or rest:
                picks.append(same_end[0] if same_end else rng.choice(rest))
            if not distinct and o["samples"]:
                picks = [o["samples"][0]]  # every sample identical to the greedy answer
            for b in picks:
                out.write(json.dumps({"pair_id": f"{name}-{n:04d}", "part": SETS[name][2], "kind": "greedy-sample",
                                      "dataset": o["dataset"], "question": o["question"], "a": a, "b": b,
                                      "aliases": o["answer"]}, ensure_ascii=False) + "\n")
                n += 1
    print(n, "candidates ->", cand)


def merge(name):
    _, cand, labels_path, merged = paths(name)
    labels = {}
    for x in labels_path.read_text(encoding="utf-8").splitlines():
        if x.strip():
            d = json.loads(x)
            labels[d["pair_id"]] = d
    kept = dropped = 0
    with open(merged, "w", encoding="utf-8") as out:
        for x in cand.read_text(encoding="utf-8").splitlines():
            c = json.loads(x)
            lab = labels.get(c["pair_id"])
            if lab is None or lab["label"] is None:
                dropped += 1
                continue
            assert part_of(c["question"]) == SETS[name][2]
            c.update(label=lab["label"], category=lab["category"])
            out.write(json.dumps(c, ensure_ascii=False) + "\n")
            kept += 1
    print(kept, "pairs,", dropped, "dropped or unlabelled ->", merged)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cmd", choices=["gen", "draw", "merge"])
    ap.add_argument("data_dir", nargs="?", help="gen only: the HonestyBench QA folder")
    ap.add_argument("--set", dest="name", choices=list(SETS), default="dev2")
    args = ap.parse_args()
    if args.cmd == "gen":
        if not args.data_dir:
            ap.error("gen needs the HonestyBench QA folder")
        gen(args.name, args.data_dir)
    else:
        {"draw": draw, "merge": merge}[args.cmd](args.name)
