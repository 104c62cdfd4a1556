"""How a finished call ended, as one value that every answer matches on (the SDK path's `answer`, the stdio fast
path's immediate answer), instead of flags read again in each place.

    Inline    its result is answered as it came (under the size rule)
    Stored    its output is over the size rule and stored whole under its handle
    Lost      its output is over the size rule and could not be stored: `message` says so, with its first part
    Failed    it never produced a result: the downstream failed, it was cancelled, or its answer was unusable

With it, settlement records what was measured of the output (`Output`): sizes, tokens, digest, whether it was
cut, stored, or over the size rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["NO_OUTPUT", "Failed", "Inline", "Lost", "Outcome", "Output", "Stored"]


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


class Output(NamedTuple):
    """What was measured of a call's output; all zero while it runs, and when it never produced one. Immutable like
    the outcomes, but a named tuple: one is made for every call, and a tuple is made in a third of the time."""

    bytes: int = 0  # kept (in memory or in its file)
    produced: int = 0  # what the tool produced; more than `bytes` when the output was cut or not stored
    lines: int = 0
    tokens: int = 0
    tokens_exact: bool = True
    tokens_counted: bool = False  # a small inline result is never counted
    sha256: str = ""  # of a spooled output: "" until extraction asks for it (`SessionStore.sha256`)
    cut: bool = False  # only the first maxOutputBytes were kept
    stored: bool = False  # whole in its file under the handle
    over_threshold: bool = False

    def counted(self, tokens: int, exact: bool) -> Output:
        return self._replace(tokens=tokens, tokens_exact=exact, tokens_counted=True)


NO_OUTPUT = Output()
