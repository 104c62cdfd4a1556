"""Evidence quotes checked against the stored output: found ones get character offsets, the rest are flagged.

Small models rarely write quotes in the asked form (`> "text"`): they write bullets, bare lines, or copy the
line into the answer itself. So, in `settle`:
- a line under EVIDENCE: in the asked form is a quote, verified or flagged unverified;
- any other line there is tried as a quote without its markup (`-`, `>`, `1.`, quotes, backticks): found in the
  output, it is a verified quote; not found, it stays in the answer (a small model's bullets held its facts);
- an answer with no quotes at all has its own lines tried the same way: a line copied whole from the output is
  evidence of itself (it stays in the answer too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from extraction.marks import without_marks
from extraction.source import Source, text_windows

__all__ = ["Evidence", "settle", "split_evidence", "verify", "with_evidence"]

_QUOTE = re.compile(r'^\s*>?\s*"(.*)"\s*$')  # the ">" is optional: a 0.5B model drops it
_MIN_QUOTE_CHARS = 3
_LOOSE_SLACK = 4096  # characters of extra whitespace a loosely matched quote may have
_MARKUP = re.compile(r"^\s*(?:[-*•>→]|\d+[.)])?\s*(?:quote:\s*)?[\"'`“]*(.*?)[\"'`”]*\s*$", re.IGNORECASE)
_MIN_LOOSE_CHARS = 12  # a shorter line found in the output proves little (a word, a number)
_MAX_LOOSE_LINES = 64


@dataclass(frozen=True, slots=True)
class Evidence:
    quote: str
    start: int | None  # None: not found in the document
    end: int | None

    def describe(self) -> str:
        where = f"chars {self.start}-{self.end}" if self.start is not None else "unverified: not in the stored output"
        return f'> "{self.quote}" ({where})'


def split_evidence(answer: str) -> tuple[str, list[str]]:
    """The answer without its EVIDENCE section, and the quotes listed there; lines of that section that are
    not quotes (small models write bullets) are kept at the end of the answer."""
    head, marker, tail = answer.partition("EVIDENCE:")
    if not marker:
        return answer.strip(), []
    quotes: list[str] = []
    other: list[str] = []  # what a model wrote there that is no quote stays in the answer, never dropped
    for line in tail.splitlines():
        if (match := _QUOTE.match(line)) is not None:
            quotes.append(match.group(1))
        elif line.strip():
            other.append(line.rstrip())
    head = head.strip()
    return (f"{head}\n{chr(10).join(other)}".strip() if other else head), quotes


def verify(quotes: list[str], document: Source) -> list[Evidence]:
    """Each distinct quote with where it first occurs in `document` (exactly, or else with whitespace
    differences), found in one pass over the stored output; blocking."""
    asked: list[str] = []
    for quote in quotes:
        quote = quote.strip()
        if len(quote) >= _MIN_QUOTE_CHARS and quote not in asked:
            asked.append(quote)
    # A line copied as claimcheck showed it (a Read or Grep gutter, an arrow) is also looked for without those marks.
    bare = {quote: plain for quote in asked if len(plain := without_marks(quote).strip()) >= _MIN_QUOTE_CHARS}
    bare = {quote: plain for quote, plain in bare.items() if plain != quote}
    wanted = list(dict.fromkeys([*asked, *bare.values()]))
    exact: dict[str, tuple[int, int]] = {}
    loose: dict[str, tuple[int, int]] = {}
    patterns = {quote: re.compile(r"\s+".join(re.escape(word) for word in quote.split())) for quote in wanted}
    # A window starts with the end of the one before, so a match up to this long is never cut in two; and
    # the first match inside any window is the first in the document, as none ended in an earlier window.
    overlap = max((len(quote) for quote in wanted), default=0) * 2 + _LOOSE_SLACK
    for offset, window in text_windows(document, overlap) if wanted else ():
        for quote in wanted:
            if quote in exact:
                continue
            if (at := window.find(quote)) >= 0:
                exact[quote] = (offset + at, offset + at + len(quote))
            elif quote not in loose and (match := patterns[quote].search(window)) is not None:
                loose[quote] = (offset + match.start(), offset + match.end())
        if len(exact) == len(wanted):
            break
    evidence = []
    for quote in asked:
        found = exact.get(quote) or loose.get(quote)
        if found is None and quote in bare:  # only as shown with claimcheck's marks: the text is what was found
            quote = bare[quote]
            found = exact.get(quote) or loose.get(quote)
        evidence.append(Evidence(quote, *found) if found else Evidence(quote, None, None))
    return evidence


def settle(answer: str, document: Source) -> tuple[str, list[Evidence]]:
    """The answer without what became evidence, and the evidence, verified (blocking: one pass over the output).

    See the module's docstring for which lines are quotes."""
    head, marker, tail = answer.partition("EVIDENCE:")
    quotes: list[str] = []
    loose: list[str] = []
    kept: list[str] = []
    for line in tail.splitlines() if marker else ():
        if (match := _QUOTE.match(line)) is not None:
            quotes.append(match.group(1))
        elif line.strip():
            kept.append(line.rstrip())
            loose.append(_bare(line))
    own = [] if quotes or loose else [_bare(line) for line in head.splitlines()]
    candidates = [text for text in [*loose, *own] if len(text) >= _MIN_LOOSE_CHARS][:_MAX_LOOSE_LINES]
    checked = verify([*quotes, *candidates], document)
    found_loose = {e.quote for e in checked if e.start is not None and e.quote in candidates}
    evidence = [e for e in checked if e.quote not in candidates or e.quote in found_loose]
    rest = [line for line in kept if _bare(line) not in found_loose]
    head = head.strip()
    return (f"{head}\n{chr(10).join(rest)}".strip() if rest else head), evidence


def _bare(line: str) -> str:
    match = _MARKUP.match(line)
    return (match.group(1) if match else line).strip()


def with_evidence(answer: str, evidence: list[Evidence]) -> str:
    if not evidence:
        return answer
    return answer + "\n\nEVIDENCE:\n" + "\n".join(item.describe() for item in evidence)
