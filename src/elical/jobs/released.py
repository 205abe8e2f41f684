"""The ``--honestybench DIR`` path of ``elical run`` and ``elical study``: the released annotations instead of
generation and judging.

What the files hold is taken as it is: the greedy answer and its token log-probs, the sampled answers, their
correctness and their agreement with the greedy answer (judged by the authors with Qwen2.5-32B-Instruct). The run
then needs the QA model for one thing only: the hidden state of the last prompt token, one prefill pass per
question and no decoding (:func:`elical.generation.features.extract_hidden_states`). The prompt is the one the
answers were generated with, the paper's ``long_qa`` instruction in the model's chat template
(:data:`elical.heads.reference.REFERENCE_INSTRUCTION`).

``--rejudge`` judges the released answers again with the run's own judges (the released verdicts are kept in each
record's ``released`` field and the agreement is printed), so the two can be compared. ROUGE-L between each sample
and the greedy answer (``consistency_rougeL``, for Consis-Lex) is computed here either way: it is a string measure,
not a judge.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from elical.fileio import atomic_path, write_text_atomic
from elical.records import read_records

__all__ = ["RELEASED_ESTIMATORS", "check_released", "instruction_of", "annotate_released"]

#: Training-free estimators the released fields support without a judge or the model (semantic entropy needs an
#: equivalence judge and the samples' log-probs, which the files do not hold; Verbal and P(True) query the model).
RELEASED_ESTIMATORS = ("Prob", "N-Prob", "Consis-Lex", "Consis-Sem")


def instruction_of(cfg) -> str:
    """The prompt instruction of a run: the paper's for released files (their answers were made with it), else
    elical's :data:`elical.generation.base.QA_INSTRUCTION`."""
    from elical.generation.base import QA_INSTRUCTION
    from elical.heads.reference import REFERENCE_INSTRUCTION

    return REFERENCE_INSTRUCTION if getattr(cfg, "honestybench", None) else QA_INSTRUCTION


def check_released(cfg) -> tuple[list[dict], dict]:
    """Every line of the released files checked and the run's records chosen, before any model loads
    (:func:`elical.data.released.select_released`). ``cfg.datasets`` filters them, except the presets' default
    ``("facts",)`` (elical's embedded set, never a released file) or ``()``: every dataset found. Raises InputError
    naming file, line and field."""
    from elical.data.released import select_released

    datasets = () if tuple(cfg.datasets) in ((), ("facts",)) else cfg.datasets
    return select_released(cfg.honestybench, n_train=cfg.n_train, n_eval=cfg.n_eval, seed=cfg.seed,
                           datasets=datasets, extra_pool=cfg.pool_datasets or ())


def _rejudge(records: list[dict], annotator, progress: bool) -> dict:
    """Judge each record's released answers again; the released verdicts go to ``record["released"]``. Returns
    the agreement counts {field: [agreeing, compared]}. Records without a gold alias keep the released
    correctness (nothing to judge against)."""
    from tqdm.auto import tqdm

    from elical.jobs.annotate import judge_answers

    agree = {"greedy_correctness": [0, 0], "sampling_correctness": [0, 0], "consistency_judgement": [0, 0]}
    for rec in tqdm(records, desc="rejudge", unit="q", disable=not progress):
        released = {k: rec[k] for k in agree}
        judged = judge_answers(rec, rec["greedy_response"], rec["sampling_response"], annotator)
        if not rec["answer"]:
            judged = {**judged, "greedy_correctness": released["greedy_correctness"],
                      "sampling_correctness": released["sampling_correctness"]}
        for k in agree:
            old, new = released[k], judged[k]
            pairs = list(zip(old, new)) if isinstance(old, list) else [(old, new)]
            agree[k][0] += sum(int(a == b) for a, b in pairs)
            agree[k][1] += len(pairs)
        rec.update(judged, released=released)
        rec["meta"] = {**rec["meta"], "judged_by": "elical"}
    return agree


def annotate_released(records: list[dict], cfg, tok, path: str | Path, annotator=None, progress: bool = True,
                      model_meta: dict | None = None) -> list[dict]:
    """Complete the chosen released records and write them to the run's record file ``path``.

    Each record gets its ``prompt`` (:func:`instruction_of` in ``tok``'s chat template), ``consistency_rougeL``
    (ROUGE-L of each sample with the greedy answer) and ``meta`` (source file and line, the model whose hidden
    states are used, ``judged_by``); with ``annotator`` (``--rejudge``) its verdicts replace the released ones
    (:func:`_rejudge`). On a resumed run whose record file holds the same ids, that file is returned unchanged.
    The file is written whole, atomically (:func:`elical.fileio.atomic_path`). Returns the records in input order."""
    from elical.generation.base import build_prompt
    from elical.judges import LexicalConsistency

    path = Path(path)
    ids = [r["id"] for r in records]
    saved = read_records(path)
    if [r["id"] for r in saved] == ids:
        return saved
    instruction = instruction_of(cfg)
    lexical = LexicalConsistency()
    for rec in records:
        rec["prompt"] = build_prompt(tok, rec["question"], instruction)
        samples = rec["sampling_response"]
        rec["consistency_rougeL"] = [round(float(v), 6) for v in lexical(rec["greedy_response"], samples)] \
            if samples else []
        rec["meta"] = {**rec["meta"], **(model_meta or {})}
    if annotator is not None:
        agree = _rejudge(records, annotator, progress)
        shown = ", ".join(f"{k} {a}/{n}" for k, (a, n) in agree.items())
        print(f"elical: --rejudge: elical's judges agree with the released verdicts on {shown}", file=sys.stderr,
              flush=True)
        write_text_atomic(path.parent / "rejudge.json", json.dumps(agree, indent=2) + "\n")
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return records
