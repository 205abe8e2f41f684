"""Draw candidate answer pairs from outputs.jsonl, and merge the hand labels into pairs.jsonl.

    python benchmarks/judge_pairs/draw_pairs.py draw    # outputs.jsonl -> candidates.jsonl (unlabelled)
    python benchmarks/judge_pairs/draw_pairs.py merge   # candidates.jsonl + labels.jsonl -> pairs.jsonl

Standard library only; no elical judge is run. Pairs are chosen with random.Random(2026) and simple text
features (is a sample identical to the greedy answer, how many words they share, does an answer contain a gold
alias as a token-bounded substring, does it contain a digit), never with a judge's verdict. Per question:

* up to 3 equivalence pairs (kind "greedy-sample": the greedy answer and one sample): the sample sharing the most
  words with the greedy answer (not identical to it); with probability 0.6 one more drawn at random; and a third:
  an identical sample (always when every sample is identical, else on a fifth of the questions that have one), or
  with probability 0.35 a sample with a digit when the greedy answer has one, else one ending in the same word;
* up to 3 correctness pairs (kind "answer-gold": an answer, greedy or sampled, and a gold alias), over the distinct
  answers of the question: answers that contain a gold alias are sought out on purpose, because the model is
  rarely right: the greedy answer if it does (else one at random), one more, and a third with probability 0.7
  (always when no answer misses); then, while there is room, an answer without a gold alias (the greedy one if
  it has none), and with probability 0.6, when the gold answer has a digit, an answer with a digit. "b" is the alias the answer contains
  (the longest), else the first alias.

The part of every pair is set by the question: "dev" when the first 8 hex digits of the SHA-1 of the normalized
question (lowercase, punctuation removed, whitespace folded), read as an integer, are below 0.4 * 16**8, else
"test"; so all pairs of one question fall in one part.
"""

import hashlib
import json
import random
import re
import sys
import unicodedata
from pathlib import Path

HERE = Path(__file__).resolve().parent
STOP = set("the a an of in on at to is was are were and or for by with from as it its this that which who what "
           "when where how be been has have had de la le".split())
DEV_SHARE = 0.4


def norm(text):
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"[^\w\s]", " ", text)
    return " ".join(text.split())


def part_of(question):
    h = int(hashlib.sha1(norm(question).encode("utf-8")).hexdigest()[:8], 16)
    return "dev" if h < DEV_SHARE * 16 ** 8 else "test"


def words(text):
    return {w for w in norm(text).split() if w not in STOP}


def contains(answer, alias):
    """Token-bounded, case-insensitive containment, also with thousands separators dropped."""
    if not alias.strip():
        return False
    a, s = norm(answer), norm(alias)
    if s and re.search(rf"(?<!\w){re.escape(s)}(?!\w)", a):
        return True
    a2, s2 = re.sub(r"(?<=\d),(?=\d{3})", "", answer.lower()), re.sub(r"(?<=\d),(?=\d{3})", "", alias.lower())
    return bool(re.search(rf"(?<!\w){re.escape(s2.strip())}(?!\w)", a2))


def gold_in(answer, aliases):
    hits = [al for al in aliases if contains(answer, al)]
    return max(hits, key=len) if hits else None


def has_digit(text):
    return bool(re.search(r"\d", text))


def last_word(text):
    ws = [w for w in norm(text).split() if w not in STOP]
    return ws[-1] if ws else ""


def jaccard(x, y):
    a, b = words(x), words(y)
    return len(a & b) / max(len(a | b), 1)


def guess_category(kind, q, a, b):
    """A first guess, corrected by hand while labelling (labels.jsonl carries the final category)."""
    gold_digit = any(has_digit(al) for al in q["answer"])
    if norm(a) == norm(b):
        return "other"
    if gold_digit or (has_digit(a) and has_digit(b)):
        return "dates" if re.search(r"\b(1[0-9]{3}|20[0-9]{2})\b", " ".join(q["answer"]) + a + b) else "numbers"
    return "names"


