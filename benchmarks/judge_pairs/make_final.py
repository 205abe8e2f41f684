"""The frozen FINAL test sets of the answer judges (issue 20, item 4): new questions, in datasets and question
styles no earlier set covers, answered by the real model and labelled by hand before any judge ran.

Run from the repository root (`--set final`, the default, or `--set finalN`, N = 2 ... 23: file prefix SET below):

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 nice python benchmarks/judge_pairs/make_final.py gen ../shared/data/mmlu
    python benchmarks/judge_pairs/make_final.py draw    # SET_outputs.jsonl -> SET_candidates.jsonl (unlabelled)
    python benchmarks/judge_pairs/make_final.py merge   # SET_candidates.jsonl + SET_labels.jsonl -> SET.jsonl

Questions: the hand-written `SET_questions.jsonl` (`id`, `style`, `question`, `answer` = gold aliases; dataset
"written") plus MMLU_N questions of MMLU's test split (dataset "mmlu", style "mmlu"), drawn with
random.Random(the set's MMLU seed) (the first MMLU_N of a shuffle) among questions short enough to ask free-form
(no blank, no "Statement 1", no "all/none of the above" option, question <= 160 characters, every option <= 40
characters) and written as "QUESTION Options: A; B; C; D." (final periods of the options dropped) with the correct
option's text as the only gold alias; the set's `left_out` lists rows left out after reading them (a wrong or
uncheckable key, options naming letters), and its `after` the earlier sets whose MMLU rows (those in their
outputs, and their `left_out`) it never draws.

Generation (`gen`): the real SmolLM2-135M-Instruct (`load_model()`, CPU, float32), the toolkit's QA prompt
(`build_prompt`), the toolkit's default decoding (`DecodingConfig()`: greedy + 5 samples, temperature 1.0, top-p
0.95, top-k 50, 24 new tokens), `TransformersGenerator`, seed 0, each question keyed (and so seeded) by its id.

Pairs (`draw`, standard library only, no judge run, no label seen):
* greedy-sample: the greedy answer against every DISTINCT sample text that differs from it (a sample identical
  to the greedy answer, or to an earlier sample, gives no pair), so each distinct pair is labelled once;
* answer-gold: the greedy answer, and one distinct sample that differs from it: a sample that contains a gold
  alias (token-bounded, case-insensitive) when the greedy answer contains none, else one drawn with
  random.Random(the set's draw seed). `b` is the alias the answer contains (the longest), else the first alias.
Every pair has `part` "test", `pair_id` "SET-NNNN", `dataset`, `style`, `question`, `a`, `b`, `aliases`,
`source` (greedy / sample index); `merge` adds the hand `label` (0/1; null = dropped as ambiguous) and `category`.
"""

import argparse
import csv
import json
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from draw_pairs import gold_in  # noqa: E402

