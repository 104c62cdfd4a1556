"""The fast path for a plain `tools/call` over stdio: no SDK dispatch on either side.

The stdio transport offers every request line to `FastPath.take` before the SDK parses it. A line that
is an ordinary tool call (`read_envelope`: method, id, tool name, arguments, nothing else: no `_meta`
but a 2026-07-28 request's own envelope, so no progress token, log level, task or chain marker) to a
known tool of a live stdio downstream (`fast_route`), from a client of the era the SDK serves on this
stream (one that finished its handshake; or a sessionless one, once the SDK served a request of that era:
`StreamEra`), is answered here, by the fast paths' one request machine (`server.upstream.engine`), with
`FastPath` as its responder: answers go out as lines through the `LineWriter`. A call a claimcheck in
front marks as a pass-through (its `_meta` holds the mark and, at most, a progress token) is answered here
too, as the SDK's path answers it: no rules, no handle, its output streamed from the spool's file when it
went there, while the file grows when it is long (`server.upstream.fast_passthrough`); so is a plain call of the
handshake era to a server whose rules are off, with the client's footer. A
`notifications/cancelled` for a call taken here cancels it, and, as the SDK does, a cancelled request is never
answered. Anything else, and every line while the path is off (`settings.fastPath`, or
`CLAIMCHECK_FAST_PATH=off`), goes to the SDK.
"""

from __future__ import annotations

import logging

from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from server import sdk_compat
from server.budget import request_key
from server.config import FAST_PATH_ENV
from server.config import fast_path_enabled as enabled
from server.handles.owners import Entrance
from server.handles.sessions import Session
from server.proxy import Proxy
from server.upstream.engine import FastRequest, fast_route
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
        proxy = self._proxy
        route = fast_route(proxy, envelope)
        caller = self._caller(envelope) if route is not None else None
        if route is None or caller is None:
            return False
        logger.debug("the stdio fast path takes call %r", envelope.id)
        context, session, origin = caller
        token = envelope.progress_token
        relay = PassthroughRelay(context, proxy.log_level, self.writer, token) if envelope.passthrough else None
        request = FastRequest(proxy, self, envelope, route, context, session, origin, relay)
        self._running[request_key(envelope.id)] = request
        self.writer.owe()
        try:
            request.start()
        except BaseException:  # the SDK's path takes the line (`stdio._taken`): nothing is owed here
            self.forget(request)
            raise
        return True

    def _caller(self, envelope: Envelope) -> tuple[CallContext, Session, str] | None:
        """Who makes the call, as the SDK's path would find them: the client, its session and `Entrance.origin`;
        None when the SDK's path must find them."""
        era, sessionless = self._era, envelope.sessionless
        if sessionless is not None:  # a 2026-07-28 client: over stdio, the default session (not made here)
            if era is None or not era.sessionless or envelope.passthrough:
                return None  # the SDK serves the handshake era here (or has not decided): it refuses the envelope
            client = self._clients.client_of(sessionless, envelope.id)
            if client is None:
                return None
            entrance = Entrance(None, None, client)
            context = CallContext(client, sessionless.protocol_version, envelope.id, era.wire)
        else:
            client = self._proxy.only_client()
            if client is None or client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                return None  # before the handshake is done (or a sessionless stream: its calls carry their envelope)
            context = CallContext(client, client.protocol_version)
            connection = sdk_compat.connection_of(client)
            if connection is None:
                return None
            entrance = Entrance(connection, None, None)
        session = self._proxy.sessions.find(entrance)
        return None if session is None else (context, session, entrance.origin)

    def write_nowait(self, data: bytes) -> None:
        self.writer.write_nowait(data)

    async def write(self, data: bytes | Streamed | Followed) -> None:
        if isinstance(data, bytes):
            await self.writer.write(data)
        elif isinstance(data, Followed):
            await write_followed(self.writer, data)
        else:
            await write_spooled(self.writer, *data.parts())

    def forget(self, request: FastRequest) -> None:
        key = request_key(request.envelope.id)
        if self._running.get(key) is request:
            del self._running[key]
            self.writer.paid()  # its answer is written, or on its way (the writer's backlog counts it)
