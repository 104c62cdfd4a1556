"""Whether the line that holds an excerpts answer's value carries what was asked.

A small model shown a page of excerpts often answers with a value from a line near the one that answers: asked
when a worker was OOM killed, Qwen2.5-Coder-0.5B gave the pod of a routine `Normal Killing` line on the same page
(the eval's ps-backup, log-errors and git-oldest misses are the same kind). So after an excerpts answer,
the page line holding its first value found there is read: when it carries none of the question's rarest terms
(`Excerpt.rare`) and other lines of the page do, the page is narrowed to those lines and their neighbours and the
model is asked once more; when the answer's line still does not carry them, the answer says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from extraction.excerpts import Excerpt
from extraction.locate import values_of

__all__ = ["Recheck", "caution", "recheck"]

_AROUND = 1
"""Lines kept on each side of a line that carries a rare term, in the narrowed page."""


@dataclass(frozen=True, slots=True)
class Recheck:
    """What the page says of an answer: the page line holding its value, and the narrowed page to ask again on
    (None when the line carries the rare terms, or no other line does)."""

    line: str | None
    narrowed: str | None = None


def value_line(answer: str, page: Excerpt) -> str | None:
    """The first line of the page that holds one of the answer's values (in the answer's order)."""
    lines = page.text.splitlines()
    for value in values_of(answer):
        for line in lines:
            if value in line:
                return line
    return None


def _carries(line: str, terms: tuple[str, ...]) -> bool:
    lowered = line.lower()
    return any(term in lowered for term in terms)


def recheck(answer: str, page: Excerpt) -> Recheck:
    """Whether to ask again on a narrower page (`Recheck.narrowed`), for `answer` read from `page`."""
    line = value_line(answer, page)
    if line is None or not page.rare or _carries(line, page.rare):
        return Recheck(line)
    lines = page.text.splitlines()
    carrying = [index for index, shown in enumerate(lines) if _carries(shown, page.rare)]
    if not carrying:
        return Recheck(line)
    kept = sorted({i for at in carrying for i in range(max(0, at - _AROUND), min(len(lines), at + _AROUND + 1))})
    return Recheck(line, "\n".join(lines[i] for i in kept))


def caution(answer: str, page: Excerpt) -> str:
    """The line the answer gets when the page line holding its value does not mention the question's rarest
    terms (empty when it does, or no such line is on the page)."""
    line = value_line(answer, page)
    if line is None or not page.rare or _carries(line, page.rare):
        return ""
    words = " or ".join(f'"{term}"' for term in page.rare)
    return (
        f"Check this answer: the line that holds its value does not mention {words}, which the question asks about "
        f"({line.strip()[:160]!r})."
    )
