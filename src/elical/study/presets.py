"""Presets of ``elical study``: the HonestyBench protocol (Ni et al., arXiv 2510.17509, Sec. 5-6) at three sizes.

A preset fixes the run (the model, the datasets, the pool and evaluation sizes, the decoding) and the study grid
(label counts k, seeds, pool sizes of the elicitation curve). ``smoke`` is for the tests (minutes on 2 cores);
``cpu`` is SmolLM2-135M-Instruct on a laptop (about 70 minutes on a quiet 2-core machine: 5,000 unlabelled pool
questions, 500 evaluation questions per dataset); ``paper`` uses the released sizes (N = 20 samples, 1,000
evaluation questions per dataset, the whole in-domain files as the pool) and is meant for GPUs with
``--backend vllm``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from elical.data.groups import IN_DOMAIN, OUT_OF_DOMAIN

__all__ = ["StudyPreset", "STUDY_PRESETS", "HONESTYBENCH_DATASETS"]

#: The HonestyBench QA sets available offline (TriviaQA is not) and MMLU, in the paper's order.
HONESTYBENCH_DATASETS: tuple[str, ...] = (*(d for d in IN_DOMAIN if d not in ("tq", "facts")),
                                          *OUT_OF_DOMAIN, "mmlu")


@dataclass(frozen=True)
class StudyPreset:
    """Sizes of one study. ``k_values``: label counts (``"all"`` = the whole pool); ``seeds``: seeds of label
    choice and head training; ``pool_sizes``: unlabelled pool sizes of the elicitation curve (values above the
    pool are dropped, the whole pool is always added); the rest are :class:`elical.jobs.run.RunConfig` fields."""

    name: str
    datasets: tuple[str, ...] = HONESTYBENCH_DATASETS
    n_train: int = 5000
    n_eval: int = 500
    n_samples: int = 5
    max_new_tokens: int = 20
    batch_size: int = 32
    model_estimators: bool = False
    k_values: tuple = (4, 8, 16, 32, 64, 128, 256, 512, 1024, "all")
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    pool_sizes: tuple[int, ...] = (250, 500, 1000, 2000, 4000)
    n_bootstrap: int = 1000
    run_overrides: dict = field(default_factory=dict)

    def run_config(self, data_dir: str, mmlu_dir: str | None, **overrides):
        """The :class:`elical.jobs.run.RunConfig` of the study's run directory (``overrides``: model, backend,
        head, layer, judges, device, ...). Its own heads use k = the smallest and the largest numeric k and seed
        0; the study fits its own grid."""
        from elical.jobs.run import RunConfig

        ks = [k for k in self.k_values if k != "all"]
        cfg = RunConfig(preset=f"study-{self.name}", datasets=self.datasets, data_dir=data_dir, mmlu_dir=mmlu_dir,
                        n_train=self.n_train, n_eval=self.n_eval, n_samples=self.n_samples,
                        max_new_tokens=self.max_new_tokens, batch_size=self.batch_size,
                        k_values=(min(ks), max(ks)), model_estimators=self.model_estimators,
                        n_bootstrap=200, **self.run_overrides)
        return replace(cfg, **{k: v for k, v in overrides.items() if v is not None})


STUDY_PRESETS: dict[str, StudyPreset] = {
    "smoke": StudyPreset("smoke", datasets=("nq", "pararel_patterns", "squad", "popqa", "mmlu"), n_train=48,
                         n_eval=12, n_samples=3, max_new_tokens=12, k_values=(4, 16, "all"), seeds=(0, 1),
                         pool_sizes=(24,), n_bootstrap=100),
    "cpu": StudyPreset("cpu"),
    "paper": StudyPreset("paper", n_train=560_000, n_eval=1000, n_samples=20, max_new_tokens=64, batch_size=64,
                         model_estimators=True,
                         k_values=(16, 64, 256, 1000, 4000, 16000, 64000, "all"),
                         pool_sizes=(1000, 4000, 16000, 64000, 256000), run_overrides={"backend": "vllm"}),
}
