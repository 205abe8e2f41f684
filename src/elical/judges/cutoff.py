"""Cut-off answers (helpers of `elical.judges.span`): a text stopped by the token limit loses its last, maybe
partial, word (`uncut`), unless the other answer of a pair states that final number (`uncut_pair`)."""

from __future__ import annotations

import re

from elical.judges.slots import ends_with_place
from elical.judges.text import numbers_in

__all__ = ["uncut", "uncut_pair"]

_CUT_WORDS = 12  # a text of this many words that ends without punctuation was cut off by the token limit


def uncut(text: str) -> str:
    """``text`` without its last word, and marked "…", when it was cut off mid-sentence (no final punctuation,
    >= 12 words) and that word may be a fragment ("... was the 1994 World", "... in Cycl", "... was the A-",
    "... January 2"). Kept: a word before a comma, a number of 3 digits or more, a symbol ("N", "Fe"), the end
    of a place name ("... in the state of California")."""
    words = text.split()
    if len(words) < _CUT_WORDS or re.search(r"[.!?\"'’”)\]…]\s*$", text):
        return text
    last = words[-1]
    if last.endswith("-"):
        last = last.rstrip("-")
        keep = bool(re.fullmatch(r"[0-9][0-9-]*", last))  # "2022-12-": the digits are whole
        words[-1] = last
    else:
        keep = bool(re.search(r"[,;:]$|^[0-9]{3,}$|^[A-Z][a-z]?$", last)) or ends_with_place(text)
    return " ".join(words if keep else words[:-1]) + "…"


def uncut_pair(a: str, b: str) -> str:
    """`uncut` ``a``, except that a number it ends with stays when ``b`` states that number ("... the atomic
    number of 4" / "... atomic number is 4."): then ``a`` is marked complete with a final period."""
    last = a.split()[-1] if a.split() else ""
    cut = uncut(a)
    return a + "." if cut != a and last.isdigit() and last in numbers_in(b) else cut