MMLU_N = 25
# MMLU rows left out before the draw, found when drawn questions were read (before any answer was generated): a
# wrong answer key (the Federal National Mortgage Association is "Fannie Mae", not the keyed "FEMA"), a question
# that needs its textbook chapter ("In this chapter's Senior View, Dr. Shealy advises you to"), and a key that could
# not be checked (Lukianoff and Haidt's "blaming"), and an option that names other options by letter ("both A and B")
LEFT_OUT = {"mmlu/miscellaneous/680", "mmlu/human_aging/27", "mmlu/moral_disputes/295", "mmlu/moral_disputes/114"}
# final2 left out a question cut off at its start ("another person's behavior is referred to as the ."), a key that
# could not be checked (cyber-security discourse "1970s") and one of an obscure engineering fact ("1.5 KV").
# final3 left out a wrong key ("surprise" as not a primary facial expression, where "love" is meant), a key that
# depends on which USDA guide ("breads") and a doubtful one ("Compound proposition" for "Complex question").
# final4 left out a wrong key (arenaviruses "predominately located" in "SE Asia", where Africa and South America is
# meant) and a key that could not be checked (Macedo's immigration position "politically liberal").
# final5 left out a wrong key (bunyaviruses' "Impaired renal function" as the exception, where hantaviruses cause
# haemorrhagic fever with renal syndrome) and a fact an earlier set asks (a standard piano's 88 keys, final3's music).
# final6 left out a wrong key (8 x (-7) x (-1) keyed as -63) and a key that could not be checked (arenavirus infection
# "pantropic").
# final7 left out an option naming others by letter ("b and c"), keys that could not be checked (20 billion movies
# watched at home a year; parental anxiety as no risk factor of eating disorders, which studies report as one; the
# "two principles that deal with questions of values"), a garbled, doubtful key (decane and "CH2CH2CH2OH" as the
# immiscible pair, where propanol mixes with alkanes) and a law row cut from its context ("With the intent to commit
# a felony therein.").
# final8 left out a doubtful key with a second defensible option (eating fish as the factor of decreased
# Alzheimer's risk, where being married is also associated with lower dementia risk), keys that could not be
# checked (Australia's occupation "soon after 40,000 years ago", now more often put at 50,000 or more; "Travel" as
# the most important factor of virus spread and infection), an outdated key (the San Antonio Spurs "play" in the
# Alamodome, which they left in 2002) and a loaded ("complex") question keyed as "Prejudicial Language" where no
# option names its fallacy and "False Dilemma" is as defensible.
# final9 left out no row: its 25 drawn rows were read (keys checked, arithmetic redone) and found clean.
# final10 left out an option naming others by letter (inflation "both A and D are correct"), a wrong key (100
# human polyomaviruses "known at present", where about 14 are known) and a fact an earlier set asks (the blimp's
# Archimedes' principle, final5's physics).
# final11 left out options naming statements the question does not give (fiduciary duty "1,3,4"), a wrong key
# (retroviruses first found "in mice causing leukaemia", where the first were found in chickens) and a key with two
# other true options (a hydraulic press's output piston can neither move farther nor faster than the input's).
# final12 left out two doubtful keys (salivating at the tone alone keyed as "acquisition", where the conditioned
# response is meant; a pleural friction rub "more prominent in expiration", where it is heard in both phases), a
# question asking for two examples whose options give one each, a key that could not be checked (UK consultancy
# practitioners "tripled" in 25 years) and a key with no word once normalised ("**": no judge could score it).
# final13 left out keys that could not be checked (older adults with higher education "more likely to be sexually
# active"; mothers' recall "most accurate about motor development and weight gain"), a wrong key (a 1 us 90-degree
# 13C pulse keyed as 5.18 mT, where theta = gamma B1 t gives 23.3 mT), questions with no single right option (every
# option of the Hohfeld question is one of his correlatives; (6-3x)(6+3x), (-3x+6)(3x+6) and 9(2-x)(2+x) all equal
# 36-9x^2), a key that does not answer its question (parvovirus "genera" keyed as "A very large number of virus
# types") and an option naming others by letter ("both b and c").
# final14 left out two wrong keys (herpes viruses inhibited by "Azidothymidine", where acyclovir is; -47 = g + 24
# keyed as g = -23, where g = -71), keys that could not be checked (the "most persuasive" argument against fair play;
# Aristotle's virtues "open-ended and revisable"; disease "most often" prevented by vaccines; the oscillator "easy to
# fabricate" in an IC), a doubtful key (respiratory diseases as the one not rarer among vegetarians, where
# EPIC-Oxford found colorectal cancer no rarer either), two options that both fit (family and corporate branding
# for one name on every product) and an option naming the others ("all three structures").
# final15 left out a wrong key (14 + (-71) keyed as 57, where it is -57) and a doubtful one (Cr3+ as the ion that
# cannot be a paramagnetic quencher, where Zn2+, d10 and diamagnetic, is the one that cannot).
# final16 left out keys that could not be checked (the peak difference in approval of school desegregation, a chart's
# figure; "Pre-conceptions" as not part of Schein's model of culture) and a doubtful one ("height" as the idea that
# nineteenth-century race theories did not consider, where genetics had not yet been founded).
# final17 left out a key that could not be checked (alcoholism as the age difference that is in part a cohort
# effect), a question two options fit (a rise in interest rates lowers investment and raises the dollar) and options
# naming numbered statements the question does not give ("1,3").
# final18 left out an option naming others by letter ("both B and C").
# final19 left out an option naming others by letter ("both (a) and (b)"), a wrong key (-25 - (-11) keyed as 14,
# where it is -14), a key that could not be checked (longitudinal support "for the theory put forth by" Erikson, its
# theory not named) and a row cut from its context (the marketing "Economic—" fragment).
# final20 left out an option naming others by number ("Both 2 and 3") and a question that needs its textbook chapter
# ("In this chapter's Senior View, Tolly Kleckley told us").
# final21 left out a question that needs its missing table ("If the wage paid to all units of labor is $4.50, how many
# units of labor are hired?") and options naming numbered statements that are not given ("I only; II only; ...").
# final22 left out a wrong key (365 + 56 keyed as 309, where it is 421) and a key that could not be checked (food
# availability and consumption "measured" at 5 stages of the food supply chain).
# final23 left out two keys that could not be checked (Australia's 2013 flat-screen television revenue "$1.2 billion",
# and the median international income of 2020 keyed "$10,000", where estimates are near $3,000 a year).
# final24 left out an option naming others by letter ("both A and B").
# Each set: its MMLU and draw seeds and its left-out rows (its `after`, the sets listed before it, is set below).
SETS = {"final": {"mmlu_seed": 2027, "draw_seed": 2028, "left_out": LEFT_OUT},
        "final2": {"mmlu_seed": 2029, "draw_seed": 2030,
                   "left_out": {"mmlu/professional_psychology/82", "mmlu/security_studies/179",
                                "mmlu/electrical_engineering/10"}},
        "final3": {"mmlu_seed": 2031, "draw_seed": 2032,
                   "left_out": {"mmlu/high_school_psychology/348", "mmlu/miscellaneous/570",
                                "mmlu/logical_fallacies/51"}},
        "final4": {"mmlu_seed": 2033, "draw_seed": 2034,
                   "left_out": {"mmlu/virology/93", "mmlu/moral_disputes/306"}},
        "final5": {"mmlu_seed": 2035, "draw_seed": 2036,
                   "left_out": {"mmlu/virology/119", "mmlu/miscellaneous/322"}},
        "final6": {"mmlu_seed": 2037, "draw_seed": 2038,
                   "left_out": {"mmlu/elementary_mathematics/181", "mmlu/virology/68"}},
        "final7": {"mmlu_seed": 2039, "draw_seed": 2040,
                   "left_out": {"mmlu/human_sexuality/24", "mmlu/miscellaneous/139", "mmlu/high_school_chemistry/44",
                                "mmlu/nutrition/108", "mmlu/professional_law/182", "mmlu/human_sexuality/44"}},
        "final8": {"mmlu_seed": 2041, "draw_seed": 2042,
                   "left_out": {"mmlu/human_aging/3", "mmlu/prehistory/171", "mmlu/miscellaneous/232",
                                "mmlu/logical_fallacies/126", "mmlu/virology/80"}},
        "final9": {"mmlu_seed": 2043, "draw_seed": 2044,
                   "left_out": set()},
        "final10": {"mmlu_seed": 2045, "draw_seed": 2046,
                    "left_out": {"mmlu/high_school_macroeconomics/59", "mmlu/virology/2",
                                 "mmlu/conceptual_physics/87"}},
        "final11": {"mmlu_seed": 2047, "draw_seed": 2048,
                    "left_out": {"mmlu/business_ethics/71", "mmlu/virology/13",
                                 "mmlu/conceptual_physics/24"}},
        "final12": {"mmlu_seed": 2049, "draw_seed": 2050,
                    "left_out": {"mmlu/high_school_psychology/182", "mmlu/public_relations/103",
                                 "mmlu/public_relations/12", "mmlu/high_school_computer_science/39",
                                 "mmlu/clinical_knowledge/29"}},
        "final13": {"mmlu_seed": 2051, "draw_seed": 2052,
                    "left_out": {"mmlu/human_aging/198", "mmlu/professional_psychology/174",
                                 "mmlu/college_chemistry/49", "mmlu/jurisprudence/84",
                                 "mmlu/high_school_mathematics/45", "mmlu/virology/73",
                                 "mmlu/prehistory/148"}},
        "final14": {"mmlu_seed": 2053, "draw_seed": 2054,
                    "left_out": {"mmlu/nutrition/282", "mmlu/jurisprudence/69", "mmlu/anatomy/118",
                                 "mmlu/philosophy/204", "mmlu/marketing/183", "mmlu/virology/44",
                                 "mmlu/electrical_engineering/141", "mmlu/virology/99",
                                 "mmlu/elementary_mathematics/230"}},
        "final15": {"mmlu_seed": 2055, "draw_seed": 2056,
                    "left_out": {"mmlu/elementary_mathematics/268", "mmlu/college_chemistry/82"}},
        "final16": {"mmlu_seed": 2057, "draw_seed": 2058,
                    "left_out": {"mmlu/global_facts/87", "mmlu/sociology/153", "mmlu/management/103"}},
        "final17": {"mmlu_seed": 2059, "draw_seed": 2060,
                    "left_out": {"mmlu/human_aging/57", "mmlu/miscellaneous/380", "mmlu/business_ethics/82"}},
        "final18": {"mmlu_seed": 2061, "draw_seed": 2062, "left_out": {"mmlu/logical_fallacies/32"}},
        "final19": {"mmlu_seed": 2063, "draw_seed": 2064,
                    "left_out": {"mmlu/machine_learning/93", "mmlu/elementary_mathematics/335", "mmlu/human_aging/23",
                                 "mmlu/marketing/218"}},
        "final20": {"mmlu_seed": 2065, "draw_seed": 2066,
                    "left_out": {"mmlu/electrical_engineering/125", "mmlu/human_aging/203"}},
        "final21": {"mmlu_seed": 2067, "draw_seed": 2068,
                    "left_out": {"mmlu/high_school_microeconomics/30", "mmlu/high_school_psychology/134"}},
        "final22": {"mmlu_seed": 2069, "draw_seed": 2070,
                    "left_out": {"mmlu/elementary_mathematics/374", "mmlu/nutrition/176"}},
        "final23": {"mmlu_seed": 2071, "draw_seed": 2072,
                    "left_out": {"mmlu/miscellaneous/320", "mmlu/global_facts/75"}},
        "final24": {"mmlu_seed": 2073, "draw_seed": 2074, "left_out": {"mmlu/moral_disputes/293"}}}
