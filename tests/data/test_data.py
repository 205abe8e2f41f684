import json
import re
from collections import Counter, defaultdict

import pytest

from elical.data.groups import IN_DOMAIN, OUT_OF_DOMAIN, UNSEEN, group_of, pool_eligible
from elical.data.sources import hash_split, load_dataset, select_run_questions
from elical.records import InputError


def key(question: str) -> str:
    """An independent normalization of a question (not the split's own): lower case, runs of [a-z0-9] as words,
    articles dropped."""
    return " ".join(w for w in re.findall(r"[a-z0-9]+", question.lower()) if w not in ("a", "an", "the"))


@pytest.fixture(scope="module")
def all_questions(shared_data):
    """(dataset, question) for every line of every file of ../shared/data/honestybench-qa."""
    out = []
    for path in sorted((shared_data / "honestybench-qa").glob("*/*.jsonl")):
        with open(path, encoding="utf-8") as fh:
            out += [(path.parent.name, json.loads(line)["question"]) for line in fh if line.strip()]
    return out


# (question, its split key written by hand from normalize_question's rule: casefolded, punctuation to spaces,
# articles dropped)
KEYED = [("What is the capital of France?", "what is capital of france"),
         ("Who wrote Hamlet?", "who wrote hamlet"),
         ("In which country is the city of Lyon?", "in which country is city of lyon"),
         ("What is the chemical symbol of gold?", "what is chemical symbol of gold"),
         ("When was The Eiffel Tower built?", "when was eiffel tower built"),
         ("Who painted the Mona Lisa?", "who painted mona lisa"),
         ("What currency is used in Japan?", "what currency is used in japan"),
         ("How many legs does a spider have?", "how many legs does spider have")]


def test_hash_split_is_sha1_of_the_normalized_question():
    # an independent implementation of the documented rule: the first 15 hex digits of SHA-1 as a fraction of
    # 16**15, "train" below 0.5. Python's salted hash() or another digest would differ on some of these.
    import hashlib

    from elical.data.sources import normalize_question

    sides = []
    for question, key in KEYED:
        assert normalize_question(question) == key
        u = int(hashlib.sha1(key.encode("utf-8")).hexdigest()[:15], 16) / 16 ** 15
        sides.append("train" if u < 0.5 else "test")
        assert hash_split(question) == sides[-1], question
    assert len(set(sides)) == 2  # both sides occur, so a constant split fails too


def test_hash_split_is_stable_and_balanced(shared_data):
    qs = load_dataset("nq", shared_data / "honestybench-qa")
    sides = Counter(hash_split(q["question"]) for q in qs)
    assert 0.45 < sides["train"] / len(qs) < 0.55
    assert [hash_split(q["question"]) for q in qs[:50]] == [hash_split(q["question"]) for q in qs[:50]]


def test_near_duplicates_across_datasets_share_a_side(all_questions):
    groups = defaultdict(set)
    for dataset, question in all_questions:
        groups[key(question)].add((dataset, question))
    dups = {k: g for k, g in groups.items() if len({q for _, q in g}) > 1}
    across = [g for g in dups.values() if len({d for d, _ in g}) > 1]
    assert len(dups) >= 150 and len(across) >= 5  # 189 groups (5 across datasets); the old hash split ~100
    # the example of the issue: NQ's question and WebQuestions' with a question mark
    nq_wq = groups[key("when did michael jordan return to the nba")]
    assert {d for d, _ in nq_wq} >= {"nq", "web_questions"}
    straddling = [sorted(g) for g in dups.values() if len({hash_split(q) for _, q in g}) > 1]
    assert straddling == []


def test_select_run_questions_disjoint_seeded(shared_data):
    by = {"nq": load_dataset("nq", shared_data / "honestybench-qa")}
    a = select_run_questions(by, n_train=40, n_eval=30, seed=1)
    b = select_run_questions(by, n_train=40, n_eval=30, seed=1)
    c = select_run_questions(by, n_train=40, n_eval=30, seed=2)
    assert a == b and a != c
    train = {key(q["question"]) for q in a if q["split"] == "train"}
    test = {key(q["question"]) for q in a if q["split"] == "test"}
    assert len(train) == 40 and len(test) == 30 and not train & test


def test_whole_sides_are_disjoint_under_an_independent_normalization(all_questions):
    sides = defaultdict(set)
    for _, question in all_questions:
        sides[hash_split(question)].add(key(question))
    assert not sides["train"] & sides["test"]


def test_pool_comes_from_in_domain_datasets_only(shared_data):
    root = shared_data / "honestybench-qa"
    by = {"nq": load_dataset("nq", root), "squad": load_dataset("squad", root)}
    chosen = select_run_questions(by, n_train=40, n_eval=20, seed=0)
    pool = [q for q in chosen if q["split"] == "train"]
    evals = Counter(q["dataset"] for q in chosen if q["split"] == "test")
    assert len(pool) == 40 and {q["dataset"] for q in pool} == {"nq"}  # all of n_train from nq
    assert evals == {"nq": 20, "squad": 20}
    with pytest.raises(InputError, match="no in-domain dataset"):
        select_run_questions({"squad": by["squad"]}, n_train=40, n_eval=20, seed=0)


