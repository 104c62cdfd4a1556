"""How a finished call ended, as one value that every answer matches on (the SDK path's `answer`, the stdio fast
path's immediate answer), instead of flags read again in each place.

    Inline    its result is answered as it came (under the size rule)
    Stored    its output is over the size rule and stored whole under its handle
    Lost      its output is over the size rule and could not be stored: `message` says so, with its first part
    Failed    it never produced a result: the downstream failed, it was cancelled, or its answer was unusable
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["Failed", "Inline", "Lost", "Outcome", "Stored"]


@dataclass(frozen=True, slots=True)
class Inline:
    """`result`: the tool's result; `raw`: the fast path's plain-text result object as the downstream gave it."""

    result: types.CallToolResult | None = None
    raw: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Stored:
    failed: bool


@dataclass(frozen=True, slots=True)
class Lost:
    message: str


@dataclass(frozen=True, slots=True)
class Failed:
    reason: str


Outcome = Inline | Stored | Lost | Failed
