"""Answer generation: the greedy answer with per-token log-probs and N sampled answers per question.

One interface (:class:`Generator`); the transformers backend runs on CPU or GPU. Decoding follows the EliCal
paper (Ni et al., 2025, Sec. 4.1): greedy decoding for the evaluated answer, and N samples at temperature 1.0,
top-p 0.95, top-k 50 for self-consistency. Generation stops at the end of the answer (EOS, or the first
newline: answers are asked for as one short line).
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

__all__ = ["QA_INSTRUCTION", "DecodingConfig", "Generation", "build_prompt", "TransformersGenerator"]

QA_INSTRUCTION = "Answer the following question with a short answer only, without explanation.\nQuestion: {question}"


@dataclass(frozen=True)
class DecodingConfig:
    """Decoding parameters. ``max_new_tokens`` is in tokens; sampling values are the paper's."""

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
    """

    greedy_response: str
    greedy_tokens: list[str]
    greedy_logprobs: list[float]
    sampling_response: list[str] = field(default_factory=list)
    sampling_cumulative_logprobs: list[float] = field(default_factory=list)
    sampling_num_tokens: list[int] = field(default_factory=list)


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


class TransformersGenerator:
    """Batched generation with a transformers causal LM (CPU or GPU).

    Parameters: ``model``/``tokenizer`` from :func:`elical.generation.models.load_model`; ``decoding`` a
    :class:`DecodingConfig`. Prompts are left-padded so all rows of a batch end at the same position.
    """

    def __init__(self, model, tokenizer, decoding: DecodingConfig = DecodingConfig()):
        self.model, self.tokenizer, self.decoding = model, tokenizer, decoding
        self._stop_ids = self._stop_token_ids()
        self._cache_kw = "cache" in inspect.signature(model.forward).parameters

    def _stop_token_ids(self) -> list[int]:
        tok = self.tokenizer
        ids = set()
        for t in (tok.eos_token_id, getattr(self.model.generation_config, "eos_token_id", None)):
            if isinstance(t, int):
                ids.add(t)
            elif isinstance(t, (list, tuple)):
                ids.update(t)
        for special in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>"):
            tid = tok.convert_tokens_to_ids(special)
            if isinstance(tid, int) and tid != tok.unk_token_id:
                ids.add(tid)
        newline = tok.encode("\n", add_special_tokens=False)
        if len(newline) == 1:
            ids.add(newline[0])
        return sorted(ids)

    def _encode(self, prompts: Sequence[str]):
        tok = self.tokenizer
        side = tok.padding_side
        tok.padding_side = "left"
        try:
            enc = tok(list(prompts), return_tensors="pt", padding=True, add_special_tokens=False)
        finally:
            tok.padding_side = side
        return {k: v.to(self.model.device) for k, v in enc.items()}

    def generate(self, prompts: Sequence[str], keys: Sequence[str], seed: int = 0,
                 n_samples: int | None = None) -> list[Generation]:
        """Greedy + ``n_samples`` sampled answers for each prompt.

        The prompts are encoded once (one prefill); the key-value cache is then repeated for 1 greedy + N sampled
        rows per prompt, which decode together and leave the batch as each one stops. ``keys``: one stable
        string per prompt (the question id); with ``seed`` it seeds the batch's own ``torch.Generator``, so the
        same seed and batch give the same answers (no global RNG is touched). Returns one :class:`Generation`
        per prompt, in order. Log-probs are those of the raw model distribution (before temperature/top-k/top-p).
        """
        import torch

        d = self.decoding
        n = d.n_samples if n_samples is None else n_samples
        per = n + 1
        enc = self._encode(prompts)
        mask = enc["attention_mask"]
        dev = self.model.device
        gen = torch.Generator(device=dev).manual_seed(seed_for(seed, "|".join(keys)))
        stop = torch.tensor(self._stop_ids, device=dev)
        with torch.inference_mode():
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            out = self._forward(enc["input_ids"], mask, pos, None)
            cache = out.cache if self._cache_kw else out.past_key_values
            cache.batch_repeat_interleave(per)
            logits = out.logits[:, -1, :].float().repeat_interleave(per, dim=0)
            mask = mask.repeat_interleave(per, dim=0)
            last_pos = pos[:, -1].repeat_interleave(per, dim=0)
            rows = mask.shape[0]
            greedy_row = torch.arange(rows, device=dev) % per == 0
            alive = torch.arange(rows, device=dev)  # original row of each row still in the batch
            tokens = [[] for _ in range(rows)]
            logps = [[] for _ in range(rows)]
            for step in range(d.max_new_tokens):
                logp = torch.log_softmax(logits, dim=-1)
                choice = logits.argmax(dim=-1)
                is_sampled = ~greedy_row[alive]
                if is_sampled.any():
                    choice[is_sampled] = self._sample(logits[is_sampled], gen)
                chosen_lp = logp.gather(-1, choice[:, None])[:, 0]
                finished = torch.isin(choice, stop)
                for r, t, lp, f in zip(alive.tolist(), choice.tolist(), chosen_lp.tolist(), finished.tolist()):
                    if not f:
                        tokens[r].append(t)
                        logps[r].append(lp)
                keep = ~finished
                if not keep.any() or step == d.max_new_tokens - 1:
                    break
                if not keep.all():  # rows that stopped leave the batch and its cache
                    idx = keep.nonzero()[:, 0]
                    cache.batch_select_indices(idx)
                    alive, choice, mask, last_pos = alive[idx], choice[idx], mask[idx], last_pos[idx]
                last_pos = last_pos + 1
                mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
                out = self._forward(choice[:, None], mask, last_pos[:, None], cache)
                cache = out.cache if self._cache_kw else out.past_key_values
                logits = out.logits[:, -1, :].float()
        return self._collect(tokens, logps, len(prompts), per)

    def _collect(self, tokens, logps, n_prompts: int, per: int) -> list[Generation]:
        """One :class:`Generation` per prompt from the decoded rows (row ``i * per`` greedy, the next ``per - 1``
        sampled)."""
        results = []
        for i in range(n_prompts):
            answers = [self._finish(tokens[i * per + j], logps[i * per + j]) for j in range(per)]
            (g_text, g_tokens, g_lps), samples = answers[0], answers[1:]
            results.append(Generation(
                greedy_response=g_text, greedy_tokens=g_tokens, greedy_logprobs=g_lps,
                sampling_response=[s[0] for s in samples],
                sampling_cumulative_logprobs=[float(np.sum(s[2])) for s in samples],
                sampling_num_tokens=[len(s[2]) for s in samples]))
        return results

    def _forward(self, input_ids, attention_mask, position_ids, cache):
        """One forward pass returning last-position logits only (transformers >= 5 calls the cache ``cache``)."""
        kw = {"cache" if self._cache_kw else "past_key_values": cache} if cache is not None else {}
        return self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                          use_cache=True, logits_to_keep=1, **kw)

    def _sample(self, logits, generator):
        """One token per row from temperature / top-k / top-p warped logits (transformers' own warpers)."""
        import torch
        from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                            TopPLogitsWarper)

        d = self.decoding
        scores = logits
        for warper in (TemperatureLogitsWarper(d.temperature), TopKLogitsWarper(d.top_k), TopPLogitsWarper(d.top_p)):
            scores = warper(None, scores)
        probs = torch.softmax(scores, dim=-1)
        return torch.multinomial(probs, 1, generator=generator)[:, 0]

    def _finish(self, ids: list[int], lps: list[float]) -> tuple[str, list[str], list[float]]:
        """Answer text (first line), its token strings and log-probs."""
        text = self.tokenizer.decode(ids, skip_special_tokens=True).split("\n")[0].strip()
        return text, self.tokenizer.convert_ids_to_tokens(ids), lps
