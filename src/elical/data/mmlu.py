"""MMLU as HonestyBench's unseen task, asked free-form with the lettered choices in the question.

EliCal (Ni et al., arXiv 2510.17509, Sec. 5) tests whether a confidence head trained on free-form QA carries over
to an unseen task: MMLU (Hendrycks et al., 2021; 57 subjects, 14,042 test questions). As in the authors'
preprocessing, each question is shown with its choices, one per line, and answered free-form; the model may answer
with the letter, the choice text or both.

Layout read here: ``<mmlu_dir>/<split>/<subject>_<split>.csv``, one question per row, columns
``question,choice0,choice1,choice2,choice3,answer`` (``answer``: index 0-3, or a letter A-D as in the original
release, whose files also have no header row; both are accepted).

A question becomes a dict for :func:`elical.jobs.annotate`:

* ``id`` ``mmlu/<subject>/<row>`` (row: 1-based data row of the CSV file, header not counted), ``dataset`` ``mmlu``,
  ``split`` (the folder: ``test``), ``subject``;
* ``question``: the stem followed by ``"\\nA. <choice>"`` ... ``"\\nD. <choice>"`` — the text the QA prompt
  (:func:`elical.generation.base.build_prompt`) puts after ``Question:``, so annotate needs nothing MMLU-specific;
* ``answer``: ``[letter, choice text]``, an :class:`MMLUAnswer` (a ``list``) that also carries ``choices`` and
  ``answer_index``, so that :class:`elical.judges.choices.MMLUCorrectness`, called by
  :func:`elical.jobs.annotate.make_record` as
  ``correctness(responses, answer)``, judges with :func:`elical.judges.choices.mmlu_correct` (the right choice named by
  letter or text and no other choice; a lone article "A" names nothing);
* ``choices`` (4 strings) and ``answer_index`` (0-3), for records and re-judging; :func:`record_choices` recovers
  them from a record's question text when the record lacks them.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence

from elical.records import InputError, decoded_lines

__all__ = ["LETTERS", "MMLUAnswer", "format_question", "load_mmlu", "record_choices"]

LETTERS = "ABCD"
HEADER = ["question", "choice0", "choice1", "choice2", "choice3", "answer"]


class MMLUAnswer(list):
    """The gold answer ``[letter, choice text]`` of an MMLU question, carrying ``choices`` (list of 4 str) and
    ``answer_index`` (int) for :class:`elical.judges.choices.MMLUCorrectness`. Serializes to JSON as the plain list."""

    def __init__(self, choices: Sequence[str], answer_index: int):
        super().__init__([LETTERS[answer_index], choices[answer_index]])
        self.choices = list(choices)
        self.answer_index = int(answer_index)


def format_question(stem: str, choices: Sequence[str]) -> str:
    """The question text shown to the model: the stem, then one ``"<letter>. <choice>"`` line per choice."""
    return stem.strip() + "".join(f"\n{LETTERS[j]}. {c}" for j, c in enumerate(choices))


def _answer_index(text: str, n: int) -> int | None:
    t = text.strip()
    if t.isdigit() and int(t) < n:
        return int(t)
    if len(t) == 1 and t.upper() in LETTERS[:n]:
        return LETTERS.index(t.upper())
    return None


def _read_subject(path: Path, subject: str, split: str) -> list[dict]:
    out = []
    with open(path, newline="", encoding="utf-8-sig") as fh:  # -sig: a byte-order mark is not part of the header
        reader = csv.reader(fh)
        row_no = prev_end = 0
        try:
            for row in reader:
                line, prev_end = prev_end + 1, reader.line_num  # a quoted field may span lines: report the first
                if not row or (row_no == 0 and [c.strip().lower() for c in row] == HEADER):
                    continue
                row_no += 1
                if len(row) != len(HEADER):
                    raise InputError(path, line, None, f"expected {len(HEADER)} columns ({','.join(HEADER)}), "
                                     f"got {len(row)}")
                stem, choices, answer = row[0], [c.strip() for c in row[1:5]], row[5]
                if not stem.strip():
                    raise InputError(path, line, "question", "empty question")
                for j, c in enumerate(choices):
                    if not c:
                        raise InputError(path, line, f"choice{j}", "empty choice")
                index = _answer_index(answer, len(choices))
                if index is None:
                    raise InputError(path, line, "answer", f"expected 0-3 or A-D, got {answer!r}")
                out.append({"id": f"mmlu/{subject}/{row_no}", "dataset": "mmlu", "split": split,
                            "question": format_question(stem, choices), "answer": MMLUAnswer(choices, index),
                            "choices": choices, "answer_index": index, "subject": subject})
        except csv.Error as exc:
            raise InputError(path, reader.line_num, None, f"malformed CSV ({exc})") from None
        except UnicodeDecodeError:
            for _ in decoded_lines(path):  # raises the InputError that names the line
                pass
            raise
    return out


def load_mmlu(mmlu_dir: str | Path, split: str = "test", subjects: Sequence[str] | None = None) -> list[dict]:
    """All MMLU questions of ``<mmlu_dir>/<split>/*.csv`` (subjects in file-name order, rows in file order).

    Returns question dicts as described in the module docstring (14,042 for the MMLU test split). ``subjects``
    keeps only those subjects. Raises :class:`InputError` naming file, line and field for a missing folder, a
    row with the wrong number of columns, an empty question or choice, or an answer that is not 0-3 / A-D.
    """
    folder = Path(mmlu_dir) / split
    files = sorted(folder.glob("*.csv")) if folder.is_dir() else []
    if not files:
        raise InputError(folder, None, "--mmlu-dir", f"no MMLU CSV files here (expected <mmlu_dir>/{split}/"
                         f"<subject>_{split}.csv)")
    wanted = set(subjects) if subjects is not None else None
    out = []
    for path in files:
        subject = path.stem[: -len(f"_{split}")] if path.stem.endswith(f"_{split}") else path.stem
        if wanted is None or subject in wanted:
            out.extend(_read_subject(path, subject, split))
    return out


def record_choices(record: dict) -> tuple[list[str], int]:
    """``(choices, answer_index)`` of an MMLU record: its ``choices``/``answer_index`` fields when present, else
    parsed back from its question text (lines ``"A. ..."`` at its end, as written by :func:`format_question`
    or the authors' ``"A.<choice>"`` lines) and the letter in ``answer[0]``. Raises ValueError when neither
    works."""
    if "choices" in record and "answer_index" in record:
        return list(record["choices"]), int(record["answer_index"])
    text, end, choices = record.get("question", "").rstrip("\n"), None, []
    for letter in reversed(LETTERS):
        pos = text.rfind(f"\n{letter}.", 0, end)
        if pos < 0:
            raise ValueError(f"record {record.get('id', '?')}: no choice line '{letter}.' in its question")
        choices.append(text[pos + 3:end].strip())
        end = pos
    answer = record.get("answer") or [""]
    index = _answer_index(str(answer[0]), len(LETTERS))
    if index is None:
        raise ValueError(f"record {record.get('id', '?')}: answer[0] is not a letter A-D: {answer[0]!r}")
    return choices[::-1], index
