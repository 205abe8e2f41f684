"""Make the model outputs behind benchmarks/judge_pairs/pairs.jsonl (real SmolLM2-135M-Instruct answers).

Run from the repository root (a few minutes on one CPU core):

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/judge_pairs/make_candidates.py \
        ../shared/data/honestybench-qa benchmarks/judge_pairs/outputs.jsonl [STAGES]

STAGES: "1,2" (default: both stages, a new file) or "2" (stage 2 only, appended). Each stage is generated in its
own batches of 8, so a one-go run gives the same answers as stage 1 followed by an appended stage 2.

Questions: a seeded (random.Random(2026)) draw from all nine HonestyBench QA sets and from several relations of
the embedded `facts` set, leaving out every question of tests/fixtures/judge_pairs.jsonl (that set tuned the judges).
Stage 1 (246 questions): about 22 per HonestyBench set and 46 `facts` questions over 13 relations, with questions
whose gold answer is a number or a date over-weighted and a few per set whose text contains a gold alias (echo
answers). Stage 2 (100 questions, PLAN2 below): question types the model gets right or answers consistently more
often, added because stage 1 gave too few correct and consistent answers. Each question gets the greedy answer and
eight samples (temperature 1.0, top-p 0.95, top-k 50, 24 new tokens, seed 0, batch 8) with today's QA prompt.
Writes one line per question: {"stage", "dataset", "relation", "question", "answer", "greedy", "samples"}.
"""

import json
import random
import re
import sys
from pathlib import Path

from elical.data.facts import load_facts
from elical.data.sources import load_dataset
from elical.generation.base import DecodingConfig, build_prompt
from elical.generation.models import load_model
from elical.generation.prefix_sharing import TransformersGenerator

ROOT = Path(__file__).resolve().parents[2]
OLD_PAIRS = ROOT / "tests" / "data" / "judge_pairs.jsonl"

MONTH = r"(January|February|March|April|May|June|July|August|September|October|November|December)"
DATE = re.compile(rf"^\D*(1[0-9]{{3}}|20[0-9]{{2}})\D*$|{MONTH}\s+\d|\d\s+{MONTH}", re.I)
NUMBER = re.compile(r"^[\s$£€~+-]*\d[\d,.\s]*(%|[a-zA-Z ]{0,12})?$")


def is_number(q):
    return any(NUMBER.match(a) and not DATE.search(a) for a in q["answer"] if a)


def is_date(q):
    return any(DATE.search(a) for a in q["answer"] if a)


def numeric(q):
    return is_number(q) or is_date(q)


def alias_in_question(q):
    text = q["question"].lower()
    return any(a and len(a) > 2 and re.search(rf"(?<!\w){re.escape(a.lower())}(?!\w)", text) for a in q["answer"])


# dataset -> [(how many, filter or None)], drawn in this order; a question is taken once
PLAN = {
    "nq": [(7, lambda q: q["question"].startswith("how many")), (7, lambda q: q["question"].startswith("when")),
           (3, alias_in_question), (7, None)],
    "hq": [(8, numeric), (3, alias_in_question), (11, None)],
    "2wikimultihopqa": [(8, is_date), (4, alias_in_question), (10, None)],
    "pararel_patterns": [(10, alias_in_question), (12, None)],
    "squad": [(8, is_number), (7, is_date), (2, alias_in_question), (5, None)],
    "web_questions": [(7, is_date), (3, alias_in_question), (12, None)],
    "complex_web_questions": [(7, numeric), (3, alias_in_question), (12, None)],
    "musique": [(8, numeric), (2, alias_in_question), (12, None)],
    "popqa": [(4, numeric), (3, alias_in_question), (15, None)],
}
FACTS_PLAN = {  # 46 questions: several relations, numbers and codes over-weighted
    "country_capital": 5, "capital_country": 4, "country_currency": 3, "country_continent": 3,
    "country_language": 3, "country_calling_code": 5, "country_tld": 2, "city_country": 5, "us_city_state": 3,
    "element_symbol": 3, "symbol_element": 3, "element_number": 5, "number_element": 2,
}


def comparison(q):
    """A two-way comparison whose answer is one of the two names in the question ("Who was born first, A or B?")."""
    return " or " in q["question"] and alias_in_question(q)


def small_number(q):
    return any(a.isdigit() and int(a) <= 30 for a in q["answer"]) or q.get("relation") == "number_element" and any(
        int(n) <= 30 for n in re.findall(r"\d+", q["question"]))