for _i, _name in enumerate(SETS):  # "after": every set made before it, whose MMLU rows it never draws
    SETS[_name]["after"] = tuple(SETS)[:_i]


def path(name, part):
    """benchmarks/judge_pairs/NAME{part}.jsonl, part one of "_questions", "_outputs", "_candidates", "_labels", ""."""
    return HERE / f"{name}{part}.jsonl"


def used_mmlu(name):
    """MMLU row ids set NAME drew or left out (its outputs file must exist)."""
    return SETS[name]["left_out"] | {json.loads(x)["id"] for x in path(name, "_outputs").read_text(
        encoding="utf-8").splitlines() if x.strip() and json.loads(x)["dataset"] == "mmlu"}


def mmlu_questions(mmlu_dir, name="final"):
    """MMLU_N test questions written as free-form questions with their options in the text, for set NAME."""
    cfg, pool = SETS[name], []
    for path in sorted(Path(mmlu_dir, "test").glob("*_test.csv")):
        subject = path.name[:-len("_test.csv")]
        with open(path, encoding="utf-8", newline="") as f:
            for row_no, row in enumerate(csv.DictReader(f), start=2):
                q, opts = row["question"].strip(), [row[f"choice{i}"].strip().rstrip(".") for i in range(4)]
                if (len(q) > 160 or "_" in q or "Statement 1" in q or any(len(o) > 40 or not o for o in opts)
                        or any(re.search(r"\b(all|none|both) of the", o, re.I) for o in opts)
                        or len(set(o.lower() for o in opts)) < 4):
                    continue
                pool.append({"id": f"mmlu/{subject}/{row_no}", "style": "mmlu", "dataset": "mmlu",
                             "question": f"{q} Options: {'; '.join(opts)}.",
                             "answer": [opts[int(row["answer"])]]})
    random.Random(cfg["mmlu_seed"]).shuffle(pool)
    skip = set(cfg["left_out"]).union(*(used_mmlu(e) for e in cfg["after"]))
    return [q for q in pool if q["id"] not in skip][:MMLU_N]


