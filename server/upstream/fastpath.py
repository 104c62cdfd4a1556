"""The fast path for a plain `tools/call` over stdio: no SDK dispatch on either side.

The stdio transport offers every request line to `FastPath.take` before the SDK parses it. A line that
is an ordinary tool call (`read_envelope`: method, id, tool name, arguments, nothing else: no `_meta`
but a 2026-07-28 request's own envelope, so no progress token, log level, task or chain marker) to a
known tool of a live stdio downstream, from a client of the era the SDK serves on this stream (one that
finished its handshake; or a sessionless one, once the SDK served a request of that era: `StreamEra`),
is answered here: the call starts as any proxied call does (`begin`, so the time rule, handles, history
and the status API see it), goes to the downstream as bytes (`server.downstream.rawcall`), and a
handshake-era client gets a plain-text result under the size rule's length bound as the downstream gave
it, under its id. Every other outcome (a handle, an error, a result with the status footer, any answer
to a sessionless client) is the same `CallToolResult` the SDK path builds, shaped as the SDK shapes it
for the client's version (`response_line`). A call a claimcheck in front marks as a
pass-through (its `_meta` holds the mark and, at most, a progress token) is answered here too, as the SDK's
path answers it: no rules, no handle, its output streamed from the spool's file when it went there
(`server.upstream.fast_passthrough`). A `notifications/cancelled` for a call taken here cancels it, and, as
the SDK does, a cancelled request is never answered. Anything else, and every line while the path is off
(`settings.fastPath`, or `CLAIMCHECK_FAST_PATH=off`), goes to the SDK.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal, cast

import anyio
import mcp_types as types
from mcp.server.session import ServerSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from server import sdk_compat
from server.budget import request_key
from server.config import FAST_PATH_ENV
from server.config import fast_path_enabled as enabled
from server.downstream.pool import Route
from server.downstream.rawcall import RawResult, raw_capable, send_now
from server.downstream.relay import RequestRelay
from server.errors import ClaimcheckError
from server.handles.call_relay import CallRelay
from server.handles.calls import Call
from server.handles.files import FILE_TOOLS
from server.handles.outcome import Inline
from server.handles.own_tools import OWN_TOOLS
from server.handles.sessions import Entrance, Session
from server.proxy import Proxy
from server.upstream.extracting import llm_available
from server.upstream.fast_passthrough import Passthrough
from server.upstream.forwarding import answer, begin, drop
from server.upstream.line_writer import LineWriter
from server.upstream.plain_call import (
    CallContext,
    Envelope,
    FastRelay,
    RequestId,
    cancelled_id,
    line,
    read_envelope,
    result_line,
)
from server.upstream.sessionless import StreamEra, client_of
from server.upstream.surface import error_result, footer_lines

__all__ = ["ENV", "FastPath", "enabled", "passthrough_route", "plain_route", "relay_of", "respond", "response_line"]

logger = logging.getLogger(__name__)

ENV = FAST_PATH_ENV


class FastPath:
    """Takes plain tool calls off the stdio transport's hands (see the module's doc)."""

    def __init__(self, proxy: Proxy, writer: LineWriter, era: StreamEra | None = None) -> None:
        self._proxy = proxy
        self.writer = writer
        self._era = era  # None: sessionless calls are the SDK's
        self._running: dict[tuple[bool, RequestId], _Request | Passthrough] = {}

    def take(self, line: bytes) -> bool:
        """Whether `line` is the fast path's: a plain call it started, or the cancellation of one."""
        if self._running and (cancelled := cancelled_id(line)) is not None:
            request = self._running.get(request_key(cancelled))
            if request is None:
                return False
            request.cancel()
            return True
        envelope = read_envelope(line)
        if envelope is None or request_key(envelope.id) in self._running:
            return False
        if envelope.sessionless is not None:
            return self._sessionless(envelope)
        client = self._proxy.only_client()
        if client is None or client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return False  # before the handshake is done (or a sessionless stream: its calls carry their envelope)
        if envelope.passthrough:
            return self._pass_through(envelope, client)
        route = plain_route(self._proxy, envelope)
        if route is None:
            return False
        connection = sdk_compat.connection_of(client)
        session = self._proxy.sessions.find(Entrance(connection, None, None)) if connection is not None else None
        if session is None:
            return False
        self._start(_Request(self, envelope, route, CallContext(client, client.protocol_version), session))
        return True

    def _sessionless(self, envelope: Envelope) -> bool:
        """A plain call of a 2026-07-28 client, on a stream the SDK serves in that era: its session is the one
        the SDK's path finds for it (over stdio, the default session; not made here)."""
        era, sessionless = self._era, envelope.sessionless
        if era is None or not era.sessionless or sessionless is None:
            return False  # the SDK serves the handshake era here (or has not decided): it refuses the envelope
        route = plain_route(self._proxy, envelope)
        client = client_of(sessionless, envelope.id) if route is not None else None
        if route is None or client is None:
            return False
        session = self._proxy.sessions.find(Entrance(None, None, client))
        if session is None:
            return False
        context = CallContext(client, sessionless.protocol_version, envelope.id, era.wire)
        self._start(_Request(self, envelope, route, context, session))
        return True

    def _start(self, request: _Request) -> None:
        logger.debug("the stdio fast path takes call %r", request.envelope.id)
        self._running[request_key(request.envelope.id)] = request
        self.writer.owe()
        request.start()

    def _pass_through(self, envelope: Envelope, client: ServerSession) -> bool:
        route = passthrough_route(self._proxy, envelope)
        if route is None:
            return False
        context = CallContext(client, client.protocol_version)
        request = Passthrough(self._proxy, self.writer, envelope, route, context, self.forget)
        self._running[request_key(envelope.id)] = request
        self.writer.owe()
        request.start()
        return True

    def forget(self, request: _Request | Passthrough) -> None:
        key = request_key(request.envelope.id)
        if self._running.get(key) is request:
            del self._running[key]
            self.writer.paid()  # its answer is written, or on its way (the writer's backlog counts it)


