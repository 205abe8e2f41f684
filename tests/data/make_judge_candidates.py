"""Make the candidate answer pairs behind judge_pairs.jsonl from real SmolLM2-135M-Instruct outputs.

Run once (about 10 minutes on 2 CPU cores); the candidates were then read and labelled by hand (README.md):

    OMP_NUM_THREADS=1 python tests/data/make_judge_candidates.py ../shared/data/honestybench-qa /tmp/candidates.jsonl

Questions: a seeded (random.Random(0)) draw from seven HonestyBench QA sets and the embedded `facts` set, with
extra weight on questions whose gold answer is a number or a date. Each question gets the greedy answer and five
samples (temperature 1.0, top-p 0.95, top-k 50, 24 new tokens; elical.generation.base defaults otherwise, seed 0).
Writes one line per question: {"dataset", "question", "answer", "greedy", "samples"}.
"""

import json
import random
import re
import sys

from elical.data.sources import load_dataset
from elical.generation.base import DecodingConfig, TransformersGenerator, build_prompt
from elical.generation.models import load_model

YEAR = re.compile(r"^\D*(1[0-9]{3}|20[0-9]{2})\D*$")
NUMBER = re.compile(r"^[\d,.\s]+$")


def pick(questions, rng, n, test=None):
    pool = [q for q in questions if test is None or test(q)]
    return rng.sample(pool, min(n, len(pool)))


def main(data_dir: str, out_path: str) -> None:
    rng = random.Random(0)
    chosen = []
    for name, plan in {
        "nq": [(12, lambda q: q["question"].startswith("how many")), (14, lambda q: q["question"].startswith("when")),
               (14, lambda q: q["question"].startswith("who"))],
        "squad": [(10, lambda q: any(NUMBER.match(a) for a in q["answer"])),
                  (10, lambda q: any(YEAR.match(a) for a in q["answer"]))],
        "popqa": [(18, None)],
        "pararel_patterns": [(18, None)],
        "web_questions": [(12, None), (6, lambda q: any(YEAR.match(a) for a in q["answer"]))],
        "hq": [(10, None)],
        "2wikimultihopqa": [(8, lambda q: any(YEAR.match(a) for a in q["answer"])), (6, None)],
    }.items():
        qs = load_dataset(name, data_dir)
        for n, test in plan:
            chosen += [q for q in pick(qs, rng, n, test) if q not in chosen]
    facts = load_facts_by_relation()
    for rel, n in {"element_number": 10, "number_element": 4, "country_calling_code": 10, "country_capital": 10,
                   "element_symbol": 6, "city_country": 10, "capital_country": 6, "country_currency": 6}.items():
        chosen += pick(facts.get(rel, []), rng, n)
    model, tok = load_model()
    gen = TransformersGenerator(model, tok, DecodingConfig(n_samples=5, max_new_tokens=24, batch_size=8))
    with open(out_path, "w", encoding="utf-8") as out:
        for i in range(0, len(chosen), 8):
            batch = chosen[i:i + 8]
            gens = gen.generate([build_prompt(tok, q["question"]) for q in batch],
                                [f"{q['dataset']}|{q['question']}" for q in batch], seed=0)
            for q, g in zip(batch, gens):
                out.write(json.dumps({"dataset": q["dataset"], "question": q["question"], "answer": q["answer"],
                                      "greedy": g.greedy_response, "samples": g.sampling_response},
                                     ensure_ascii=False) + "\n")
            out.flush()
            print(i + len(batch), "/", len(chosen), flush=True)


def load_facts_by_relation():
    from elical.data.facts import load_facts

    by = {}
    for q in load_facts():
        by.setdefault(q["relation"], []).append(q)
    return by


if __name__ == "__main__":
    main(*sys.argv[1:3])
