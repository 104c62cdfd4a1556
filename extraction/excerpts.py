"""The excerpts strategy's reading: the lines of an output that share the rarest words with the question, with
their neighbours, the output's first lines and its last, in order, within a small budget.

Why: a small local model misses a line in a chunk of thousands of tokens (Qwen2.5-Coder-0.5B answered "not
found" over a 2 000-token chunk that held the answer, bench/extraction_eval.py) but reads a page of a few
dozen lines well. Picking the lines is lexical and cheap: two passes over the stored output, no model.

A line longer than `SEGMENT_CHARS` (a minified bundle, one-line JSON) is read as segments of that length, so
a 10 000-character line is not one unit. Memory is bounded whatever the output: segments are grouped by which
question words they hold (at most 2**MAX_TERMS groups), each group keeping at most `KEEP` positions, and at
most `CANDIDATES` of those are read back.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from extraction.marks import EXCERPT_MARK, excerpt_line
from extraction.source import Source, text_pieces
from extraction.tokens import count_tokens
from extraction.wording import plural

__all__ = ["Excerpt", "excerpt", "terms_of"]

SEGMENT_CHARS = 400
MAX_TERMS = 10
KEEP = 24  # positions kept per group of segments holding the same question words
NEIGHBOURS = 2  # lines (or segments of a long line) shown on each side of a chosen one
HEAD_SEGMENTS = 5
TAIL_SEGMENTS = 10
HEAD_TAIL_SHARE = 0.15  # of the budget, each: a bundle's 400-character segments must not fill it alone
MARK = EXCERPT_MARK  # before a chosen line, as Grep marks a match; the lines around it get two spaces
CANDIDATES = 200  # chosen lines read back at most: a page of ~1 500 tokens never holds more, and the text read
# back stays under a megabyte whatever the output (200 x 5 neighbours and headings x 400 characters)
RELEVANT = 0.25  # a group is shown when its words weigh at least this share of the best group's
_SEPARATOR = re.compile(r"[;,\s{}()\[\]]")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]*")
_STOP = frozenset(
    """a an and are as at be by can do does did for from give has have how if in into is it its list made me
    name names of on one or than that the their them there these this those to was were what when where which
    who whom whose why with would your you all any each every first give given show tell value values""".split()
)


@dataclass(frozen=True, slots=True)
class Excerpt:
    text: str
    segments: int  # of the output
    chosen: int  # segments chosen for holding question words
    terms: tuple[str, ...]
    marked: tuple[str, ...] = ()  # the chosen segments themselves, in order
    rare: tuple[str, ...] = ()  # the question's rarest terms in the output (fewest lines hold them), if any holds


def terms_of(question: str) -> list[str]:
    """The question's words worth looking for, lowercased and cut to a stem (`killed` → `kill`)."""
    terms: list[str] = []
    for word in _WORD.findall(question):
        lowered = word.lower()
        if lowered in _STOP or (len(lowered) < 3 and not word.isupper()):
            continue
        stem = _stem(lowered)
        if stem not in terms:
            terms.append(stem)
    return terms[:MAX_TERMS]


def _stem(word: str) -> str:
    if not word.isalpha():  # an identifier (max_retry_backoff_ms, x-token-3) is looked for as written
        return word
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def _segments(source: Source) -> Iterator[str]:
    """The output's lines, each longer line as pieces of at most SEGMENT_CHARS (blocking)."""
    rest = ""
    for piece in text_pieces(source):
        rest += piece
        lines = rest.split("\n")
        rest = lines.pop()
        for line in lines:
            pieces, last = _split_long(line)
            yield from pieces
            yield last
        pieces, rest = _split_long(rest)  # a line without its end yet: its finished pieces go now
        yield from pieces
    if rest:
        pieces, last = _split_long(rest)
        yield from pieces
        yield last


