"""Command line: a thin layer over the stages. ``elical run --help`` lists the options.

Exit codes: 0 success, 2 bad input (the message names file, line and field), 1 any other error.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

__all__ = ["main"]

# Each of these modules defines ``register(subparsers)``, which adds its subcommand with
# ``set_defaults(handler=...)``; the handler takes the parsed args and returns an exit code. Keep their top-level
# imports light: every ``elical`` call imports them.
_SUBCOMMAND_MODULES: tuple[str, ...] = ("jobs.build", "jobs.merge", "jobs.judge", "jobs.evaluate", "report", "jobs.sweep", "jobs.predict",
                                         "jobs.serve", "study.command", "jobs.export", "judges.explain")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="elical", description="Honesty alignment: EliCal and HonestyBench.")
    sub = p.add_subparsers(dest="command", required=True)
    from elical.jobs.config import add_run_arguments

    r = sub.add_parser("run", help="train and evaluate EliCal and its baselines end to end")
    add_run_arguments(r)  # one option per RunConfig field (elical.jobs.config)
    r.add_argument("--output", help="run directory (default: runs/<preset>-<time>)")
    r.add_argument("--resume", action="store_true", help="continue the --output run directory with its saved preset "
                   "and options (config.json); an option given that differs from them is refused")
    r.add_argument("--quiet", action="store_true", help="no progress bars")
    for module in _SUBCOMMAND_MODULES:
        if module == "report":
            _register_report(sub)
            continue
        try:
            mod = importlib.import_module(f"elical.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"elical.{module}":
                raise
            continue
        mod.register(sub)
    return p


def _report(args) -> int:
    # here, on top, because it reads both kinds of directory: report (a run) must not import study (above it)
    from pathlib import Path

    if (Path(args.run_dir) / "study.json").is_file():  # an `elical study` directory: the study's own page
        from elical.study.page import build_study_report

        out = build_study_report(args.run_dir, args.output)
    else:
        from elical.report.page import build_report

        out = build_report(args.run_dir, args.output)
    print(f"report written to {out / 'index.html'}")
    return 0


def _register_report(subparsers) -> None:
    """``elical report RUN_DIR [--output DIR]``: the page of a run (elical.report.page) or of a study
    (elical.study.page)."""
    p = subparsers.add_parser("report", help="tables, figures and an offline HTML page from a run directory")
    p.add_argument("run_dir", help="a finished `elical run` directory (results.json, predictions.jsonl), or an "
                   "`elical study` directory (study.json)")
    p.add_argument("--output", help="where to write the report (default: RUN_DIR/report)")
    p.set_defaults(handler=_report)


def _config_from_args(args):
    """The run's RunConfig: the preset, or with ``--resume`` the run directory's saved configuration, and the
    options given (:func:`elical.jobs.config.config_from_args`)."""
    from elical.jobs.config import config_from_args

    return config_from_args(args, output=getattr(args, "output", None), resume=getattr(args, "resume", False))


def _silence_progress_bars() -> None:
    """``--quiet``: our own bars get ``disable=not progress``; these are the libraries' (transformers' and
    sentence-transformers' "Loading weights", Hugging Face downloads)."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # read when huggingface_hub is first imported
    os.environ["TQDM_DISABLE"] = "1"  # read by the bars that show themselves on a terminal (heads, the LLM judge)
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


def main(argv=None) -> int:
    from elical.registry import load_plugins

    load_plugins()  # entries of installed plug-in packages, before the registries give the CLI its choices
    args = _parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the defaults are offline; a user may set it to 0
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if getattr(args, "quiet", False):
        _silence_progress_bars()
    from elical.extras import MissingExtraError
    from elical.generation.openai_client import EndpointError
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
    except (InputError, MissingExtraError) as exc:
        print(f"elical: error: {exc}", file=sys.stderr)
        return 2
    except EndpointError as exc:  # a remote server down, failing or unusable: its message, no traceback
        print(f"elical: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("elical: interrupted; continue with the same command and --resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
