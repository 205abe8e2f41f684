"""``elical build``, ``elical merge``, ``elical export``: HonestyBench-style annotation, resumable and sharded.

``elical build`` annotates named datasets (``facts``, folders of a HonestyBench QA ``--data-dir``, ``mmlu``) into
``BUILD_DIR/<dataset>/<split>.jsonl`` (the record schema of ``elical run``) and the last-prompt-token hidden states
into ``BUILD_DIR/<dataset>/<split>.features.safetensors``; ``BUILD_DIR/build.json`` holds the configuration, which
every later command on the directory must match. ``train``/``test`` are the sides of :func:`elical.data.sources.hash_split`
(MMLU: ``test`` only). Records are appended batch by batch with seeds fixed by the full question list, so a build
killed at any moment and run again ends with the files of an uninterrupted one; ``--shard i/n`` takes every n-th
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

from elical.records import InputError, open_append, read_records

__all__ = ["BuildConfig", "Unit", "load_config", "parse_shard", "plan_units", "shard_part", "build", "merge", "export",
           "reuse_build", "reuse_features", "register"]

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

    if name == "facts":
        return load_dataset("facts", None)
    if name == "mmlu":
        if not cfg.mmlu_dir:
            raise InputError("--mmlu-dir", None, "--datasets", "dataset 'mmlu' needs --mmlu-dir "
                             "(e.g. ../shared/data/mmlu)")
        from elical.data.mmlu import load_mmlu

        return load_mmlu(cfg.mmlu_dir, "test")
    return load_dataset(name, cfg.data_dir)


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
    for name in cfg.datasets:
        questions = _load_source(name, cfg)
        dup = [i for i, c in Counter(q["id"] for q in questions).items() if c > 1]
        if dup:
            raise InputError(name, None, "id", f"duplicate question ids: {_some(dup)}")
        for split in splits:
            side = [{**q, "split": split} for q in questions
                    if (q["split"] if name == "mmlu" else hash_split(q["question"])) == split]
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
    batches (and derives the same sampling seeds) as on the full list."""
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
        kw = {f.name: saved[f.name] for f in fields(BuildConfig)}
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
          progress: bool = True, model=None, tokenizer=None, log=print) -> dict:
    """Annotate and featurize every unit of ``cfg`` (or shard ``(i, n)`` of each) into ``out``; resumable.

    ``model``/``tokenizer``: an already loaded model (else :func:`elical.generation.models.load_model`). Returns
    ``{"nothing_to_do": bool, "units": [{"dataset", "split", "path", "n", "had", "features"}]}`` (``had``:
    records present before). A finished build loads no model and touches no file. Raises InputError for bad
    input or a configuration that differs from ``out/build.json``; nothing is written before those checks.
    """
    out = Path(out)
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
    if not (out / CONFIG_FILE).exists():  # shards started together write the same content: either rename wins
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / f"{CONFIG_FILE}.tmp{os.getpid()}"
        tmp.write_text(json.dumps(_config_dict(cfg), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, out / CONFIG_FILE)
    from elical.jobs.annotate import Annotator, annotate
    from elical.generation.features import extract_hidden_states, save_features
    from elical.generation.backends import make_generator
    from elical.generation.base import DecodingConfig
    from elical.data.mmlu import MMLUCorrectness

    if model is None:
        from elical.generation.models import load_model

        model, tokenizer = load_model(cfg.model, device=device)
    decoding = DecodingConfig(n_samples=cfg.n_samples, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size)
    # the builder's fast path: prefix-sharing decoding (elical.generation.prefix_sharing, docs/benchmarks.md)
    generator = make_generator("transformers", model, tokenizer, decoding)
    qa = Annotator.default(cfg.semantic_model)
    mc = Annotator(MMLUCorrectness(), qa.lexical, qa.semantic, names={**qa.names, "correctness": "mmlu_correct"})
    for u, qs, ids, rpath, fpath, entry in todo:
        annotator = mc if u.dataset == "mmlu" else qa
        meta = {"model": cfg.model, "seed": cfg.seed, "decoding": asdict(decoding), "judges": annotator.describe()}
        log(f"{u.dataset}/{rpath.name}: {entry['had']} of {len(qs)} records present")
        records = annotate(qs, generator, annotator, rpath, seed=cfg.seed, meta=meta, progress=progress)
        if not _features_done(fpath, ids):
            feats = extract_hidden_states(model, tokenizer, [r["prompt"] for r in records], layer=cfg.layer,
                                          batch_size=cfg.batch_size, progress=progress)
            save_features(fpath, ids, feats, meta={"model": cfg.model, "layer": cfg.layer,
                                                   "token": "last prompt token"})
    log(f"done: {sum(e['n'] for e in report)} records in {len(report)} files under {out}")
    return {"nothing_to_do": False, "units": report}


def _raw_lines(path: Path):
    """``(id, raw line)`` of a record file; a torn last line (no newline) is left out."""
    lines = path.read_text(encoding="utf-8").split("\n")
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines):
                continue
            raise InputError(path, i, None, "malformed JSON") from None
        yield str(obj.get("id")) if isinstance(obj, dict) else None, line


