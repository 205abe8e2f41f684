"""A small hand mutation check of the metric and calibration code (run by hand; result in docs/metrics.md).

    nice python benchmarks/mutation_check.py --n 40 --seed 0 [--budget-s 1200]

Copies src/ and tests/ into a temporary directory, and for each of ``--n`` mutants drawn with ``--seed`` from
every mutation point of src/elical/evaluation/*.py and src/elical/estimators/calibration.py (a comparison
flipped or loosened, + / - and * / / swapped, an int constant changed by one, a float constant halved, a
``return <expr>`` replaced by ``return 0.5``), applies it to the copy (ast.unparse) and runs the fast tests of
those modules (tests/evaluation, tests/estimators/test_calibration.py; -x, timeout 300 s each). A mutant is
*killed* when a test fails, *survived* otherwise. Prints one line per mutant and a summary; ``--json`` writes
them. Stops drawing when ``--budget-s`` seconds of wall time are spent.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = sorted((ROOT / "src/elical/evaluation").glob("*.py")) + [ROOT / "src/elical/estimators/calibration.py"]
TESTS = ["tests/evaluation", "tests/estimators/test_calibration.py"]
_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}
_BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}


class _Mutator(ast.NodeTransformer):
    """Counts mutation points; with ``target`` set, rewrites that one and records what it did."""

    def __init__(self, target: int | None = None):
        self.count, self.target, self.done = 0, target, None

    def _hit(self, node, what: str) -> bool:
        hit = self.count == self.target
        if hit:
            self.done = f"line {node.lineno}: {what}"
        self.count += 1
        return hit

    def visit_FunctionDef(self, node):
        if node.name == "__init__" or ast.get_docstring(node) is None and node.name.startswith("__"):
            return node
        return self.generic_visit(node)

    def visit_Compare(self, node):
        self.generic_visit(node)
        op = type(node.ops[0])
        if op in _CMP and self._hit(node, f"{op.__name__} -> {_CMP[op].__name__}"):
            node.ops[0] = _CMP[op]()
        return node

    def visit_BinOp(self, node):
        self.generic_visit(node)
        op = type(node.op)
        if op in _BIN and self._hit(node, f"{op.__name__} -> {_BIN[op].__name__}"):
            node.op = _BIN[op]()
        return node

    def visit_Constant(self, node):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            return node
        if isinstance(node.value, int):
            if self._hit(node, f"{node.value} -> {node.value + 1}"):
                return ast.copy_location(ast.Constant(node.value + 1), node)
        elif node.value != 0 and self._hit(node, f"{node.value} -> {node.value / 2}"):
            return ast.copy_location(ast.Constant(node.value / 2), node)
        return node

    def visit_Return(self, node):
        self.generic_visit(node)
        if node.value is not None and self._hit(node, "return ... -> return 0.5"):
            node.value = ast.Constant(0.5)
        return node


def _points(path: Path) -> int:
    m = _Mutator()
    m.visit(ast.parse(path.read_text(encoding="utf-8")))
    return m.count


def _mutate(path: Path, index: int) -> tuple[str, str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    m = _Mutator(index)
    tree = m.visit(tree)
    return ast.unparse(ast.fix_missing_locations(tree)), m.done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget-s", type=float, default=1200.0)
    ap.add_argument("--json", help="write the per-mutant results here")
    args = ap.parse_args()
    points = [(path, i) for path in TARGETS for i in range(_points(path))]
    drawn = random.Random(args.seed).sample(points, min(args.n, len(points)))
    print(f"{len(points)} mutation points in {len(TARGETS)} files; {len(drawn)} drawn (seed {args.seed})", flush=True)
    results, t0 = [], time.time()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(ROOT / "src", work / "src")
        shutil.copytree(ROOT / "tests", work / "tests")
        for name in ("pyproject.toml",):
            shutil.copy2(ROOT / name, work / name)
        env = {**os.environ, "PYTHONPATH": str(work / "src"), "OMP_NUM_THREADS": "1"}
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-m", "not slow", "-p", "no:cacheprovider",
               "--deselect", "tests/evaluation/test_metrics.py::test_evaluate_confidence_consistent_and_fast", *TESTS]
        for path, index in drawn:
            if time.time() - t0 > args.budget_s:
                print("budget spent; stopping", flush=True)
                break
            rel = path.relative_to(ROOT)
            original = (work / rel).read_text(encoding="utf-8")
            source, what = _mutate(path, index)
            (work / rel).write_text(source, encoding="utf-8")
            try:
                run = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=300)
                status = "survived" if run.returncode == 0 else "killed"
            except subprocess.TimeoutExpired:
                status = "killed (timeout)"
            finally:
                (work / rel).write_text(original, encoding="utf-8")
            results.append({"file": str(rel), "mutant": what, "status": status})
            print(f"{status:17s} {rel} {what}", flush=True)
    killed = sum(r["status"].startswith("killed") for r in results)
    print(f"{killed} of {len(results)} mutants killed, {len(results) - killed} survived, "
          f"{time.time() - t0:.0f} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
