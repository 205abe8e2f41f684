"""elical: honesty alignment for language models (EliCal, Ni et al., arXiv 2510.17509).

The public API, imported lazily (``import elical`` loads neither torch nor transformers)::

    import elical
    results = elical.run(elical.RunConfig(preset="smoke"), "runs/smoke")        # the whole job
    model = elical.ConfidenceModel.load("runs/smoke/heads/elical_k8")          # confidence before answering
    elical.evaluate_confidence(y, confidence)                                 # AUROC, ECE, Alignment, ...

Registries by name (one shape, :class:`elical.registry.Registry`): ``EQUIVALENCE_JUDGES``, ``CORRECTNESS_JUDGES``,
``ESTIMATORS``, ``HEADS``, ``METRICS``, ``BACKENDS``, ``SOURCES``; ``PRESETS`` (run sizes), ``STUDY_PRESETS``
(``elical study`` sizes; ``run_study``).
"""

from __future__ import annotations

import importlib
from importlib import metadata

try:
    __version__ = metadata.version("elical")
except metadata.PackageNotFoundError:  # a source tree that was not installed
    __version__ = "0.0.0+unknown"

# public name -> module that defines it
_EXPORTS = {
    "run": "elical.jobs.run",
    "RunConfig": "elical.jobs.run",
    "PRESETS": "elical.jobs.run",
    "ProbeHead": "elical.heads.probe",
    "LoRAHead": "elical.heads.lora",
    "LoRAConfig": "elical.heads.lora_config",
    "fit_eli_only": "elical.heads.stages",
    "fit_elical": "elical.heads.stages",
    "fit_cal_only": "elical.heads.stages",
    "ConfidenceModel": "elical.heads.confidence",
    "run_study": "elical.study.command",
    "STUDY_PRESETS": "elical.study.presets",
    "evaluate_confidence": "elical.evaluation.metrics",
    "aggregate": "elical.evaluation.aggregate",
    "make_generator": "elical.generation.backends",
    "DecodingConfig": "elical.generation.base",
    "load_model": "elical.generation.models",
    "EQUIVALENCE_JUDGES": "elical.judges",
    "CORRECTNESS_JUDGES": "elical.judges",
    "ESTIMATORS": "elical.estimators",
    "estimate": "elical.estimators",
    "HEADS": "elical.heads",
    "BACKENDS": "elical.generation",
    "SOURCES": "elical.data",
    "METRICS": "elical.evaluation",
    "make_equivalence_judge": "elical.judges",
    "make_correctness_judge": "elical.judges",
    "load_dataset": "elical.data.sources",
    "read_records": "elical.records",
    "InputError": "elical.records",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'elical' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