def questions(mmlu_dir, name="final"):
    written = [dict(json.loads(x), dataset="written") for x in path(name, "_questions").read_text(
        encoding="utf-8").splitlines() if x.strip()]
    return written + mmlu_questions(mmlu_dir, name)


def gen(mmlu_dir, name="final"):
    from elical.generation.base import DecodingConfig, build_prompt
    from elical.generation.models import load_model
    from elical.generation.prefix_sharing import TransformersGenerator
    qs = questions(mmlu_dir, name)
    print(len(qs), "questions", flush=True)
    model, tok = load_model()
    g = TransformersGenerator(model, tok, DecodingConfig(batch_size=8))
    with open(path(name, "_outputs"), "w", encoding="utf-8") as out:
        for i in range(0, len(qs), 8):
            batch = qs[i:i + 8]
            gens = g.generate([build_prompt(tok, q["question"]) for q in batch], [q["id"] for q in batch], seed=0)
            for q, r in zip(batch, gens):
                out.write(json.dumps({"id": q["id"], "dataset": q["dataset"], "style": q["style"],
                                      "question": q["question"], "answer": q["answer"],
                                      "greedy": r.greedy_response, "samples": r.sampling_response},
                                     ensure_ascii=False) + "\n")
            print(i + len(batch), "/", len(qs), flush=True)


