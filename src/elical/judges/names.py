"""Two answers that name the same thing in the asked slot, read from their capitalized names (helpers of
`elical.judges.span`, tried after `elical.judges.slots` and before the answer spans):

* **the producer, developer or owner** (`same_organization`): for "Who produces / developed / owns X?", the
  organization each answer names as the agent: a name with a corporate word ("Honda Motor Corp", "the Honda
  Corporation"), the name after "produced by" / "developed by", or the name that is the subject of "produces" /
  "owns". Two answers agree when one name's core (corporate words dropped) begins the other's: "Nintendo of
  America" / "Nintendo" (GUIDELINE rule 3: the granularity the question needs), "Nissan Motor Corporation" /
  "Nissan";
* **the issuer of a currency** (`different_issuers`): "the US Dollar" / "the Guam Dollar" / "the Australian
  Dollar" name three currencies (only says "different", 0);
* **a region named twice** (`shared_region`): for a typed question ("On which continent ...?") that neither
  answer fills with an entity of the asked type, two answers naming the same region ("in the Caribbean", "on the
  Arabian Peninsula") are the same answer (GUIDELINE rule 12).

Each only ever gives one verdict or leaves the pair open (None): a pair they do not decide goes on to the spans.
"""

from __future__ import annotations

import re

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from elical.judges.slots import entities
from elical.judges.text import tokens

__all__ = ["organizations", "same_organization", "shared_region", "currency_issuer", "different_issuers"]

_RUN = r"[A-Z][\w'’&.-]*(?:\s+(?:of\s+|de\s+|&\s+)?[A-Z][\w'’&.-]*)*"
_LISTED = re.compile(r"\s*(?:,|\band\b|\bor\b)\s*(?:the\s+)?[A-Z]")
_NAME_RUN = re.compile(_RUN)
_CORPORATE = frozenset(
    "corp corporation inc incorporated company co ltd limited plc llc gmbh ag sa group holdings industries "
    "technologies technology motor motors studios studio entertainment games labs laboratories electronics "
    "systems software international enterprises manufacturing products".split())
_AGENT_QUESTION = re.compile(
    r"^\s*(?:who|which company|what company|which organi[sz]ation|what organi[sz]ation)\b.*\b(?:produc\w*|develop\w*|"
    r"manufactur\w*|owns?|owned|makes?|made|publish\w*|creat\w*|design\w*|buil[dt]s?)\b", re.I)
_VERB = r"(?i:produces|produced|develops|developed|manufactures|manufactured|owns|owned|makes|made|publishes|" \
        r"published|creates|created|designs|designed|builds|built)"
_BY = re.compile(rf"\b{_VERB}\s+(?i:by)\s+(?:the\s+)?({_RUN})")
_SUBJECT = re.compile(rf"(?:^|[.!?]\s+)(?:[Tt]he\s+)?({_RUN})\s+{_VERB}\b")


def _core(run: str) -> tuple[str, ...]:
    return tuple(t for t in tokens(re.sub(r"(?<=\w)['’]s\b", "", run)) if t not in _CORPORATE and t != "the")


def organizations(text: str, question: str) -> set[tuple[str, ...]]:
    """The cores (token tuples, corporate words dropped) of the organizations ``text`` names as the agent, leaving
    out names that are (parts of) the question's own product name."""
    asked = tuple(tokens(question))
    found = [m.group(1) for rx in (_BY, _SUBJECT) for m in rx.finditer(text)
             if not _LISTED.match(text, m.end(1))]  # "by Steve Jobs and Steve Wozniak": a list, no one agent
    found += [m.group() for m in _NAME_RUN.finditer(text) if _CORPORATE & set(tokens(m.group()))]
    out = set()
    for run in found:
        core = _core(run)
        if core and not _inside(core, asked):
            out.add(core)
    return out


def _inside(core: tuple[str, ...], hay: tuple[str, ...]) -> bool:
    """``core`` is the whole question, or a name of two or more words in it (the product: "Microsoft Developer
    Network"); a one-word core may repeat a question word ("Nissan" for "Who produces Nissan S30?")."""
    k = len(core)
    return core == hay or (k > 1 and any(hay[i:i + k] == core for i in range(len(hay) - k + 1)))


def _begins(x: tuple[str, ...], y: tuple[str, ...]) -> bool:
    short, long_ = sorted((x, y), key=len)
    return long_[:len(short)] == short


def same_organization(a: str, b: str, question: str | None) -> int | None:
    """1 when ``question`` asks who produces / develops / owns something and both answers name an organization
    as the agent with one core beginning the other's; None otherwise."""
    if not question or not _AGENT_QUESTION.search(question):
        return None
    oa, ob = organizations(a, question), organizations(b, question)
    return 1 if any(_begins(x, y) for x in oa for y in ob) else None


def _regions(text: str, question: str) -> set[tuple[str, ...]]:
    """The capitalized names in ``text`` (token tuples, stop words and question words dropped) that are no
    country, continent or US state (those are the slot's) and not one capitalized word starting a sentence
    ("Located in ...")."""
    asked = set(tokens(question))
    out = set()
    for m in _NAME_RUN.finditer(text):
        if " " not in m.group().strip() and re.search(r"(?:^|[.!?:]\s*)$", text[:m.start()]):
            continue
        name = tuple(t for t in tokens(m.group()) if t not in ENGLISH_STOP_WORDS and t not in asked)
        if name and not entities(" ".join(name)):
            out.add(name)
    return out


def shared_region(a: str, b: str, question: str | None, kind: str | None) -> int | None:
    """1 when the question asks a place type (``kind`` from `elical.judges.slots.asked_type`; neither answer
    names an entity of it) and both answers name the same region (a capitalized name beyond the question that is
    no country, continent or state: "the Caribbean", "the Arabian Peninsula"); None otherwise."""
    if not question or kind is None:
        return None
    return 1 if _regions(a, question) & _regions(b, question) else None


_CURRENCY = re.compile(
    rf"({_RUN})\s+(?i:dollars?|pounds?|francs?|pesos?|rupees?|rupiahs?|kron[ae]|kroner|yen|yuan|lira|liras|dinars?|"
    r"shillings?|rand|rubles?|roubles?|riyals?|rials?|dirhams?|marks?|escudos?|guilders?|kwachas?|nairas?|cedis?)\b")


def currency_issuer(text: str) -> str | None:
    """ISO code of the country whose currency ``text`` names first ("the US Dollar" -> "US", "Australian
    dollars" -> "AU"), None when its first currency word has no country before it."""
    m = _CURRENCY.search(text.replace("U.S.", "US"))
    found = [code for kind, code, _ in entities(m.group(1))] if m else []
    return found[-1] if found else None


def different_issuers(a: str, b: str, question: str | None) -> int | None:
    """0 when the question asks a currency and the two answers name currencies of two different countries; None
    otherwise."""
    if not question or "currency" not in question.casefold():
        return None
    ia, ib = currency_issuer(a), currency_issuer(b)
    return 0 if ia and ib and ia != ib else None