# Stage 2, drawn after stage 1 from the same random.Random(2026) and generated in its own batches (so stage 1's
# outputs do not change): questions the model answers right or consistently more often, chosen by question type
# only (a "facts" relation, a two-way comparison, a gold alias in the question), because stage 1 gave too few
# correct and consistent answers for both classes to be well represented.
PLAN2 = {
    "hq": [(8, comparison)],
    "2wikimultihopqa": [(8, comparison)],
    "pararel_patterns": [(8, alias_in_question)],
    "popqa": [(6, lambda q: q["question"].startswith("What is the capital of"))],
    "web_questions": [(5, alias_in_question)],
}
FACTS_PLAN2 = {
    "country_capital": (8, None), "capital_country": (8, None), "country_language": (8, None),
    "country_continent": (8, None), "city_country": (8, None), "us_city_state": (6, None),
    "element_symbol": (6, None), "symbol_element": (5, None), "element_number": (5, small_number),
    "number_element": (3, small_number),
}


def pick(pool, rng, n, test, taken):
    pool = [q for q in pool if q["question"] not in taken and (test is None or test(q))]
    got = rng.sample(pool, min(n, len(pool)))
    taken.update(q["question"] for q in got)
    return got


def read_questions(name, data_dir):
    """load_dataset, or (ComplexWebQuestions, which has lines whose aliases are all empty, so load_dataset refuses
    the file) the file read directly, dropping empty aliases and questions left without one."""
    try:
        return load_dataset(name, data_dir)
    except Exception:  # elical's InputError
        (path,) = sorted((Path(data_dir) / name).glob("*.jsonl"))
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            q = json.loads(line) if line.strip() else None
            if q and any(a.strip() for a in q["answer"]):
                out.append({"dataset": name, "question": q["question"],
                            "answer": [a for a in q["answer"] if a.strip()]})
        return out


def choose_questions(data_dir):
    """(stage 1 questions, stage 2 questions), both drawn with one random.Random(2026)."""
    rng = random.Random(2026)
    taken = {json.loads(line)["question"] for line in OLD_PAIRS.read_text(encoding="utf-8").splitlines() if line}
    chosen, qs = [], {name: read_questions(name, data_dir) for name in PLAN}
    for name, plan in PLAN.items():
        for n, test in plan:
            chosen += pick(qs[name], rng, n, test, taken)
    by = {}
    for q in load_facts():
        by.setdefault(q["relation"], []).append(q)
    for rel, n in FACTS_PLAN.items():
        chosen += pick(by[rel], rng, n, None, taken)
    chosen2 = []
    for name, plan in PLAN2.items():
        for n, test in plan:
            chosen2 += pick(qs[name], rng, n, test, taken)
    for rel, (n, test) in FACTS_PLAN2.items():
        chosen2 += pick(by[rel], rng, n, test, taken)
    return chosen, chosen2


def main(data_dir: str, out_path: str, stages: str = "1,2") -> None:
    """Generate the given stages ("1,2": both, a new file; "2": stage 2 only, appended to out_path)."""
    stage1, stage2 = choose_questions(data_dir)
    todo = [(st, qs) for st, qs in ((1, stage1), (2, stage2)) if str(st) in stages.split(",")]
    print(len(stage1), "+", len(stage2), "questions", flush=True)
    model, tok = load_model()
    gen = TransformersGenerator(model, tok, DecodingConfig(n_samples=8, max_new_tokens=24, batch_size=8))
    with open(out_path, "w" if "1" in stages.split(",") else "a", encoding="utf-8") as out:
        for stage, chosen in todo:
            for i in range(0, len(chosen), 8):  # each stage in its own batches
                batch = chosen[i:i + 8]
                gens = gen.generate([build_prompt(tok, q["question"]) for q in batch],
                                    [f"{q['dataset']}|{q['question']}" for q in batch], seed=0)
                for q, g in zip(batch, gens):
                    out.write(json.dumps({"stage": stage, "dataset": q["dataset"], "relation": q.get("relation"),
                                          "question": q["question"], "answer": q["answer"],
                                          "greedy": g.greedy_response, "samples": g.sampling_response},
                                         ensure_ascii=False) + "\n")
                out.flush()
                print(f"stage {stage}:", i + len(batch), "/", len(chosen), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