def draw(name="final"):
    rng, n = random.Random(SETS[name]["draw_seed"]), 0
    with open(path(name, "_candidates"), "w", encoding="utf-8") as out:
        def put(o, kind, a, b, source):
            nonlocal n
            out.write(json.dumps({"pair_id": f"{name}-{n:04d}", "part": "test", "kind": kind, "dataset": o["dataset"],
                                  "style": o["style"], "question": o["question"], "a": a, "b": b,
                                  "aliases": o["answer"], "source": source}, ensure_ascii=False) + "\n")
            n += 1

        for line in path(name, "_outputs").read_text(encoding="utf-8").splitlines():
            o = json.loads(line)
            a, aliases = o["greedy"], o["answer"]
            first = {}  # distinct sample text -> index of its first occurrence
            for i, s in enumerate(o["samples"]):
                if s != a and s not in first:
                    first[s] = i
            for s, i in first.items():
                put(o, "greedy-sample", a, s, f"sample {i}")
            put(o, "answer-gold", a, gold_in(a, aliases) or aliases[0], "greedy")
            if first:
                with_gold = [s for s in first if gold_in(s, aliases)]
                s = with_gold[0] if with_gold and not gold_in(a, aliases) else rng.choice(list(first))
                put(o, "answer-gold", s, gold_in(s, aliases) or aliases[0], f"sample {first[s]}")
    print(n, "candidates ->", path(name, "_candidates"))


def merge(name="final"):
    labels = {}
    for x in path(name, "_labels").read_text(encoding="utf-8").splitlines():
        if x.strip():
            d = json.loads(x)
            labels[d["pair_id"]] = d
    kept = dropped = 0
    with open(path(name, ""), "w", encoding="utf-8") as out:
        for x in path(name, "_candidates").read_text(encoding="utf-8").splitlines():
            c = json.loads(x)
            lab = labels.get(c["pair_id"])
            if lab is None:
                raise SystemExit(f"{path(name, '_labels')}: no label for {c['pair_id']}")
            if lab["label"] is None:
                dropped += 1
                continue
            c.update(b=lab.get("b", c["b"]), label=lab["label"], category=lab["category"])
            out.write(json.dumps(c, ensure_ascii=False) + "\n")
            kept += 1
    print(kept, "pairs,", dropped, "dropped ->", path(name, ""))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cmd", choices=["gen", "draw", "merge"])
    ap.add_argument("mmlu_dir", nargs="?", help="gen only: the MMLU folder (with test/*_test.csv)")
    ap.add_argument("--set", default="final", choices=sorted(SETS), help="which frozen set (file prefix)")
    args = ap.parse_args()
    if args.cmd == "gen":
        if not args.mmlu_dir:
            ap.error("gen needs the MMLU folder")
        gen(args.mmlu_dir, args.set)
    else:
        {"draw": draw, "merge": merge}[args.cmd](args.set)
