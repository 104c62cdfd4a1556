"""Counts in messages: "1 line", "2 lines", never "1 lines" nor "line(s)". Here, at the bottom of the layers, so
that extraction's messages and every wing of the server say counts alike."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, singular: str, many: str | None = None) -> str:
    """`count` and the noun for it: `plural(1, "line")` is "1 line", `plural(3, "match", "matches")` "3 matches"."""
    return f"{count} {singular if count == 1 else many or singular + 's'}"
