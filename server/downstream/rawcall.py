"""A plain `tools/call` to a stdio downstream written and read as bytes, beside the SDK client.

The SDK client validates every request and result with pydantic, and that is much of what a proxied call
costs. On the fast path the request is one line of JSON written straight to the server's stdin, and the
response comes back parsed by the stdlib (`RawChannel` in `server.downstream.stdio` picks it out by its
id). Everything else about the call is as `Downstream.call` does it: the same live connection (restarted
if it is down), the same in-flight tracking (log messages, sampling and elicitation of the server go to
the waiting requests), the call's progress, its timeout and a courtesy cancel when it is abandoned, and
the same errors. A tool of a claimcheck behind this one is called with the pass-through mark in the request's
`_meta` (`chain.passthrough_meta`) beside the progress token, as the SDK client would send it. A caller that
streams its answer (`follow`) may get a long tool result's output while the server still writes it (a
`GrowingOutput`). A call this
path cannot make exactly as the SDK would (a task, an HTTP server) is made by `Downstream.call`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Literal, overload

import anyio
import mcp_types as types

from server import tracing
from server.downstream.chain import passthrough_meta
from server.downstream.rawchannel import RawAnswer, RawChannel
from server.downstream.relay import Relay
from server.downstream.server import DOWNSTREAM_MESSAGE_LIMIT, Downstream
from server.downstream.spooled import GrowingOutput
from server.errors import DownstreamError, clip

__all__ = ["RawResult", "RawSent", "call_raw", "raw_capable", "send_now"]

_CANCEL_WRITE_S = 2.0


@dataclass(frozen=True, slots=True)
class RawResult:
    """A downstream's `tools/call` result as it came, parsed by the stdlib and not validated yet."""

    result: dict[str, Any]

    def plain_text(self) -> str | None:
        """The text a model sees, when the result is text items and nothing else (no error, no structured
        content, no annotations), so that passing it on as it is equals what the SDK's round trip gives;
        None otherwise (then `model()`)."""
        texts = self.texts()
        return None if texts is None else "\n".join(texts)

    def texts(self) -> list[str] | None:
        """The texts of its items, when `plain_text` is not None."""
        result = self.result
        content = result.get("content")
        if not isinstance(content, list) or result.get("isError", False) is not False:
            return None
        if len(result) != 1 + ("isError" in result):
            return None
        texts: list[str] = []
        for item in content:
            if type(item) is not dict or len(item) != 2 or item.get("type") != "text":
                return None
            text = item.get("text")
            if type(text) is not str:
                return None
            texts.append(text)
        return texts

    def model(self) -> types.CallToolResult:
        return types.CallToolResult.model_validate(self.result, by_name=False)


def raw_capable(downstream: Downstream, tool: str) -> bool:
    """Whether a call of `tool` can go as bytes: a live stdio connection, and a tool that is not a task (that
    needs more than a plain request)."""
    process = downstream.process
    if process is None or process.raw is None or process.raw.closed or downstream.state != "ready":
        return False
    definition = downstream.tools.get(tool)
    if definition is None:
        return False
    execution = definition.execution
    return execution is None or execution.task_support != "required"


@dataclass(frozen=True, slots=True)
class RawSent:
    """A raw request already written (`send_now`), whose answer `call_raw` waits for."""

    ident: int
    waiter: asyncio.Future[RawAnswer]


def _request(
    downstream: Downstream, channel: RawChannel, tool: str, arguments: dict[str, Any] | None, progress: bool
) -> tuple[int, bytes]:
    ident = channel.new_id()
    params: dict[str, Any] = {"name": tool}
    if arguments is not None:
        params["arguments"] = arguments
    meta: dict[str, Any] = {"progressToken": ident} if progress else {}
    meta.update(passthrough_meta(downstream.tools.get(tool)) or {})
    if tracing.ENABLED:  # the downstream's span joins this call's trace
        tracing.inject(meta)
    if meta:
        params["_meta"] = meta
    line = json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}, ensure_ascii=False)
    return ident, line.encode() + b"\n"


def send_now(downstream: Downstream, tool: str, arguments: dict[str, Any] | None) -> RawSent | None:
    """Write a plain call's request at once, before the call's bookkeeping (the stdio fast path: the server works
    on it meanwhile), when the connection is live and its pipe takes it without waiting; else None. Its answer,
    progress (with a token) and the server's messages meanwhile are `call_raw`'s, given what this returns: the
    call's task enters it before any line of the server is read again."""
    process = downstream.process
    channel = process.raw if process is not None else None
    if channel is None or channel.send_nowait is None or downstream.broken or tracing.ENABLED:
        return None  # `call_raw` reconnects first, as `Downstream.client` does; traced, it sends in the call's span
    if not raw_capable(downstream, tool):
        return None
    ident, data = _request(downstream, channel, tool, arguments, progress=True)
    waiter: asyncio.Future[RawAnswer] = asyncio.get_running_loop().create_future()
    channel.waiting[ident] = waiter
    if not channel.send_nowait(data):
        del channel.waiting[ident]
        return None
    return RawSent(ident, waiter)


