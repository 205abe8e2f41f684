"""Confidence heads: probe heads on frozen hidden states, the paper's LoRA + linear head, the EliCal stages.

``HEADS`` is the registry of head kinds (the choices of ``--head``); ``HEADS.create(kind, ...)`` gives the
:class:`elical.heads.stages.HeadStages` that trains Eli-Only, Cal-Only(k) and EliCal(k) for that kind.
"""

from elical.registry import Registry

__all__ = ["HEADS"]

HEADS = Registry("head kind")
HEADS.add("linear", lambda **kw: _probe(kind="linear", **kw), needs=("random_state",),
          summary="Linear -> sigmoid on the frozen hidden state (the paper's head, fast)", inputs="features")
HEADS.add("mlp", lambda **kw: _probe(kind="mlp", **kw), needs=("random_state",),
          summary="the official MLP (H -> H/2 -> H/4 -> 1, ReLU, sigmoid) on the frozen hidden state",
          inputs="features")
HEADS.add("lora", "elical.heads.stages:lora_stages", needs=("model", "tokenizer", "random_state"),
          summary="the paper's LoRA adapters + linear head, trained on the model itself (slow on a CPU)",
          inputs="prompts")


def _probe(**kw):
    from elical.heads.stages import probe_stages

    return probe_stages(**kw)
