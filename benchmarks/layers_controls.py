"""Tables of docs/benchmarks.md, "Where the confidence lives": AUROC (scikit-learn, on predictions.jsonl) on all and
on the in-domain evaluation questions, Brier on in-domain and out-of-domain ones, for every layer / pooling
set and control of an `elical run --layer ... --pooling ... --controls` directory.

Usage: python benchmarks/layers_controls.py RUN_DIR
"""
import json, sys
from collections import defaultdict
import numpy as np
from sklearn.metrics import roc_auc_score
run = sys.argv[1]
preds = defaultdict(dict)
y = {}; ds = {}
for l in open(f"{run}/predictions.jsonl"):
    p = json.loads(l); preds[p["method"]][p["id"]] = p["confidence"]; y[p["id"]] = p["greedy_correctness"]; ds[p["id"]] = p["dataset"]
ind = [i for i in y if ds[i] in ("nq", "hq", "pararel_patterns")]
ood = [i for i in y if ds[i] in ("squad", "popqa")]
allids = list(y)
def auc(m, ids):
    yy = [y[i] for i in ids]; cc = [preds[m][i] for i in ids]
    return roc_auc_score(yy, cc) if 0 < sum(yy) < len(yy) else float("nan")
def brier(m, ids):
    return float(np.mean([(preds[m][i] - y[i]) ** 2 for i in ids]))
def mean(m, ids):
    return float(np.mean([preds[m][i] for i in ids]))
print("n in", len(ind), sum(y[i] for i in ind), "n ood", len(ood), sum(y[i] for i in ood))
r = json.load(open(f"{run}/results.json"))
K = max(r["config"]["k_values"])
cols = [("AUROC all", lambda m: auc(m, allids)), ("AUROC in-domain", lambda m: auc(m, ind)),
        ("Brier in-domain", lambda m: brier(m, ind)), ("Brier OOD", lambda m: brier(m, ood)), ("mean conf OOD", lambda m: mean(m, ood))]
def table(rows):
    print("| " + " | ".join(["features", "method"] + [c for c, _ in cols]) + " |")
    print("|---" * (2 + len(cols)) + "|")
    for label, m in rows:
        print(f"| {label} | {m} | " + " | ".join(f"{fn(m):.3f}" for _, fn in cols) + " |")
rows = []
for row in r["layers"]:
    tag = None if row["primary"] else (f"L{row['layer']}" if row["pooling"] == "last" else f"L{row['layer']} {row['pooling']}")
    for base in ("Eli-Only", f"EliCal({K})", f"Cal-Only({K})"):
        rows.append((f"L{row['layer']} {row['pooling']}" + (" (primary)" if row["primary"] else ""), base if tag is None else f"{base} [{tag}]"))
table(rows)
print()
ctrl = r["controls"]["control_model"]
rows = []
for label, tag in (("SmolLM2 L30 last (primary)", None), ("shuffled labels", "shuffled"), ("MiniLM question", "MiniLM"), (f"{ctrl} L-1 last", ctrl)):
    for base in ("Eli-Only", "Cal-Only(32)", "EliCal(32)", f"Cal-Only({K})", f"EliCal({K})"):
        m = base if tag is None else f"{base} [{tag}]"
        if m in preds: rows.append((label, m))
for m in ("Consis-Sem", "N-Prob"):
    rows.append(("training-free", m))
table(rows)
