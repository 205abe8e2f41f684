"""Two answers that name the same thing in the asked slot, read from their capitalized names (helpers of
`elical.judges.span`, tried after `elical.judges.slots` and before the answer spans):

* **the producer, developer or owner** (`same_organization`): for "Who produces / developed / owns X?", the
  organization each answer names as the agent: a name with a corporate word ("Honda Motor Corp", "the Honda
  Corporation"), the name after "produced by" / "developed by" (or "made by the Italian car company"), or the name
  that is the subject of "produces" / "owns" (also across an apposition: "Honda, a leading manufacturer, makes";
  "Fiat is a car company that makes"); the question's product name with its number is none. Two answers agree
  when one name's core (corporate words dropped) begins the other's: "Nintendo of America" / "Nintendo"
  (GUIDELINE rule 3: the granularity the question needs), "Nissan Motor Corporation" / "Nissan";
* **a currency** (`currency_verdict`): "the US Dollar" / "the Guam Dollar" / "the Australian Dollar" name three
  currencies (0); "the Taiwanese dollar (TWD)" / "the Taiwanese dollar" one (1); for a currency question, a text
  that names no currency (no ISO 4217 unit word or code) is no answer (0);
* **a region named twice** (`shared_region`): for a typed question ("On which continent ...?") that neither
  answer fills with an entity of the asked type, two answers naming the same region ("in the Caribbean", "on the
  Arabian Peninsula") are the same answer (GUIDELINE rule 12).

Each gives a verdict or leaves the pair open (None): a pair they do not decide goes on to the spans.
"""

from __future__ import annotations

import functools
import re

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from elical.judges.slots import asked_type, entities
from elical.judges.text import tokens

__all__ = ["organizations", "same_organization", "shared_region", "names_currency", "currency_issuer",
           "currency_verdict"]

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
_MAKER = r"(?i:company|firm|manufacturer|maker|automaker|carmaker|corporation|conglomerate|brand|giant|developer)"
# "produced by (the Italian car company) Fiat"
_BY = re.compile(rf"\b{_VERB}\s+(?i:by)\s+(?:the\s+)?(?:(?:[\w-]+\s+){{0,3}}?{_MAKER}\s+)?({_RUN})")
# "Fiat makes", "Honda, a leading auto manufacturer, produces", "Honda is a major company that produces"
_SUBJECT = re.compile(rf"(?:^|[.!?]\s+)(?:[Tt]he\s+)?({_RUN})(?:,[^,.]{{1,80}},|\s+is\s+an?\s+[^,.]{{0,60}}?"
                      rf"{_MAKER}\s+(?:that|which))?\s+{_VERB}\b")


def _core(run: str) -> tuple[str, ...]:
    return tuple(t for t in tokens(re.sub(r"(?<=\w)['’]s\b", "", run)) if t not in _CORPORATE and t != "the")


def organizations(text: str, question: str) -> set[tuple[str, ...]]:
    """The cores (token tuples, corporate words dropped) of the organizations ``text`` names as the agent, leaving
    out names that are (parts of) the question's own product name."""
    asked = tuple(tokens(question))
    found = [m.group(1) for rx in (_BY, _SUBJECT) for m in rx.finditer(text)
             if not _LISTED.match(text, m.end(1))  # "by Steve Jobs and Steve Wozniak": a list, no one agent
             and not _product(tokens(m.group(1)), tokens(text[m.end(1):])[:3], asked)]
    found += [m.group() for m in _NAME_RUN.finditer(text) if _CORPORATE & set(tokens(m.group()))]
    out = set()
    for run in found:
        core = _core(run)
        if core and not _inside(core, asked):
            out.add(core)
    return out


def _product(name: list[str], after: list[str], asked: tuple[str, ...]) -> bool:
    """``name`` and the words after it are the question's product name with its number ("produced by the BMW 5
    Series" for "Who produces BMW 5 Series Gran Turismo?"): an echo, no agent."""
    if not after or not after[0].isdigit():
        return False
    return any(_inside(tuple(name + after[:k]), asked) for k in range(1, len(after) + 1))


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


