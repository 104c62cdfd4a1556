"""Where `tool_output` gets an output's text, and its non-LLM readings besides truncate: raw and slice.

A stored output is read from its file through the store's one door (`SessionStore.open_output`), in pieces:
nothing here holds a whole output, whatever its size. A small result that was never stored is read from
memory. raw and slice are blocking; callers run them in a worker thread.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass

import anyio

from extraction import (
    Source,
    TextSource,
    exceeds,
    find_all,
    read_all,
    read_chars,
    source_exceeds,
    truncate,
    truncate_source,
)
from server.downstream.render import render_output
from server.handles.calls import Call
from server.handles.sessions import Session, Sessions
from server.handles.store import SessionStore, StoreError

__all__ = ["Opener", "RetrievalError", "SliceRequest", "error_of", "raw", "slice_text", "source_of"]

_USE_INSTEAD = 'Use mode "auto" with `extract`, mode "slice", mode "truncate", or Read/Grep with the handle as `file`.'
_MAX_TOKEN_BYTES = 128  # a slice of more characters than threshold × this is over the threshold
ANCHOR_SEARCH_SECONDS = 10.0
"""The longest search for the `match_index`-th anchor: each occurrence costs the anchor's length, so a long
anchor repeated in a repetitive output (overlapping occurrences count) could otherwise take hours."""

Opener = Callable[[], AbstractAsyncContextManager[Source]]


class RetrievalError(Exception):
    """The request cannot be answered from this output; the message says why and what to do instead."""


@dataclass(frozen=True, slots=True)
class SliceRequest:
    start: int | None = None
    length: int | None = None
    anchor: str | None = None
    window: int = 1000
    match_index: int = 0


async def source_of(call: Call, session: Session, sessions: Sessions) -> Opener:
    """How to open the output of a finished `call` for reading; `RetrievalError` when there is none."""
    if call.stored:
        store = call.home if call.home is not None else session.store
        return lambda: _stored(store, call.handle)
    if call.result is not None:
        await sessions.ensure_stored(session, call)
        source = TextSource.of(render_output(call.result))  # small: it was returned inline
        return lambda: nullcontext(source)
    raise RetrievalError(call.fallback if call.fallback is not None else "The output could not be stored.")


async def error_of(call: Call, session: Session, sessions: Sessions, *, threshold: int) -> str:
    """What a call that did not finish ready reports, cut to the threshold: the tool's own error output when
    it is stored (it can be as large as any output), else the error claimcheck recorded."""
    if call.status == "failed" and call.stored:
        try:
            opener = await source_of(call, session, sessions)
            async with opener() as source:
                return await anyio.to_thread.run_sync(lambda: truncate_source(source, threshold=threshold))
        except RetrievalError:
            pass
    return truncate(call.error or "no details", threshold=threshold)


@asynccontextmanager
async def _stored(store: SessionStore, handle: str) -> AsyncIterator[Source]:
    try:
        opened = await anyio.to_thread.run_sync(store.open_output, handle)
    except StoreError as exc:
        raise RetrievalError(str(exc)) from None
    try:
        yield opened
    finally:
        opened.close()


def raw(source: Source, *, size: str, threshold: int) -> str:
    """The whole output, when it is under the token threshold."""
    if source_exceeds(source, threshold):
        raise RetrievalError(
            f"The output is too large for raw ({size}; the threshold is {threshold} tokens). {_USE_INSTEAD}"
        )
    return read_all(source)


def slice_text(source: Source, request: SliceRequest, *, threshold: int) -> str:
    """Characters `start`..`start+length`, or a window centred on the `match_index`-th `anchor`."""
    if request.anchor is not None:
        if request.anchor == "":
            raise RetrievalError("`anchor` must not be empty.")
        if request.window < 0 or request.match_index < 0:
            raise RetrievalError("`window` and `match_index` must not be negative.")
        if exceeds(request.anchor, threshold):  # the slice holds the anchor: it could never be answered
            raise RetrievalError(
                f"The anchor alone is over the {threshold}-token threshold; use a shorter one (a few words)."
            )
        position, found = -1, 0
        deadline = time.monotonic() + ANCHOR_SEARCH_SECONDS
        for at in find_all(source, request.anchor):
            position, found = at, found + 1
            if found > request.match_index:
                break
            if found % 256 == 0 and time.monotonic() > deadline:
                raise RetrievalError(
                    f"The search for the anchor stopped after {ANCHOR_SEARCH_SECONDS:g} s at occurrence {found}; "
                    "use a rarer anchor or a smaller match_index, or Grep."
                )
        if found <= request.match_index:
            seen = f" (it occurs {found} time{'s' if found != 1 else ''}; match_index is 0-based)" if found else ""
            raise RetrievalError(f"Anchor not found in content{seen}.")
        start = max(0, position - request.window // 2)
        wanted = position + len(request.anchor) + request.window // 2
    else:
        if request.start is None or request.length is None:
            raise RetrievalError("slice needs either `anchor` or both `start` and `length` (in characters).")
        if request.start < 0 or request.length < 0:
            raise RetrievalError("`start` and `length` must not be negative.")
        start, wanted = request.start, request.start + request.length
    piece, total = read_chars(source, start, wanted, threshold * _MAX_TOKEN_BYTES)
    if request.anchor is None and start >= total and not (start == 0 and not total):
        raise RetrievalError(f"`start` {start} is past the end of the output ({total} characters).")
    end = min(total, wanted)
    if piece is None or exceeds(piece, threshold):
        raise RetrievalError(
            f"The slice of {end - start} characters is over the {threshold}-token threshold; ask for a shorter one."
        )
    return f"[characters {start}-{end} of {total}]\n{piece}"
