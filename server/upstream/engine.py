"""The fast paths' one request machine: a plain `tools/call`, the time rule, the answer, a cancellation.

Every fast path (the stdio line, HTTP with a session, sessionless HTTP) takes a call it can make exactly as the SDK's
path would (`fast_route`) and hands it to a `FastRequest`, with a `Responder` that only knows how its transport
writes. (A pass-through, and a plain call to a server whose rules are off, start no `Call`: they are answered by
`fast_passthrough.pass_through`, counted in the principal's share of running calls while they run.) The call starts
as any proxied call does (`begin`, so the time rule, handles, history and the status API see it) and goes to the
downstream as bytes (`server.downstream.tool_call`). Its answer is
written when it finishes (`Call.then`), without a task: the downstream's plain result as it came, under the
client's id (`replies.response_line`); or, when the time rule's timer fires first, or for any other outcome
(a handle, an error, a stored output), it is built in a task of the lifespan task group by `answer`, as on
the SDK's path. A cancelled request is never answered; a call not handed out yet is cancelled with it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, cast

import anyio
import mcp_types as types

from server.downstream.pool import Route
from server.downstream.relay import RequestRelay
from server.downstream.tool_call import RawResult, RawSent, raw_capable, send_now
from server.errors import ClaimcheckError
from server.handles.call_relay import CallRelay
from server.handles.calls import Call
from server.handles.files import FILE_TOOLS
from server.handles.outcome import Inline
from server.handles.own_tools import OWN_TOOLS
from server.handles.sessions import Session
from server.proxy import Proxy
from server.upstream.extracting import llm_available
from server.upstream.fast_passthrough import Streamed, pass_through
from server.upstream.forwarding import answer, begin, drop
from server.upstream.plain_call import CallContext, Envelope, FastRelay
from server.upstream.replies import error_line, error_result, response_line
from server.upstream.streamed import Followed

__all__ = ["Answer", "FastRequest", "Responder", "fast_route", "passthrough_route", "plain_route"]

logger = logging.getLogger(__name__)


class Responder(Protocol):
    """How one transport writes the answer to a fast-path call: the engine decides what and when."""

    def write_nowait(self, data: bytes) -> None:
        """The answer, from the call's finish callback (no task to wait in)."""

    async def write(self, data: bytes | Streamed | Followed) -> None:
        """The answer, from the task that built it (a pass-through's output to stream, a `Streamed` or `Followed`, is
        its own to release once written)."""

    def forget(self, request: FastRequest) -> None:
        """`request` is over: answered (after its `write`), or cancelled (never answered)."""


