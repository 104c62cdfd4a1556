"""One `tools/call` to a downstream: written and read as bytes when it can be, else through the SDK client; its
timeout, and every error a call can meet.

The SDK client validates every request and result with pydantic, and that is much of what a proxied call
costs. On the fast path (`raw`) the request is one line of JSON written straight to a stdio server's stdin, and
the response comes back parsed by the stdlib (`RawChannel` in `server.downstream.stdio` picks it out by its id).
Everything else about the call is the same either way: the same live connection (`Downstream.connected`:
restarted if it is down), the same in-flight tracking (log messages, sampling, elicitation and roots of the server
go to the waiting requests), the call's progress, its timeout and a courtesy cancel when it is abandoned, and the
same errors. A tool of a claimcheck behind this one is called with the pass-through mark in the request's `_meta`
(`chain.passthrough_meta`) beside the progress token, as the SDK client would send it. A call that cannot go as
bytes (a task, an HTTP server) goes through the SDK client; a tool that requires tasks is always called as one,
a tool that allows them is when `as_task` (the call goes to the background anyway), so cancellation and progress
are the server's own. A caller that streams its answer (`follow`: a pass-through) may get a long tool result's
output while the server still writes it (a `GrowingOutput`).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Literal, overload

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError

from server import tracing
from server.downstream.chain import passthrough_meta
from server.downstream.listing import describe
from server.downstream.rawchannel import RawAnswer, RawChannel
from server.downstream.relay import Relay
from server.downstream.server import Downstream
from server.downstream.spooled import GrowingOutput
from server.downstream.task_client import call_as_task, wants_task
from server.errors import DownstreamError, DownstreamTimeout, DownstreamUnavailable, clip

__all__ = [
    "DOWNSTREAM_MESSAGE_LIMIT",
    "RawResult",
    "RawSent",
    "call_tool",
    "client_of",
    "connection_failed",
    "raw_capable",
    "send_now",
]

DOWNSTREAM_MESSAGE_LIMIT = 2000
"""The most characters of a downstream's JSON-RPC error message passed on (it may quote a huge argument)."""
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
    """A raw request already written (`send_now`), whose answer `call_tool` waits for."""

    channel: RawChannel
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
    progress (with a token) and the server's messages meanwhile are `call_tool`'s, given what this returns: the
    call's task enters it before any line of the server is read again."""
    process = downstream.process
    channel = process.raw if process is not None else None
    if channel is None or channel.send_nowait is None or downstream.broken or tracing.ENABLED:
        return None  # `call_tool` reconnects first; traced, it sends in the call's span
    if not raw_capable(downstream, tool):
        return None
    ident, data = _request(downstream, channel, tool, arguments, progress=True)
    waiter: asyncio.Future[RawAnswer] = asyncio.get_running_loop().create_future()
    channel.waiting[ident] = waiter
    if not channel.send_nowait(data):
        del channel.waiting[ident]
        return None
    return RawSent(channel, ident, waiter)


@overload
async def call_tool(
    downstream: Downstream, tool: str, arguments: dict[str, Any] | None, relay: Relay | None, *, as_task: bool = False
) -> types.CallToolResult: ...


@overload
async def call_tool(
    downstream: Downstream,
    tool: str,
    arguments: dict[str, Any] | None,
    relay: Relay | None,
    *,
    raw: bool,
    sent: RawSent | None = None,
    as_task: bool = False,
    follow: Literal[False] = False,
) -> RawResult | types.CallToolResult: ...


@overload
async def call_tool(
    downstream: Downstream,
    tool: str,
    arguments: dict[str, Any] | None,
    relay: Relay | None,
    *,
    raw: bool,
    sent: RawSent | None = None,
    as_task: bool = False,
    follow: bool,
) -> RawResult | types.CallToolResult | GrowingOutput: ...