class _Request:
    """One plain call taken by the fast path, from its line to its answer, without a task of its own: the call
    runs as every proxied call does (`begin`); its answer is written when it finishes (`Call.then`), or
    when the time rule's timer fires first (a handle). Only an answer that needs more than the downstream's
    result as it came (an error, a handle, a stored output) is built in a task, by `answer`, as on the SDK's
    path."""

    __slots__ = ("call", "call_relay", "context", "envelope", "path", "route", "scope", "session", "state", "timer")

    def __init__(
        self, path: FastPath, envelope: Envelope, route: Route, context: CallContext, session: Session
    ) -> None:
        self.path = path
        self.envelope = envelope
        self.route = route
        self.context = context
        self.session = session
        self.state: Literal["waiting", "answering", "done"] = "waiting"
        self.call: Call | None = None
        self.call_relay: CallRelay | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.scope: anyio.CancelScope | None = None

    def start(self) -> None:
        proxy = self.path._proxy
        args = dict(self.envelope.arguments) if self.envelope.arguments is not None else None
        sent = send_now(self.route.downstream, self.route.tool, args)  # the server works while the call is set up
        relay = relay_of(self.context, proxy.log_level)
        try:
            self.call, self.call_relay = begin(
                proxy, self.route, args, self.session, relay, background=False, raw=True, sent=sent
            )
        except ClaimcheckError as exc:
            if sent is not None:
                sent.waiter.cancel()  # its answer, when it comes, is dropped
            self._respond(error_result(str(exc)))
            return
        self.call.then(self._finished)
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(self.route.policy.async_timeout_secs, self._respond)

    def _finished(self) -> None:
        """The call finished (in its own task): a plain answer is written at once; any other is built by `answer`."""
        if self.state != "waiting":
            return
        call, session = self.call, self.session
        assert call is not None
        match call.outcome:
            case Inline(raw=dict() as raw):
                pass
            case _:  # anything but the downstream's plain result as it came is built by `answer`
                self._respond()
                return
        self._end()
        session.calls.pop(call.handle, None)  # answered inline: no handle to remember
        response = response_line(self.path._proxy, self.envelope, session, RawResult(raw), None, self.context)
        self.path.writer.write_nowait(response)

    def _respond(self, result: types.CallToolResult | None = None) -> None:
        """Build the answer in a task: `result`, or what `answer` says of the call now (its result, or a handle)."""
        if self.state != "waiting":
            return
        self.state = "answering"
        if self.timer is not None:
            self.timer.cancel()
        if self.call_relay is not None:
            self.call_relay.upstream = None
        self.scope = anyio.CancelScope()
        self.path._proxy.sessions.spawn(lambda: self._answer(result))

    async def _answer(self, given: types.CallToolResult | None) -> None:
        assert self.scope is not None
        response = None
        try:
            with self.scope:
                response = await self._build(given)
        finally:
            self._end()
        if response is not None and not self.scope.cancelled_caught:
            await self.path.writer.write(response)

    async def _build(self, given: types.CallToolResult | None) -> bytes:
        proxy, call, call_relay, context = self.path._proxy, self.call, self.call_relay, self.context
        if given is not None or call is None or call_relay is None:
            result = given if given is not None else error_result("the call could not start")
            return response_line(proxy, self.envelope, self.session, result, None, context)
        llm = _llm(proxy, context)
        answering = answer(proxy, self.route, self.session, call, call_relay, background=True, llm=llm)
        return await _answered_line(proxy, self.envelope, self.route, self.session, context, answering)

    def cancel(self) -> None:
        """The client cancelled its request: as the SDK does, it is never answered; a call not handed out yet is
        cancelled with it."""
        if self.state == "answering":
            assert self.scope is not None
            self.scope.cancel()
            return
        if self.state != "waiting":
            return
        self._end()
        call = self.call
        if self.call_relay is not None:
            self.call_relay.upstream = None
        if call is not None:
            call.then(None)
            drop(self.session, call)

    def _end(self) -> None:
        self.state = "done"
        if self.timer is not None:
            self.timer.cancel()
        self.path.forget(self)