def _split_long(text: str) -> tuple[list[str], str]:
    """`text` as pieces of at most SEGMENT_CHARS, each cut after a separator (`;`, `,`, a space…) in its last
    quarter where there is one, so a word is rarely cut in two; and what is left (at most SEGMENT_CHARS)."""
    pieces = []
    while len(text) > SEGMENT_CHARS:
        window = text[SEGMENT_CHARS * 3 // 4 : SEGMENT_CHARS]
        found = _SEPARATOR.search(window[::-1])
        cut = SEGMENT_CHARS - found.start() if found else SEGMENT_CHARS
        pieces.append(text[:cut])
        text = text[cut:]
    return pieces, text


def excerpt(source: Source, question: str, budget_tokens: int) -> Excerpt:
    """The excerpt of `source` for `question` within about `budget_tokens` (cl100k); blocking."""
    terms = terms_of(question)
    groups: dict[int, list[int]] = {}
    outline: dict[int, tuple[int, ...]] = {}  # a kept segment's headings: the last two unindented lines before it
    headings: tuple[int, ...] = ()
    frequency = [0] * len(terms)
    total = 0
    for index, segment in enumerate(_segments(source)):
        total = index + 1
        lowered = segment.lower()
        mask = 0
        for bit, term in enumerate(terms):
            if term in lowered:
                mask |= 1 << bit
                frequency[bit] += 1
        if mask:
            kept = groups.setdefault(mask, [])
            if len(kept) < KEEP:
                kept.append(index)
                outline[index] = headings
        if segment[:1].isalnum():  # `commit …`, `diff --git …`, `Author: …`: what the indented lines belong to
            headings = (*headings[-1:], index)
    weight = [math.log((total + 1) / (count + 0.5)) if count else 0.0 for count in frequency]

    def score(mask: int) -> float:
        return sum(weight[bit] for bit in range(len(terms)) if mask >> bit & 1)

    best = max(map(score, groups), default=0.0)
    ranked = [
        i for mask in sorted(groups, key=score, reverse=True) if score(mask) >= best * RELEVANT for i in groups[mask]
    ][:CANDIDATES]
    windows = [
        (sorted({*outline[i], *range(max(0, i - NEIGHBOURS), min(total, i + NEIGHBOURS + 1))}), [*outline[i], i])
        for i in ranked
    ]
    top = max(weight, default=0.0)
    rare = tuple(term for term, w in zip(terms, weight, strict=True) if w and w >= top)
    return replace(_render(source, ranked, windows, total, budget_tokens, tuple(terms)), rare=rare)


def _render(
    source: Source,
    ranked: list[int],
    windows: list[tuple[list[int], list[int]]],
    total: int,
    budget_tokens: int,
    terms: tuple[str, ...],
) -> Excerpt:
    """The start and end of the output, and the chosen segments with their neighbours and headings (or, where
    those do not fit, with their headings alone), in order, as long as the budget holds (best first); chosen
    segments are marked."""
    head = range(min(HEAD_SEGMENTS, total))
    tail = range(max(0, total - TAIL_SEGMENTS), total)
    needed = {*head, *tail}.union(*(set(wide) for wide, _ in windows))
    wanted: dict[int, str] = {}
    for index, segment in enumerate(_segments(source)):
        if index in needed:
            wanted[index] = segment
    shown: set[int] = set()
    used = 0
    for edge in (head, reversed(tail)):
        share = 0
        for index in edge:
            cost = count_tokens(wanted.get(index, "")) + 1
            if share + cost > budget_tokens * HEAD_TAIL_SHARE:
                break
            shown.add(index)
            share += cost
        used += share
    chosen: set[int] = set()
    for center, choices in zip(ranked, windows, strict=True):
        for window in choices:
            new = [i for i in window if i not in shown]
            cost = sum(count_tokens(wanted.get(i, "")) + 3 for i in new)
            if used + cost <= budget_tokens:
                shown.update(new)
                chosen.add(center)
                used += cost
                break
    lines: list[str] = []
    last = -1
    for index in sorted(shown):
        if index > last + 1:
            lines.append(f"  [… {plural(index - last - 1, 'line')} not shown …]")
        lines.append(excerpt_line(wanted.get(index, ""), chosen=index in chosen))
        last = index
    if last < total - 1:
        lines.append(f"  [… {plural(total - 1 - last, 'line')} not shown …]")
    marked = tuple(wanted.get(i, "") for i in sorted(chosen))
    return Excerpt("\n".join(lines), total, len(chosen), terms, marked)
