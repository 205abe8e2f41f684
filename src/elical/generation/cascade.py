"""Shared-prefix ("cascade") attention: the keys/values of the tokens all prompts of a batch start with are kept
once, not once per cache row, and every row attends to them and to its own keys/values in two parts whose
softmaxes are merged by their log-sum-exps (Hydragen, Juravsky et al., 2024; FlashInfer's cascade attention).

:class:`elical.generation.prefix_sharing.TransformersGenerator` decodes ~300 cache rows per batch that all start
with the same ~40 chat-template tokens; with the prefix in every row, each decode step re-reads those keys/values
once per row and each branch of the prefix tree copies them. With :func:`shared_prefix` active, the cache holds
only what follows the prefix, and attention computes, per query, softmax over [prefix keys; row keys] as

    out = (o_p * exp(l_p - m) + o_r * exp(l_r - m)) / (exp(l_p - m) + exp(l_r - m)),   m = max(l_p, l_r)

where o_p, l_p (o_r, l_r) are the attention output and log-sum-exp of the scores over the prefix (the row's own
keys, masked as transformers masks them). The prefix part is one attention over all rows' queries at once (batch
1, rows x query heads as query positions), so its keys/values are read once per layer and step.

It applies to transformers models whose attention layers call the attention interface with the standard layout
(query (B, heads, q, head_dim), key/value (B, kv_heads, L, head_dim), a boolean mask (B, 1, q, L) or None, and
``module.layer_idx``): :func:`supports` lists the model types; others keep the plain path.
"""

from __future__ import annotations

import contextlib
import contextvars

__all__ = ["NAME", "supports", "shared_prefix", "cascade_attention"]

NAME = "elical_cascade"
#: model types whose attention is the standard sdpa/eager layout (no softcap, sliding window or sinks)
MODEL_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3"})
#: per layer (keys, values) of the shared prefix, shape (1, kv_heads, S, head_dim) each; None: plain attention
_PREFIX: contextvars.ContextVar = contextvars.ContextVar("elical_cascade_prefix", default=None)
_registered = False


def supports(model) -> bool:
    """Whether :func:`shared_prefix` applies to ``model``: a listed model type, attention ``sdpa`` or ``eager``,
    no sliding window."""
    cfg = model.config
    return (getattr(cfg, "model_type", None) in MODEL_TYPES
            and getattr(cfg, "_attn_implementation", None) in ("sdpa", "eager")
            and not getattr(cfg, "sliding_window", None)
            and not getattr(cfg, "use_sliding_window", False))


def _register() -> None:
    global _registered
    if not _registered:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(NAME, cascade_attention)
        AttentionMaskInterface.register(NAME, sdpa_mask)
        _registered = True


@contextlib.contextmanager
def shared_prefix(model, prefix_kv):
    """Within the block, ``model`` attends every row to ``prefix_kv`` (per layer (keys, values), each of shape
    (1, kv_heads, S, head_dim), positions 0..S-1) before its own cache entries; position ids passed to the model
    must count the prefix, the attention mask must not (it covers the row's own entries only)."""
    _register()
    cfg = model.config
    old = cfg._attn_implementation
    token = _PREFIX.set(list(prefix_kv))
    cfg._attn_implementation = NAME
    try:
        yield
    finally:
        cfg._attn_implementation = old
        _PREFIX.reset(token)


def _attend(q, k, v, mask, scale):
    """Attention output (B, kv_heads, n, d) and log-sum-exp of the scores (B, kv_heads, n) of queries q
    (B, kv_heads, n, d) over keys/values (B, kv_heads, L, d); ``mask`` additive float (B, 1, n, L) or None."""
    import torch

    if q.device.type == "cpu":
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=mask, scale=scale)
    return _attend_matmul(q, k, v, mask, scale)


def _attend_matmul(q, k, v, mask, scale):
    """:func:`_attend` on any device, in plain matmuls (queries that see no key get NaN)."""
    import torch

    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if mask is not None:
        s = s + mask
    lse = torch.logsumexp(s, dim=-1)
    return torch.matmul(torch.exp(s - lse[..., None]), v), lse


def cascade_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """transformers attention function: query (B, H, q, d), key/value (B, kv_heads, L, d) (the rows' own cache
    entries), attention_mask boolean (B, 1, q, L) (True: attend) or None (all visible when q == 1, causal
    otherwise). Returns (output (B, q, H, d), None). Without an active :func:`shared_prefix`, plain sdpa."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    prefix = _PREFIX.get()
    if prefix is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    kp, vp = prefix[module.layer_idx]
    b, h, q, d = query.shape
    kvh, length = key.shape[1], key.shape[2]
    g = h // kvh
    scale = scaling if scaling is not None else d ** -0.5
    qg = query.reshape(b, kvh, g * q, d)  # query head j of kv head i is head i * g + j; positions (g, q) flattened
    if attention_mask is None and q > 1:
        attention_mask = torch.ones(q, length, dtype=torch.bool, device=query.device).tril(length - q)[None, None]
    mask = dead = None
    if attention_mask is not None:
        attention_mask = attention_mask.expand(b, 1, q, length)
        if q > 1:
            dead = ~attention_mask.any(dim=-1)  # (B, 1, q): queries that see none of their row (left padding)
        mask = torch.zeros(attention_mask.shape, dtype=query.dtype, device=query.device)
        mask.masked_fill_(~attention_mask, float("-inf"))
        if g > 1:
            mask = mask.repeat(1, 1, g, 1)
    o_r, l_r = _attend(qg, key, value, mask, scale)
    qp = qg.transpose(0, 1).reshape(1, kvh, b * g * q, d)  # all rows' queries against the one prefix
    o_p, l_p = _attend(qp, kp, vp, None, scale)
    o_p = o_p.reshape(kvh, b, g * q, d).transpose(0, 1)
    l_p = l_p.reshape(kvh, b, g * q).transpose(0, 1)
    if dead is not None:  # their row part is empty: no weight, and no NaN from an all -inf softmax
        dead = dead.repeat(1, 1, g).expand(b, kvh, g * q)
        l_r = l_r.masked_fill(dead, float("-inf"))
        o_r = o_r.masked_fill(dead[..., None], 0.0)
    m = torch.maximum(l_r, l_p)
    w_r, w_p = torch.exp(l_r - m), torch.exp(l_p - m)
    out = (o_r * w_r[..., None] + o_p * w_p[..., None]) / (w_r + w_p)[..., None]
    return out.reshape(b, h, q, d).transpose(1, 2).contiguous(), None