_UNIT = (r"dollars?|pounds?|francs?|pesos?|rupees?|rupiahs?|kron[ae]|kroner|yen|yuan|lira|liras|dinars?|shillings?|"
         r"rand|rubles?|roubles?|riyals?|rials?|dirhams?|marks?|escudos?|guilders?|kwachas?|nairas?|cedis?")
_CURRENCY = re.compile(rf"({_RUN})\s+(?i:({_UNIT}))\b")


# unit words that are also English words count only after a capitalized name: "the South Korean won", "Deutsche Mark"
_AMBIGUOUS_UNITS = frozenset("day gold mark real sol sum won colon dram kina oro udi previsional fomento".split())
_AMBIGUOUS = re.compile(r"\b(?!(?:It|He|She|They|We|I|You|This|That|Who|Which|There)\b)[A-Z][\w'’-]*\s+"
                        r"(?i:marks?|reals?|won|sols?|sum|colons?|drams?|kinas?)\b")
_ASKS_CURRENCY = re.compile(r"\b(?:(?:what|which) (?:is |was )?(?:the )?(?:\w+ )?currency|currency (?:of|is|was|used|in|"
                            r"where|that|for))\b", re.I)
_OLD_UNITS = frozenset("yuan shekel kroner kronor rouble lev lats litas drachma peseta schilling markka punt".split())


@functools.lru_cache(maxsize=1)
def _currency_words() -> frozenset:
    """Unit words of the ISO 4217 currencies of countries (pycountry, codes not starting with X: "hryvnia",
    "euro"), a few former ones, with their plurals; English words among them are left to `_AMBIGUOUS`."""
    import pycountry

    words = {w for c in pycountry.currencies if not c.alpha_3.startswith("X") for w in tokens(c.name)[-1:]
             if w.isalpha() and len(w) > 2}
    words = (words | _OLD_UNITS | set(tokens(_UNIT.replace("?", "").replace("|", " ")))) - _AMBIGUOUS_UNITS
    return frozenset(words | {w + "s" for w in words})


def names_currency(text: str) -> bool:
    """Whether ``text`` names a currency: a unit word of a country's ISO 4217 currency (an English word such as
    "won" or "mark" only after a capitalized name) or an ISO code ("TWD")."""
    import pycountry

    if set(tokens(text)) & _currency_words() or _AMBIGUOUS.search(text):
        return True
    return any(pycountry.currencies.get(alpha_3=c) for c in re.findall(r"\b[A-Z]{3}\b", text))


def currency_issuer(text: str) -> tuple[str, str] | None:
    """ISO code of the country whose currency ``text`` names first and the unit word ("the US Dollar" -> ("US",
    "dollar"), "Australian dollars" -> ("AU", "dollar")), None when its first currency word has no country
    before it."""
    m = _CURRENCY.search(text.replace("U.S.", "US"))
    found = [code for kind, code, _ in entities(m.group(1))] if m else []
    return (found[-1], m.group(2).casefold().rstrip("s")) if found else None


def currency_verdict(a: str, b: str, question: str | None) -> int | None:
    """For a question that asks a currency: 0 when an answer names no currency (no answer, GUIDELINE rule 5) or
    the two name currencies of two different countries; 1 when both name the same country's same unit ("the
    Taiwanese dollar (TWD)" / "the Taiwanese dollar (KMT)"); None otherwise."""
    if not question or not _ASKS_CURRENCY.search(question) or asked_type(question):
        return None  # not "Which country uses the rand as its currency?"
    if not names_currency(a) or not names_currency(b):
        return 0
    ia, ib = currency_issuer(a), currency_issuer(b)
    if ia and ib:
        return int(ia == ib)
    return None
