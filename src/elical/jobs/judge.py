"""``elical judge``: judge stored generations again, without generating, into a new directory.

    elical judge RUN_OR_BUILD_DIR --output NEW_DIR [--correctness-judge NAME] [--equivalence-judge NAME]

Reads the records of an ``elical run`` directory (``records/annotations.jsonl``) or of an ``elical build``
directory (``<dataset>/<split>.jsonl``), recomputes their judged fields (``greedy_correctness``,
``sampling_correctness``, ``consistency_judgement``, ``consistency_rougeL``) with the chosen judges, which always
receive the question (:func:`elical.jobs.annotate.judge_answers`), and writes them with ``meta.judges`` updated to
``NEW_DIR`` in the same layout; the hidden states are copied, the generations are untouched. Nothing in the source
directory is written. Identical (question, answers) inputs are judged once (the cache is keyed by the input). A
killed pass resumes with ``--resume``: records already in ``NEW_DIR`` are kept.

Continue a run directory with ``elical run --output NEW_DIR --resume`` and the same options plus the new judge
names (the heads and metrics are recomputed; nothing is generated again); use a build directory as before
(``elical run --build-dir NEW_DIR`` with the same judges).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from elical.records import InputError, open_append, read_records, write_json_atomic

__all__ = ["judge_directory", "register"]


def _record_files(src: Path) -> tuple[str, list[Path]]:
    """``("run" | "build", record files relative to src)``; InputError when src is neither."""
    if (src / "records" / "annotations.jsonl").is_file():
        return "run", [Path("records/annotations.jsonl")]
    if (src / "build.json").is_file():
        files = sorted(p.relative_to(src) for p in src.glob("*/*.jsonl") if ".shard-" not in p.name)
        if files:
            return "build", files
    raise InputError(src, None, "RUN_OR_BUILD_DIR", "neither a run directory (records/annotations.jsonl) nor a "
                     "build directory (build.json and <dataset>/<split>.jsonl)")


class _CachedAnnotator:
    """An annotator whose verdicts are cached by their input: (question, answer(s), aliases)."""

    def __init__(self, annotator):
        self.inner, self.cache, self.hits = annotator, {}, 0
        self.lexical = annotator.lexical
        self.semantic = self  # judge_answers calls .semantic.judge and .correctness
        self.describe = annotator.describe

    def _cached(self, key, compute):
        if key in self.cache:
            self.hits += 1
        else:
            self.cache[key] = compute()
        return self.cache[key]

    def correctness(self, responses, aliases, question=None):
        key = ("c", question, tuple(responses), tuple(aliases))
        return self._cached(key, lambda: list(self.inner.correctness(responses, aliases, question=question)))

    def judge(self, greedy, samples, question=None):
        key = ("e", question, greedy, tuple(samples))
        return self._cached(key, lambda: list(self.inner.semantic.judge(greedy, samples, question=question)))


def judge_directory(src, out, *, correctness: str | None = None, equivalence: str | None = None,
                    semantic_model: str | None = None, resume: bool = False, progress: bool = True,
                    judge_base_url: str | None = None, client: dict | None = None) -> dict:
    """Judge the records of ``src`` again into ``out`` (module docstring). Returns {"kind", "files", "records",
    "cache_hits", "judges"}. Raises InputError (nothing written) for a bad source, an existing non-empty ``out``
    without ``resume``, an unknown judge, or a malformed record (file and line named). An ``llm`` judge needs
    ``judge_base_url`` (an OpenAI-compatible server; ``semantic_model`` is then the model name sent, ``client``
    its timeout / retries / concurrency) or ``semantic_model`` as a local judge model directory. Each record is
    written as soon as it is judged, so a failed pass resumes (``resume``) where it stopped."""
    from tqdm.auto import tqdm

    from elical.jobs.annotate import Annotator, judge_answers

    src, out = Path(src), Path(out)
    kind, files = _record_files(src)
    if out.resolve() == src.resolve():
        raise InputError(out, None, "--output", "must differ from the source directory (it is never overwritten)")
    from elical.jobs.checks import check_output_dir

    check_output_dir(out)
    if out.is_dir() and any(out.iterdir()) and not resume:
        raise InputError(out, None, "--output", "exists and is not empty; pass --resume to continue it")
    try:
        llm = "llm" in (correctness, equivalence)
        annotator = _CachedAnnotator(Annotator.default(
            None if llm else semantic_model, correctness=correctness, equivalence=equivalence,
            judge_model=semantic_model if llm else None, judge_base_url=judge_base_url, client=client))
    except ValueError as exc:
        raise InputError("--equivalence-judge", None, "--equivalence-judge", str(exc)) from None
    judges = annotator.describe()
    sources = {f: read_records(src / f) for f in files}  # every file checked before anything is written
    out.mkdir(parents=True, exist_ok=True)
    total = sum(len(v) for v in sources.values())
    with tqdm(total=total, desc="judge", unit="q", disable=not progress) as bar:
        for rel, records in sources.items():
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            done = {r["id"] for r in read_records(target)}
            bar.update(len(done))
            with open_append(target) as w:
                for r in records:
                    if r["id"] in done:
                        continue
                    greedy = r["greedy_response"][0] if isinstance(r["greedy_response"], list) else r["greedy_response"]
                    new = {**r, **judge_answers(r, greedy, list(r.get("sampling_response") or []), annotator),
                           "meta": {**(r.get("meta") or {}), "judges": judges}}
                    w.write([new])
                    bar.update(1)
    for extra in (["config.json", "features"] if kind == "run" else ["build.json", *sorted(
            str(p.relative_to(src)) for p in src.glob("*/*.features.safetensors"))]):
        s, d = src / extra, out / extra
        if d.exists() or not s.exists():
            continue
        if s.is_dir():
            shutil.copytree(s, d)
        else:
            d.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(s, d)
    if kind == "run":
        cfg = json.loads((out / "config.json").read_text(encoding="utf-8"))
        cfg.update({k: v for k, v in (("correctness_judge", judges["correctness"]),
                                      ("equivalence_judge", judges["equivalence"])) if k in cfg})
        write_json_atomic(out / "config.json", cfg)
    return {"kind": kind, "files": [str(f) for f in files], "records": total, "cache_hits": annotator.hits,
            "judges": judges}


def _cmd_judge(args) -> int:
    from elical.generation.openai_client import client_options

    res = judge_directory(args.directory, args.output, correctness=args.correctness_judge,
                          equivalence=args.equivalence_judge, semantic_model=args.judge_model, resume=args.resume,
                          progress=not args.quiet, judge_base_url=args.judge_base_url,
                          client=client_options(args.request_timeout, args.max_retries, args.concurrency))
    print(f"judged {res['records']} records of a {res['kind']} directory into {args.output} "
          f"({res['cache_hits']} repeated inputs answered from the cache); judges: "
          f"{res['judges']['correctness']} (correctness), {res['judges']['equivalence']} (equivalence)")
    return 0


def register(sub) -> None:
    """Add the ``judge`` subcommand to the ``elical`` parser."""
    from elical.jobs.config import judge_name
    from elical.judges import correctness_names, equivalence_names

    p = sub.add_parser("judge", help="judge the stored answers of a run or build directory again, without "
                       "generating, into a new directory")
    p.add_argument("directory", help="an `elical run` or `elical build` directory")
    p.add_argument("--output", required=True, help="new directory for the re-judged records (never the source)")
    p.add_argument("--correctness-judge", choices=correctness_names(), type=judge_name("correctness"),
                   help="default: learned")
    p.add_argument("--equivalence-judge", choices=equivalence_names(), type=judge_name("equivalence"),
                   help="default: learned")
    p.add_argument("--judge-model", help="local model directory for the learned, embedding or nli judge; for "
                   "llm a local judge model directory, or the model name sent to --judge-base-url")
    p.add_argument("--judge-base-url", help="llm judge: an OpenAI-compatible server, e.g. http://host:8000/v1")
    from elical.generation.openai_client import CLIENT_ARGUMENTS

    for flag, kw in CLIENT_ARGUMENTS:
        p.add_argument(flag, **kw)
    p.add_argument("--resume", action="store_true", help="continue a killed pass into the same --output")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=_cmd_judge)