def _some(ids: Sequence[str], k: int = 10) -> str:
    return ", ".join(ids[:k]) + (f" and {len(ids) - k} more" if len(ids) > k else "")


def merge(build_dir: str | Path, log=print) -> dict:
    """Join the shard files of every unit into ``<split>.jsonl`` (lines in question order, byte for byte as
    written by the shards) and, when every shard has them, the features into ``<split>.features.safetensors``.

    Everything is checked before anything is written: InputError (naming the ids) when an id is in two shard
    files, an expected id is in none, or a shard holds an id outside the build's question list.
    Returns ``{"merged": [paths], "nothing_to_do": bool}``.
    """
    root = Path(build_dir)
    jobs = [job for u in plan_units(load_config(root), log=lambda *_: None) if (job := _merge_job(u, root))]
    for u, ids, n, lines in jobs:
        target = u.records_path(root)
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        tmp.write_text("".join(lines[r] + "\n" for r in ids), encoding="utf-8")
        os.replace(tmp, target)
        log(f"merged {len(ids)} records into {target}")
        _merge_features(u, ids, root, n, log)
    if not jobs:
        log(f"nothing to do: no shard files left to merge in {root}")
    return {"merged": [str(j[0].records_path(root)) for j in jobs], "nothing_to_do": not jobs}


def _merge_job(u: Unit, root: Path):
    """``(unit, ids, n, {id: raw line})`` to merge, None when the unit is already complete; InputError else."""
    ids, target = [q["id"] for q in u.questions], u.records_path(root)
    shards = sorted(p for p in target.parent.glob(f"{u.split}.shard-*-of-*.jsonl") if _SHARD_RE.match(p.name))
    if target.exists() and _records_done(target, ids) == len(ids):
        return None
    if not shards or target.exists():
        raise InputError(target, None, None, "exists but is incomplete while shard files are present: remove one "
                         "or the other" if shards else f"incomplete and no shard files: run `elical build` first")
    ns = {int(_SHARD_RE.match(p.name)["n"]) for p in shards}
    if len(ns) != 1:
        raise InputError(target.parent, None, "--shard", f"shard files of different n: {sorted(ns)}")
    n = ns.pop()
    owner, lines, overlap = {}, {}, []
    for p in shards:
        for rid, line in _raw_lines(p):
            if rid in owner:
                overlap.append(f"{rid} ({owner[rid]}, {p.name})")
            owner[rid], lines[rid] = p.name, line
    expected = set(ids)
    unexpected = sorted(r for r in owner if r not in expected)
    missing = [r for r in ids if r not in owner]
    absent = [p.name for i in range(1, n + 1) if not (p := u.records_path(root, (i, n))).exists()]
    problems = {"ids in more than one shard file": overlap, "ids not in the build's question list": unexpected,
                "ids missing from the shard files" + (f" (no {', '.join(absent)})" if absent else ""): missing}
    for what, bad in problems.items():
        if bad:
            raise InputError(target.parent, None, "id", f"{len(bad)} {what} (nothing was merged): {_some(bad)}")
    return u, ids, n, lines


def _merge_features(u: Unit, ids: list[str], root: Path, n: int, log) -> None:
    import numpy as np

    from elical.generation.features import load_features, save_features

    rows, meta = {}, {}
    for i in range(1, n + 1):
        path = u.features_path(root, (i, n))
        if not path.exists():
            log(f"{u.dataset}/{u.split}: no features in shard {i}/{n}; `elical build` without --shard computes them")
            return
        sids, X, meta = load_features(path)
        rows.update(zip(sids, X))
    if set(rows) != set(ids):
        log(f"{u.dataset}/{u.split}: shard features do not cover the records; `elical build` recomputes them")
        return
    save_features(u.features_path(root), ids, np.stack([rows[r] for r in ids]), meta)


def export(build_dir: str | Path, dest: str | Path, log=print) -> list[str]:
    """Write every complete record file of a build to ``dest/<dataset>/<split>.jsonl`` in the released
    HonestyBench layout (:func:`elical.data.honestybench.to_released`). Raises InputError, before writing anything,
    when a file is incomplete (finish or merge the build first) or a destination file exists."""
    from elical.data.honestybench import write_honestybench

    root, dest = Path(build_dir), Path(dest)
    jobs = []
    for u in plan_units(load_config(root), log=lambda *_: None):
        ids, src = [q["id"] for q in u.questions], u.records_path(root)
        by_id = {r["id"]: r for r in read_records(src)}
        if set(by_id) != set(ids):
            raise InputError(src, None, None, f"{len(set(ids) & set(by_id))} of {len(ids)} records: finish the "
                             "build (or merge its shards) before exporting")
        target = dest / u.dataset / f"{u.split}.jsonl"
        if target.exists():
            raise InputError(target, None, "--output", "exists; nothing was overwritten")
        jobs.append((target, [by_id[r] for r in ids]))
    for target, recs in jobs:
        write_honestybench(target, recs)
        log(f"wrote {len(recs)} records to {target}")
    return [str(t) for t, _ in jobs]


