"""Evidence quotes checked against the stored output: found ones get character offsets, the rest are flagged."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Evidence", "split_evidence", "verify", "with_evidence"]

_QUOTE = re.compile(r'^\s*>\s*"(.*)"\s*$')
_MIN_QUOTE_CHARS = 3


@dataclass(frozen=True, slots=True)
class Evidence:
    quote: str
    start: int | None  # None: not found in the document
    end: int | None

    def describe(self) -> str:
        where = f"chars {self.start}-{self.end}" if self.start is not None else "unverified: not in the stored output"
        return f'> "{self.quote}" ({where})'


def split_evidence(answer: str) -> tuple[str, list[str]]:
    """The answer without its EVIDENCE section, and the quotes listed there."""
    head, marker, tail = answer.partition("EVIDENCE:")
    if not marker:
        return answer.strip(), []
    quotes = [m.group(1) for line in tail.splitlines() if (m := _QUOTE.match(line)) is not None]
    return head.strip(), quotes


def verify(quotes: list[str], document: str) -> list[Evidence]:
    """Each distinct quote with where it occurs in `document` (exactly, or with whitespace differences)."""
    seen: set[str] = set()
    evidence = []
    for quote in quotes:
        quote = quote.strip()
        if len(quote) < _MIN_QUOTE_CHARS or quote in seen:
            continue
        seen.add(quote)
        position = document.find(quote)
        if position >= 0:
            evidence.append(Evidence(quote, position, position + len(quote)))
            continue
        loose = re.search(r"\s+".join(re.escape(word) for word in quote.split()), document)
        if loose is not None:
            evidence.append(Evidence(quote, loose.start(), loose.end()))
        else:
            evidence.append(Evidence(quote, None, None))
    return evidence


def with_evidence(answer: str, evidence: list[Evidence]) -> str:
    if not evidence:
        return answer
    return answer + "\n\nEVIDENCE:\n" + "\n".join(item.describe() for item in evidence)
