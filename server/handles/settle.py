"""A finished call's result under the size rule: what stays in memory, what is stored under its handle."""

from __future__ import annotations

import hashlib
import logging

import anyio
import mcp_types as types

from extraction import (
    Source,
    estimate_source_tokens,
    estimate_tokens,
    exceeds,
    exceeds_by_length,
    head_tokens,
    read_all,
    source_exceeds,
)
from server.config import Policy
from server.downstream.render import render_output
from server.downstream.spool import CUT_MARKER
from server.downstream.spooled import SpooledOutput, SpooledOutputs, kept_result
from server.downstream.tool_call import RawResult
from server.handles.calls import Call
from server.handles.messages import not_stored_message as messages_not_stored
from server.handles.outcome import Inline, Lost, Outcome, Output, Stored
from server.handles.session import Session
from server.handles.store import StoreError

__all__ = ["settle", "store_text"]

logger = logging.getLogger(__name__)


async def settle(
    session: Session,
    call: Call,
    result: types.CallToolResult | RawResult,
    policy: Policy,
    max_output_bytes: int,
    spooled_outputs: SpooledOutputs,
) -> Outcome:
    """Apply the size rule; store what a handle will need; finish the call with its outcome (`Call.settle`, the one
    writer of how a call ended). A stand-in result is exchanged for its output in `spooled_outputs`."""
    if isinstance(result, RawResult):
        if (outcome := _settle_raw(call, result, policy, max_output_bytes)) is not None:
            return outcome
        result = result.model()
    spooled = spooled_outputs.claim(result)
    if spooled is not None:
        return await _settle_spooled(session, call, spooled, policy)
    text = render_output(result)
    total = len(text.encode("utf-8", "replace"))
    if total > max_output_bytes:
        cut = text.encode("utf-8", "replace")[:max_output_bytes].decode("utf-8", "ignore")
        text = cut + CUT_MARKER.format(limit=max_output_bytes, total=total)
    over = exceeds_by_length(text, policy.async_token_threshold)
    if over is None:
        over = await anyio.to_thread.run_sync(exceeds, text, policy.async_token_threshold)
    output = _measured(text, over=over, produced=total, cut=total > max_output_bytes)
    if over or call.handed_out:
        output = output.counted(*await anyio.to_thread.run_sync(estimate_tokens, text))
        failure = await store_text(session, call, text)
        if failure is not None and over:  # a small output stays in memory; a big one is lost but its start
            return _not_stored(call, output, failure, text, policy)
        output = output._replace(stored=failure is None)
    outcome = Stored(result.is_error) if over else Inline(result)
    return _finish(call, outcome, output, failed=result.is_error, text=text)


def _measured(text: str, *, over: bool, produced: int | None = None, cut: bool = False) -> Output:
    """What is measured of an output held in memory (its tokens are counted only when it is shown as a handle)."""
    data = text.encode("utf-8", "replace")
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    size = len(data)
    sha256 = hashlib.sha256(data).hexdigest()
    return Output(size, size if produced is None else produced, lines, sha256=sha256, cut=cut, over_threshold=over)


def _settle_raw(call: Call, result: RawResult, policy: Policy, max_output_bytes: int) -> Outcome | None:
    """The fast path's common case, decided without waiting (so no handoff can come in between): a plain
    text result under the threshold by its length alone, for a call not handed out. None: not that case."""
    text = result.plain_text() if not call.handed_out else None
    if text is None or exceeds_by_length(text, policy.async_token_threshold) is not False:
        return None
    if len(text.encode("utf-8", "replace")) > max_output_bytes:
        return None
    outcome = Inline(raw=result.result)
    call.settle(outcome, "ready", _measured(text, over=False))
    return outcome


async def _settle_spooled(session: Session, call: Call, spooled: SpooledOutput, policy: Policy) -> Outcome:
    """An output that went to disk as it arrived: adopt its file, or say plainly that it could not be kept."""
    # No digest yet: it is taken from the file when extraction asks for it (`SessionStore.sha256`).
    output = Output(spooled.bytes, spooled.total, spooled.lines, cut=spooled.cut)
    result: types.CallToolResult | None = None
    try:
        if spooled.path is None:
            raise StoreError(spooled.failure or "the disk refused it")
        session.store.adopt(call.handle, spooled.path)
        stored = await anyio.to_thread.run_sync(session.store.open_output, call.handle)  # the one door
        with stored:
            over = await anyio.to_thread.run_sync(source_exceeds, stored, policy.async_token_threshold)
            if not over:  # small after all: answer as the tool did
                result = await anyio.to_thread.run_sync(_small_result, spooled, stored)
            if over or call.handed_out:
                output = output.counted(*await anyio.to_thread.run_sync(estimate_source_tokens, stored))
    except StoreError as exc:
        return _not_stored(call, output, exc.reason, spooled.head, policy)
    finally:
        if spooled.raw is not None:
            spooled.raw.unlink(missing_ok=True)
    output = output._replace(stored=True, over_threshold=over)
    outcome: Outcome = Stored(spooled.is_error) if over else Inline(result)
    return _finish(call, outcome, output, failed=spooled.is_error, text=None)


def _not_stored(call: Call, output: Output, reason: str, head: str, policy: Policy) -> Outcome:
    """The output is lost but for its first part: answer with that, truthfully, and fail the handle."""
    shown = head_tokens(head[: policy.async_token_threshold * 8], policy.async_token_threshold // 2)
    output = output._replace(over_threshold=True)
    outcome = Lost(messages_not_stored(call, reason, shown, produced=output.produced))
    call.settle(outcome, "failed", output)
    return outcome


def _finish(call: Call, outcome: Outcome, output: Output, *, failed: bool, text: str | None) -> Outcome:
    if failed:  # the tool's own error: its text, or where it is stored
        call.settle(outcome, "failed", output, error=text if text is not None else _error_head(output))
    else:
        call.settle(outcome, "ready", output)
    return outcome


async def store_text(session: Session, call: Call, text: str) -> str | None:
    """Write the output under its handle; the reason it failed, or None."""
    try:
        await session.store.write(call.handle, text)
    except StoreError as exc:
        logger.warning("%s", exc)
        return exc.reason
    return None


def _small_result(spooled: SpooledOutput, stored: Source) -> types.CallToolResult:
    """The result of an output under the threshold: from the tool's own message when it was kept whole
    (bounded by the spool's `raw_keep`), else from the stored text (under the threshold, so small)."""
    kept = kept_result(spooled)
    if kept is not None:
        return kept
    text = read_all(stored)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=spooled.is_error)


def _error_head(output: Output) -> str:
    """A failed output that is stored on disk is described, not held: its size and where it is."""
    return f"the tool reported an error; its output ({output.bytes} bytes) is stored under the handle"
