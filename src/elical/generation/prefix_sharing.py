"""Greedy + N sampled answers decoded as a prefix tree: every distinct token history is run through the model once.

The rows of one question (its greedy row and N sampled rows) share the prompt, the prompts of a batch share the
chat template and instruction, and at temperature 1.0 many samples also share their first tokens ("The", "The
capital", ...). :class:`PrefixSharingGenerator` runs the tokens all prompts of a batch start with once, then each
prompt's own rest, and then keeps one *node* per distinct (prompt, generated tokens) history: each decode step
runs the model on the distinct histories only, and every row picks its next token from its node's distribution
(greedy: argmax; sampled: top-k, temperature, top-p, one draw per row, in row order). When rows diverge, their
node's key-value cache entry is copied for each branch; rows leave as they finish. The rows, draws and log-probs
are those of decoding every row on its own (:class:`elical.generation.base.TransformersGenerator` with the same
top-k-first draw); only the work is shared. This is the prefix sharing of tree-structured decoding (SGLang's
RadixAttention, Zheng et al., 2024; vLLM's prefix caching) applied within one batch. On 32 HonestyBench NQ
questions with N = 20 and 20 new tokens it runs 24 % fewer decode tokens than there are answer tokens, and a
third of the prompt tokens (``benchmarks/build_throughput.py``).

The key-value cache (:class:`GrowingLayer`) keeps spare positions and rows: a decode step writes one position
instead of concatenating the whole cache, a new branch gets its parent's entries copied into a free row while the
other rows stay in place, and the rows of finished histories are dropped only when they make up a quarter of the
batch (until then they are run but unused, or taken by new branches).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from transformers.cache_utils import DynamicLayer

from elical.generation.base import Generation, TransformersGenerator, seed_for

__all__ = ["PrefixSharingGenerator", "GrowingLayer"]


class GrowingLayer(DynamicLayer):
    """A transformers ``DynamicLayer`` whose keys/values live in a buffer with room to spare: ``spare`` more
    positions (appending a token writes in place instead of concatenating the cache) and more rows (a branch of
    the prefix tree gets its parent's entries copied into a free row, the other rows stay where they are).
    ``keys``/``values`` are views of the filled part, shape (rows, kv_heads, length, head_dim)."""

    def __init__(self, spare: int = 32):
        super().__init__()
        self.spare, self.length, self.rows, self._k, self._v = spare, 0, 0, None, None

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        rows, new = key_states.shape[0], key_states.shape[-2]
        if self._k is None or self.length + new > self._k.shape[2] or rows > self._k.shape[0]:
            self._realloc(key_states, max(rows, self.rows), self.length + new + self.spare)
        self.rows = rows
        self._k[:rows, :, self.length:self.length + new] = key_states
        self._v[:rows, :, self.length:self.length + new] = value_states
        self.length += new
        self._views()
        return self.keys, self.values

    def _realloc(self, like, rows: int, length: int):
        shape = (rows, like.shape[1], length, like.shape[3])
        k, v = like.new_empty(shape), like.new_empty(shape)
        if self.length:
            k[:self.rows, :, :self.length], v[:self.rows, :, :self.length] = self.keys, self.values
        self._k, self._v = k, v

    def _views(self):
        self.keys = self._k[:self.rows, :, :self.length]
        self.values = self._v[:self.rows, :, :self.length]

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def copy_rows(self, rows: int, dst, src) -> None:
        """Make the batch ``rows`` long (rows past the old end are uninitialized until written) and copy the
        entries of rows ``src`` into rows ``dst`` (disjoint index tensors of equal length)."""
        if rows > self._k.shape[0]:
            self._realloc(self._k, max(rows, 2 * self._k.shape[0]), self._k.shape[2])
        self.rows = rows
        if len(dst):
            self._k[dst, :, :self.length] = self._k[src, :, :self.length]
            self._v[dst, :, :self.length] = self._v[src, :, :self.length]
        self._views()

    def batch_select_indices(self, indices) -> None:
        import torch

        if not self.length:
            return
        if torch.equal(indices, torch.arange(len(indices), device=indices.device)):
            self.rows = len(indices)  # dropping rows at the end: no copy
        else:
            self._k, self._v, self.rows = self._k[indices], self._v[indices], len(indices)
        self._views()

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.length:
            self._k = self.keys.repeat_interleave(repeats, 0)
            self._v = self.values.repeat_interleave(repeats, 0)
            self.rows *= repeats
            self._views()

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("GrowingLayer is for append-only decoding")


class PrefixSharingGenerator(TransformersGenerator):
    """Drop-in :class:`elical.generation.base.TransformersGenerator` (same constructor, ``generate`` and records) that
    decodes the rows of each question as a prefix tree (module docstring) and samples top-k first.

    Sampling: the k largest logits are kept first (the ranking is the same before or after temperature), then
    temperature, top-p and one multinomial draw per row on the (rows, k) tensor: transformers' Temperature ->
    TopK -> TopP distribution up to ties at the k-th logit, without sorting the whole vocabulary. Same seed and
    batch -> same answers; the draws differ from :class:`TransformersGenerator`'s (it samples over the whole
    vocabulary). ``top_k <= 0`` samples over the whole vocabulary.

    After each ``generate``, ``stats_`` holds the work done: ``prompt_tokens`` (real prompt tokens prefilled),
    ``decoded_tokens`` (tokens run through the model after the prefill, one per distinct history and step) and
    ``answer_tokens`` (tokens in all answers together; the difference is the work prefix sharing saved).
    """

    #: prompts of a batch that start with at least this many equal tokens run them once
    min_shared_prefix = 8

    def generate(self, prompts: Sequence[str], keys: Sequence[str], seed: int = 0,
                 n_samples: int | None = None) -> list[Generation]:
        """Greedy + ``n_samples`` sampled answers per prompt; one :class:`Generation` per prompt, in order.
        Arguments, seeding and log-probs as in :meth:`elical.generation.base.TransformersGenerator.generate`."""
        import torch
        from transformers.cache_utils import DynamicCache

        d = self.decoding
        n = d.n_samples if n_samples is None else n_samples
        per = n + 1
        dev = self.model.device
        gen = torch.Generator(device=dev).manual_seed(seed_for(seed, "|".join(keys)))
        stop = torch.tensor(self._stop_ids, device=dev)
        cache = DynamicCache(config=self.model.config)
        cache.layers = [GrowingLayer(d.max_new_tokens) if type(layer) is DynamicLayer else layer
                        for layer in cache.layers]
        rows, fed = len(prompts) * per, 0
        tokens = [[] for _ in range(rows)]
        logps = [[] for _ in range(rows)]
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        with torch.inference_mode():
            # one cache row ("slot") per distinct history (see _branch)
            logits, mask, last_pos, prompt_tokens = self._prefill(prompts, cache)
            alive = torch.arange(rows, device=dev)  # original row of each live row
            slot = alive // per  # slot of each live row
            for step in range(d.max_new_tokens):
                logp = torch.log_softmax(logits, dim=-1)
                choice = logits.argmax(dim=-1)[slot]
                sampled = (alive % per) != 0
                if sampled.any():
                    choice[sampled] = self._draw(logits, slot[sampled], gen)
                chosen_lp = logp[slot, choice]
                finished = torch.isin(choice, stop)
                for r, t, lp, f in zip(alive.tolist(), choice.tolist(), chosen_lp.tolist(), finished.tolist()):
                    if not f:
                        tokens[r].append(t)
                        logps[r].append(lp)
                keep = ~finished
                if not keep.any() or step == d.max_new_tokens - 1:
                    break
                alive, slot, choice = alive[keep], slot[keep], choice[keep]
                slot, step_ids, mask, last_pos = self._branch(cache, slot, choice, mask, last_pos,
                                                              logits.shape[-1])
                fed += int((step_ids != -1).sum())
                step_ids[step_ids == -1] = pad
                last_pos = last_pos + 1
                mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
                logits = self._forward(step_ids[:, None], mask, last_pos[:, None], cache).logits[:, -1, :].float()
        self.stats_ = {"prompt_tokens": prompt_tokens, "decoded_tokens": fed,
                       "answer_tokens": sum(len(t) for t in tokens)}
        return self._collect(tokens, logps, len(prompts), per)

    def _branch(self, cache, slot, choice, mask, last_pos, vocab: int):
        """The next step's slots from the live rows' slots and chosen tokens, shape (rows,) each.

        Each distinct (slot, token) pair is one history. A slot's first child stays in it; the others go to free
        slots (holes first, then new rows at the end) with a copy of the parent's cache entries. Slots without
        a child become holes; they are dropped when they make up a quarter of the batch, or at once when they
        are all at its end. Returns the rows' new slots, the token to feed per slot (-1 for holes), and the
        attention mask (slots, length) and last positions (slots,) rearranged the same way."""
        import torch

        dev = slot.device
        uniq, inverse = torch.unique(slot * vocab + choice, return_inverse=True)
        parent, token = uniq // vocab, uniq % vocab
        first = torch.ones_like(parent, dtype=torch.bool)
        first[1:] = parent[1:] != parent[:-1]
        size = mask.shape[0]
        holes = torch.ones(size, dtype=torch.bool, device=dev)
        holes[parent] = False
        free = holes.nonzero()[:, 0]
        branch = (~first).nonzero()[:, 0]
        grow = max(0, len(branch) - len(free))
        dst = torch.cat([free[:len(branch)], torch.arange(size, size + grow, device=dev)])
        child = parent.clone()
        child[branch] = dst
        src = torch.arange(size + grow, device=dev)  # row i of the new batch comes from row src[i]
        src[dst] = parent[branch]
        if len(branch):
            self._copy_rows(cache, src, dst, parent[branch])
        mask, last_pos = mask[src], last_pos[src]
        live = torch.sort(child).values
        if len(live) < len(src) and (live[-1] < len(live) or 4 * (len(src) - len(live)) > len(src)):
            lut = torch.empty(len(src), dtype=torch.long, device=dev)
            lut[live] = torch.arange(len(live), device=dev)
            cache.batch_select_indices(live)
            mask, last_pos, child = mask[live], last_pos[live], lut[child]
        step_ids = torch.full((mask.shape[0],), -1, dtype=torch.long, device=dev)
        step_ids[child] = token
        return child[inverse], step_ids, mask, last_pos

    @staticmethod
    def _copy_rows(cache, src, dst, dst_src):
        """Cache rows ``dst`` get the entries of rows ``dst_src``; the batch becomes ``len(src)`` rows, row i
        taken from row ``src[i]`` (layers other than :class:`GrowingLayer` copy the whole batch that way)."""
        for layer in cache.layers:
            if isinstance(layer, GrowingLayer):
                layer.copy_rows(len(src), dst, dst_src)
            else:
                layer.batch_select_indices(src)

    def _prefill(self, prompts: Sequence[str], cache):
        """Run the prompts into ``cache``: the tokens all prompts start with once, then each prompt's own rest
        (left-padded after the shared part; padding is masked and skipped by the positions). Returns the last
        prompt position's logits (P, V), the attention mask (P, length), the last positions (P,) and the number
        of real prompt tokens run."""
        import torch

        ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        shared = 0
        if len(ids) > 1:  # the chat template and instruction: ~40 tokens of SmolLM2's ~55-token prompts
            limit = min(len(x) for x in ids) - 1
            while shared < limit and all(x[shared] == ids[0][shared] for x in ids):
                shared += 1
            shared = shared if shared >= self.min_shared_prefix else 0
        dev = self.model.device
        if shared:
            prefix = torch.tensor([ids[0][:shared]], device=dev)
            self._forward(prefix, torch.ones_like(prefix), torch.arange(shared, device=dev)[None], cache)
            cache.batch_repeat_interleave(len(ids))
        rest = [x[shared:] for x in ids]
        width = max(len(x) for x in rest)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in rest], device=dev)
        mask = torch.tensor([[1] * shared + [0] * (width - len(x)) + [1] * len(x) for x in rest], device=dev)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, shared:]
        logits = self._forward(input_ids, mask, pos, cache).logits[:, -1, :].float()
        return logits, mask, pos[:, -1], shared + sum(len(x) for x in rest)

    def _draw(self, node_logits, row_node, generator):
        """One token per sampled row from its node's logits (rows, in live-row order): top-k, then temperature
        and top-p (transformers' warpers) on the k candidates, then a multinomial draw."""
        import torch
        from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

        d = self.decoding
        if not 0 < d.top_k < node_logits.shape[-1]:
            return self._sample(node_logits[row_node], generator)
        values, index = torch.topk(node_logits, d.top_k, dim=-1)  # per node, sorted descending
        values, index = values[row_node], index[row_node]
        scores = TopPLogitsWarper(d.top_p)(None, TemperatureLogitsWarper(d.temperature)(None, values))
        pick = torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=generator)
        return index.gather(-1, pick)[:, 0]
