"""One proxied `tools/call`: forward it, and apply the time and size rules."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext

from server.config import fast_path_enabled
from server.downstream.pool import Route
from server.downstream.relay import Relay, RequestRelay
from server.downstream.spooled import materialize
from server.downstream.tool_call import RawResult, RawSent, call_tool, raw_capable
from server.errors import ClaimcheckError, clip
from server.handles import messages
from server.handles.call_relay import CallRelay
from server.handles.calls import Call
from server.handles.guide import guide_for
from server.handles.outcome import Failed, Inline, Lost, Stored
from server.handles.resources import link_result
from server.handles.sessions import Session
from server.handles.shares import check_calls, passing
from server.proxy import Proxy
from server.upstream.extracting import llm_available
from server.upstream.replies import inline_result, text_result
from server.upstream.requesters import for_client
from server.upstream.streamed import stand_in, streamable, streaming_of

__all__ = ["ArgumentError", "answer", "begin", "drop", "forward", "split_arguments"]


class ArgumentError(ClaimcheckError):
    """An argument claimcheck itself reads (such as `background`) has the wrong type."""


async def forward(
    proxy: Proxy,
    ctx: ServerRequestContext[Any],
    route: Route,
    arguments: dict[str, Any] | None,
    session: Session,
    *,
    origin: str,
    passthrough: bool = False,
) -> tuple[types.CallToolResult, Call | None]:
    """The result for the client, and the call it is about when that call now has a handle.

    `passthrough`: a claimcheck in front of this one makes the handles (`server.downstream.chain`), so the
    call is answered whole, as with `async` off; an output the downstream's transport spooled is answered
    with a stand-in the stdio or legacy SSE transport streams from its file, when that transport serves this request
    (`server.upstream.streamed`), else read whole."""
    relay = RequestRelay(ctx, proxy.log_level)
    args, background = split_arguments(route, arguments)
    route = await for_client(proxy, ctx, route, session, relay)
    if passthrough or not route.policy.async_enabled:
        with passing(proxy.sessions.live, session, proxy.config.settings.limits.calls):  # no `Call`, but a share
            result = await call_tool(route.downstream, route.tool, args, relay)
        spooled = proxy.pool.spooled.claim(result)
        outputs = streaming_of(ctx.request)
        if spooled is not None and outputs is not None and streamable(spooled):
            result = stand_in(outputs, spooled)
        elif spooled is not None:
            result = await anyio.to_thread.run_sync(materialize, spooled)
        return inline_result(route, result), None

    raw = not background and fast_path_enabled(proxy.config.settings) and raw_capable(route.downstream, route.tool)
    call, call_relay = begin(proxy, route, args, session, relay, origin=origin, background=background, raw=raw)
    llm = functools.partial(llm_available, proxy.config.settings.extraction, ctx)
    answered, about = await answer(proxy, route, session, call, call_relay, background=background, llm=llm)
    return (answered.model() if isinstance(answered, RawResult) else answered), about


async def answer(
    proxy: Proxy,
    route: Route,
    session: Session,
    call: Call,
    call_relay: CallRelay,
    *,
    background: bool = False,
    waited: bool = False,
    llm: Callable[[], bool],
) -> tuple[types.CallToolResult | RawResult, Call | None]:
    """Wait for a started call as the time rule says: its result, or a handle to it. A plain-text result of
    the fast path comes back as the downstream gave it (`RawResult`). `waited`: the time rule was kept already
    (a fast path's timer). `llm`: whether `extract` can be answered for this client (what the messages offer)."""
    try:
        if not background and not waited:
            with anyio.move_on_after(route.policy.async_timeout_secs):
                await call.finished.wait()
    except anyio.get_cancelled_exc_class():
        drop(session, call)  # the client gave up on its request before the handoff
        raise
    finally:
        call_relay.upstream = None
    if not call.finished.is_set():
        why = "background: true" if background else "still running after the time rule"
        local = await proxy.sessions.hand_out(call, why)
        return link_result(session, call, text_result(messages.running_message(call, llm=llm()) + local)), call
    if not isinstance(call.outcome, Stored):
        session.calls.pop(call.handle, None)  # answered inline: no handle to remember
    match call.outcome:
        case Stored(failed=failed):
            call.mark_seen()  # the model is being told about it right now
            local = await proxy.sessions.hand_out(call, "over the token threshold")
            guide = await guide_for(call, session, llm=llm())
            return link_result(
                session, call, text_result(messages.too_large_message(call, guide) + local, is_error=failed)
            ), call
        case Inline(raw=dict() as raw):
            return RawResult(raw), None
        case Inline(result=types.CallToolResult() as result):
            return inline_result(route, result), None
        case Lost(message=message):  # nothing stored to come back to: its first part, inline
            return text_result(message, is_error=True), None
        case Failed(reason=reason):
            return text_result(reason, is_error=True), None
    return text_result(call.error or f"the call {call.status}", is_error=True), None


def drop(session: Session, call: Call) -> None:
    """Forget the call of a request the client cancelled before its handle was given: stop it, and remove what it
    stored (now, or when it ends if it is still settling), so no output is left that no handle names. A call
    already handed out stays: its handle was reported."""
    if call.handed_out:
        return
    session.calls.pop(call.handle, None)
    if call.finished.is_set():
        session.store.discard(call.handle)
        return
    call.scope.cancel()
    call.then(functools.partial(session.store.discard, call.handle))


def split_arguments(route: Route, arguments: dict[str, Any] | None) -> tuple[dict[str, Any] | None, bool]:
    """The downstream's arguments, and whether claimcheck's `background` flag asked for the background."""
    args = dict(arguments) if arguments is not None else None
    if args is None or route.background_param is None or route.background_param not in args:
        return args, False
    flag = args.pop(route.background_param)
    if not isinstance(flag, bool):
        raise ArgumentError(f'"{route.background_param}" must be true or false, not {clip(repr(flag))}.')
    return args, flag


def begin(
    proxy: Proxy,
    route: Route,
    args: dict[str, Any] | None,
    session: Session,
    relay: Relay | None,
    *,
    origin: str,
    background: bool,
    raw: bool = False,
    sent: RawSent | None = None,
    ttl_ms: int | None = None,
) -> tuple[Call, CallRelay]:
    """Start the call in the proxy's task group, from `origin` (`Entrance.origin`); `background` lets a
    downstream that takes tasks run it as one; `raw`: the fast path's plain call, written and read as bytes
    (`server.downstream.tool_call`), whose request `sent` may already have written; `ttl_ms`: a call started as
    an MCP task."""
    sessions = proxy.sessions
    limits = proxy.config.settings.limits  # the principal's shares, else OverShare
    check_calls(sessions.live, session, limits.calls, limits.stored_bytes)
    public, server = route.public, route.downstream.name
    call = sessions.new_call(session, public, server, route.tool, args or {}, origin=origin, ttl_ms=ttl_ms)

    def invoke(r: CallRelay) -> Awaitable[types.CallToolResult | RawResult]:
        return call_tool(route.downstream, route.tool, args, r, raw=raw, sent=sent, as_task=background)

    return call, sessions.start(session, call, invoke, route.policy, relay)