def plain_route(proxy: Proxy, envelope: Envelope) -> Route | None:
    """The route of a call the fast path can make exactly as the SDK's path would, else None (stdio and HTTP): a
    plain call (not a pass-through) to a server whose rules are on, that `passthrough_route` takes."""
    route = passthrough_route(proxy, envelope) if not envelope.passthrough else None
    return route if route is not None and route.policy.async_enabled else None


def passthrough_route(proxy: Proxy, envelope: Envelope) -> Route | None:
    """The route of a call the fast path can forward exactly as the SDK's path would, whatever the rules (a
    pass-through ignores them): not claimcheck's own tool, no `background` argument (the SDK's path reads
    it), a server every client shares (a scoped one: the SDK's path finds the client's own process), and a
    tool `raw_capable` takes; else None."""
    if envelope.name in OWN_TOOLS or envelope.name in FILE_TOOLS:
        return None
    route = proxy.pool.route(envelope.name)
    if route is None:
        return None
    arguments = envelope.arguments
    if route.background_param is not None and arguments is not None and route.background_param in arguments:
        return None
    if not proxy.pool.for_everyone(route):
        return None
    return route if raw_capable(route.downstream, route.tool) else None


async def respond(
    proxy: Proxy, envelope: Envelope, route: Route, session: Session, relay: RequestRelay, context: Any
) -> bytes:
    """The JSON-RPC response line to a fast-path call over HTTP: started with `begin`, waited for with `answer`,
    as the SDK's path does; `context` is what `llm_available` reads of a request context."""
    args = dict(envelope.arguments) if envelope.arguments is not None else None

    async def answering() -> tuple[types.CallToolResult | RawResult, Call | None]:
        call, call_relay = begin(proxy, route, args, session, relay, background=False, raw=True)
        return await answer(proxy, route, session, call, call_relay, background=False, llm=_llm(proxy, context))

    return await _answered_line(proxy, envelope, route, session, context, answering())


def _llm(proxy: Proxy, context: Any) -> Callable[[], bool]:
    """Whether `extract` can be answered for this client (what `answer`'s messages offer)."""
    return functools.partial(llm_available, proxy.config.settings.extraction, cast(Any, context))


async def _answered_line(
    proxy: Proxy,
    envelope: Envelope,
    route: Route,
    session: Session,
    context: Any,
    answering: Awaitable[tuple[types.CallToolResult | RawResult, Call | None]],
) -> bytes:
    """The response line of what `answering` gives; a `ClaimcheckError` as an error result, and anything else
    that fails as the internal error the SDK's dispatcher would answer."""
    try:
        result, about = await answering
    except ClaimcheckError as exc:
        result, about = error_result(str(exc)), None
    except Exception as exc:
        logger.exception("the fast path failed on a call of %s", route.public)
        if context.wire is not None:
            return bytes(context.wire.error(envelope.id, exc))
        error = {"code": types.INTERNAL_ERROR, "message": "Internal error"}
        return line({"jsonrpc": "2.0", "id": envelope.id, "error": error})
    return response_line(proxy, envelope, session, result, about, context)


def response_line(
    proxy: Proxy,
    envelope: Envelope,
    session: Session,
    result: types.CallToolResult | RawResult,
    about: Call | None,
    context: Any,
) -> bytes:
    """The response line of a fast-path call's answer: a handshake-era client's plain result as the downstream gave
    it; any other, with the session's footer (as `surface._with_footer` adds it), shaped by the SDK's own
    serializer as its path would (for a sessionless client, by the SDK's runner, framed by `context.wire`)."""
    lines = footer_lines(session, about) if proxy.config.settings.status_footer else []
    wire = context.wire
    if isinstance(result, RawResult) and not lines and wire is None:
        return line({"jsonrpc": "2.0", "id": envelope.id, "result": result.result})
    model = result.model() if isinstance(result, RawResult) else result
    if lines:
        extra = [types.TextContent(type="text", text=text) for text in lines]
        model = model.model_copy(update={"content": [*model.content, *extra]})
    if wire is not None:
        return bytes(wire.result(envelope.id, model, context.protocol_version))
    return result_line(envelope.id, model, context.protocol_version)  # as the SDK's path shapes it


def relay_of(context: CallContext, min_log_level: types.LoggingLevel | None) -> RequestRelay:
    """The relay of a fast-path call: a handshake-era client's connection (`FastRelay`); a sessionless client's
    request, as the SDK's path relays it (no requests to the client, no log messages it did not ask for)."""
    if context.wire is not None:
        return RequestRelay(cast(Any, context), min_log_level)
    return FastRelay(context, min_log_level)
