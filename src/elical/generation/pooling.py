"""Where a head reads the model: which token positions of the prompt are pooled into one feature vector.

``last``: the last real prompt token (EliCal, Ni et al., arXiv 2510.17509, Sec. 3; the default). ``mean``: the mean
over the tokens of the question itself inside the chat prompt (the instruction and the chat template's tokens left
out), as in probing studies that pool a span instead of one position. The question's tokens are found from the
tokenizer's character offsets (``return_offsets_mapping``, fast tokenizers), so the span is exact whatever the
chat template puts around it.
"""

from __future__ import annotations

from typing import Sequence

from elical.generation.base import QA_INSTRUCTION

__all__ = ["POOLINGS", "question_char_span", "question_token_mask"]

#: Pooling names, first the paper's.
POOLINGS = ("last", "mean")


def question_char_span(prompt: str, question: str, instruction: str = QA_INSTRUCTION) -> tuple[int, int]:
    """Character span ``(start, end)`` of ``question`` inside ``prompt`` (as built by
    :func:`elical.generation.base.build_prompt` with ``instruction``): found after the instruction's text before
    ``{question}`` when that text is in the prompt, else the question's last occurrence. Raises ValueError when the
    question (stripped of outer spaces) is not in the prompt."""
    q = question.strip()
    if not q:
        raise ValueError("empty question")
    before = instruction.split("{question}", 1)[0]
    at = prompt.find(before + q) if before else -1
    start = at + len(before) if at >= 0 else prompt.rfind(q)
    if start < 0:
        raise ValueError(f"question {q[:60]!r} not found in its prompt")
    return start, start + len(q)


def question_token_mask(offsets, attention_mask, spans: Sequence[tuple[int, int]]):
    """Boolean tensor of shape (batch, seq_len): True at the real tokens whose characters overlap the question's span.

    offsets : long tensor (batch, seq_len, 2), the tokenizer's ``offset_mapping`` (character start, end per token;
    (0, 0) for padding and added special tokens). attention_mask : (batch, seq_len), 1 for real tokens.
    spans : one ``(start, end)`` character span per row (:func:`question_char_span`). A token that straddles the
    span's edge (e.g. a leading space merged into the question's first word) counts. Raises ValueError for a row
    where no token overlaps its span.
    """
    import torch

    start = torch.tensor([s for s, _ in spans], dtype=torch.long).unsqueeze(1)
    end = torch.tensor([e for _, e in spans], dtype=torch.long).unsqueeze(1)
    tok_start, tok_end = offsets[..., 0].cpu(), offsets[..., 1].cpu()
    mask = (tok_start < end) & (tok_end > start) & (tok_end > tok_start) & attention_mask.cpu().bool()
    empty = (mask.sum(dim=1) == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"no token of the question in prompt row {empty[0]}")
    return mask
