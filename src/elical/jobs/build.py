"""``elical build``, ``elical merge``, ``elical export``: HonestyBench-style annotation, resumable and sharded.

``elical build`` annotates named datasets (``facts``, folders of a HonestyBench QA ``--data-dir``, ``mmlu``) into
``BUILD_DIR/<dataset>/<split>.jsonl`` (the record schema of ``elical run``) and the last-prompt-token hidden states
into ``BUILD_DIR/<dataset>/<split>.features.safetensors``; ``BUILD_DIR/build.json`` holds the configuration, which
every later command on the directory must match. ``train``/``test`` are the sides of :func:`elical.data.sources.hash_split`
(MMLU: ``test`` only). Records are appended batch by batch and a question's answers depend only on the seed and its
id, so a build killed at any moment and run again ends with the files of an uninterrupted one; ``--shard i/n`` takes every n-th
whole batch, so merged shards equal an unsharded build line for line. Details: ``docs/build.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
from collections import Counter
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Sequence

from elical.fileio import write_text_atomic
from elical.records import InputError, read_records

__all__ = ["BuildConfig", "Unit", "load_config", "parse_shard", "plan_units", "shard_part", "build", "register"]

SPLITS = ("train", "test")
CONFIG_FILE = "build.json"
FORMAT = 1
_SHARD_RE = re.compile(r"^(?P<split>\w+)\.shard-(?P<i>\d+)-of-(?P<n>\d+)\.jsonl$")


@dataclass(frozen=True)
class BuildConfig:
    """What a build generates. Everything here changes the records, so a resumed build must match it; the device
    and the shard do not belong here (shards of one build share it)."""

    datasets: tuple[str, ...] = ("facts",)
    data_dir: str | None = None
    mmlu_dir: str | None = None
    split: str = "all"
    limit: int | None = None
    model: str = "smollm2-135m-instruct"
    backend: str = "transformers"
    n_samples: int = 5
    max_new_tokens: int = 20
    batch_size: int = 16
    layer: int = -1
    seed: int = 0
    semantic_model: str | None = None


@dataclass
class Unit:
    """One dataset and split: ``questions`` is its full, ordered question list (after ``--limit``)."""

    dataset: str
    split: str
    questions: list[dict]

    def records_path(self, root, shard: tuple[int, int] | None = None, ext: str = ".jsonl") -> Path:
        """``root/<dataset>/<split>[.shard-i-of-n]<ext>``."""
        return Path(root) / self.dataset / f"{self.split}{_suffix(shard)}{ext}"

    def features_path(self, root, shard: tuple[int, int] | None = None) -> Path:
        return self.records_path(root, shard, ".features.safetensors")


def _suffix(shard) -> str:
    return "" if shard is None else f".shard-{shard[0]}-of-{shard[1]}"


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"i/n"`` -> ``(i, n)`` with 1 <= i <= n; None -> None. Raises InputError for anything else."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise InputError("--shard", None, "--shard", f"expected i/n with 1 <= i <= n (e.g. 1/4), got {text!r}")
    return int(m.group(1)), int(m.group(2))


def _load_source(name: str, cfg: BuildConfig) -> list[dict]:
    from elical.data.sources import load_dataset

    return load_dataset(name, cfg.data_dir, cfg.mmlu_dir)


def _limit_key(qid: str) -> str:
    return hashlib.sha1(qid.encode("utf-8")).hexdigest()


def plan_units(cfg: BuildConfig, log=print) -> list[Unit]:
    """The (dataset, split) units of a build with their full question lists; empty units are left out (MMLU has
    no ``train`` side). Raises InputError for a bad dataset name, a bad data line or duplicate ids."""
    from elical.data.sources import hash_split

    if cfg.split not in (*SPLITS, "all"):
        raise InputError("--split", None, "--split", f"expected train, test or all, got {cfg.split!r}")
    if not cfg.datasets:
        raise InputError("--datasets", None, "--datasets", "no dataset named")
    splits = SPLITS if cfg.split == "all" else (cfg.split,)
    units = []
    from elical.data.sources import source_of

    for name in cfg.datasets:
        questions = _load_source(name, cfg)
        own_split = source_of(name, cfg.data_dir).info.get("own_split", False)
        dup = [i for i, c in Counter(q["id"] for q in questions).items() if c > 1]
        if dup:
            raise InputError(name, None, "id", f"duplicate question ids: {_some(dup)}")
        for split in splits:
            # a source's own split (MMLU's); a released training split's side (read_qa_folder); else the hash
            side = [{**{k: v for k, v in q.items() if k != "side"}, "split": split} for q in questions
                    if (q["split"] if own_split else q.get("side") or hash_split(q["question"])) == split]
            if cfg.limit is not None and len(side) > cfg.limit:
                keep = set(sorted((q["id"] for q in side), key=_limit_key)[:cfg.limit])
                side = [q for q in side if q["id"] in keep]
            if side:
                units.append(Unit(name, split, side))
            else:
                log(f"{name}/{split}: no questions on this side; skipped")
    return units


def shard_part(questions: Sequence[dict], batch_size: int, shard: tuple[int, int] | None) -> list[dict]:
    """The questions of shard ``(i, n)``: batches ``i-1, i-1+n, i-1+2n, ...`` of the list cut every
    ``batch_size`` questions. Every batch is whole, so :func:`elical.jobs.annotate` on the part cuts the same
    batches as on the full list (the answers would be the same in any batches; the same batches keep even the
    float rounding of the log-probs, so merged shards equal an unsharded build byte for byte)."""
    if shard is None:
        return list(questions)
    i, n = shard
    return [q for k in range(0, len(questions), batch_size) if (k // batch_size) % n == i - 1
            for q in questions[k:k + batch_size]]


def _config_dict(cfg: BuildConfig) -> dict:
    return json.loads(json.dumps({"format": FORMAT, **asdict(cfg)}))


def load_config(build_dir: str | Path) -> BuildConfig:
    """The :class:`BuildConfig` saved in ``build_dir/build.json``; InputError when absent or malformed."""
    path = Path(build_dir) / CONFIG_FILE
    if not path.is_file():
        raise InputError(build_dir, None, None, f"not an elical build directory (no {CONFIG_FILE})")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        # builds made before the backend option were all made with the transformers backend
        kw = {f.name: saved[f.name] if f.name != "backend" else saved.get(f.name, "transformers")
              for f in fields(BuildConfig)}
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise InputError(path, None, None, f"malformed build configuration ({exc})") from None
    return BuildConfig(**{**kw, "datasets": tuple(kw["datasets"])})


def _check_config(out: Path, cfg: BuildConfig) -> None:
    path = out / CONFIG_FILE
    if out.exists() and not out.is_dir():
        raise InputError(out, None, "--output", "exists and is not a directory")
    if not path.exists():
        # build.json is a build's first file; temporary files of a concurrent shard's write do not count
        others = out.exists() and any(not p.name.startswith(CONFIG_FILE) for p in out.iterdir())
        if others and not path.exists():  # re-checked: a concurrent shard writes build.json before anything else
            raise InputError(out, None, "--output", f"exists, is not empty and has no {CONFIG_FILE}: not a build "
                             "directory; choose another --output (nothing was overwritten)")
        if not path.exists():
            return
    saved, now = _config_dict(load_config(out)), _config_dict(cfg)
    diff = [k for k in now if saved.get(k) != now[k]]
    if diff:
        raise InputError(path, None, diff[0], f"differs from this command ({', '.join(diff)}; saved "
                         f"{saved[diff[0]]!r}, now {now[diff[0]]!r}): a resumed build must use the same configuration")


def _some(ids: Sequence[str], k: int = 10) -> str:
    return ", ".join(ids[:k]) + (f" and {len(ids) - k} more" if len(ids) > k else "")


def _records_done(path: Path, ids: Sequence[str]) -> int:
    """Number of ``ids`` with a record in ``path``; InputError when the file holds records of other ids."""
    have = [r.get("id") for r in read_records(path)]
    extra = sorted(set(have) - set(ids))
    if extra:
        raise InputError(path, None, "id", f"{len(extra)} records not in this build's question list "
                         f"(e.g. {', '.join(map(str, extra[:3]))}); nothing was changed")
    return len(set(have))


def _features_done(path: Path, ids: Sequence[str]) -> bool:
    from elical.generation.features import load_features

    if not path.exists():
        return False
    try:
        return load_features(path)[0] == list(ids)
    except Exception:  # an unreadable file is recomputed, not trusted
        return False


def build(cfg: BuildConfig, out: str | Path, shard: tuple[int, int] | None = None, *, device: str = "cpu",
          progress: bool = True, model=None, tokenizer=None, log=print, backend_options: dict | None = None) -> dict:
    """Annotate and featurize every unit of ``cfg`` (or shard ``(i, n)`` of each) into ``out``; resumable.

    ``model``/``tokenizer``: an already loaded model (else :func:`elical.generation.models.load_model`; it computes
    the hidden states when ``cfg.backend`` gives none). ``backend_options``: for
    :func:`elical.generation.backends.make_generator` (openai: ``base_url``, ``api_key``). Returns
    ``{"nothing_to_do": bool, "units": [{"dataset", "split", "path", "n", "had", "features"}]}`` (``had``:
    records present before). A finished build loads no model and touches no file. Raises InputError for bad
    input or a configuration that differs from ``out/build.json``; nothing is written before those checks.
    """
    from elical.jobs.checks import check_output_dir

    out = check_output_dir(out)
    units = plan_units(cfg, log)
    _check_config(out, cfg)
    todo, report = [], []
    for u in units:
        qs = shard_part(u.questions, cfg.batch_size, shard)
        if not qs:
            continue
        ids = [q["id"] for q in qs]
        rpath, fpath = u.records_path(out, shard), u.features_path(out, shard)
        had = _records_done(rpath, ids) if rpath.exists() else 0
        entry = {"dataset": u.dataset, "split": u.split, "path": str(rpath), "n": len(qs), "had": had,
                 "features": str(fpath)}
        report.append(entry)
        if had < len(qs) or not _features_done(fpath, ids):
            todo.append((u, qs, ids, rpath, fpath, entry))
    if not todo:
        log(f"nothing to do: {len(report)} record files and their features are complete in {out}")
        return {"nothing_to_do": True, "units": report}
    if model is None:
        from elical.generation.models import load_model

        model, tokenizer = load_model(cfg.model, device=device)
    from elical.jobs.checks import check_prompt_lengths

    # before anything is written: a prompt longer than the model's context fails here, naming file and line
    check_prompt_lengths([q for t in todo for q in t[1]], tokenizer, model, cfg.max_new_tokens)
    if not (out / CONFIG_FILE).exists():  # shards started together write the same content: either rename wins
        write_text_atomic(out / CONFIG_FILE, json.dumps(_config_dict(cfg), indent=2) + "\n")
    import numpy as np

    from elical.jobs.annotate import Annotator, annotate
    from elical.generation.features import extract_hidden_states, save_features
    from elical.generation.backends import make_generator
    from elical.generation.base import DecodingConfig, decoding_meta
    from elical.judges.choices import MMLUCorrectness
    from elical.data.sources import source_of

    decoding = DecodingConfig(n_samples=cfg.n_samples, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size)
    # the builder's fast path: prefix-sharing decoding (elical.generation.prefix_sharing, docs/benchmarks.md)
    generator = make_generator(cfg.backend, model if cfg.backend == "transformers" else cfg.model, tokenizer, decoding,
                               **(backend_options or {}))
    qa = Annotator.default(cfg.semantic_model)
    mc = Annotator(MMLUCorrectness(), qa.lexical, qa.semantic, names={**qa.names, "correctness": "mmlu_correct"})
    for u, qs, ids, rpath, fpath, entry in todo:
        annotator = mc if source_of(u.dataset, cfg.data_dir).info.get("answers") == "choices" else qa
        meta = {"model": cfg.model, "seed": cfg.seed, "decoding": decoding_meta(generator),
                "judges": annotator.describe()}
        log(f"{u.dataset}/{rpath.name}: {entry['had']} of {len(qs)} records present")
        fresh = {}  # hidden states from the decoder's prefill; records made earlier get a separate pass
        records = annotate(qs, generator, annotator, rpath, seed=cfg.seed, meta=meta, progress=progress,
                           hidden_layers=(cfg.layer,), hidden_states=fresh)
        if not _features_done(fpath, ids):
            rest = [r["prompt"] for r in records if r["id"] not in fresh]
            rest = iter(extract_hidden_states(model, tokenizer, rest, layer=cfg.layer, batch_size=cfg.batch_size,
                                              progress=progress))
            feats = np.stack([fresh[r["id"]][cfg.layer] if r["id"] in fresh else next(rest) for r in records])
            save_features(fpath, ids, feats, meta={"model": cfg.model, "layer": cfg.layer,
                                                   "token": "last prompt token"})
    log(f"done: {sum(e['n'] for e in report)} records in {len(report)} files under {out}")
    return {"nothing_to_do": False, "units": report}


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _cmd_build(args) -> int:
    datasets = tuple(dict.fromkeys(d.strip() for d in args.datasets.split(",") if d.strip()))
    cfg = BuildConfig(datasets=datasets, data_dir=os.path.abspath(args.data_dir) if args.data_dir else None,
                      mmlu_dir=os.path.abspath(args.mmlu_dir) if args.mmlu_dir else None, split=args.split,
                      limit=args.limit, model=args.model, n_samples=args.n_samples,
                      max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, layer=args.layer,
                      seed=args.seed, semantic_model=args.semantic_model, backend=args.backend)
    options = {}
    if args.backend == "openai":
        if not args.base_url:
            raise InputError("--base-url", None, "--base-url", "the openai backend needs --base-url "
                             "(e.g. http://127.0.0.1:8000/v1)")
        key = os.environ.get(args.api_key_env) if args.api_key_env else None
        if args.api_key_env and not key:
            raise InputError("--api-key-env", None, "--api-key-env", f"environment variable {args.api_key_env} "
                             "is not set")
        from elical.generation.openai_client import client_options, require_openai

        require_openai("--backend")
        c = client_options(args.request_timeout, args.max_retries, args.concurrency)
        options = {"base_url": args.base_url, "api_key": key, "timeout": c["timeout"],
                   "max_retries": c["max_retries"], "max_concurrency": c["concurrency"]}
    options.update(_vllm_options(args))
    build(cfg, args.output, parse_shard(args.shard), device=args.device, progress=not args.quiet,
          backend_options=options)
    return 0


def _vllm_options(args) -> dict:
    """``vllm.LLM`` keyword arguments of ``--tensor-parallel-size`` and ``--vllm-arg`` (vllm backend only; checked
    against the installed vLLM before anything is written). They are not part of ``build.json``: how the engine is
    spread over GPUs does not change the records, so shards may use different settings. Raises InputError."""
    from elical.generation.backends import check_vllm_options, parse_vllm_args

    options = parse_vllm_args(args.vllm_arg or (), args.tensor_parallel_size)
    if options and args.backend != "vllm":
        raise InputError("--vllm-arg", None, "--backend", f"--tensor-parallel-size and --vllm-arg are options of "
                         f"the vllm backend, not of {args.backend!r}")
    return check_vllm_options(options) if args.backend == "vllm" else {}


def register(sub) -> None:
    """Add the ``build`` subcommand to the ``elical`` parser."""
    from elical.generation import BACKENDS
    from elical.generation.openai_client import CLIENT_ARGUMENTS

    fmt = argparse.ArgumentDefaultsHelpFormatter
    b = sub.add_parser("build", formatter_class=fmt, help="annotate datasets into a resumable, shardable build "
                       "directory (records + hidden states)")
    for flag, kw in (
            ("--datasets", dict(required=True, help="comma-separated: facts, mmlu, or folders of --data-dir")),
            ("--data-dir", dict(help="directory in the HonestyBench QA layout <dataset>/<file>.jsonl")),
            ("--mmlu-dir", dict(help="MMLU directory with <split>/<subject>_<split>.csv (for 'mmlu')")),
            ("--output", dict(required=True, help="build directory (BUILD_DIR)")),
            ("--split", dict(choices=["train", "test", "all"], default="all",
                             help="hash-split side(s): train = training pool, test = evaluation")),
            ("--limit", dict(type=_positive, help="at most this many questions per dataset and split")),
            ("--shard", dict(help="i/n: only shard i of n (1-based); join the shards with `elical merge`")),
            ("--model", dict(default=BuildConfig.model, help="model name, local directory or HF id")),
            ("--backend", dict(choices=BACKENDS.names(), default=BuildConfig.backend,
                               help="generation backend (docs/backends.md); hidden states come from the local "
                                    "model when it gives none")),
            ("--base-url", dict(help="openai backend: the server's URL, e.g. http://127.0.0.1:8000/v1")),
            ("--api-key-env", dict(help="openai backend: environment variable holding the API key")),
            ("--tensor-parallel-size", dict(type=int, help="vllm backend: GPUs per model copy (vllm.LLM's "
                                            "tensor_parallel_size); data parallelism: one --shard per GPU")),
            ("--vllm-arg", dict(action="append", metavar="KEY=VALUE", help="vllm backend: an option of vllm.LLM, "
                                "repeatable (gpu_memory_utilization=0.85, max_model_len=4096, dtype=bfloat16, "
                                "enforce_eager=true; docs/scaling.md)")),
            ("--n-samples", dict(type=_positive, default=BuildConfig.n_samples, help="sampled answers (N)")),
            ("--max-new-tokens", dict(type=_positive, default=BuildConfig.max_new_tokens, help="answer length cap")),
            ("--batch-size", dict(type=_positive, default=BuildConfig.batch_size, help="questions per batch")),
            ("--layer", dict(type=int, default=BuildConfig.layer, help="hidden layer of the features (-1 = final)")),
            ("--seed", dict(type=int, default=BuildConfig.seed, help="sampling seed")),
            ("--semantic-model", dict(help="sentence-embedding model for consistency (default all-MiniLM-L6-v2)")),
            ("--device", dict(default="cpu", help="cpu, cuda, cuda:1, ...")),
            ("--quiet", dict(action="store_true", help="no progress bars")), *CLIENT_ARGUMENTS):
        b.add_argument(flag, **kw)
    b.set_defaults(handler=_cmd_build)
