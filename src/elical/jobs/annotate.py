"""Annotation: generate answers for each question and judge them, writing one HonestyBench record per question.

Records are appended batch by batch to a JSONL file (:func:`elical.records.open_append`), so a killed run
resumes where it stopped. Batch boundaries are fixed by the full question list and each batch's sampling seed is
derived from the run seed and its question ids, so a resumed run writes the same records as an uninterrupted one.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Sequence

import numpy as np

from elical.generation.base import Generation, build_prompt
from elical.records import open_append, read_records

__all__ = ["Annotator", "make_record"]


class Annotator:
    """Judges bundled for annotation.

    ``correctness``: callable(responses, aliases) -> 0/1 array; ``lexical``: callable(greedy, samples) -> ROUGE-L
    array; ``semantic``: object with ``judge(greedy, samples) -> 0/1 array``.
    """

    def __init__(self, correctness, lexical, semantic, names: dict | None = None):
        self.correctness, self.lexical, self.semantic = correctness, lexical, semantic
        self.names = names or {}

    @classmethod
    def default(cls, semantic_model: str | None = None, *, correctness: str = "contains",
                equivalence: str = "embedding", model=None, tokenizer=None) -> "Annotator":
        """Judges by name (see :func:`elical.judges.core.make_equivalence_judge` / ``make_correctness_judge``).

        ``semantic_model``: local model directory for the "embedding" (default: the packaged all-MiniLM-L6-v2) or
        "nli" (required) judges. The "llm" judges use ``model``/``tokenizer`` (the run's own model, greedy)."""
        from elical.judges.core import LexicalConsistency, make_correctness_judge, make_equivalence_judge

        def kwargs(name: str) -> dict:
            if name == "llm":
                if model is None:
                    raise ValueError("the llm judge needs the model and tokenizer")
                from elical.judges.llm import TransformersCompletion

                return {"complete": TransformersCompletion(model, tokenizer)}
            if name in ("embedding", "nli") and semantic_model:
                return {"model_path": semantic_model}
            return {}

        return cls(make_correctness_judge(correctness, **kwargs(correctness)), LexicalConsistency(),
                   make_equivalence_judge(equivalence, **kwargs(equivalence)),
                   names={"correctness": correctness, "equivalence": equivalence})

    def describe(self) -> dict:
        sem = self.semantic
        return {"correctness": self.names.get("correctness", type(self.correctness).__name__),
                "equivalence": self.names.get("equivalence", type(sem).__name__),
                "lexical_consistency": "ROUGE-L F1",
                "semantic_consistency": type(sem).__name__ + f"(threshold={getattr(sem, 'threshold', None)})"}


def make_record(question: dict, prompt: str, gen: Generation, annotator: Annotator, meta: dict) -> dict:
    """One record in the HonestyBench schema (see :mod:`elical.records`) from a question and its generation."""
    aliases = question["answer"]
    samples = gen.sampling_response
    greedy_ok = int(annotator.correctness([gen.greedy_response], aliases)[0])
    sample_ok = [int(v) for v in annotator.correctness(samples, aliases)] if samples else []
    consistent = [int(v) for v in annotator.semantic.judge(gen.greedy_response, samples)] if samples else []
    rouge = [round(float(v), 6) for v in annotator.lexical(gen.greedy_response, samples)] if samples else []
    g = asdict(gen)
    record = {
        "id": question["id"], "dataset": question["dataset"], "split": question.get("split", "test"),
        "question": question["question"], "answer": list(aliases), "prompt": prompt,
        "greedy_response": g["greedy_response"], "greedy_tokens": g["greedy_tokens"],
        "greedy_logprobs": [round(x, 6) for x in g["greedy_logprobs"]],
        # None when a backend returns an answer without log-probs (0.0 would read as probability 1)
        "greedy_cumulative_logprobs": (round(float(np.sum(g["greedy_logprobs"])), 6)
                                       if g["greedy_logprobs"] or not g["greedy_response"] else None),
        "greedy_correctness": greedy_ok,
        "sampling_response": samples,
        "sampling_cumulative_logprobs": [round(x, 6) for x in g["sampling_cumulative_logprobs"]],
        "sampling_num_tokens": g["sampling_num_tokens"],
        "sampling_correctness": sample_ok,
        "consistency_judgement": consistent,
        "consistency_rougeL": rouge,
        "meta": meta,
    }
    # MMLU questions carry their choices (elical.data.mmlu); the released schema has no place for them otherwise.
    record.update((k, question[k]) for k in ("choices", "answer_index", "subject") if k in question)
    return record


def annotate(questions: Sequence[dict], generator, annotator: Annotator, path: str | Path, *, seed: int,
             meta: dict, progress: bool = True) -> list[dict]:
    """Annotate ``questions`` into the record file ``path`` and return all records in question order.

    Questions whose id is already in ``path`` are skipped (resume). Raises ValueError on duplicate ids.
    """
    from tqdm.auto import tqdm

    ids = [q["id"] for q in questions]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate question ids in the input")
    done = {r["id"]: r for r in read_records(path)}
    bs = generator.decoding.batch_size
    batches = [list(questions[i:i + bs]) for i in range(0, len(questions), bs)]
    tok = generator.tokenizer
    with open_append(path) as out, tqdm(total=len(questions), initial=sum(i in done for i in ids),
                                        desc="generate+judge", unit="q", disable=not progress) as bar:
        for batch in batches:
            missing = [q for q in batch if q["id"] not in done]
            if not missing:
                continue
            prompts = [build_prompt(tok, q["question"]) for q in batch]
            # The whole fixed batch is generated again so that its sampling seed, and so its answers, match an
            # uninterrupted run; only the missing records are written.
            gens = generator.generate(prompts, [q["id"] for q in batch], seed=seed)
            new = [make_record(q, p, g, annotator, meta) for q, p, g in zip(batch, prompts, gens)
                   if q["id"] not in done]
            out.write(new)
            done.update((r["id"], r) for r in new)
            bar.update(len(new))
    return [done[i] for i in ids]
