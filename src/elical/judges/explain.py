"""``elical judge-explain``: the extraction, features, probability and verdict of the judges for one pair.

    elical judge-explain --question "Where is Odense?" "Odense is in Denmark." "It is in Denmark, in Europe."
    elical judge-explain --question "Where is Odense?" "It is in Denmark." --aliases Denmark "Kingdom of Denmark"

Two answers: equivalence (is b the same answer as a?); one answer and ``--aliases``: correctness. The learned judge
shows every feature; any other judge named with ``--judges`` shows its verdict beside it.
"""

from __future__ import annotations

import json


def explain_pair(a: str, b: str | None, question: str | None, aliases=None, judges=("learned",)) -> dict:
    """{judge: explanation dict (learned) or {"verdict": 0/1}} for an (a, b) equivalence pair, or for the answer
    ``a`` against ``aliases`` (correctness) when ``aliases`` is given. Raises ValueError for an unknown judge."""
    from elical.judges import make_correctness_judge, make_equivalence_judge

    out = {}
    qs = None if question is None else [question]
    for name in judges:
        if aliases:
            judge = make_correctness_judge(name)
            out[name] = judge.explain(a, aliases, question) if hasattr(judge, "explain") else \
                {"verdict": int(judge.judge_many([(a, list(aliases))], qs)[0])}
        else:
            judge = make_equivalence_judge(name)
            out[name] = judge.explain(a, b, question) if hasattr(judge, "explain") else \
                {"verdict": int(judge.judge_many([(a, b)], qs)[0])}
    return out


def _cmd(args) -> int:
    if (args.b is None) == (not args.aliases):
        print("error: give two answers (equivalence) or one answer and --aliases (correctness)")
        return 2
    try:
        res = explain_pair(args.a, args.b, args.question, args.aliases, args.judges.split(","))
    except ValueError as exc:
        print(f"error: {exc}")
        return 2
    print(json.dumps(res, indent=1, default=lambda v: sorted(v) if isinstance(v, (set, frozenset)) else str(v)))
    return 0


def register(sub) -> None:
    """Add the ``judge-explain`` subcommand to the ``elical`` parser."""
    p = sub.add_parser("judge-explain", help="show how the judges decide one pair (extraction, features, verdict)")
    p.add_argument("a", help="an answer (the greedy answer, for equivalence)")
    p.add_argument("b", nargs="?", help="a second answer (a sample), for equivalence")
    p.add_argument("--question", help="the question both answers reply to (judges are question-aware)")
    p.add_argument("--aliases", nargs="+", help="gold aliases: judge the correctness of a instead")
    p.add_argument("--judges", default="learned", help="comma-separated judge names (default learned)")
    p.set_defaults(handler=_cmd)
