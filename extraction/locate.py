"""Where an answer's values stand in the stored output, when the model quoted nothing.

A small model rarely quotes (Qwen2.5-Coder-0.5B quoted in 4 of the 11 cases where it found something,
bench/extraction_eval.py) but its answers are mostly values: an IP, a time, an id, a path, a version. Each such
value is looked up in the output, and the first line holding it is shown with its character range, so the
client can check the answer without reading the output. This is claimcheck's finding, not the model's quote,
and is labelled so (`located: …`); a value found nowhere is said to be so: the model may have made it up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from extraction.source import Source, text_windows

__all__ = ["MAX_VALUES", "Location", "locate", "values_of"]

MAX_VALUES = 5
_LINE_CHARS = 300  # of the line around a value: a minified bundle's line is a whole file
_VALUE = re.compile(r"[A-Za-z0-9_./:@#%+=~-]*[0-9/_.:@#=][A-Za-z0-9_./:@#%+=~-]*")
_MIN_VALUE_CHARS = 4


@dataclass(frozen=True, slots=True)
class Location:
    """A value of the answer and the first line of the output holding it (`line` None: not in the output)."""

    value: str
    line: str | None = None
    start: int | None = None
    end: int | None = None

    def describe(self) -> str:
        if self.line is None:
            return f'> "{self.value}" (not in the stored output: the model may have made it up)'
        return f'> "{self.line}" (chars {self.start}-{self.end}; located by claimcheck: holds "{self.value}")'


def values_of(answer: str) -> list[str]:
    """The answer's value-like words (with a digit or `/ _ . : @ # =` inside), in order, without repeats."""
    values: list[str] = []
    for match in _VALUE.finditer(answer):
        value = match.group().strip(".:,;-=")
        has_letter_or_digit = any(c.isalnum() for c in value)
        if len(value) >= _MIN_VALUE_CHARS and has_letter_or_digit and value not in values:
            values.append(value)
    return values[:MAX_VALUES]


def locate(answer: str, document: Source) -> list[Location]:
    """Each value of the answer with the first line of `document` that holds it, in one pass; blocking."""
    values = values_of(answer)
    found: dict[str, Location] = {}
    overlap = _LINE_CHARS * 2 + max((len(v) for v in values), default=0)
    for offset, window in text_windows(document, overlap) if values else ():
        for value in values:
            if value in found or (at := window.find(value)) < 0:
                continue
            first = max(window.rfind("\n", 0, at) + 1, at - _LINE_CHARS // 2)
            last = window.find("\n", at)
            last = min(last if last >= 0 else len(window), at + len(value) + _LINE_CHARS // 2)
            found[value] = Location(value, window[first:last], offset + first, offset + last)
        if len(found) == len(values):
            break
    return [found.get(value) or Location(value) for value in values]