def _meta_key(meta: dict) -> dict:
    decoding = {k: v for k, v in (meta.get("decoding") or {}).items() if k != "batch_size"}
    return {"model": meta.get("model"), "decoding": decoding, "judges": meta.get("judges")}


def reuse_build(build_dir: str | Path, questions: Sequence[dict], path: str | Path, *, meta: dict) -> int:
    """Append to the run's record file ``path`` the built records of ``questions`` (matched by id, in question
    order; ``split`` set to the question's), so that :func:`elical.jobs.annotate` generates only the rest.

    ``meta``: the run's record meta; a built record must share its model, decoding (batch size aside) and judges,
    else InputError. The seed may differ: a built record keeps its own in ``meta``. Returns the number appended.
    """
    root = Path(build_dir)
    load_config(root)
    wanted = {q["id"]: q for q in questions}
    present = {r["id"] for r in read_records(path)}
    key, taken = _meta_key(meta), {}
    for ds in sorted({q["dataset"] for q in questions}):
        for f in sorted((root / ds).glob("*.jsonl")):
            for rec in read_records(f):
                q = wanted.get(rec.get("id"))
                if q is None or rec["id"] in present or rec["id"] in taken:
                    continue
                if rec.get("question") != q["question"]:
                    raise InputError(f, None, "question", f"record {rec['id']} was built from another question "
                                     f"text ({rec.get('question')!r} vs {q['question']!r})")
                if _meta_key(rec.get("meta") or {}) != key:
                    raise InputError(f, None, "meta", f"built with {_meta_key(rec.get('meta') or {})}, this run "
                                     f"uses {key}")
                taken[rec["id"]] = {**rec, "split": q.get("split", rec.get("split"))}
    new = [taken[q["id"]] for q in questions if q["id"] in taken]
    if new:
        with open_append(path) as w:
            w.write(new)
    return len(new)


def reuse_features(build_dir: str | Path, records: Sequence[dict], model, tokenizer, *, model_name: str,
                   layer: int, batch_size: int = 16, progress: bool = False):
    """Hidden states of ``records`` (ndarray of shape (len(records), hidden_size)): rows built with the same
    model name and layer are read from the build, the rest computed with
    :func:`elical.generation.features.extract_hidden_states`."""
    import numpy as np

    from elical.generation.features import extract_hidden_states, load_features

    need, known = {r["id"] for r in records}, {}
    for ds in sorted({r["dataset"] for r in records}):
        for f in sorted((Path(build_dir) / ds).glob("*.features.safetensors")):
            ids, X, meta = load_features(f)
            if meta.get("model") == model_name and meta.get("layer") == layer:
                known.update((rid, X[i]) for i, rid in enumerate(ids) if rid in need)
    todo = [i for i, r in enumerate(records) if r["id"] not in known]
    if not todo and records:
        return np.stack([known[r["id"]] for r in records]).astype(np.float32)
    fresh = extract_hidden_states(model, tokenizer, [records[i]["prompt"] for i in todo], layer=layer,
                                  batch_size=batch_size, progress=progress)
    out = np.zeros((len(records), fresh.shape[1]), dtype=np.float32)
    out[todo] = fresh
    for i, r in enumerate(records):
        if r["id"] in known:
            out[i] = known[r["id"]]
    return out


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
                      seed=args.seed, semantic_model=args.semantic_model)
    build(cfg, args.output, parse_shard(args.shard), device=args.device, progress=not args.quiet)
    return 0


def _cmd_merge(args) -> int:
    merge(args.build_dir)
    return 0


def _cmd_export(args) -> int:
    export(args.build_dir, args.output)
    return 0


def register(sub) -> None:
    """Add the ``build``, ``merge`` and ``export`` subcommands to the ``elical`` parser."""
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
            ("--n-samples", dict(type=_positive, default=BuildConfig.n_samples, help="sampled answers (N)")),
            ("--max-new-tokens", dict(type=_positive, default=BuildConfig.max_new_tokens, help="answer length cap")),
            ("--batch-size", dict(type=_positive, default=BuildConfig.batch_size, help="questions per batch")),
            ("--layer", dict(type=int, default=BuildConfig.layer, help="hidden layer of the features (-1 = final)")),
            ("--seed", dict(type=int, default=BuildConfig.seed, help="sampling seed")),
            ("--semantic-model", dict(help="sentence-embedding model for consistency (default all-MiniLM-L6-v2)")),
            ("--device", dict(default="cpu", help="cpu, cuda, cuda:1, ...")),
            ("--quiet", dict(action="store_true", help="no progress bars"))):
        b.add_argument(flag, **kw)
    b.set_defaults(handler=_cmd_build)
    m = sub.add_parser("merge", help="join the --shard files of a build; refuses overlapping or missing ids")
    m.add_argument("build_dir")
    m.set_defaults(handler=_cmd_merge)
    e = sub.add_parser("export", help="write a build's records in the released HonestyBench layout")
    e.add_argument("build_dir")
    e.add_argument("--output", required=True, help="destination directory (<dataset>/<split>.jsonl)")
    e.set_defaults(handler=_cmd_export)
