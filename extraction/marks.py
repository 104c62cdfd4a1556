"""The marks claimcheck puts on the lines it shows a model, in one place: Read's and Grep's line-number gutters,
Grep's match arrow and column, the excerpt page's arrow. A model copies lines as it sees them, marks included;
`without_marks` takes these (and only these) off such a copy so that it can be found in the stored output."""

from __future__ import annotations

import re

__all__ = ["EXCERPT_MARK", "excerpt_line", "grep_line", "grep_snippet", "read_line", "without_marks"]

EXCERPT_MARK = "→ "  # before a chosen line of the excerpt page, as Grep marks a match
_EXCERPT_PLAIN = "  "  # before the lines around it

# A line number (right-aligned in 6, though a copy may lose the padding), then what follows it in each form:
# Grep's column snippet, Grep's match, Grep's context line, Read's line; or the excerpt page's two marks.
_MARKS = re.compile(r"^(?:\s*\d+(?: → col \d+: | → |   |  )|→ |  )")


def read_line(number: int, text: str) -> str:
    return f"{number:>6}  {text}"


def grep_line(number: int, text: str, *, match: bool) -> str:
    return f"{number:>6}{' →' if match else '  '} {text}"


def grep_snippet(number: int, column: int, text: str) -> str:
    return f"{number:>6} → col {column}: {text}"


def excerpt_line(text: str, *, chosen: bool) -> str:
    return (EXCERPT_MARK if chosen else _EXCERPT_PLAIN) + text


def without_marks(quote: str) -> str:
    """`quote` without the marks claimcheck put before a line it showed, on each of its lines; unchanged when it
    has none."""
    return "\n".join(_MARKS.sub("", line, count=1) for line in quote.split("\n"))
