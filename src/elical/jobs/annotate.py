"""Annotation: generate answers for each question and judge them, writing one HonestyBench record per question.

Records are appended batch by batch to a JSONL file (:func:`elical.records.open_append`), so a killed run
resumes where it stopped. A question's answers depend only on the run seed and its id (every backend seeds each
question on its own), so a resumed run generates only the missing questions, in batches of its own, and writes
the same records as an uninterrupted one; the batch size changes the speed, not the records.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Sequence

import numpy as np

from elical.generation.base import Generation, build_prompt, decoding_meta
from elical.records import open_append, read_records

__all__ = ["Annotator", "judge_answers", "make_record", "annotate"]


class Annotator:
    """Judges bundled for annotation.

    ``correctness``: callable(responses, aliases, question=None) -> 0/1 array; ``lexical``: callable(greedy,
    samples) -> ROUGE-L array; ``semantic``: object with ``judge(greedy, samples, question=None) -> 0/1 array``.
    Both judges receive the record's question; MMLU records (``choices``, ``answer_index``) are judged by the
    lettered choice they name instead.
    """

    def __init__(self, correctness, lexical, semantic, names: dict | None = None):
        self.correctness, self.lexical, self.semantic = correctness, lexical, semantic
        self.names = names or {}

    @classmethod
    def default(cls, semantic_model: str | None = None, *, correctness: str | None = None,
                equivalence: str | None = None, model=None, tokenizer=None, judge_model: str | None = None,
                judge_base_url: str | None = None, judge_with_qa_model: bool = False,
                client: dict | None = None) -> "Annotator":
        """Judges by name (:data:`elical.judges.EQUIVALENCE_JUDGES` / ``CORRECTNESS_JUDGES``; defaults
        ``DEFAULT_CORRECTNESS`` and ``DEFAULT_EQUIVALENCE``, both "learned").

        ``semantic_model``: local model directory for the judges that take one ("learned", "embedding":
        default the packaged all-MiniLM-L6-v2; "nli": required). The "llm" judges need their own judge:
        ``judge_model`` (a local model directory) or ``judge_base_url`` (an OpenAI-compatible server;
        ``judge_model`` is then the model name sent; ``client``: its ``timeout``, ``max_retries``, ``concurrency``,
        :func:`elical.generation.openai_client.client_options`). Only with ``judge_with_qa_model=True`` do they
        use the QA model itself
        (``model``/``tokenizer``), with a warning, and ``describe()`` records ``judge_is_qa_model: true``.
        Raises :class:`elical.records.InputError` (exit 2) for an llm judge without any of these."""
        import sys
        import warnings

        from elical.judges import DEFAULT_CORRECTNESS, DEFAULT_EQUIVALENCE, LexicalConsistency, judge_model_kw, \
            make_correctness_judge, make_equivalence_judge

        correctness = correctness or DEFAULT_CORRECTNESS
        equivalence = equivalence or DEFAULT_EQUIVALENCE
        backend, qa_judge = {}, False
        if "llm" in (correctness, equivalence):
            from elical.judges.llm import OpenAICompletion, TransformersCompletion
            from elical.records import InputError

            if judge_base_url:
                backend["complete"] = OpenAICompletion(judge_base_url, judge_model or "default", **(client or {}))
            elif judge_model:
                from elical.generation.models import load_model

                backend["complete"] = TransformersCompletion(*load_model(judge_model, device=getattr(
                    model, "device", "cpu")))
            elif judge_with_qa_model:
                if model is None:
                    raise InputError("--judge-with-qa-model", None, "--judge-with-qa-model",
                                     "the llm judge needs the QA model and tokenizer")
                warnings.warn("the llm judge is the QA model itself (--judge-with-qa-model): its judgements "
                              "grade its own answers; the record meta says judge_is_qa_model: true", stacklevel=2)
                print("elical: WARNING: the llm judge is the QA model itself (judge_is_qa_model: true)",
                      file=sys.stderr)
                backend["complete"], qa_judge = TransformersCompletion(model, tokenizer), True
            else:
                raise InputError("--judge-model", None, "--judge-model",
                                 "the llm judge needs its own judge model: give --judge-model DIR or "
                                 "--judge-base-url URL (or, knowingly, --judge-with-qa-model)")

        def kwargs(name: str, task: str) -> dict:
            if name == "llm":
                return dict(backend)
            if judge_model_kw(name, task) and semantic_model:
                return {judge_model_kw(name, task): semantic_model}
            return {}

        if semantic_model and not any(judge_model_kw(n, t) or n == "llm" for n, t in
                                      ((correctness, "correctness"), (equivalence, "equivalence"))):
            print(f"elical: WARNING: --judge-model {semantic_model} is unused: neither the correctness judge "
                  f"{correctness!r} nor the equivalence judge {equivalence!r} takes a model", file=sys.stderr)

        names = {"correctness": correctness, "equivalence": equivalence}
        if qa_judge:
            names["judge_is_qa_model"] = True
        return cls(make_correctness_judge(correctness, **kwargs(correctness, "correctness")), LexicalConsistency(),
                   make_equivalence_judge(equivalence, **kwargs(equivalence, "equivalence")), names=names)

    def describe(self) -> dict:
        """The judges of the record meta: names, thresholds, and ``judge_is_qa_model`` when the LLM judge is the
        QA model itself."""
        sem = self.semantic
        out = {"correctness": self.names.get("correctness", getattr(self.correctness, "name",
                                                                    type(self.correctness).__name__)),
               "equivalence": self.names.get("equivalence", getattr(sem, "name", type(sem).__name__)),
               "mmlu_correctness": "mmlu_correct",
               "lexical_consistency": "ROUGE-L F1",
               "semantic_consistency": type(sem).__name__ + f"(threshold={getattr(sem, 'threshold', None)})"}
        if self.names.get("judge_is_qa_model"):
            out["judge_is_qa_model"] = True
        return out


def _mmlu_judgements(question: dict, greedy: str, samples: list[str]) -> tuple[int, list[int], list[int]]:
    """Greedy correctness, sample correctness and sample consistency of an MMLU question (``choices`` and
    ``answer_index``): the one choice each answer names (:func:`elical.judges.choices.mmlu_correct`)."""
    from elical.judges.choices import mmlu_choice, mmlu_correct

    choices, key = question["choices"], int(question["answer_index"])
    pick = mmlu_choice(greedy, choices)
    return (int(mmlu_correct(greedy, choices, key)), [int(mmlu_correct(s, choices, key)) for s in samples],
            [int(pick is not None and mmlu_choice(s, choices) == pick) for s in samples])


def judge_answers(question: dict, greedy: str, samples: list[str], annotator: Annotator) -> dict:
    """The judged fields of a record: ``greedy_correctness`` (0/1), ``sampling_correctness``,
    ``consistency_judgement`` (N x 0/1) and ``consistency_rougeL`` (N floats). ``question``: a question or record
    (``question``, ``answer``; MMLU also ``choices``, ``answer_index``). Judges always receive the question."""
    aliases, q = question["answer"], question["question"]
    if "choices" in question and "answer_index" in question:  # MMLU: judged by the lettered choice named
        greedy_ok, sample_ok, consistent = _mmlu_judgements(question, greedy, samples)
    else:
        greedy_ok = int(annotator.correctness([greedy], aliases, question=q)[0])
        sample_ok = [int(v) for v in annotator.correctness(samples, aliases, question=q)] if samples else []
        consistent = [int(v) for v in annotator.semantic.judge(greedy, samples, question=q)] if samples else []
    rouge = [round(float(v), 6) for v in annotator.lexical(greedy, samples)] if samples else []
    return {"greedy_correctness": greedy_ok, "sampling_correctness": sample_ok, "consistency_judgement": consistent,
            "consistency_rougeL": rouge}


def make_record(question: dict, prompt: str, gen: Generation, annotator: Annotator, meta: dict) -> dict:
    """One record in the HonestyBench schema (see :mod:`elical.records`) from a question and its generation."""
    aliases, samples = question["answer"], gen.sampling_response
    judged = judge_answers(question, gen.greedy_response, samples, annotator)
    g = {f.name: getattr(gen, f.name) for f in fields(gen) if f.name != "hidden_states"}
    record = {
        "id": question["id"], "dataset": question["dataset"], "split": question.get("split", "test"),
        "question": question["question"], "answer": list(aliases), "prompt": prompt,
        "greedy_response": g["greedy_response"], "greedy_tokens": g["greedy_tokens"],
        "greedy_logprobs": [round(x, 6) for x in g["greedy_logprobs"]],
        # None when a backend returns an answer without log-probs (0.0 would read as probability 1)
        "greedy_cumulative_logprobs": (round(float(np.sum(g["greedy_logprobs"])), 6)
                                       if g["greedy_logprobs"] or not g["greedy_response"] else None),
        "greedy_correctness": judged["greedy_correctness"],
        "sampling_response": samples,
        "sampling_cumulative_logprobs": [round(x, 6) for x in g["sampling_cumulative_logprobs"]],
        "sampling_num_tokens": g["sampling_num_tokens"],
        "sampling_correctness": judged["sampling_correctness"],
        "consistency_judgement": judged["consistency_judgement"],
        "consistency_rougeL": judged["consistency_rougeL"],
        "meta": meta,
    }
    # MMLU questions carry their choices (elical.data.mmlu); the released schema has no place for them otherwise.
    record.update((k, question[k]) for k in ("choices", "answer_index", "subject") if k in question)
    return record


def _generation_fields(g: Generation) -> dict:
    return {k: getattr(g, k) for k in ("greedy_response", "greedy_tokens", "greedy_logprobs", "sampling_response",
                                       "sampling_cumulative_logprobs", "sampling_num_tokens")}


def _read_generations(path: Path, decoding: dict, seed: int) -> dict:
    """{id: (prompt, Generation)} of the answers kept in ``path`` by the same decoder and seed (a torn last line,
    from a kill mid-write, is skipped)."""
    import json

    out = {}
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and row.get("decoding") == decoding and row.get("seed") == seed:
            values = {k: row[k] for k in _generation_fields(Generation("", [], [])) if k in row}
            out[row["id"]] = (row["prompt"], Generation(**values))
    return out


def annotate(questions: Sequence[dict], generator, annotator: Annotator, path: str | Path, *, seed: int,
             meta: dict, progress: bool = True, hidden_layers: Sequence[int] = (),
             hidden_states: dict | None = None) -> list[dict]:
    """Annotate ``questions`` into the record file ``path`` and return all records in question order.

    Each batch's answers are first kept in ``<path stem>.generations.jsonl`` beside ``path``, then each record is
    written as soon as it is judged; a resumed call judges the kept answers (same prompt, decoder and seed)
    without generating them again, and the side file is removed once every question has its record.
    Questions whose id is already in ``path`` are skipped (resume); the others are generated
    ``generator.decoding.batch_size`` at a time. ``meta["decoding"]`` is set from the generator
    (:func:`elical.generation.base.decoding_meta`), so every record says which decoder made it.
    ``hidden_layers`` / ``hidden_states``: when the generator has ``supports_hidden_states``, the last prompt
    token's states of the given layers are taken from its prefill and put in the dict ``hidden_states`` as
    ``{id: {layer: float32 ndarray (hidden_size,)}}`` for the questions generated here (not the resumed ones).
    Raises ValueError on duplicate ids.
    """
    from tqdm.auto import tqdm

    ids = [q["id"] for q in questions]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate question ids in the input")
    meta = {**meta, "decoding": decoding_meta(generator)}
    done = {r["id"]: r for r in read_records(path)}
    missing = [q for q in questions if q["id"] not in done]
    bs = generator.decoding.batch_size
    kw = {"hidden_layers": tuple(hidden_layers)} if hidden_layers and getattr(
        generator, "supports_hidden_states", False) else {}
    tok = generator.tokenizer
    # Answers are kept in a side file before they are judged: a judge that fails (a remote judge timing out) loses
    # no generated answer, and a resumed run judges them without generating them again.
    side = Path(path).with_name(Path(path).stem + ".generations.jsonl")
    kept = _read_generations(side, meta["decoding"], seed)
    with open_append(path) as out, open_append(side) as side_out, \
            tqdm(total=len(questions), initial=len(questions) - len(missing), desc="generate+judge", unit="q",
                 disable=not progress) as bar:
        for start in range(0, len(missing), bs):
            batch = missing[start:start + bs]
            prompts = [build_prompt(tok, q["question"]) for q in batch]
            todo = [i for i, (q, p) in enumerate(zip(batch, prompts)) if kept.get(q["id"], (None,))[0] != p]
            if todo:
                fresh = generator.generate([prompts[i] for i in todo], [batch[i]["id"] for i in todo], seed=seed,
                                           **kw)
                side_out.write([{"id": batch[i]["id"], "prompt": prompts[i], "seed": seed,
                                 "decoding": meta["decoding"], **_generation_fields(g)} for i, g in zip(todo, fresh)])
                kept.update((batch[i]["id"], (prompts[i], g)) for i, g in zip(todo, fresh))
                if hidden_states is not None and kw:
                    hidden_states.update((batch[i]["id"], g.hidden_states) for i, g in zip(todo, fresh))
            for q, p in zip(batch, prompts):
                record = make_record(q, p, kept[q["id"]][1], annotator, meta)
                out.write([record])  # each record as soon as it is judged
                done[record["id"]] = record
                bar.update(1)
    if all(i in done for i in ids):
        side.unlink(missing_ok=True)
    return [done[i] for i in ids]
