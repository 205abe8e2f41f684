"""Confidence before answering: a trained head scores new questions with one forward pass and no generation.

This is what EliCal is for (Ni et al., arXiv 2510.17509, Sec. 1 and 3): the model states how likely it is to answer
a question correctly *before* it answers, from the hidden state of the last prompt token. A training-free estimator
such as Consis-Sem needs N sampled answers plus judging for the same number (see
``benchmarks/confidence_latency.py``).

:class:`ConfidenceModel` loads either kind of head directory:

- a :class:`elical.heads.probe.ProbeHead` directory (``head.json`` format ``elical.ProbeHead``) -- it holds the head only,
  so the base model, layer and prompt come from the sidecar ``model.json`` (:func:`write_model_json`)::

      {"format": "elical.HeadModel", "format_version": 1, "model": "smollm2-135m-instruct", "layer": -1,
       "instruction": "Answer the following question ... Question: {question}", "pooling": "last",
       "token": "last real prompt token"}

  ``model``: what :func:`elical.generation.models.load_model` takes (name, directory or HF id); ``layer``: index into the
  model's ``output_hidden_states`` (-1 = final); ``instruction``: the template given to
  :func:`elical.generation.base.build_prompt` (must contain ``{question}``); ``pooling``: ``"last"`` (the last real
  prompt token, the paper's; the default when absent) or ``"mean"`` (the mean over the question's tokens,
  :mod:`elical.generation.pooling`). ``elical run`` writes it beside each head, ``--layer``/``--pooling`` ones included.
- a :class:`elical.heads.lora.LoRAHead` directory (``head.json`` format ``elical.LoRAHead``): the base model comes from
  ``head.json`` (``model.json``, when present, overrides it and sets the instruction; default instruction:
  :data:`elical.generation.base.QA_INSTRUCTION`, the one ``elical run`` uses).
- a directory written by ``elical export-head`` (:data:`elical.heads.reference.EXPORT_JSON`, the reference format).

:meth:`ConfidenceModel.from_reference` loads a checkpoint of the paper's own code (a peft adapter directory plus
``vector_head_*.pt``; :mod:`elical.heads.reference`), e.g. the released Honest-Qwen2.5 / Honest-Llama3 models
(``docs/models.md``). :meth:`ConfidenceModel.gate` turns confidences into answer / abstain decisions.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from elical.fileio import write_text_atomic
from elical.generation.base import QA_INSTRUCTION, build_prompt
from elical.records import InputError

__all__ = ["MODEL_JSON", "write_model_json", "read_model_json", "Gate", "ConfidenceModel"]

MODEL_JSON = "model.json"
_MODEL_FORMAT = "elical.HeadModel"
_TOKENS = {"last": "last real prompt token", "mean": "mean over the question's tokens"}


def write_model_json(directory, model: str, layer: int = -1, instruction: str = QA_INSTRUCTION,
                     pooling: str = "last") -> Path:
    """Write the sidecar ``<directory>/model.json`` that tells :class:`ConfidenceModel` how the head's inputs were
    made: base ``model`` (name/path/HF id), hidden ``layer``, prompt ``instruction`` (with ``{question}``) and
    ``pooling`` ("last" or "mean"). Returns its path. Raises ValueError for an instruction without ``{question}``
    or an unknown pooling."""
    if "{question}" not in instruction:
        raise ValueError("instruction must contain the placeholder {question}")
    if pooling not in _TOKENS:
        raise ValueError(f"pooling must be one of {sorted(_TOKENS)}, got {pooling!r}")
    path = Path(directory) / MODEL_JSON
    meta = {"format": _MODEL_FORMAT, "format_version": 1, "model": str(model), "layer": int(layer),
            "instruction": instruction, "pooling": pooling, "token": _TOKENS[pooling]}
    write_text_atomic(path, json.dumps(meta, indent=2) + "\n")
    return path


def _read_json(path: Path) -> dict:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(path, exc.lineno, None, f"malformed JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise InputError(path, None, None, "expected a JSON object")
    return obj


def read_model_json(directory) -> dict | None:
    """The validated sidecar of a head directory (keys model, layer, instruction, pooling), or None when absent.

    Raises InputError naming the file and field for a malformed file."""
    path = Path(directory) / MODEL_JSON
    if not path.exists():
        return None
    meta = _read_json(path)
    if not isinstance(meta.get("model"), str) or not meta["model"]:
        raise InputError(path, None, "model", "expected the base model's name, directory or HF id (a string)")
    layer = meta.get("layer", -1)
    if not isinstance(layer, int) or isinstance(layer, bool):
        raise InputError(path, None, "layer", f"expected an integer hidden-layer index, got {layer!r}")
    instruction = meta.get("instruction", QA_INSTRUCTION)
    if not isinstance(instruction, str) or "{question}" not in instruction:
        raise InputError(path, None, "instruction", "expected a prompt template containing {question}")
    pooling = meta.get("pooling", "last")
    if pooling not in _TOKENS:
        raise InputError(path, None, "pooling", f"expected one of {sorted(_TOKENS)}, got {pooling!r}")
    return {"model": meta["model"], "layer": layer, "instruction": instruction, "pooling": pooling}


@dataclass(frozen=True)
class Gate:
    """The decision for one question (:meth:`ConfidenceModel.gate`): ``confidence`` in [0, 1] (probability that the
    answer will be correct, higher = more likely) and ``answer`` (True when ``confidence >= threshold``: generate;
    False: abstain, or retrieve first)."""

    question: str
    confidence: float
    answer: bool


class ConfidenceModel:
    """Confidence that the model will answer each question correctly, before any answer is generated.

    Parameters
    ----------
    head : ProbeHead, LoRAHead or :class:`elical.heads.reference.ReferenceHead`, fitted
    model, tokenizer : the base model the head was trained on (for a LoRAHead: the model its adapter lives in).
    layer : int
        Hidden layer a ProbeHead reads (index into ``output_hidden_states``; ignored for a LoRAHead: final layer).
    instruction : str
        Prompt template for :func:`elical.generation.base.build_prompt`.
    pooling : str
        How a ProbeHead's features are read: "last" (last real prompt token) or "mean" (mean over the question's
        tokens); ignored for a LoRAHead.
    method : str, optional
        Name written beside each confidence (default: the head directory's name when loaded).
    batch_size : int
        Prompts per forward pass.
    base_model : str, optional
        The base model's name, directory or HF id as recorded with the head (informational; None when unknown).
    """

    def __init__(self, head, model, tokenizer, *, layer: int = -1, instruction: str = QA_INSTRUCTION,
                 pooling: str = "last", method: str | None = None, batch_size: int = 16,
                 base_model: str | None = None):
        from elical.heads.probe import ProbeHead
        from elical.heads.lora import LoRAHead
        from elical.heads.reference import ReferenceHead

        if not isinstance(head, (ProbeHead, LoRAHead, ReferenceHead)):
            raise ValueError(f"head must be a fitted ProbeHead, LoRAHead or ReferenceHead, got {type(head).__name__}")
        if isinstance(head, (ProbeHead, ReferenceHead)) and head.n_features_in_ != model.config.hidden_size:
            raise ValueError(f"the head reads {head.n_features_in_} features but the model's hidden size is "
                             f"{model.config.hidden_size}: not the model it was trained on")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if pooling not in _TOKENS:
            raise ValueError(f"pooling must be one of {sorted(_TOKENS)}, got {pooling!r}")
        if isinstance(head, LoRAHead):
            from dataclasses import replace

            head.config = replace(head.config, batch_size=batch_size)  # prediction batch size only
        self.head, self.model, self.tokenizer = head, model, tokenizer
        self.layer, self.instruction, self.batch_size, self.pooling = layer, instruction, batch_size, pooling
        self.method = method or type(head).__name__
        self.base_model = base_model

    @classmethod
    def load(cls, head_dir, model=None, device: str = "cpu", batch_size: int = 16) -> ConfidenceModel:
        """Load a head directory written by ``ProbeHead.save`` (+ ``model.json``), ``LoRAHead.save`` or
        ``elical export-head`` (the reference format, through :meth:`from_reference`).

        ``model``: None (load the base model recorded with the head, on ``device``), a model name/path overriding
        it, or a ``(model, tokenizer)`` pair already loaded (for a LoRAHead, its adapter is added to that model).
        Raises InputError (file and field named) for a missing or malformed head directory or ``model.json``;
        ValueError when the head does not fit the model.
        """
        from elical.heads.probe import ProbeHead
        from elical.generation.models import load_model
        from elical.heads.lora import LoRAHead

        from elical.heads.reference import read_export_json

        head_dir = Path(head_dir)
        head_json = head_dir / "head.json"
        exported = None if head_json.exists() else read_export_json(head_dir)
        if exported is not None:
            lora = exported.get("lora_dir")
            return cls.from_reference(head_dir / lora if lora else None, head_dir / exported["head_file"], model,
                                      device=device, batch_size=batch_size, method=exported.get("method"))
        if not head_json.exists():
            raise InputError(head_json, None, None, "not found: HEAD_DIR must be a directory with a trained head "
                             "(e.g. <run>/heads/elical_k64)")
        head_meta = _read_json(head_json)
        fmt = head_meta.get("format")
        sidecar = read_model_json(head_dir)
        if fmt == "elical.ProbeHead":
            if sidecar is None and (model is None or isinstance(model, str)):
                raise InputError(head_dir / MODEL_JSON, None, None,
                                 'missing: a ProbeHead directory needs model.json {"model": <base model>, "layer": '
                                 '<hidden layer>, "instruction": <prompt with {question}>} (elical.heads.confidence.'
                                 'write_model_json); in Python, model=(model, tokenizer) of the training run works too')
            meta = sidecar or {"layer": -1, "instruction": QA_INSTRUCTION}
            with _as_input_error(head_dir):
                head = ProbeHead.load(head_dir)
            lm, tok = _resolve_model(model, meta.get("model"), device)
            recorded = meta.get("model")
        elif fmt == "elical.LoRAHead":
            meta = sidecar or {"layer": -1, "instruction": QA_INSTRUCTION}
            name = model if isinstance(model, str) else (sidecar or {}).get("model")
            if model is None and not name and not head_meta.get("base_model"):
                raise InputError(head_json, None, "base_model", "no base model recorded; pass the model "
                                 "(--model) or write model.json beside the head")
            pair = model if isinstance(model, tuple) else (load_model(name, device) if name else None)
            with _as_input_error(head_dir):
                head = LoRAHead.load(head_dir, model=pair, device=device)
            lm, tok = head.model, head.tokenizer
            recorded = name or head_meta.get("base_model")
        else:
            raise InputError(head_json, None, "format", f"expected 'elical.ProbeHead' or 'elical.LoRAHead', got "
                             f"{fmt!r}")
        return cls(head, lm, tok, layer=meta["layer"], instruction=meta["instruction"],
                   pooling=meta.get("pooling", "last"), method=head_dir.name,
                   batch_size=batch_size, base_model=model if isinstance(model, str) else recorded)

    @classmethod
    def from_reference(cls, lora_dir, head_file, base_model=None, *, layer: int | None = None,
                       instruction: str | None = None, device: str = "cpu", batch_size: int = 16,
                       method: str | None = None) -> ConfidenceModel:
        """Load a checkpoint in the reference code's format (Ni et al., arXiv 2510.17509; :mod:`elical.heads.reference`).

        Parameters
        ----------
        lora_dir : path or None
            The peft adapter directory (``adapter_config.json`` + ``adapter_model.safetensors``) trained with the
            head, or None for a head on the frozen base model's hidden states (the reference's ``train_mlp.py``).
        head_file : path
            ``vector_head_*.pt``: the state dict of ``nn.Linear(hidden, 1)`` (``weight`` [1, hidden], ``bias`` [1])
            or of ``Sequential(Linear, ReLU, ..., Linear)`` (``0.*``, ``2.*``, ``4.*``). Read with
            ``torch.load(weights_only=True)`` only.
        base_model : str or (model, tokenizer), optional
            The base model (name, local directory or HF id; or a pair already loaded, shared). Default: the one in
            ``elical_reference.json`` beside the head file (``elical export-head``), else the adapter's
            ``base_model_name_or_path``.
        layer : int, optional
            Hidden layer the head reads (default: the export's, else -1, the final layer after the final norm, as
            in the reference; a LoRA head always reads the final layer).
        instruction : str, optional
            Prompt template with ``{question}`` inside the chat template (default: the export's, else
            :data:`elical.heads.reference.REFERENCE_INSTRUCTION`, the reference's QA prompt).
        method : str, optional
            Name written beside each confidence (default: the head file's stem, e.g. ``vector_head_epoch_best``).

        Confidence = sigmoid(head(h)) with ``h`` the raw hidden state of the last real prompt token. Raises
        InputError (file and field named) for unusable files, a file ``weights_only`` refuses, or no base model;
        ValueError when the head does not fit the model.
        """
        from elical.heads.reference import load_reference

        head, lm, tok, layer, instruction, stem, name = load_reference(lora_dir, head_file, base_model, layer=layer,
                                                                       instruction=instruction, device=device)
        return cls(head, lm, tok, layer=layer, instruction=instruction, method=method or stem,
                   batch_size=batch_size, base_model=name)

    def prompts(self, questions: Sequence[str]) -> list[str]:
        """The exact model inputs for the questions (chat template around the instruction)."""
        if isinstance(questions, str):
            raise ValueError("questions must be a list of strings, not one string")
        bad = [i for i, q in enumerate(questions) if not isinstance(q, str) or not q.strip()]
        if bad:
            raise ValueError(f"questions must be non-empty strings; item {bad[0]} is {questions[bad[0]]!r}")
        return [build_prompt(self.tokenizer, q, self.instruction) for q in questions]

    def predict(self, questions: Sequence[str]) -> np.ndarray:
        """Confidence for each question: ndarray of shape (n,), float64 in [0, 1], higher = more likely correct.

        One batched forward pass over the prompts (``batch_size`` at a time), no generation. Raises ValueError for
        empty or non-string questions."""
        from elical.heads.probe import ProbeHead
        from elical.heads.reference import ReferenceHead

        prompts = self.prompts(questions)
        if not prompts:
            return np.zeros(0)
        if isinstance(self.head, (ProbeHead, ReferenceHead)):
            from elical.generation.features import extract_hidden_states

            feats = extract_hidden_states(self.model, self.tokenizer, prompts, layer=self.layer,
                                          batch_size=self.batch_size, pooling=self.pooling,
                                          questions=list(questions) if self.pooling == "mean" else None)
            return self.head.predict(feats)
        return self.head.predict(prompts)

    def gate(self, questions: Sequence[str], threshold: float) -> list[Gate]:
        """Answer-or-abstain decisions before answering: one :class:`Gate` per question, in order.

        ``questions``: n non-empty strings; ``threshold``: probability in [0, 1]. Returns a list of n ``Gate``
        (``confidence``: float in [0, 1], as :meth:`predict`; ``answer``: ``confidence >= threshold``). One forward
        pass per batch, no generation: use it to skip generation, abstain, or retrieve first (RAG) for the questions
        with ``answer=False``. Raises ValueError for a threshold outside [0, 1] or bad questions."""
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be a probability in [0, 1], got {threshold!r}")
        confidence = self.predict(questions)
        return [Gate(q, float(c), bool(c >= threshold)) for q, c in zip(questions, confidence)]


@contextmanager
def _as_input_error(head_dir: Path):
    """A head directory with missing or mismatched files is bad input (exit code 2 in the CLI)."""
    try:
        yield
    except InputError:
        raise
    except (FileNotFoundError, ValueError, KeyError) as exc:
        raise InputError(head_dir, None, None, f"unusable head: {exc}") from exc


def _resolve_model(model, recorded: str | None, device: str):
    from elical.generation.models import load_model

    if isinstance(model, tuple):
        return model
    return load_model(model or recorded, device)
