"""How deep JSON text nests, found without building it: the depth budget of every parser of outputs.

json's C scanner recurses once per level and raises RecursionError near the interpreter's limit (about 1 000
levels, less on a deep stack), and what it builds is walked recursively again later (`json.dumps`, `==`,
pydantic). So text is measured before it is built, and a value deeper than the budget is refused or passed
over as text. The measure is cheap where it matters: text with fewer opening brackets than the budget is
never scanned.
"""

from __future__ import annotations

from server.budget import nests_deeper

__all__ = ["MAX_DEPTH", "deeper_than"]

MAX_DEPTH = 200
"""The deepest JSON claimcheck builds from an output: far beyond what tools return, far below the limit."""


def deeper_than(text: str, limit: int = MAX_DEPTH, start: int = 0, end: int | None = None) -> bool:
    """Whether the JSON text in `text[start:end]` nests arrays and objects more than `limit` deep (brackets
    inside strings do not count; in text that is not JSON the answer may be too high, never too low)."""
    end = len(text) if end is None else end
    if text.count("[", start, end) + text.count("{", start, end) <= limit:
        return False
    return nests_deeper(text[start:end].encode("utf-8", "surrogatepass"), limit)