def draw():
    rng = random.Random(2026)
    out, questions, eq_used = [], [], {}
    for line in (HERE / "outputs.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        questions.append(q)
        greedy, samples = q["greedy"], q["samples"]
        # equivalence pairs
        eq = []
        idx = list(range(len(samples)))
        rng.shuffle(idx)
        nondup = [i for i in idx if norm(samples[i]) != norm(greedy)]
        dups = [i for i in idx if norm(samples[i]) == norm(greedy)]
        if nondup:
            eq.append(max(nondup, key=lambda i: jaccard(greedy, samples[i])))
        rest = [i for i in nondup if i not in eq and norm(samples[i]) not in {norm(samples[j]) for j in eq}]
        third = None
        if q.get("stage", 1) == 2:  # stage 2 (make_candidates.py): the two nearest samples, sometimes a duplicate
            if rest:
                eq.append(max(rest, key=lambda i: jaccard(greedy, samples[i])))
            if dups and (not nondup or rng.random() < 0.3):
                third = dups[0]
        else:
            if rest and rng.random() < 0.6:
                eq.append(rng.choice(rest))
            rest = [i for i in nondup if i not in eq and norm(samples[i]) not in {norm(samples[j]) for j in eq}]
            if dups and (not nondup or rng.random() < 0.2):
                third = dups[0]
            elif rng.random() < 0.35:
                if has_digit(greedy) and [i for i in rest if has_digit(samples[i])]:
                    third = [i for i in rest if has_digit(samples[i])][0]
                elif [i for i in rest if last_word(samples[i]) == last_word(greedy)]:
                    third = [i for i in rest if last_word(samples[i]) == last_word(greedy)][0]
        if third is not None:
            eq.append(third)
        for i in eq:
            out.append((q, "greedy-sample", greedy, samples[i], f"greedy/sample{i}"))
        eq_used[q["question"]] = [norm(samples[i]) for i in eq]
        # correctness pairs
        answers = [("greedy", greedy)] + [(f"sample{i}", s) for i, s in enumerate(samples)]
        seen, uniq = set(), []
        for src, text in answers:
            if norm(text) not in seen:
                seen.add(norm(text))
                uniq.append((src, text))
        hit = [(s, t) for s, t in uniq if gold_in(t, q["answer"])]
        miss = [(s, t) for s, t in uniq if not gold_in(t, q["answer"])]
        chosen = []
        if hit:
            first = [h for h in hit if h[0] == "greedy"] or [rng.choice(hit)]
            chosen += first
            others = [h for h in hit if h not in chosen]
            rng.shuffle(others)
            chosen += others[:1]
            if len(others) > 1 and (not miss or rng.random() < 0.7):
                chosen.append(others[1])
        if miss and len(chosen) < 3:
            chosen.append(uniq[0] if uniq[0] in miss else rng.choice(miss))
        if len(chosen) < 3 and any(has_digit(al) for al in q["answer"]) and rng.random() < 0.6:
            digit = [u for u in uniq if u not in chosen and has_digit(u[1])]
            if digit:
                chosen.append(rng.choice(digit))
        for src, text in chosen[:3]:
            out.append((q, "answer-gold", text, gold_in(text, q["answer"]) or q["answer"][0], src))
    # a last pass, appended so that the pairs above keep their ids: stages 1-2 gave too few "same" equivalence
    # pairs, so every question with fewer than 3 gets one more sample, the nearest to the greedy answer among those
    # that end in the same word or contain the same gold alias as it (text features only)
    for q in questions:
        greedy, used = q["greedy"], eq_used[q["question"]]
        if len(used) >= 3:
            continue
        alias = gold_in(greedy, q["answer"])
        extra = [i for i, s in enumerate(q["samples"]) if norm(s) != norm(greedy) and norm(s) not in used
                 and (last_word(s) == last_word(greedy) or (alias and gold_in(s, q["answer"]) == alias))]
        if extra:
            i = max(extra, key=lambda i: (jaccard(greedy, q["samples"][i]), -i))
            out.append((q, "greedy-sample", greedy, q["samples"][i], f"greedy/sample{i}"))
    with open(HERE / "candidates.jsonl", "w", encoding="utf-8") as f:
        for n, (q, kind, a, b, src) in enumerate(out):
            f.write(json.dumps({"pair_id": f"jp{n:04d}", "part": part_of(q["question"]), "kind": kind,
                                "dataset": q["dataset"], "question": q["question"], "a": a, "b": b,
                                "aliases": q["answer"], "source": src,
                                "category_guess": guess_category(kind, q, a, b)}, ensure_ascii=False) + "\n")
    print(len(out), "candidates")


def merge():
    labels = {}
    for line in (HERE / "labels.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            labels[r["pair_id"]] = r
    kept = dropped = 0
    with open(HERE / "pairs.jsonl", "w", encoding="utf-8") as f:
        for line in (HERE / "candidates.jsonl").read_text(encoding="utf-8").splitlines():
            c = json.loads(line)
            lab = labels[c["pair_id"]]  # every candidate was read: a KeyError means one was not
            if lab["label"] is None:
                dropped += 1
                continue
            kept += 1
            # "b" is replaced where the reader found that the answer states a gold alias the containment check
            # missed ("Czech" for "Czech Language"): then b is that alias, as for every other correct pair
            f.write(json.dumps({"pair_id": c["pair_id"], "part": c["part"], "kind": c["kind"],
                                "dataset": c["dataset"], "question": c["question"], "a": c["a"],
                                "b": lab.get("b", c["b"]),
                                "aliases": c["aliases"], "label": lab["label"], "category": lab["category"]},
                               ensure_ascii=False) + "\n")
    print(kept, "pairs,", dropped, "dropped")


if __name__ == "__main__":
    {"draw": draw, "merge": merge}[sys.argv[1]]()
