"""The transformers decoder: greedy + N sampled answers decoded as a prefix tree, every distinct token history run
through the model once, and the prompt's hidden states taken from the prefill.

The rows of one question (its greedy row and N sampled rows) share the prompt, the prompts of a batch share the
chat template and instruction, and at temperature 1.0 many samples also share their first tokens ("The", "The
capital", ...). :class:`TransformersGenerator` runs the tokens all prompts of a batch start with once, then each
prompt's own rest, and then keeps one *node* per distinct (prompt, generated tokens) history: each decode step
runs the model on the distinct histories only, and every row picks its next token from its node's distribution.
When rows diverge, their node's key-value cache entry is copied for each branch; rows leave as they finish. This
is the prefix sharing of tree-structured decoding (SGLang's RadixAttention, Zheng et al., 2024; vLLM's prefix
caching) applied within one batch; only the work is shared, the rows are those of decoding each row on its own.

Sampling depends only on (seed, question id), never on the batch: each question draws a fixed block of uniforms
(``max_new_tokens`` x N, from its own generator seeded with :func:`elical.generation.base.seed_for`), and sample
row j takes, at step t, the token where uniform (t, j) falls in the cumulative distribution of its node's warped
(top-k, temperature, top-p) probabilities, candidates in descending order (inverse-CDF sampling). A row uses its
uniforms whether or not other rows share its node, finished early, or sit in the same batch, so batch size,
batch composition and a resumed run change nothing beyond float noise (a draw within ~1e-6 of a CDF step).

The key-value cache (:class:`GrowingLayer`) keeps spare positions and rows: a decode step writes one position
instead of concatenating the whole cache, a new branch gets its parent's entries copied into a free row while the
other rows stay in place, and the rows of finished histories that no branch takes are filled with the last rows
(a copy of a few rows instead of running them unused). For the usual model types the batch's shared prompt
prefix is not in the cache at all: its keys/values are kept once and every row attends to them through
shared-prefix attention (:mod:`elical.generation.cascade`), so rows and branch copies hold only what follows it.
Throughput: ``benchmarks/build_throughput.py``.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Sequence

import numpy as np
from transformers.cache_utils import DynamicLayer

from elical.generation import cascade
from elical.generation.base import DecodingConfig, Generation, seed_for

__all__ = ["TransformersGenerator", "GrowingLayer", "question_uniforms", "DecodingCancelled"]


def question_uniforms(seed: int, key: str, steps: int, n: int):
    """The uniforms of one question's sampled rows: float64 tensor of shape (steps, n) in [0, 1), drawn on the CPU
    from a ``torch.Generator`` seeded with ``seed_for(seed, key)``: the same on every machine, device and batch."""
    import torch

    gen = torch.Generator().manual_seed(seed_for(seed, key))
    return torch.rand((steps, n), generator=gen, dtype=torch.float64)


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
            for buf in (self._k, self._v):
                filled = buf[:, :, :self.length]
                filled.index_copy_(0, dst, filled.index_select(0, src))
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


class DecodingCancelled(RuntimeError):
    """``TransformersGenerator.generate`` stopped early because ``should_stop()`` said so."""


class TransformersGenerator:
    """Greedy + N sampled answers per prompt with a transformers causal LM (CPU or GPU), decoded as a prefix
    tree (module docstring); the one transformers decoder of elical (runs, builds, estimators, judges, ``serve``).

    Parameters: ``model``/``tokenizer`` from :func:`elical.generation.models.load_model`; ``decoding`` a
    :class:`elical.generation.base.DecodingConfig` (the paper's values by default, Ni et al., 2025, Sec. 4.1).

    Sampling keeps the k largest logits first (the ranking is the same before or after temperature), then applies
    temperature and top-p (transformers' warpers) to the k candidates and draws by inverse CDF with the row's own
    uniform: transformers' Temperature -> TopK -> TopP distribution up to ties at the k-th logit, without sorting
    the whole vocabulary. ``top_k <= 0`` samples over the whole vocabulary.

    After each ``generate``, ``stats_`` holds the work done: ``prompt_tokens`` (real prompt tokens prefilled),
    ``decoded_tokens`` (tokens run through the model after the prefill, one per distinct history and step) and
    ``answer_tokens`` (tokens in all answers together; the difference is the work prefix sharing saved).
    """

    #: prompts of a batch that start with at least this many equal tokens run them once
    min_shared_prefix = 8
    #: ``generate(..., hidden_layers=...)`` returns the last prompt token's hidden states
    supports_hidden_states = True
    #: None, or a callable checked between decoding steps: True stops ``generate`` with DecodingCancelled
    should_stop = None

    def __init__(self, model, tokenizer, decoding: DecodingConfig = DecodingConfig()):
        self.model, self.tokenizer, self.decoding = model, tokenizer, decoding
        self._stop_ids = self._stop_token_ids()
        self._cache_kw = "cache" in inspect.signature(model.forward).parameters

    def _stop_token_ids(self) -> list[int]:
        """EOS, the chat end-of-turn tokens and the newline token: answers are one line."""
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

    def generate(self, prompts: Sequence[str], keys: Sequence[str], seed: int = 0, n_samples: int | None = None,
                 hidden_layers: Sequence[int] = ()) -> list[Generation]:
        """Greedy + ``n_samples`` (default ``decoding.n_samples``) sampled answers per prompt.

        ``keys``: one stable string per prompt (the question id); a prompt's samples depend only on ``seed`` and
        its key (module docstring), not on the other prompts of the call. ``seed`` may also be a sequence of one
        seed per prompt (a server batching requests of different seeds). ``hidden_layers``: indices into
        transformers' ``hidden_states`` (0 = embeddings, -1 = final layer); each Generation's ``hidden_states``
        then maps every layer to the last real prompt token's state, float32 ndarray of shape (hidden_size,),
        taken from the prefill (the same values as :func:`elical.generation.features.extract_hidden_states`).
        Returns one :class:`Generation` per prompt, in order. Log-probs are those of the raw model distribution
        (before temperature/top-k/top-p). Raises ValueError for an empty prompt, a bad layer, or keys that do
        not match the prompts.
        """
        import torch
        from transformers.cache_utils import DynamicCache

        if len(keys) != len(prompts):
            raise ValueError(f"{len(keys)} keys for {len(prompts)} prompts")
        d = self.decoding
        n = d.n_samples if n_samples is None else n_samples
        per = n + 1
        self.stats_ = {"prompt_tokens": 0, "decoded_tokens": 0, "answer_tokens": 0}
        if not prompts:
            return []
        dev = self.model.device
        stop = torch.tensor(self._stop_ids, device=dev)
        # (prompts, steps, n): drawn in full whatever happens during decoding, so no row's draws shift another's
        seeds = list(seed) if isinstance(seed, (list, tuple)) else [seed] * len(prompts)
        if len(seeds) != len(prompts):
            raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts")
        uniforms = torch.stack([question_uniforms(s, k, d.max_new_tokens, n) for s, k in zip(seeds, keys)]).to(dev)
        cache = DynamicCache(config=self.model.config)
        cache.layers = [GrowingLayer(d.max_new_tokens) if type(layer) is DynamicLayer else layer
                        for layer in cache.layers]
        rows, fed = len(prompts) * per, 0
        tokens = [[] for _ in range(rows)]
        logps = [[] for _ in range(rows)]
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        with torch.inference_mode(), contextlib.ExitStack() as stack:
            # one cache row ("slot") per distinct history (see _branch)
            logits, mask, last_pos, prompt_tokens, hidden = self._prefill(prompts, cache, hidden_layers, stack)
            alive = torch.arange(rows, device=dev)  # original row of each live row
            slot = alive // per  # slot of each live row
            for step in range(d.max_new_tokens):
                if self.should_stop is not None and self.should_stop():
                    raise DecodingCancelled("every request of this batch was cancelled")
                sampled = (alive % per) != 0
                choice = torch.empty_like(slot)
                greedy = ~sampled  # argmax only where a greedy row sits, draws only where a sampled one does
                if greedy.any():
                    nodes, inv = torch.unique(slot[greedy], return_inverse=True)
                    choice[greedy] = logits[nodes].argmax(dim=-1)[inv]
                if sampled.any():
                    row = alive[sampled]  # sample row j of question q is row q * per + 1 + j
                    choice[sampled] = self._draw(logits, slot[sampled], uniforms[row // per, step, row % per - 1])
                # raw-model log-prob of each chosen token: logit - logsumexp (no (nodes, V) log-softmax written)
                chosen_lp = logits[slot, choice] - _logsumexp(logits)[slot]
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
        out = self._collect(tokens, logps, len(prompts), per)
        if hidden:
            for i, g in enumerate(out):
                g.hidden_states = {layer: h[i] for layer, h in hidden.items()}
        return out

    def next_token_logits(self, prompts: Sequence[str]):
        """Logits of the token after each prompt: float32 tensor of shape (len(prompts), vocab), from one prefill
        (the prompts' common prefix run once, as in :meth:`generate`); no token is decoded. Used by P(True).
        Raises ValueError for an empty prompt."""
        import torch
        from transformers.cache_utils import DynamicCache

        if not prompts:
            return torch.empty((0, self.model.config.vocab_size))
        with torch.inference_mode(), contextlib.ExitStack() as stack:
            return self._prefill(prompts, DynamicCache(config=self.model.config), (), stack)[0]

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

    def _finish(self, ids: list[int], lps: list[float]) -> tuple[str, list[str], list[float]]:
        """Answer text (first line), its token strings and log-probs."""
        text = self.tokenizer.decode(ids, skip_special_tokens=True).split("\n")[0].strip()
        return text, self.tokenizer.convert_ids_to_tokens(ids), lps

    def _forward(self, input_ids, attention_mask, position_ids, cache, hidden: bool = False):
        """One forward pass returning last-position logits only (transformers >= 5 calls the cache ``cache``)."""
        kw = {"cache" if self._cache_kw else "past_key_values": cache} if cache is not None else {}
        if hidden:
            kw["output_hidden_states"] = True
        return self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                          use_cache=True, logits_to_keep=1, **kw)

    def _branch(self, cache, slot, choice, mask, last_pos, vocab: int):
        """The next step's slots from the live rows' slots and chosen tokens, shape (rows,) each.

        Each distinct (slot, token) pair is one history. A slot's first child stays in it; the others go to free
        slots (holes first, then new rows at the end) with a copy of the parent's cache entries. Slots without
        a child become holes; with :class:`GrowingLayer` caches the last rows move into them and the batch
        shrinks at once, otherwise they are dropped when they make up a quarter of the batch or all sit at its
        end. Returns the rows' new slots, the token to feed per slot (-1 for holes), and the
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
        growing = all(isinstance(layer, GrowingLayer) for layer in cache.layers)
        if len(live) < len(src) and growing and live[-1] >= len(live):
            # move the live rows past the end of the live count into the holes below it: a copy of a few rows
            # is cheaper than running the holes through the model
            n = len(live)
            keep = torch.arange(n, device=dev)
            low_holes = keep[~torch.isin(keep, live)]
            moved = live[live >= n]
            keep[low_holes] = moved
            for layer in cache.layers:
                layer.copy_rows(n, low_holes, moved)
            lut = torch.empty(len(src), dtype=torch.long, device=dev)
            lut[keep] = torch.arange(n, device=dev)
            mask, last_pos, child = mask[keep], last_pos[keep], lut[child]
        elif len(live) < len(src) and (live[-1] < len(live) or 4 * (len(src) - len(live)) > len(src)):
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

    def _prefill(self, prompts: Sequence[str], cache, hidden_layers: Sequence[int] = (), stack=None):
        """Run the prompts into ``cache``: the tokens all prompts start with once, then each prompt's own rest
        (left-padded after the shared part; padding is masked and skipped by the positions). Returns the last
        prompt position's logits (P, V), the attention mask (P, length), the last positions (P,), the number
        of real prompt tokens run, and ``{layer: float32 ndarray (P, hidden_size)}`` of the last real prompt
        token for ``hidden_layers`` (that token is always in the per-prompt part: the shared part stops a
        token short of the shortest prompt).

        With an ``ExitStack`` ``stack`` and a model :func:`elical.generation.cascade.supports`, the shared part's
        keys/values stay out of ``cache``: they are kept once and attended to by every row (shared-prefix
        attention, entered on ``stack`` for the rest of its block); the mask then covers the cache's
        positions only (those after the shared part)."""
        import torch
        from transformers.cache_utils import DynamicCache

        from elical.generation.features import check_layer

        layers = list(dict.fromkeys(hidden_layers))
        for layer in layers:
            check_layer(self.model, layer)
        ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        if any(not x for x in ids):
            raise ValueError("an empty prompt has no last token to answer from")
        shared = 0
        if len(ids) > 1:  # the chat template and instruction: ~40 tokens of SmolLM2's ~55-token prompts
            limit = min(len(x) for x in ids) - 1
            while shared < limit and all(x[shared] == ids[0][shared] for x in ids):
                shared += 1
            shared = shared if shared >= self.min_shared_prefix else 0
        dev = self.model.device
        split = bool(shared) and stack is not None and cascade.supports(self.model)
        if shared:
            prefix = torch.tensor([ids[0][:shared]], device=dev)
            own = DynamicCache(config=self.model.config) if split else cache
            self._forward(prefix, torch.ones_like(prefix), torch.arange(shared, device=dev)[None], own)
            if split and all(type(layer) is DynamicLayer for layer in own.layers):
                stack.enter_context(cascade.shared_prefix(self.model, [(l.keys, l.values) for l in own.layers]))
            elif split:  # not plain layers after all: run the prefix again, into the rows' cache
                split = False
                self._forward(prefix, torch.ones_like(prefix), torch.arange(shared, device=dev)[None], cache)
            if not split:
                cache.batch_repeat_interleave(len(ids))
        rest = [x[shared:] for x in ids]
        width = max(len(x) for x in rest)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in rest], device=dev)
        mask = torch.tensor([[1] * shared + [0] * (width - len(x)) + [1] * len(x) for x in rest], device=dev)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, shared:]
        if split:
            mask = mask[:, shared:]
        out = self._forward(input_ids, mask, pos, cache, hidden=bool(layers))
        # the rest is left-padded, so its last position is every row's last real token
        hidden = {layer: out.hidden_states[layer][:, -1, :].float().cpu().numpy() for layer in layers}
        return out.logits[:, -1, :].float(), mask, pos[:, -1], shared + sum(len(x) for x in rest), hidden

    def _draw(self, node_logits, row_node, uniforms):
        """One token per sampled row (live-row order) by inverse CDF: the row's node's logits (nodes, V) are cut
        to the top k (sorted descending), warped by transformers' temperature and top-p, normalised, and the
        row takes the first candidate whose cumulative probability exceeds its uniform (float64, shape (rows,))."""
        import torch
        from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

        d = self.decoding
        k = d.top_k if 0 < d.top_k < node_logits.shape[-1] else node_logits.shape[-1]
        nodes, inv = torch.unique(row_node, return_inverse=True)  # only the nodes that sampled rows sit on
        if 4 * len(nodes) < 3 * len(node_logits):
            values, index = torch.topk(node_logits[nodes], k, dim=-1)  # per node, sorted descending
        else:  # most nodes: cheaper than copying their (nodes, V) logits out
            values, index = torch.topk(node_logits, k, dim=-1)
            values, index = values[nodes], index[nodes]
        scores = TopPLogitsWarper(d.top_p)(None, TemperatureLogitsWarper(d.temperature)(None, values))
        cdf = torch.softmax(scores.double(), dim=-1).cumsum(dim=-1)
        u = uniforms.to(cdf.dtype)[:, None] * cdf[inv, -1:]
        pick = torch.searchsorted(cdf[inv], u, right=True).clamp(max=k - 1)
        return index[inv].gather(-1, pick)[:, 0]


def _logsumexp(logits, chunk: int = 16):
    """``torch.logsumexp(logits, dim=-1)`` for logits (rows, V), ``chunk`` rows at a time so that the
    intermediates stay in cache (the whole (rows, V) one is ~40 MB for 200 rows of a 49k vocabulary)."""
    import torch

    if logits.device.type != "cpu" or len(logits) <= chunk:
        return torch.logsumexp(logits, dim=-1)
    return torch.cat([torch.logsumexp(part, dim=-1) for part in logits.split(chunk)])