@overload
async def call_raw(
    downstream: Downstream,
    tool: str,
    arguments: dict[str, Any] | None,
    relay: Relay | None,
    sent: RawSent | None = None,
    *,
    follow: Literal[False] = False,
) -> RawResult | types.CallToolResult: ...


@overload
async def call_raw(
    downstream: Downstream,
    tool: str,
    arguments: dict[str, Any] | None,
    relay: Relay | None,
    sent: RawSent | None = None,
    *,
    follow: bool,
) -> RawResult | types.CallToolResult | GrowingOutput: ...


async def call_raw(
    downstream: Downstream,
    tool: str,
    arguments: dict[str, Any] | None,
    relay: Relay | None,
    sent: RawSent | None = None,
    *,
    follow: bool = False,
) -> RawResult | types.CallToolResult | GrowingOutput:
    """Forward one `tools/call` (or wait for the one `sent` already wrote); failures become `DownstreamError`s
    exactly as in `Downstream.call`. With `follow`, a long tool result may come as its output while it grows."""
    if sent is None:
        await downstream.client(tool)  # connects (or says why it cannot) as a call through the SDK would
    process = downstream.process
    channel = process.raw if process is not None else None
    if sent is None:
        if not raw_capable(downstream, tool) or channel is None or channel.send is None:
            return await downstream.call(tool, arguments, relay)
        ident, data = _request(downstream, channel, tool, arguments, progress=relay is not None)
        waiter: asyncio.Future[RawAnswer] = asyncio.get_running_loop().create_future()
        channel.waiting[ident] = waiter
    else:
        assert channel is not None and channel.send is not None
        ident, data, waiter = sent.ident, b"", sent.waiter
    if relay is not None:
        channel.progress[ident] = relay.progress
    if follow:
        channel.follows.add(ident)
    answered = False
    try:
        with downstream.in_flight.track(relay) as waiting, anyio.move_on_after(downstream.config.timeout):
            try:
                if data:
                    await channel.send(data)
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise downstream.connection_failed(tool, exc) from None
            answer = await waiter
            answered = True
            return await _result(downstream, tool, answer)
        raise downstream.timed_out(tool, waiting.unanswered)
    finally:
        channel.waiting.pop(ident, None)
        channel.progress.pop(ident, None)
        channel.follows.discard(ident)
        if not answered and waiter.done() and not waiter.cancelled():
            if isinstance(growing := waiter.result(), GrowingOutput):
                growing.release()  # handed over as this call was cancelled: nobody will read it
        if not answered and not channel.closed and channel.send is not None:
            await _courtesy_cancel(channel.send, ident)


async def _result(
    downstream: Downstream, tool: str, answer: RawAnswer
) -> RawResult | types.CallToolResult | GrowingOutput:
    if answer is None:
        raise await downstream.closed_during_call(tool)
    if isinstance(answer, GrowingOutput):
        return answer
    if not isinstance(answer, tuple):  # a long response the spool stood in for: the SDK's message
        message = answer.message
        assert isinstance(message, types.JSONRPCResponse)
        return types.CallToolResult.model_validate(message.result, by_name=False)
    _, parsed = answer
    error = parsed.get("error")
    if error is not None or "result" not in parsed:
        code = error.get("code") if isinstance(error, dict) else None
        text = error.get("message") if isinstance(error, dict) else None
        message_text = clip(text if isinstance(text, str) else "a malformed error", DOWNSTREAM_MESSAGE_LIMIT)
        raise DownstreamError(downstream.name, tool, f"{message_text} (JSON-RPC error {code})")
    result = parsed["result"]
    if not isinstance(result, dict):
        raise DownstreamError(downstream.name, tool, f"a result that is not an object: {clip(json.dumps(result), 80)}")
    return RawResult(result)


async def _courtesy_cancel(send: Any, ident: int) -> None:
    """Tell the server the request was abandoned (as the SDK client does), without waiting on a stuck pipe."""
    params = {"requestId": ident, "reason": "cancelled"}
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
    with anyio.move_on_after(_CANCEL_WRITE_S, shield=True):
        try:
            await send(json.dumps(note).encode() + b"\n")
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
