"""Scoring for bench/extraction_eval.py: which facts an answer holds, which of its items are wrong or invented, and
how many of its quotes were verified.

An answer is judged on what it claims: its text without the EVIDENCE quotes (they are evidence, not claims). Its
answer-shaped items (a case's `shape`: times, ids, paths) that are no fact and not in the question are `wrong`
when the output holds them (a wrong pick) and `invented` when it does not. When those outnumber the facts found
(an answer listing every timestamp of a log holds the right one too), none of its facts is credited. Every arm
(baseline, claimcheck, oracle) is judged the same way.

Pure functions over text, so CI tests them without a model (tests/extraction/test_extraction_eval_scoring.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from extraction.provenance import Evidence, settle, split_evidence
from extraction.source import TextSource

__all__ = [
    "Judged",
    "Quotes",
    "Scored",
    "answer_body",
    "claims",
    "count_quotes",
    "facts_found",
    "judge",
    "score_tool_output",
    "shaped_items",
    "verified_answer",
]

_HEADER = re.compile(r"^(ABSTRACT FROM TOOL OUTPUT|TOOL_OUTPUT FAILED FOR) .*STRATEGY:[\w-]+:\n\n", re.DOTALL)
_FOOTER = re.compile(r"\n*source: sha256=[0-9a-f]{64} bytes=\d+ chunks=\S+ model=.*$")
_STATUS = re.compile(r"\n\[claimcheck\] .*$", re.DOTALL)
# One described quote per line, as extraction.provenance writes them; the last parenthesis decides.
_DESCRIBED = re.compile(
    r'^> "(?P<quote>.*)" \((?P<where>chars \d+-\d+(?:; located by claimcheck: holds ".*")?'
    r"|unverified: not in the stored output|not in the stored output: the model may have made it up)\)$"
)


@dataclass(frozen=True)
class Quotes:
    verified: int
    unverified: int
    located: int = 0  # lines claimcheck found holding the answer's values (extraction/locate.py), not quotes
    missing: int = 0  # values of the answer claimcheck found nowhere in the output


@dataclass(frozen=True)
class Judged:
    found: list[str]  # the facts the answer's claims hold
    wrong: list[str]  # answer-shaped items that are no fact but are in the output: wrong picks
    invented: list[str]  # answer-shaped items that are nowhere in the output

    @property
    def credited(self) -> list[str]:
        """The facts that count: none when the wrong and invented items outnumber the facts found."""
        return self.found if len(self.wrong) + len(self.invented) <= len(self.found) else []


NOTHING = Judged([], [], [])


@dataclass(frozen=True)
class Scored:
    judged: Judged
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
        pattern = _whole(fact)
        if pattern is None or pattern.search(question):
            continue
        if pattern.search(answer):
            found.append(fact)
    return found


def claims(answer: str) -> str:
    """What an answer claims: its text without the EVIDENCE quotes, as the model wrote them (`> "…"`) or as
    claimcheck describes them (`> "…" (chars a-b)`)."""
    text, _ = split_evidence(answer)
    return "\n".join(line for line in text.splitlines() if _DESCRIBED.match(line.strip()) is None).strip()


def shaped_items(text: str, shape: Sequence[str]) -> list[str]:
    """The distinct items of `text` that match one of the `shape` regexes (ignoring case), in order; an item inside
    a longer one (the version in a URL, the line number in `path:line`) is part of that one, not an item of its own."""
    matches = sorted(
        (match.start(), -match.end(), match.group())
        for pattern in shape
        for match in re.finditer(pattern, text, re.IGNORECASE)
        if match.group()
    )
    items: list[str] = []
    seen: set[str] = set()
    reach = -1
    for _, negative_end, item in matches:
        if -negative_end <= reach:
            continue
        reach = -negative_end
        key = " ".join(item.lower().split())
        if key not in seen:
            seen.add(key)
            items.append(item)
    return items


def judge(answer: str, facts: Sequence[str], *, question: str, output: str, shape: Sequence[str]) -> Judged:
    """An answer's claims against the facts and the whole output (see the module's docstring).

    An item that holds a fact, or is part of one (`src/a.py:12` and `src/a.py`; `change 7` and `auth: change 7`),
    is that fact, not a wrong item; an item the question contains is no claim."""
    text = claims(answer)
    wrong: list[str] = []
    invented: list[str] = []
    for item in shaped_items(text, shape):
        pattern = _whole(item)
        if pattern is None or facts_found(item, facts) or any(pattern.search(fact) for fact in facts):
            continue
        if pattern.search(question):
            continue
        (wrong if pattern.search(output) else invented).append(item)
    return Judged(facts_found(text, facts, question=question), wrong, invented)


def _whole(text: str) -> re.Pattern[str] | None:
    """`text` as a case-insensitive pattern that matches it whole, any run of spaces matching any other."""
    words = [re.escape(word) for word in text.split()]
    if not words:
        return None
    return re.compile(_before(text.strip()[0]) + r"\s+".join(words) + _after(text.strip()[-1]), re.IGNORECASE)


def _before(first: str) -> str:
    """No match inside a longer number or word: `10.1.2.3` is not in `110.1.2.3`, but `08:01:37` is in `T08:01:37`."""
    return r"(?<![\d.])" if first.isdigit() else r"(?<![A-Za-z0-9_])" if first.isalnum() else ""


def _after(last: str) -> str:
    return r"(?!\.?\d)" if last.isdigit() else r"(?![A-Za-z0-9_])" if last.isalnum() else ""


def count_quotes(answer: str) -> Quotes:
    """Described quotes in an answer: `(chars a-b)` ones are verified, `(unverified: …)` ones are not.

    A quote counts as verified only when its own line ends with a character range, so a quote whose text
    merely contains "(chars 1-2)" but was flagged unverified stays unverified."""
    verified = unverified = located = missing = 0
    for line in answer.splitlines():
        match = _DESCRIBED.match(line.strip())
        if match is None:
            continue
        where = match.group("where")
        if "located by claimcheck" in where:
            located += 1
        elif where.startswith("chars "):
            verified += 1
        elif "made it up" in where:
            missing += 1
        else:
            unverified += 1
    return Quotes(verified, unverified, located, missing)


def verified_answer(answer: str, document: str) -> tuple[str, list[Evidence]]:
    """A baseline or oracle answer with its EVIDENCE quotes checked against the whole output, as claimcheck
    checks its own (so the three columns count quotes the same way)."""
    text, evidence = settle(answer, TextSource.of(document))
    if not evidence:
        return text, evidence
    return text + "\n\nEVIDENCE:\n" + "\n".join(item.describe() for item in evidence), evidence


def score_tool_output(
    result: str, facts: Sequence[str], question: str, *, output: str, shape: Sequence[str] = ()
) -> Scored:
    """A `tool_output` result scored: a truncate fallback hands over the output's head and tail, not an answer,
    so nothing in it counts as found, wrong or invented."""
    strategy = re.search(r"STRATEGY:([\w-]+)", result)
    fallback = re.search(r"fallback to truncate \((.*?)\)\. Read", result, re.DOTALL)
    body = answer_body(result)
    return Scored(
        judged=NOTHING if fallback else judge(body, facts, question=question, output=output, shape=shape),
        quotes=count_quotes(body),
        strategy=strategy.group(1) if strategy else "?",
        fallback=fallback.group(1) if fallback else None,
        body=body,
    )
