"""A MiniLM cross-encoder for answer equivalence (question, greedy answer, sample) fine-tuned with LoRA on the
labelled pairs, measured against the feature classifier on the same grouped folds.

    python benchmarks/judge_cross_encoder.py --folds 0,1,2,3,4    # grouped CV (~25 min a fold on one core)
    python benchmarks/judge_cross_encoder.py --folds 0            # one fold; the table pools every saved fold
    python benchmarks/judge_cross_encoder.py --folds '' --sweep   # the saved folds' table + bands and orders swept
    python benchmarks/judge_cross_encoder.py --write              # train on every pair, write the shipped weights

Rows, folds and seed as benchmarks/judge_cv.py (GroupKFold(5, shuffled, seed 0) by normalised question). The
cross-encoder reads "question [SEP] a" and "b" as a BERT text pair; each training pair is seen in both orders and a
prediction averages both orders or (the shipped judge since the ninth round) reads the one with the smaller string
first: symmetric either way. LoRA (Hu et al., 2022; peft; r = 8) on every linear layer of
all-MiniLM-L6-v2's encoder (attention query/key/value/output, feed-forward; fifth round: the fourth round's
query/value and 2 epochs scored 0.840 on fold 0, this recipe 0.851) plus a linear head on [CLS]; class-balanced BCE;
AdamW, 3 epochs. ``--r``, ``--modules`` and ``--epochs`` set another recipe. A fold's saved predictions
(``runs/judge_cross_encoder/foldK.npy``) hold the test rows, a tree model's P(same), and the cross-encoder's in each
order of (a, b), and ``foldK.keys.json`` a fingerprint of each of those rows: a fold saved for other rows (the
labelled sets changed) stops the report with a message to re-run it, rather than being scored against the wrong
labels. The report scores the shipped judge's cross-encoder (``SECOND_ORDERS`` of benchmarks/judge_cv.py:
the mean of both orders, or the one order the judge reads) and ``--sweep`` the cascade at other bands and orders.
Since the twelfth round a retrained cross-encoder ships only if the shipped cascade with it stays within 0.02 of
the best earlier one on the default run's own template style: the ``test`` parts of study_random and
study_disagree, pooled, which no model trains on (``benchmarks/judge_agreement.py --pairs
benchmarks/judge_pairs/study_random.jsonl benchmarks/judge_pairs/study_disagree.jsonl --part test --judges learned``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def encode(tok, rows, swap=False):
    """The shipped judge's inputs (`elical.judges.cross_encoder.pair_inputs`) of labelled rows."""
    from elical.judges.cross_encoder import pair_inputs

    return pair_inputs(tok, [(r["a"], r["b"], r["question"]) for r in rows], swap)


