"""Scoring for bench/extraction_eval.py: which facts an answer holds and how many of its quotes were verified.

Pure functions over text, so CI tests them without a model (tests/extraction/test_extraction_eval_scoring.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from extraction.provenance import Evidence, split_evidence, verify
from extraction.source import TextSource

__all__ = ["Quotes", "Scored", "answer_body", "count_quotes", "facts_found", "score_tool_output", "verified_answer"]

_HEADER = re.compile(r"^(ABSTRACT FROM TOOL OUTPUT|TOOL_OUTPUT FAILED FOR) .*STRATEGY:[\w-]+:\n\n", re.DOTALL)
_FOOTER = re.compile(r"\n*source: sha256=[0-9a-f]{64} bytes=\d+ chunks=\S+ model=.*$")
_STATUS = re.compile(r"\n\[claimcheck\] .*$", re.DOTALL)
# One described quote per line, as extraction.provenance writes them; the last parenthesis decides.
_DESCRIBED = re.compile(r'^> "(?P<quote>.*)" \((?P<where>chars \d+-\d+|unverified: not in the stored output)\)$')


@dataclass(frozen=True)
class Quotes:
    verified: int
    unverified: int


@dataclass(frozen=True)
class Scored:
    found: list[str]
    quotes: Quotes
    strategy: str
    fallback: str | None  # why claimcheck fell back to truncate, or None
    body: str


def answer_body(result: str) -> str:
    """What the model said in a `tool_output` result: without claimcheck's header, source line and status footer."""
    body = _STATUS.sub("", result)
    header = _HEADER.match(body)
    body = body[header.end() :] if header else body
    return _FOOTER.sub("", body).strip()


def facts_found(answer: str, facts: Sequence[str], *, question: str = "") -> list[str]:
    """The facts present in `answer`, not as part of a longer number or word (case-insensitive, any run of spaces
    matching any other).

    A fact that the question itself contains is never counted: echoing the question finds nothing."""
    found = []
    for fact in facts:
        words = [re.escape(word) for word in fact.split()]
        if not words:
            continue
        pattern = re.compile(_before(fact[0]) + r"\s+".join(words) + _after(fact[-1]), re.IGNORECASE)
        if pattern.search(question):
            continue
        if pattern.search(answer):
            found.append(fact)
    return found


def _before(first: str) -> str:
    """No match inside a longer number or word: `10.1.2.3` is not in `110.1.2.3`, but `08:01:37` is in `T08:01:37`."""
    return r"(?<![\d.])" if first.isdigit() else r"(?<![A-Za-z0-9_])" if first.isalnum() else ""


def _after(last: str) -> str:
    return r"(?!\.?\d)" if last.isdigit() else r"(?![A-Za-z0-9_])" if last.isalnum() else ""


def count_quotes(answer: str) -> Quotes:
    """Described quotes in an answer: `(chars a-b)` ones are verified, `(unverified: …)` ones are not.

    A quote counts as verified only when its own line ends with a character range, so a quote whose text
    merely contains "(chars 1-2)" but was flagged unverified stays unverified."""
    verified = unverified = 0
    for line in answer.splitlines():
        match = _DESCRIBED.match(line.strip())
        if match is None:
            continue
        if match.group("where").startswith("chars "):
            verified += 1
        else:
            unverified += 1
    return Quotes(verified, unverified)


def verified_answer(answer: str, document: str) -> tuple[str, list[Evidence]]:
    """A baseline or oracle answer with its EVIDENCE quotes checked against the whole output, as claimcheck
    checks its own (so the three columns count quotes the same way)."""
    text, quotes = split_evidence(answer)
    evidence = verify(quotes, TextSource.of(document))
    if not evidence:
        return text, evidence
    return text + "\n\nEVIDENCE:\n" + "\n".join(item.describe() for item in evidence), evidence


def score_tool_output(result: str, facts: Sequence[str], question: str) -> Scored:
    """A `tool_output` result scored: a truncate fallback hands over the output's head and tail, not an answer,
    so nothing in it counts as found."""
    strategy = re.search(r"STRATEGY:([\w-]+)", result)
    fallback = re.search(r"fallback to truncate \((.*?)\)\. Read", result, re.DOTALL)
    body = answer_body(result)
    return Scored(
        found=[] if fallback else facts_found(body, facts, question=question),
        quotes=count_quotes(body),
        strategy=strategy.group(1) if strategy else "?",
        fallback=fallback.group(1) if fallback else None,
        body=body,
    )