async def call_tool(
    downstream: Downstream,
    tool: str,
    arguments: dict[str, Any] | None,
    relay: Relay | None,
    *,
    raw: bool = False,
    sent: RawSent | None = None,
    as_task: bool = False,
    follow: bool = False,
) -> RawResult | types.CallToolResult | GrowingOutput:
    """Forward one `tools/call` (as bytes when `raw` and the connection takes it; or wait for the one `sent` already
    wrote); failures of the downstream become `DownstreamError`s. With `follow` (a caller that streams its answer),
    a long tool result read as bytes may come as its output while the server still writes it."""
    # Tracked from before the connection: a process started for this call asks its roots through it.
    with downstream.in_flight.track(relay) as waiting:
        client = await client_of(downstream, tool) if sent is None else None
        channel = sent.channel if sent is not None else _raw_channel(downstream, tool) if raw else None
        try:
            with anyio.move_on_after(downstream.config.timeout):
                if channel is not None:
                    return await _as_bytes(downstream, channel, tool, arguments, relay, sent, follow)
                assert client is not None
                if wants_task(downstream.tools.get(tool), client.server_capabilities, as_task):
                    ttl_ms = int(downstream.config.timeout * 1000)
                    return await call_as_task(client, tool, arguments, relay, ttl_ms=ttl_ms)
                meta = passthrough_meta(downstream.tools.get(tool))
                progress = relay.progress if relay is not None else None
                return await client.call_tool(tool, arguments, progress_callback=progress, meta=meta)
            raise _timed_out(downstream, tool, waiting.unanswered)
        except MCPError as exc:
            if exc.error.code == types.CONNECTION_CLOSED:
                raise await _closed_during_call(downstream, tool) from None
            refusals = downstream.refusals
            refused = refusals.failure(downstream.name, downstream.config) if refusals is not None else None
            message = clip(exc.error.message, DOWNSTREAM_MESSAGE_LIMIT)
            raise DownstreamError(
                downstream.name, tool, refused or f"{message} (JSON-RPC error {exc.error.code})"
            ) from None
        except (httpx2.HTTPError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise connection_failed(downstream, tool, exc) from None


async def client_of(downstream: Downstream, tool: str) -> Client:
    """The downstream's live client, (re)connecting first; else `DownstreamUnavailable`, naming why."""
    client = await downstream.connected()
    if isinstance(client, str):
        raise DownstreamUnavailable(downstream.name, tool, client)
    return client


def _raw_channel(downstream: Downstream, tool: str) -> RawChannel | None:
    """The channel a call of `tool` is written to as bytes, when it can be (`raw_capable`)."""
    process = downstream.process
    channel = process.raw if process is not None else None
    if channel is None or channel.send is None or not raw_capable(downstream, tool):
        return None
    return channel


async def _as_bytes(
    downstream: Downstream,
    channel: RawChannel,
    tool: str,
    arguments: dict[str, Any] | None,
    relay: Relay | None,
    sent: RawSent | None,
    follow: bool,
) -> RawResult | types.CallToolResult | GrowingOutput:
    """The call written as one line (unless `sent` wrote it already), and its answer read by the stdlib."""
    assert channel.send is not None
    if sent is None:
        ident, data = _request(downstream, channel, tool, arguments, progress=relay is not None)
        waiter: asyncio.Future[RawAnswer] = asyncio.get_running_loop().create_future()
        channel.waiting[ident] = waiter
    else:
        ident, data, waiter = sent.ident, b"", sent.waiter
    if relay is not None:
        channel.progress[ident] = relay.progress
    if follow:
        channel.follows.add(ident)
    answered = False
    try:
        if data:
            await channel.send(data)
        answer = await waiter
        answered = True
        return await _result(downstream, tool, answer)
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
        raise await _closed_during_call(downstream, tool)
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


# What a call learns of the connection, the same for a call through the SDK client and a raw one: each marks the
# connection broken where it is, and gives the call's error.


def connection_failed(downstream: Downstream, tool: str, exc: BaseException) -> DownstreamError:
    if downstream.retired_why is not None:  # stopped on purpose: that is why, not what the connection said
        return DownstreamUnavailable(downstream.name, tool, downstream.retired_why)
    downstream.mark_broken(downstream.where(describe(exc)))
    return DownstreamError(downstream.name, tool, f"the connection failed: {downstream.last_error}")


async def _closed_during_call(downstream: Downstream, tool: str) -> DownstreamError:
    if downstream.retired_why is not None:
        return DownstreamUnavailable(downstream.name, tool, downstream.retired_why)
    downstream.mark_broken("the connection closed during a call")
    why = await downstream.why_gone()
    return DownstreamError(downstream.name, tool, f"the server closed the connection ({why})")


def _timed_out(downstream: Downstream, tool: str, unanswered: str | None) -> DownstreamTimeout:
    """`unanswered`: the kind of request of the server's that the client left unanswered meanwhile, if any."""
    process = downstream.process
    if process is not None and process.mid_message:
        # It is still writing one message that never ends: nothing after it can get through.
        downstream.mark_broken("a message that did not end within the call's timeout")
    asked = f" (nobody answered its {unanswered} request)" if unanswered else ""
    limit = f"the server's timeout of {downstream.config.timeout:g} s (mcpServers.{downstream.name}.timeout)"
    return DownstreamTimeout(downstream.name, tool, f"no answer within {limit}{asked}")