def train_ce(rows, epochs=3, batch=16, lr=1e-3, seed=0, r=8, modules=("query", "key", "value", "dense")):
    import torch
    from peft import LoraConfig, get_peft_model

    from elical.judges.semantic import Embedder

    torch.manual_seed(seed)
    st = Embedder().model
    tok, bert = st.tokenizer, st[0].auto_model
    model = get_peft_model(bert, LoraConfig(r=r, lora_alpha=2 * r, target_modules=list(modules)))
    head = torch.nn.Linear(bert.config.hidden_size, 1)
    params = [p for p in model.parameters() if p.requires_grad] + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=lr)
    y = np.array([x["label"] for x in rows], dtype=np.float32)
    pos_weight = torch.tensor((1 - y.mean()) / max(y.mean(), 1e-6))
    data = [(x, s) for x in rows for s in (False, True)]
    rng = np.random.default_rng(seed)
    steps = epochs * ((len(data) + batch - 1) // batch)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: min(1.0, (t + 1) / 50) * max(0.0, 1 - t / steps))
    model.train()
    t0, step = time.perf_counter(), 0
    for ep in range(epochs):
        order = rng.permutation(len(data))
        for i in range(0, len(order), batch):
            chunk = [data[j] for j in order[i:i + batch]]
            loss = 0.0
            for swap in (False, True):
                part = [x for x, s in chunk if s == swap]
                if not part:
                    continue
                enc = encode(tok, part, swap)
                logit = head(model(**enc).last_hidden_state[:, 0]).squeeze(-1)
                target = torch.tensor([x["label"] for x in part], dtype=torch.float32)
                loss = loss + torch.nn.functional.binary_cross_entropy_with_logits(
                    logit, target, pos_weight=pos_weight, reduction="sum") / len(chunk)
            loss.backward()
            opt.step(), sched.step(), opt.zero_grad()
            step += 1
            if step % 50 == 0:
                print(f"  epoch {ep} step {step}/{steps} loss {float(loss):.3f} {time.perf_counter() - t0:.0f} s",
                      flush=True)
    model.eval()
    return tok, model, head


def predict_ce(tok, model, head, rows, batch=64):
    """The cross-encoder's P(same) of labelled rows in each order of (a, b), shape (n, 2): column 0 reads (a, b),
    column 1 (b, a) (`elical.judges.cross_encoder.symmetric_proba` with one order)."""
    import torch

    from elical.judges.cross_encoder import symmetric_proba

    with torch.no_grad():
        out = [np.stack([symmetric_proba(tok, model, head, [(b, a, q) if swap else (a, b, q) for a, b, q in part],
                                         orders=1).numpy() for swap in (False, True)], axis=1)
               for part in ([(r["a"], r["b"], r["question"]) for r in rows[i:i + batch]]
                            for i in range(0, len(rows), batch))]
    return np.concatenate(out) if out else np.zeros((0, 2))


def shipped_ce(rows, p_orders: np.ndarray, orders: int) -> np.ndarray:
    """The shipped judge's P(same) from both orders' (shape (n, 2), as `predict_ce`): their mean (``orders`` 2) or,
    as `elical.judges.cross_encoder.CrossEncoder` reads one order, the one with the smaller string first."""
    if orders == 2:
        return p_orders.mean(axis=1)
    first = np.array([r["a"] <= r["b"] for r in rows])
    return np.where(first, p_orders[:, 0], p_orders[:, 1])


def export(model, head, path: Path, r: int, max_length: int = 128) -> None:
    """Write the LoRA pairs (named by the BERT module they adapt) and the head as safetensors (the shipped form,
    read by `elical.judges.cross_encoder.CrossEncoder`)."""
    from safetensors.torch import save_file

    out = {"head.weight": head.weight.detach().clone(), "head.bias": head.bias.detach().clone()}
    for name, param in model.named_parameters():
        if ".lora_" in name:
            module, which = name.split(".lora_")
            module = module.removeprefix("base_model.model.")
            if module.startswith("pooler."):  # the head reads [CLS] of the last layer: the pooler is never trained
                continue
            out[f"{module}.lora_{which.split('.')[0]}"] = param.detach().clone().contiguous()
    save_file(out, str(path), metadata={"r": json.dumps(r), "alpha": json.dumps(2 * r),
                                        "max_length": json.dumps(max_length),
                                        "made_by": json.dumps("benchmarks/judge_cross_encoder.py --write")})


def row_keys(rows) -> list[str]:
    """A short fingerprint of each labelled row (its question, a and b), saved beside a fold's row indices."""
    import hashlib

    return [hashlib.sha1("\t".join((r["question"], r["a"], r["b"])).encode()).hexdigest()[:12] for r in rows]


def load_fold(path: Path, rows) -> np.ndarray:
    """A saved fold (shape (4, n): row indices, trees' P(same), the cross-encoder's in each order), checked against
    the rows it indexes. Raises SystemExit when its key file is missing or names other rows (the labelled sets
    changed since it was saved): re-run that fold."""
    fold, keys = np.load(path), path.with_suffix(".keys.json")
    idx = fold[0].astype(int)
    if (not keys.exists() or idx.max(initial=-1) >= len(rows)
            or json.loads(keys.read_text()) != row_keys([rows[i] for i in idx])):
        raise SystemExit(f"{path}: saved for other labelled rows than today's (benchmarks/judge_cv.py SETS changed, "
                         f"or no {keys.name}); re-run it with --folds {path.stem.removeprefix('fold')}")
    return fold


def main(argv=None) -> int:
    from judge_cv import BANDS, SECOND_BAND, SECOND_ORDERS, SEED, Task, fit, in_band, load_sets, scores
    from sklearn.model_selection import GroupKFold

    from elical.judges.features import EQUIVALENCE_FEATURES, SOFT_FEATURES, TokenEncoder
    from elical.judges.learned import LearnedEquivalenceJudge as LE, load_weights

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--folds", default="0", help="folds to run, e.g. 0,1,2,3,4 ('' = only report the saved ones)")
    p.add_argument("--save", type=Path, default=ROOT / "runs" / "judge_cross_encoder",
                   help="where each fold's out-of-fold predictions are kept (the report pools every saved fold)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--r", type=int, default=8, help="LoRA rank (alpha = 2 r)")
    p.add_argument("--modules", default="query,key,value,dense",
                   help="the BERT linear layers LoRA adapts (their names' last part; 'dense': every "
                        "feed-forward and output layer)")
    p.add_argument("--write", action="store_true", help="train on every pair and write the shipped weights")
    p.add_argument("--sweep", action="store_true", help="also the cascade's accuracy for other bands and orders of "
                                                         "the cross-encoder, against its cost")
    args = p.parse_args(argv)
    rows = [r for r in load_sets() if r["kind"] == "greedy-sample"]
    if args.write:
        from elical.judges.cross_encoder import CE_WEIGHTS_PATH

        t0 = time.perf_counter()
        tok, model, head = train_ce(rows, epochs=args.epochs, r=args.r, modules=args.modules.split(","))
        export(model, head, CE_WEIGHTS_PATH, r=args.r)
        print(f"wrote {CE_WEIGHTS_PATH} ({CE_WEIGHTS_PATH.stat().st_size / 1024:.0f} KiB) in "
              f"{time.perf_counter() - t0:.0f} s")
        return 0
    judge = LE.__new__(LE)
    judge.encoder, judge.names = TokenEncoder(), EQUIVALENCE_FEATURES
    data = Task("equivalence", rows, judge)
    cheap = [i for i, f in enumerate(EQUIVALENCE_FEATURES) if f not in SOFT_FEATURES]
    folds = list(GroupKFold(5, shuffle=True, random_state=SEED).split(data.X, data.y, data.groups))
    args.save.mkdir(parents=True, exist_ok=True)
    for k in (int(f) for f in args.folds.split(",")) if args.folds else ():
        train, test = folds[k]
        t0 = time.perf_counter()
        p_trees = fit("trees", data.X[train], data.y[train]).predict_proba(data.X[test])[:, 1]
        tok, model, head = train_ce([rows[i] for i in train], epochs=args.epochs, r=args.r,
                                    modules=args.modules.split(","))
        t1 = time.perf_counter()
        p_ce = predict_ce(tok, model, head, [rows[i] for i in test])
        print(f"fold {k}: train {t1 - t0:.0f} s, predict {time.perf_counter() - t1:.0f} s ({len(test)} pairs)")
        np.save(args.save / f"fold{k}.npy", np.stack([test, p_trees, p_ce[:, 0], p_ce[:, 1]]))
        (args.save / f"fold{k}.keys.json").write_text(json.dumps(row_keys([rows[i] for i in test])))
    saved = sorted(args.save.glob("fold*.npy"))
    if not saved:
        return 0
    loaded = [load_fold(f, rows) for f in saved]
    test = np.concatenate([f[0] for f in loaded]).astype(int)
    # the cross-encoder reads no feature: kept as trained, both orders of (a, b)
    p_orders = np.concatenate([f[2:4].T for f in loaded])
    p_both = p_orders.mean(axis=1)
    p_ce = shipped_ce([rows[i] for i in test], p_orders, SECOND_ORDERS)
    shipped = load_weights()["meta"]["equivalence"]  # the kinds of model and the cut judge_cv.py chose
    threshold = shipped.get("threshold", 0.5)
    p_cheap, p_full = np.zeros(len(test)), np.zeros(len(test))
    for f in saved:  # both feature stages of each saved fold, refitted on today's features (seeded)
        k = int(f.stem.removeprefix("fold"))
        at, train = np.isin(test, folds[k][1]), folds[k][0]
        p_cheap[at] = fit(shipped["cheap_model"], data.X[train][:, cheap], data.y[train]).predict_proba(
            data.X[test[at]][:, cheap])[:, 1]
        p_full[at] = fit(shipped["model"], data.X[train], data.y[train]).predict_proba(data.X[test[at]])[:, 1]
    ruled = data.ruled[test]
    unsure, second = in_band(p_cheap, BANDS["equivalence"]), in_band(p_full, SECOND_BAND)
    preds = {f"cheap stage ({shipped['cheap_model']})": p_cheap,
             f"full feature model ({shipped['model']})": p_full, "cross-encoder, both orders": p_both,
             f"cross-encoder, {SECOND_ORDERS} order(s) (shipped)": p_ce,
             "mean of full and cross-encoder (both orders: learned-ce)": (p_full + p_both) / 2,
             "cascade, full model in the band (before)": np.where(unsure, p_full, p_cheap),
             "cascade, mean wherever the cheap stage is unsure": np.where(unsure, (p_full + p_ce) / 2, p_cheap),
             "cascade, mean where both stages are unsure (shipped)": np.where(
                 unsure, np.where(second, (p_full + p_ce) / 2, p_full), p_cheap)}
    y, sets = data.y[test], np.array([rows[i]["set"] for i in test])
    names = list(dict.fromkeys(sets))
    both = unsure & second
    print(f"\n### {len(saved)} grouped fold(s) of 5, {len(test)} pairs; the band sends {unsure.mean():.0%} to the "
          f"full stage and {both.mean():.0%} to the cross-encoder; verdicts at P >= {threshold}\n")
    print("| judge | " + " | ".join(f"{s} (n={(sets == s).sum()})" for s in names) + " | pooled |")
    print("|---|" + "---|" * (len(names) + 1))
    for name, pr in preds.items():
        v = np.where(ruled, 0, pr >= threshold)
        cells = [f"{scores(y[sets == s], v[sets == s])['balanced_accuracy']:.3f}" for s in names]
        a = scores(y, v)
        print(f"| {name} | " + " | ".join(cells) + f" | {a['balanced_accuracy']:.3f} "
              f"({a['recall_same']:.2f}/{a['recall_diff']:.2f}) |")
    if args.sweep:
        sweep(y, ruled, p_cheap, p_full, {1: shipped_ce([rows[i] for i in test], p_orders, 1), 2: p_both},
              threshold)
    return 0


def sweep(y, ruled, p_cheap, p_full, p_ce: dict, threshold: float) -> None:
    """The cascade's pooled balanced accuracy for each cheap band, second band and number of cross-encoder orders,
    against its cross-encoder cost (share of the pairs it reads x orders) and the share the full stage encodes: the
    best of each cost bucket. The judging cost of a run follows both shares (benchmarks/judge_speed.py measures it)."""
    import itertools

    from judge_cv import in_band, scores

    found = []
    for c0, c1, s0, s1 in itertools.product((0.02, 0.05, 0.1, 0.15), (0.8, 0.9), (0.05, 0.1, 0.15, 0.2),
                                            (0.8, 0.85, 0.9, 0.95)):
        unsure = in_band(p_cheap, (c0, c1))
        second = unsure & in_band(p_full, (s0, s1))
        for orders, ce in p_ce.items():
            v = np.where(ruled, 0, np.where(second, (p_full + ce) / 2, np.where(unsure, p_full, p_cheap)) >= threshold)
            found.append((scores(y, v), (c0, c1), (s0, s1), orders, second[~ruled].mean() * orders,
                          unsure[~ruled].mean()))
    print("\n| cross-encoder cost up to | cheap band | second band | orders | cost | full-stage share "
          "| balanced accuracy |\n|---|---|---|---|---|---|---|")
    for limit in (0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.8):
        within = [f for f in found if f[4] <= limit]
        if not within:
            continue
        a, cheap, second, orders, cost, full = max(within, key=lambda f: f[0]["balanced_accuracy"])
        print(f"| {limit:.2f} | {cheap} | {second} | {orders} | {cost:.2f} | {full:.2f} | "
              f"{a['balanced_accuracy']:.3f} ({a['recall_same']:.2f}/{a['recall_diff']:.2f}) |")


if __name__ == "__main__":
    raise SystemExit(main())
