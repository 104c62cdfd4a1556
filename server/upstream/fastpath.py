"""The fast path for a plain `tools/call` over stdio: no SDK dispatch on either side.

The stdio transport offers every request line to `FastPath.take` before the SDK parses it. A line that
is an ordinary tool call (`read_envelope`: method, id, tool name, arguments, nothing else: no `_meta`
but a 2026-07-28 request's own envelope, so no progress token, log level, task or chain marker) to a
known tool of a live stdio downstream (`plain_route`), from a client of the era the SDK serves on this
stream (one that finished its handshake; or a sessionless one, once the SDK served a request of that era:
`StreamEra`), is answered here, by the fast paths' one request machine (`server.upstream.engine`), with
`FastPath` as its responder: answers go out as lines through the `LineWriter`. A call a claimcheck in
front marks as a pass-through (its `_meta` holds the mark and, at most, a progress token) is answered here
too, as the SDK's path answers it: no rules, no handle, its output streamed from the spool's file when it
went there, while the file grows when it is long (`server.upstream.fast_passthrough`). A
`notifications/cancelled` for a call taken here cancels it, and, as the SDK does, a cancelled request is never
answered. Anything else, and every line while the path is off (`settings.fastPath`, or
`CLAIMCHECK_FAST_PATH=off`), goes to the SDK.
"""

from __future__ import annotations

import logging

from mcp.server.session import ServerSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from server import sdk_compat
from server.budget import request_key
from server.config import FAST_PATH_ENV
from server.config import fast_path_enabled as enabled
from server.downstream.pool import Route
from server.handles.sessions import Entrance, Session
from server.proxy import Proxy
from server.upstream.engine import FastRequest, passthrough_route, plain_route, relay_of
from server.upstream.fast_passthrough import PassthroughRelay, Streamed
from server.upstream.line_writer import LineWriter
from server.upstream.plain_call import CallContext, Envelope, Envelopes, RequestId, cancelled_id, roots_changed
from server.upstream.sessionless import SessionlessClients, StreamEra
from server.upstream.streamed import Followed, write_followed, write_spooled

__all__ = ["ENV", "FastPath", "enabled"]

logger = logging.getLogger(__name__)

ENV = FAST_PATH_ENV


class FastPath:
    """Takes plain tool calls off the stdio transport's hands (see the module's doc), and writes their answers
    as lines: the `Responder` of every `Request` it starts."""

    def __init__(self, proxy: Proxy, writer: LineWriter, era: StreamEra | None = None) -> None:
        self._proxy = proxy
        self.writer = writer
        self._era = era  # None: sessionless calls are the SDK's
        self._running: dict[tuple[bool, RequestId], FastRequest] = {}
        self._envelopes = Envelopes()
        self._clients = SessionlessClients()

    def take(self, line: bytes) -> bool:
        """Whether `line` is the fast path's: a plain call it started, or the cancellation of one."""
        if self._running and (cancelled := cancelled_id(line)) is not None:
            request = self._running.get(request_key(cancelled))
            if request is None:
                return False
            request.cancel()
            return True
        envelope = self._envelopes.envelope_of(line)
        if envelope is None:
            if roots_changed(line):  # before the next line is read: a call behind it waits for the new roots
                self._proxy.roots_changing(None)
            return False
        if request_key(envelope.id) in self._running:
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
        if connection is None:
            return False
        entrance = Entrance(connection, None, None)
        session = self._proxy.sessions.find(entrance)
        if session is None:
            return False
        self._start(envelope, route, CallContext(client, client.protocol_version), session, entrance.origin)
        return True

    def _sessionless(self, envelope: Envelope) -> bool:
        """A plain call of a 2026-07-28 client, on a stream the SDK serves in that era: its session is the one
        the SDK's path finds for it (over stdio, the default session; not made here)."""
        era, sessionless = self._era, envelope.sessionless
        if era is None or not era.sessionless or sessionless is None:
            return False  # the SDK serves the handshake era here (or has not decided): it refuses the envelope
        route = plain_route(self._proxy, envelope)
        client = self._clients.client_of(sessionless, envelope.id) if route is not None else None
        if route is None or client is None:
            return False
        entrance = Entrance(None, None, client)
        session = self._proxy.sessions.find(entrance)
        if session is None:
            return False
        context = CallContext(client, sessionless.protocol_version, envelope.id, era.wire)
        self._start(envelope, route, context, session, entrance.origin)
        return True

    def _start(self, envelope: Envelope, route: Route, context: CallContext, session: Session, origin: str) -> None:
        logger.debug("the stdio fast path takes call %r", envelope.id)
        proxy = self._proxy
        relay = relay_of(context, proxy.log_level)
        self._run(FastRequest(proxy, self, envelope, route, context, session, relay, origin))

    def _pass_through(self, envelope: Envelope, client: ServerSession) -> bool:
        route = passthrough_route(self._proxy, envelope)
        if route is None:
            return False
        context = CallContext(client, client.protocol_version)
        relay = PassthroughRelay(context, self._proxy.log_level, self.writer, envelope.progress_token)
        self._run(FastRequest(self._proxy, self, envelope, route, context, None, relay))
        return True

    def _run(self, request: FastRequest) -> None:
        self._running[request_key(request.envelope.id)] = request
        self.writer.owe()
        try:
            request.start()
        except BaseException:  # the SDK's path takes the line (`stdio._taken`): nothing is owed here
            self.forget(request)
            raise

    def write_nowait(self, data: bytes) -> None:
        self.writer.write_nowait(data)

    async def write(self, data: bytes | Streamed | Followed) -> None:
        if isinstance(data, bytes):
            await self.writer.write(data)
        elif isinstance(data, Followed):
            await write_followed(self.writer, data)
        else:
            await write_spooled(self.writer, data.ident, data.line, data.placeholder, data.spooled)

    def forget(self, request: FastRequest) -> None:
        key = request_key(request.envelope.id)
        if self._running.get(key) is request:
            del self._running[key]
            self.writer.paid()  # its answer is written, or on its way (the writer's backlog counts it)
