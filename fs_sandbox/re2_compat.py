"""google-re2's engine under its `re`-like wrapper: the only module of fs_sandbox that touches its private parts.

Grep needs what the public `re2.compile` does not give: a pattern compiled from bytes, the engine's own error
text (to name a construct RE2 refuses), and a search of `data[start:stop]` that answers the first match's span
with the bytes around it as context, with no match object made per call. The wrapper's extension module
`re2._re2` (`RE2(pattern, options)`, `.ok()`, `.error()`, `.Match(anchor, data, start, stop)`) and its
`re2._Anchor` give that; a public span search in google-re2 would replace this module.
tests/test_compat_canary.py checks their shape. Stdlib and re2 only: the Grep worker imports it."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

try:  # fs_sandbox depends on google-re2; without it every search is `re` under the fixed guard
    import re2
    from re2 import _re2

    _UNANCHORED: Any = re2._Anchor.UNANCHORED
except ImportError:  # pragma: no cover - only when the dependency is missing
    _re2 = None

AVAILABLE = _re2 is not None

Span = tuple[int, int]


class Program(Protocol):
    """A compiled RE2 program."""

    def ok(self) -> bool: ...

    def error(self) -> bytes: ...


def compiled(
    pattern: bytes, *, case_sensitive: bool = True, literal: bool = False, max_mem: int | None = None
) -> Program:
    """`pattern` compiled without capture groups or logging; `.ok()` says whether RE2 took it, `.error()` why not."""
    options = re2.Options()
    options.case_sensitive = case_sensitive
    options.literal = literal
    options.never_capture = True
    options.log_errors = False
    if max_mem is not None:
        options.max_mem = max_mem
    program: Program = _re2.RE2(pattern, options)
    return program


def searcher(program: Program) -> Callable[[bytes | bytearray | memoryview, int, int], list[Span]]:
    """`search(data, start, stop)`: `[(start, end)]` of the first match in data[start:stop] (the bytes around it
    are context for `^`, `$` and `\\b`), `[(-1, -1)]` when there is none."""
    search: Callable[[bytes | bytearray | memoryview, int, int], list[Span]] = partial(
        program.Match,  # type: ignore[attr-defined]  # the extension's method, not in the Protocol on purpose
        _UNANCHORED,
    )
    return search