class FastRequest:
    """One plain call taken by a fast path, from its envelope to its answer (see the module's doc)."""

    __slots__ = (
        "call",
        "call_relay",
        "context",
        "envelope",
        "following",
        "origin",
        "proxy",
        "relay",
        "responder",
        "route",
        "scope",
        "session",
        "state",
        "timer",
    )

    def __init__(
        self,
        proxy: Proxy,
        responder: Responder,
        envelope: Envelope,
        route: Route,
        context: CallContext,
        session: Session,
        origin: str,
        relay: RequestRelay | None = None,
    ) -> None:
        """`session` and `origin` (`Entrance.origin`): whose call it is (a pass-through starts no `Call`, but
        counts in its principal's share); `relay`: the call's, when not the one `_relay_of` gives."""
        self.proxy = proxy
        self.responder = responder
        self.envelope = envelope
        self.route = route
        self.context = context
        self.session = session
        self.origin = origin
        self.relay = relay if relay is not None else _relay_of(context, proxy.log_level)
        self.state: Literal["waiting", "answering", "done"] = "waiting"
        self.call: Call | None = None
        self.call_relay: CallRelay | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.scope: anyio.CancelScope | None = None
        self.following: Followed | None = None  # its answer, while written as its output grows

    def start(self) -> None:
        args = dict(self.envelope.arguments) if self.envelope.arguments is not None else None
        try:
            sent = send_now(self.route.downstream, self.route.tool, args)  # the server works while the call is set up
        except UnicodeEncodeError:  # a lone surrogate in the arguments: the call meets it in its task, and fails
            sent = None
        if self.envelope.passthrough or not self.route.policy.async_enabled:
            # No rules, no `Call`: the claimcheck in front makes the handles, or the server's rules are off.
            if self.envelope.passthrough:
                self.proxy.meters.passed_through(self.route.downstream.name)
            self._answering(functools.partial(self._pass_through, sent))
            return
        session = self.session
        try:
            self.call, self.call_relay = begin(
                self.proxy,
                self.route,
                args,
                session,
                self.relay,
                origin=self.origin,
                background=False,
                raw=True,
                sent=sent,
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
        self.state = "done"
        if self.timer is not None:
            self.timer.cancel()
        session.calls.pop(call.handle, None)  # answered inline: no handle to remember
        footer = self.proxy.config.settings.status_footer
        self.responder.write_nowait(
            response_line(self.envelope, session, RawResult(raw), None, self.context, footer=footer)
        )
        self.responder.forget(self)

    def _respond(self, result: types.CallToolResult | None = None) -> None:
        """Build the answer in a task: `result`, or what `answer` says of the call now (its result, or a handle)."""
        if self.state != "waiting":
            return
        if self.timer is not None:
            self.timer.cancel()
        if self.call_relay is not None:
            self.call_relay.upstream = None
        self._answering(functools.partial(self._build, result))

    def _answering(self, build: Callable[[], Awaitable[bytes | Streamed | Followed]]) -> None:
        self.state = "answering"
        self.scope = anyio.CancelScope()
        self.proxy.sessions.spawn(lambda: self._answer(build))

    async def _answer(self, build: Callable[[], Awaitable[bytes | Streamed | Followed]]) -> None:
        """Build the answer under the request's cancel scope and write it, unless the request was cancelled first."""
        assert self.scope is not None
        try:
            response = None
            with self.scope:
                response = await build()
            self.state = "done"  # a line cannot be taken back: once writing, it is finished
            if isinstance(response, Streamed) and self.scope.cancelled_caught:
                response.spooled.release()
            elif isinstance(response, Followed) and self.scope.cancelled_caught:
                response.growing.release()
            elif response is not None and not self.scope.cancelled_caught:
                self.following = response if isinstance(response, Followed) else None
                await self.responder.write(response)
        finally:
            self.state = "done"
            self.responder.forget(self)

    async def _pass_through(self, sent: RawSent | None) -> bytes | Streamed | Followed:
        try:
            return await pass_through(
                self.proxy, self.route, self.envelope, self.context, self.relay, sent, session=self.session
            )
        finally:
            if sent is not None and not sent.waiter.done():
                sent.waiter.cancel()  # never waited for (cancelled first): its answer, when it comes, is dropped

    async def _build(self, given: types.CallToolResult | None) -> bytes:
        proxy, call, call_relay, context, session = (
            self.proxy,
            self.call,
            self.call_relay,
            self.context,
            self.session,
        )
        result: types.CallToolResult | RawResult
        about: Call | None = None
        try:
            if given is not None or call is None or call_relay is None:
                result = given if given is not None else error_result("the call could not start")
            else:
                llm = functools.partial(llm_available, proxy.config.settings.extraction, cast(Any, context))
                result, about = await answer(proxy, self.route, session, call, call_relay, waited=True, llm=llm)
        except ClaimcheckError as exc:
            result, about = error_result(str(exc)), None
        except Exception as exc:
            logger.exception("the fast path failed on a call of %s", self.route.public)
            return error_line(self.envelope, exc, context)
        footer = proxy.config.settings.status_footer
        return response_line(self.envelope, session, result, about, context, footer=footer)

    def cancel(self) -> None:
        """The client cancelled its request: as the SDK does, it is never answered; a call not handed out yet is
        cancelled with it; an answer written as its output grows is ended now, as an error."""
        if self.following is not None:
            self.following.growing.interrupt()
            return
        if self.state == "answering":
            assert self.scope is not None
            self.scope.cancel()
            return
        if self.state != "waiting":
            return
        self.state = "done"
        if self.timer is not None:
            self.timer.cancel()
        call = self.call
        if self.call_relay is not None:
            self.call_relay.upstream = None
        if call is not None:
            call.then(None)
            drop(self.session, call)
        self.responder.forget(self)


class Answer:
    """The `Responder` of a transport that writes from the request's own task (HTTP): the answer, once (a
    pass-through's output to stream is handed over as it is: the request's task streams it)."""

    __slots__ = ("data", "over")

    def __init__(self) -> None:
        self.data: bytes | Streamed | Followed | None = None
        self.over = anyio.Event()

    def write_nowait(self, data: bytes) -> None:
        self.data = data

    async def write(self, data: bytes | Streamed | Followed) -> None:
        self.data = data

    def forget(self, request: FastRequest) -> None:
        self.over.set()

    async def of(self, request: FastRequest) -> bytes | Streamed | Followed | None:
        """`request`'s answer, or None when it was cancelled; cancelling this wait cancels the request."""
        try:
            await self.over.wait()
        except anyio.get_cancelled_exc_class():
            request.cancel()
            raise
        return self.data


def fast_route(proxy: Proxy, envelope: Envelope) -> Route | None:
    """The route of a call a fast path takes: a pass-through's (`passthrough_route`), a plain call's
    (`plain_route`), or, from a client of the handshake era, a plain call to a server whose rules are off (made
    as a pass-through is, with the client's footer); None when the SDK's path must make it."""
    route = passthrough_route(proxy, envelope)
    if envelope.passthrough or route is None or route.policy.async_enabled:
        return route
    return route if envelope.sessionless is None else None


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


def _relay_of(context: CallContext, min_log_level: types.LoggingLevel | None) -> RequestRelay:
    """The relay of a fast-path call: over stdio, a handshake-era client's connection (`FastRelay`); else the
    request's, as the SDK's path relays it (no requests to a sessionless client, no log messages it did not ask
    for)."""
    if context.wire is not None or context.request_id is not None:
        return RequestRelay(cast(Any, context), min_log_level)
    return FastRelay(context, min_log_level)
