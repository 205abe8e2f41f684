"""Checks of the user's input that need more than one file: run sizes, the output path, and prompt lengths
against the model's context. Each raises :class:`elical.records.InputError` (exit code 2) naming the file, line
and field, and runs before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from elical.records import InputError

__all__ = ["MIN_N_EVAL", "check_sizes", "check_output_dir", "context_limit", "check_prompt_lengths"]

MIN_N_EVAL = 10
"""Fewest evaluation questions per dataset: the Alignment threshold is chosen on a dev part and scored on the
rest, and both need a few questions (``elical.evaluation.metrics.evaluate_confidence``)."""


def check_sizes(n_train: int, n_eval: int, k_values: Sequence[int] = ()) -> None:
    """InputError for sizes no run can use: ``n_eval`` below :data:`MIN_N_EVAL`, or a non-positive size."""
    if n_train < 1:
        raise InputError("--n-train", None, "--n-train", f"expected a positive number of questions, got {n_train}")
    if n_eval < MIN_N_EVAL:
        raise InputError("--n-eval", None, "--n-eval", f"{n_eval} evaluation questions per dataset; at least "
                         f"{MIN_N_EVAL} are needed (the Alignment threshold is chosen on a dev part of them and "
                         "scored on the rest)")
    if any(k < 1 for k in k_values):
        raise InputError("--k", None, "--k", f"expected positive label counts, got {list(k_values)}")


def check_output_dir(path: str | Path, flag: str = "--output") -> Path:
    """The path as a Path; InputError when it exists and is not a directory (a file would be overwritten), or when
    a directory above it is a file (nothing can be made below a file)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(path, None, flag, "exists and is a file, not a directory; choose another "
                         f"{flag} (nothing was overwritten)")
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(path, None, flag, f"{parent} is a file, so no directory can be made below it; "
                                 f"choose another {flag}")
            break
    return path


def context_limit(model=None, tokenizer=None) -> int | None:
    """The model's context in tokens: the smaller of ``config.max_position_embeddings`` and the tokenizer's
    ``model_max_length`` where either is set to a real value (tokenizers use 1e30 for "unset"); None if neither."""
    limits = [getattr(getattr(model, "config", None), "max_position_embeddings", None),
              getattr(tokenizer, "model_max_length", None)]
    limits = [int(v) for v in limits if isinstance(v, (int, float)) and 0 < v < 10**7]
    return min(limits) if limits else None


def _where(question: dict) -> tuple[str, int | None]:
    src = question.get("source") or {}
    return (src["file"], src.get("line")) if "file" in src else (f"question {question.get('id', '?')}", None)


def check_prompt_lengths(questions: Sequence[dict], tokenizer, model=None, max_new_tokens: int = 0) -> None:
    """InputError naming file and line of the first question whose prompt plus ``max_new_tokens`` does not fit
    in the model's context (:func:`context_limit`); a longer prompt would be cut by the model or make generation
    allocate memory for an impossible sequence. Only prompts whose UTF-8 size could exceed the limit are
    tokenized (a token is at least one byte), so the check costs little on ordinary questions."""
    from elical.generation.base import build_prompt

    limit = context_limit(model, tokenizer)
    if limit is None:
        return
    for q in questions:
        prompt = build_prompt(tokenizer, q["question"])
        if len(prompt.encode("utf-8")) + max_new_tokens <= limit:
            continue
        n = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        if n + max_new_tokens > limit:
            path, line = _where(q)
            raise InputError(path, line, "question", f"the prompt is {n:,} tokens; with {max_new_tokens} new "
                             f"tokens it does not fit the model's context of {limit:,} tokens (shorten or "
                             "remove this question)")
