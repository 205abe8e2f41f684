"""Answer generation: the greedy answer with per-token log-probs and N sampled answers per question.

One interface: ``generate(prompts, keys, seed=0, n_samples=None) -> list[Generation]`` with the attributes
``tokenizer`` and ``decoding`` (:mod:`elical.generation.backends`). The transformers decoder,
:class:`elical.generation.prefix_sharing.TransformersGenerator`, builds on the types here. Decoding follows the EliCal
paper (Ni et al., 2025, Sec. 4.1): greedy decoding for the evaluated answer, and N samples at temperature 1.0,
top-p 0.95, top-k 50 for self-consistency. Generation stops at the end of the answer (EOS, or the first
newline: answers are asked for as one short line).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

__all__ = ["QA_INSTRUCTION", "DecodingConfig", "Generation", "build_prompt", "seed_for", "decoding_meta"]

QA_INSTRUCTION = "Answer the following question with a short answer only, without explanation.\nQuestion: {question}"


@dataclass(frozen=True)
class DecodingConfig:
    """Decoding parameters. ``max_new_tokens`` is in tokens; sampling values are the paper's. ``batch_size``
    (prompts per ``generate`` call) changes the speed only, never the answers."""

    n_samples: int = 5
    temperature: float = 1.0
    top_p: float = 0.95
    top_k: int = 50
    max_new_tokens: int = 24
    batch_size: int = 16


@dataclass
class Generation:
    """Greedy and sampled answers of one question.

    ``greedy_logprobs``: natural-log probability of each greedy token under the model, shape (T,).
    ``sampling_cumulative_logprobs`` / ``sampling_num_tokens``: per sample, shape (N,).
    ``hidden_states``: when asked for and the backend has them, ``{layer: float32 ndarray (hidden_size,)}`` of the
    last real prompt token (not part of the record).
    """

    greedy_response: str
    greedy_tokens: list[str]
    greedy_logprobs: list[float]
    sampling_response: list[str] = field(default_factory=list)
    sampling_cumulative_logprobs: list[float] = field(default_factory=list)
    sampling_num_tokens: list[int] = field(default_factory=list)
    hidden_states: dict | None = field(default=None, repr=False, compare=False)


def build_prompt(tokenizer, question: str, instruction: str = QA_INSTRUCTION) -> str:
    """The exact text fed to the model: the chat template around the QA instruction when the tokenizer has one."""
    user = instruction.format(question=question)
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template([{"role": "user", "content": user}], tokenize=False,
                                             add_generation_prompt=True)
    return user + "\nAnswer:"


def seed_for(seed: int, key: str) -> int:
    """A 63-bit seed derived from the run seed and a string key (a question id), stable across machines."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def decoding_meta(generator) -> dict:
    """What made a record's answers, for its ``meta["decoding"]`` and for matching built records: the generator
    class and its decoding settings (n_samples, temperature, top_p, top_k, max_new_tokens). The batch size is
    left out: answers do not depend on it."""
    d = generator.decoding
    return {"generator": type(generator).__name__, "n_samples": d.n_samples, "temperature": d.temperature,
            "top_p": d.top_p, "top_k": d.top_k, "max_new_tokens": d.max_new_tokens}
