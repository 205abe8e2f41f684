"""Answer generation: prompts and decoding settings (``base``), the transformers decoder (``prefix_sharing``), vLLM
and OpenAI-compatible servers (``backends``), model loading (``models``), prompt hidden states (``features``) and
a small OpenAI-compatible server (``serve``).

``BACKENDS`` is the registry of generation backends (the one registry shape, :class:`elical.registry.Registry`);
:func:`elical.generation.backends.make_generator` makes one by name, and ``--backend`` reads its names.
"""

from elical.registry import Registry

__all__ = ["BACKENDS"]

BACKENDS = Registry("backend")
_B = "elical.generation.backends:"
BACKENDS.add("transformers", _B + "transformers_generator", hidden_states=True,
             summary="the prefix-sharing transformers decoder (CPU or GPU); hidden states from its prefill")
BACKENDS.add("vllm", _B + "vllm_generator", hidden_states=False,
             summary="vLLM (GPU; tensor and data parallelism passed through); a feature pass gives hidden states")
BACKENDS.add("openai", _B + "openai_generator", hidden_states=False,
             summary="any OpenAI-compatible server (--base-url); a feature pass gives hidden states")
