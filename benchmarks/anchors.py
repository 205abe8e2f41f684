"""The anchors ``build_throughput.py`` measures the record builder against: what a user would write instead.

Each function answers the same questions with the same prompts, N, ``max_new_tokens``, stop tokens and sampling
settings (temperature, top-p, top-k) as the builder, records the raw-model log-prob of every answer token, and
returns ``(greedy answers, model rows run)``. Imported by the benchmark as a sibling module.

- :func:`plain_loop`: per question, one greedy ``model.generate`` and one sampled ``model.generate`` with
  ``num_return_sequences=N`` (the README's former anchor);
- :func:`batched_generate`: ``model.generate`` over ``batch`` questions at once, left-padded: one greedy call
  over the batch and one sampled call with ``num_return_sequences=N`` (batch x N rows), log-probs from
  ``output_logits``;
- :func:`llamacpp_loop`: llama.cpp through ``llama_cpp.Llama`` on the GGUF file the transformers model was
  dequantized from; per question the greedy answer and N samples, each through ``Llama.generate`` (the prompt's
  KV cache is kept between the rows of a question: llama-cpp-python's prefix match), the chosen token's log-prob
  from the last logits; with ``completion=True`` instead ``Llama.create_completion(logprobs=1)``, the
  OpenAI-style call of the library (and of its server), which needs ``logits_all=True``.
"""

from __future__ import annotations

import numpy as np
import torch


def _answers(tok, sequences, logits, width: int, stop_ids) -> tuple[list[str], int]:
    """First-line answer texts of ``sequences`` (rows, width + steps) and the raw log-prob of every chosen token
    (computed step by step from ``logits``, a tuple of (rows, V), as a user would; the sums are not used).
    Returns (texts, answer tokens)."""
    new = sequences[:, width:]
    stops = torch.isin(new, torch.tensor(stop_ids))
    done = torch.cumsum(stops.int(), dim=1) > 0  # the stop token and everything after it is not answer
    logp = torch.zeros(new.shape, dtype=torch.float32)
    for t, step in enumerate(logits):
        logp[:, t] = torch.log_softmax(step.float(), dim=-1).gather(-1, new[:, t:t + 1])[:, 0]
    logp = logp.masked_fill(done, 0.0).sum(dim=1)
    texts = [tok.decode(row, skip_special_tokens=True).split("\n")[0].strip() for row in new]
    return texts, int((~done).sum())


def plain_loop(model, tok, prompts, d, stop_ids, seed: int):
    """Per question: greedy generate + sampled generate (num_return_sequences=N). Returns (greedy texts, tokens
    processed: prompt tokens once per row plus every decoded position, finished rows included)."""
    greedy_texts, processed = [], 0
    with torch.random.fork_rng(devices=[]):  # transformers' sampling draws from the global RNG; keep it local
        torch.manual_seed(seed)
        for p in prompts:
            enc = tok(p, return_tensors="pt", add_special_tokens=False)
            width = enc["input_ids"].shape[1]
            common = dict(max_new_tokens=d.max_new_tokens, eos_token_id=stop_ids, pad_token_id=tok.pad_token_id,
                          return_dict_in_generate=True, output_logits=True)
            g = model.generate(**enc, do_sample=False, **common)
            s = model.generate(**enc, do_sample=True, temperature=d.temperature, top_p=d.top_p, top_k=d.top_k,
                               num_return_sequences=d.n_samples, **common)
            greedy_texts.append(_answers(tok, g.sequences, g.logits, width, stop_ids)[0][0])
            _answers(tok, s.sequences, s.logits, width, stop_ids)
            processed += sum(out.sequences.numel() for out in (g, s))
    return greedy_texts, processed


def batched_generate(model, tok, prompts, d, stop_ids, seed: int, batch: int):
    """``model.generate`` over ``batch`` questions at a time, left-padded: one greedy call (batch rows) and one
    sampled call (batch x N rows, ``num_return_sequences=N``), ``output_logits`` for the log-probs. Returns
    (greedy texts, tokens processed: padded prompt rows plus every decoded position)."""
    side = tok.padding_side
    tok.padding_side = "left"
    greedy_texts, processed = [], 0
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for i in range(0, len(prompts), batch):
                enc = tok(list(prompts[i:i + batch]), return_tensors="pt", padding=True, add_special_tokens=False)
                width = enc["input_ids"].shape[1]
                common = dict(max_new_tokens=d.max_new_tokens, eos_token_id=stop_ids,
                              pad_token_id=tok.pad_token_id, return_dict_in_generate=True, output_logits=True)
                g = model.generate(**enc, do_sample=False, **common)
                s = model.generate(**enc, do_sample=True, temperature=d.temperature, top_p=d.top_p,
                                   top_k=d.top_k, num_return_sequences=d.n_samples, **common)
                greedy_texts += _answers(tok, g.sequences, g.logits, width, stop_ids)[0]
                _answers(tok, s.sequences, s.logits, width, stop_ids)
                processed += sum(out.sequences.numel() for out in (g, s))
                del g, s  # the stored logits of the batch (rows x steps x V floats) go before the next one
    finally:
        tok.padding_side = side
    return greedy_texts, processed


def load_llama(gguf_path, threads: int, completion: bool = False, seed: int = 0):
    """A ``llama_cpp.Llama`` on ``gguf_path`` with ``threads`` threads for decoding and prompt processing
    (``logits_all=True`` for ``completion``: create_completion's log-probs need it)."""
    from llama_cpp import Llama

    return Llama(model_path=str(gguf_path), n_ctx=512, n_batch=512, n_threads=threads, n_threads_batch=threads,
                 logits_all=completion, seed=seed, verbose=False)


def llamacpp_loop(llm, prompts, d, stop_ids, seed: int, completion: bool = False):
    """Per question with llama.cpp: the greedy answer and N samples (temperature, top-p, top-k as ``d``; min-p,
    typical-p and the repeat penalty off), at most ``d.max_new_tokens`` tokens, stopping at ``stop_ids``.
    Returns (greedy texts, tokens decoded)."""
    import llama_cpp

    sampling = dict(top_k=d.top_k, top_p=d.top_p, min_p=0.0, typical_p=1.0, repeat_penalty=1.0)
    greedy_texts, decoded = [], 0
    n_vocab = llm.n_vocab()
    stop = set(stop_ids)
    for q, prompt in enumerate(prompts):
        for row in range(d.n_samples + 1):
            temp = 0.0 if row == 0 else d.temperature
            row_seed = (seed * 1_000_003 + q * (d.n_samples + 1) + row) % 2 ** 31
            if completion:
                out = llm.create_completion(prompt, max_tokens=d.max_new_tokens, temperature=temp, stop=["\n"],
                                            logprobs=1, seed=row_seed, **sampling)
                text = out["choices"][0]["text"]
                decoded += out["usage"]["completion_tokens"]
            else:
                tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)
                llm.set_seed(row_seed)
                ids, lps = [], []
                for t in llm.generate(tokens, temp=temp, reset=True, **sampling):
                    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1),
                                                   shape=(n_vocab,))
                    m = logits.max()
                    lps.append(float(logits[t] - m - np.log(np.exp(logits - m).sum())))
                    if t in stop:
                        break
                    ids.append(t)
                    if len(ids) >= d.max_new_tokens:
                        break
                decoded += len(lps)
                text = llm.detokenize(ids).decode("utf-8", errors="replace")
            if row == 0:
                greedy_texts.append(text.split("\n")[0].strip())
    return greedy_texts, decoded