def test_dataset_in_no_group_is_evaluation_only_unless_named(shared_data):
    nq = load_dataset("nq", shared_data / "honestybench-qa")
    mine = [dict(q, dataset="mine", id=f"mine/{i}") for i, q in enumerate(load_dataset(
        "musique", shared_data / "honestybench-qa"))]
    by = {"nq": nq, "mine": mine}
    default = select_run_questions(by, n_train=20, n_eval=10, seed=0)
    assert {q["dataset"] for q in default if q["split"] == "train"} == {"nq"}
    named = select_run_questions(by, n_train=20, n_eval=10, seed=0, extra_pool=["mine"])
    assert Counter(q["dataset"] for q in named if q["split"] == "train") == {"nq": 10, "mine": 10}
    for ood in ("squad", "mmlu"):
        with pytest.raises(InputError, match="evaluation only"):
            select_run_questions(by, n_train=20, n_eval=10, seed=0, extra_pool=[ood])


def test_dataset_groups():
    # HonestyBench (Ni et al., 2025, Sec. 5): five in-domain sets (TriviaQA's folder is "tq"), five
    # out-of-domain, MMLU unseen; the embedded facts set is in-domain
    assert set(IN_DOMAIN) == {"nq", "tq", "hq", "2wikimultihopqa", "pararel_patterns", "facts"}
    assert set(OUT_OF_DOMAIN) == {"squad", "web_questions", "complex_web_questions", "musique", "popqa"}
    assert UNSEEN == ("mmlu",)
    assert [group_of(n) for n in ("tq", "popqa", "mmlu", "mine")] == ["in_domain", "out_of_domain", "unseen", None]
    assert pool_eligible("facts") and not pool_eligible("squad", ["squad"]) and pool_eligible("mine", ["mine"])


def test_missing_dataset_and_too_many(tmp_path, shared_data):
    with pytest.raises(InputError, match="no dataset 'nope'"):
        load_dataset("nope", shared_data / "honestybench-qa")
    by = {"nq": load_dataset("nq", shared_data / "honestybench-qa")}
    with pytest.raises(InputError, match="--n-eval"):
        select_run_questions(by, n_train=10, n_eval=10**6, seed=0)


def test_sources_by_name(shared_data):
    from elical.data import SOURCES
    from elical.data.sources import load_dataset
    from elical.records import InputError

    assert SOURCES.names() == ["facts", "mmlu", "qa-folder"]
    hb, mmlu_dir = shared_data / "honestybench-qa", shared_data / "mmlu"
    # the embedded facts also beside a QA directory (no folder named facts there), so `--datasets facts,nq` works
    assert [q["id"] for q in load_dataset("facts", hb)[:3]] == [q["id"] for q in load_dataset("facts")[:3]]
    mmlu = load_dataset("mmlu", hb, mmlu_dir)
    assert len(mmlu) == 14042 and {"choices", "answer_index"} <= set(mmlu[0])  # the shared data README's count
    with pytest.raises(InputError, match="--mmlu-dir"):
        load_dataset("mmlu", hb)
    assert len(load_dataset("nq", hb)) == 3610  # the shared data README's count


def test_a_released_training_split_feeds_the_pool_and_is_never_hash_split(tmp_path, capsys):
    import json

    from elical.data.sources import load_questions, normalize_question, select_run_questions

    folder = tmp_path / "nq"
    folder.mkdir()
    train = [{"question": f"train question number {i}?", "answer": [str(i)]} for i in range(40)]
    train.append({"question": "Who wrote Hamlet", "answer": ["Shakespeare"]})  # the evaluation question again
    evaluation = [{"question": f"evaluation question number {i}?", "answer": [str(i)]} for i in range(30)]
    evaluation.append({"question": "who wrote hamlet?", "answer": ["William Shakespeare"]})
    (folder / "train.jsonl").write_text("".join(json.dumps(q) + "\n" for q in train))
    (folder / "dev.jsonl").write_text("".join(json.dumps(q) + "\n" for q in evaluation))
    by = load_questions(["nq"], tmp_path)
    assert "1 training question(s) also in dev.jsonl dropped" in capsys.readouterr().err
    chosen = select_run_questions(by, n_train=40, n_eval=31, seed=0)
    pool = {q["question"] for q in chosen if q["split"] == "train"}
    test = {q["question"] for q in chosen if q["split"] == "test"}
    assert pool == {q["question"] for q in train[:40]}  # every training-file question, whatever its hash
    assert test == {q["question"] for q in evaluation}
    assert not {normalize_question(q) for q in pool} & {normalize_question(q) for q in test}
    assert all("side" not in q for q in chosen)
    assert len({q["id"] for q in chosen}) == len(chosen)  # train ids (nq/train/<line>) never collide with eval ids
