"""Serving claimcheck to clients: stdio, streamable HTTP at `/mcp`, or SSE at `/sse` + `/messages/`.

Over HTTP the edge rules of `server.http_edge` apply: a deadline for each request, one Authorization
header, and request bodies limited to `settings.maxRequestBytes` (413 with a JSON-RPC error beyond it); then
`BudgetGate` refuses a body nested too deep before anything parses it (400 with a JSON-RPC error); a session
serves only the principal that opened it (`server.upstream.principals`). Who may ask at all: the static tokens
(`server.upstream.bearer`), and with `settings.auth` OAuth access tokens too (`server.upstream.resource_server`).
"""

from __future__ import annotations

import errno
import logging
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Literal

import anyio
import uvicorn
from mcp.server.sse import SseServerTransport
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server import sdk_compat, tracing
from server.errors import StartupError
from server.http_compat import send_of
from server.http_edge import REQUEST_DEADLINE_SECS, BodyLimit, edge_server, raise_caught, serve_until_cancelled
from server.platform import cancel_on_stop_signal
from server.proxy import Proxy, Starter
from server.upstream.bearer import BearerAuth, Tokens
from server.upstream.event_store import BoundedEventStore, SessionScopedEvents
from server.upstream.fastpath import FastPath
from server.upstream.fastpath import enabled as fast_path_enabled
from server.upstream.gate import BudgetGate
from server.upstream.http_fast import HttpFastPath
from server.upstream.http_stand_ins import StandInSend, with_outputs, with_stand_ins
from server.upstream.line_writer import LineWriter
from server.upstream.local_only import LOOPBACK, LocalOnly, security
from server.upstream.mcp_sessions import SessionShares, SseShares
from server.upstream.principals import PrincipalAsUser
from server.upstream.resource_server import OAuth
from server.upstream.sessionless import StreamEra
from server.upstream.standing import StandingStreams
from server.upstream.stdio import Take, stdio_streams
from server.upstream.surface import build_server

__all__ = ["UpstreamTransport", "serve", "serve_http", "serve_sse", "serve_stdio"]

logger = logging.getLogger(__name__)

UpstreamTransport = Literal["stdio", "http", "sse"]
_RETRY_MS = 1000
"""How soon a client whose stream dropped should reconnect (with Last-Event-ID) to resume it."""


async def serve(
    start: Starter,
    transport: UpstreamTransport,
    host: str = "127.0.0.1",
    port: int = 0,
    auth: Tokens | None = None,
    oauth: OAuth | None = None,
) -> None:
    """Serve until stopped; over HTTP/SSE every request must carry `Authorization: Bearer <token>` of one of
    `auth`'s tokens, if given, or an access token `oauth` accepts (by default `settings.auth`'s); `start` makes
    and runs the proxy (`Proxy.start` with the command's config and options)."""
    if transport == "stdio":
        await serve_stdio(start)
    else:
        sock = _bind(host, port)
        if transport == "http":
            await serve_http(start, sock, auth, oauth=oauth)
        else:
            await serve_sse(start, sock, auth, oauth=oauth)


async def serve_stdio(start: Starter) -> None:
    """Serve one client on stdin/stdout until stdin closes or SIGINT/SIGTERM arrives."""
    async with start() as proxy, anyio.create_task_group() as tg:
        server = build_server(proxy)
        era = StreamEra(server)  # a sessionless client's plain calls are the fast path's once the SDK serves its era
        server.middleware.append(era.middleware)
        tg.start_soon(cancel_on_stop_signal, tg.cancel_scope)
        fast = partial(_fast_path, proxy, era) if fast_path_enabled(proxy.config.settings) else None
        limit = proxy.config.settings.max_request_bytes
        async with stdio_streams(limit, fast, outputs=proxy.pool.spooled) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        tg.cancel_scope.cancel()


def _fast_path(proxy: Proxy, era: StreamEra, writer: LineWriter) -> Take:
    return FastPath(proxy, writer, era).take


async def serve_http(
    start: Starter,
    sock: socket.socket,
    auth: Tokens | None = None,
    *,
    oauth: OAuth | None = None,
    request_deadline: float = REQUEST_DEADLINE_SECS,
) -> None:
    """Serve streamable HTTP at `/mcp` on an already bound socket; the proxy runs from before the first request
    to after the last."""
    async with start(many_clients=True, anonymous=auth is None and oauth is None) as proxy:
        server = await _serve_http(proxy, sock, auth, oauth, request_deadline)
    raise_caught(server)  # SIGTERM or SIGINT, as uvicorn would, now that the proxy has stopped


async def _serve_http(
    proxy: Proxy, sock: socket.socket, auth: Tokens | None, oauth: OAuth | None, request_deadline: float
) -> uvicorn.Server:
    standing = StandingStreams()  # questions go at once to a session whose GET stream is open
    server = build_server(proxy, standing)
    host = sock.getsockname()[0]
    limit = proxy.config.settings.max_request_bytes
    inner = server.streamable_http_app(
        streamable_http_path="/mcp",
        host=host,
        event_store=BoundedEventStore(),
        retry_interval=_RETRY_MS,
        max_request_body_size=limit,  # ours answers first, with a clearer message; the SDK's stays a backstop
        transport_security=security(host),  # likewise `LocalOnly`
    )

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    fast = HttpFastPath(proxy, server.session_manager) if fast_path_enabled(proxy.config.settings) else None
    if fast is not None:  # plain calls answered without the SDK's transport
        server.middleware.append(fast.middleware)

    shares = SessionShares(server.session_manager, lambda: proxy.config.settings.limits.mcp_sessions)

    def endpoint(app: ASGIApp) -> ASGIApp:
        app = with_stand_ins(app, proxy.pool.spooled)  # the SDK's path streams a pass-through's output from its file
        app = app if fast is None else fast.app(app)
        app = shares.app(app)  # a principal opens MCP sessions within its share
        return tracing.from_headers(app) if tracing.ENABLED else app

    routes = [
        Route(route.path, endpoint=standing.app(SessionScopedEvents(endpoint(route.endpoint))), name=route.name)
        if isinstance(route, Route)
        else route
        for route in inner.routes
    ]
    app = Starlette(
        routes=routes, lifespan=lifespan, middleware=_edges(limit, host), exception_handlers={404: _elsewhere("/mcp")}
    )
    return await _run_uvicorn(app, sock, "/mcp", "streamable HTTP", _access(proxy, auth, oauth), request_deadline)


async def serve_sse(
    start: Starter,
    sock: socket.socket,
    auth: Tokens | None = None,
    *,
    oauth: OAuth | None = None,
    request_deadline: float = REQUEST_DEADLINE_SECS,
) -> None:
    """Serve the legacy SSE transport: `GET /sse` opens a stream, `POST /messages/` carries requests."""
    async with start(many_clients=True, anonymous=auth is None and oauth is None) as proxy:
        server = await _serve_sse(proxy, sock, auth, oauth, request_deadline)
    raise_caught(server)


async def _serve_sse(
    proxy: Proxy, sock: socket.socket, auth: Tokens | None, oauth: OAuth | None, request_deadline: float
) -> uvicorn.Server:
    server = build_server(proxy)
    host = sock.getsockname()[0]
    limit = proxy.config.settings.max_request_bytes
    sse = SseServerTransport("/messages/", security_settings=security(host), max_request_body_size=limit)
    sdk_compat.quiet_unreadable_sse_posts()

    outputs = proxy.pool.spooled  # a pass-through's stored output, answered on its client's event stream from its file

    shares = SseShares(lambda: proxy.config.settings.limits.mcp_sessions)

    async def handle_sse(request: Request) -> Response:
        with shares.hold(request.scope) as refusal:  # a principal opens SSE sessions within its share
            if refusal is not None:
                return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": refusal}}, 503)
            send = StandInSend(send_of(request), outputs)
            try:
                async with sse.connect_sse(request.scope, request.receive, send) as (read, write):
                    await server.run(read, write, server.create_initialization_options())
            except ValueError as exc:
                if str(exc) != sdk_compat.SSE_REFUSED:
                    raise
                return _Answered()  # the SDK answered it (403 for another site's Origin, 421 for another Host)
        return Response()

    post = _after_its_stream(with_outputs(sse.handle_post_message, outputs))
    app = Starlette(
        routes=[Route("/sse", endpoint=handle_sse, methods=["GET"]), Mount("/messages/", app=post)],
        middleware=_edges(limit, host),
        exception_handlers={404: _elsewhere("/sse")},
    )
    return await _run_uvicorn(app, sock, "/sse", "SSE", _access(proxy, auth, oauth), request_deadline)


def _elsewhere(path: str) -> Callable[[Request, Exception], Awaitable[Response]]:
    """The answer to a path this server does not serve (a browser opening `/`, a client given `/sse` of an HTTP
    server): 404, saying where MCP is served."""
    transport = "streamable HTTP" if path == "/mcp" else "SSE (the legacy transport)"

    async def not_here(request: Request, exc: Exception) -> Response:
        said = f"Not Found: claimcheck serves MCP over {transport} at {path} on this port; give an MCP client that URL"
        return PlainTextResponse(said + "\n", status_code=404)

    return not_here


class _Answered(Response):
    """The response of a request the SDK has answered already: nothing more is sent (the connection stays usable)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        return


def _after_its_stream(post: ASGIApp) -> ASGIApp:
    """A POST to `/messages/` whose session's event stream has just ended: the SDK answers it (202, or 400 for a
    body it cannot read), then fails to hand the message to the closed stream; that is no error of claimcheck's
    (the session is gone, as its next POST is told with 404), so it is logged at debug, not as a traceback."""

    async def answered(scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await post(scope, receive, sending)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("a message came for an SSE session whose stream had ended")
            if not started:
                await Response("Could not find session: its event stream has ended", status_code=404)(
                    scope, receive, send
                )

    return answered


def _edges(limit: int, host: str) -> list[Middleware]:
    """On loopback, a request for another host is refused first; the size of a body is counted as it comes;
    whether it nests too deep, once it is whole; then the request carries its principal, which the SDK binds each
    session to."""
    local = [Middleware(LocalOnly)] if host in LOOPBACK else []
    return [
        *local,
        Middleware(BodyLimit, max_bytes=limit),
        Middleware(BudgetGate, max_bytes=limit),
        Middleware(PrincipalAsUser),
    ]


def _access(proxy: Proxy, tokens: Tokens | None, oauth: OAuth | None) -> tuple[Tokens | None, OAuth | None]:
    """The static tokens and the OAuth check a request may pass; `settings.auth` is never left unchecked."""
    if oauth is None and proxy.config.settings.auth is not None:
        oauth = OAuth.from_settings(proxy.config.settings.auth)
    return tokens, oauth


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise StartupError(_bind_failure(host, port, exc)) from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it: no 40 ms stalls
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def _bind_failure(host: str, port: int, exc: OSError) -> str:
    """What to do when `--host`/`--port` cannot be listened on."""
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is taken by another program; use --port 0 (a free port) or another --port"
    if exc.errno == errno.EACCES:
        return f"port {port} needs privileges this user lacks; use --port 0 (a free port) or a port above 1023"
    return f"cannot listen on {host} port {port}: {exc.strerror or exc}; check --host (default 127.0.0.1)"


async def _run_uvicorn(
    app: Starlette,
    sock: socket.socket,
    path: str,
    label: str,
    access: tuple[Tokens | None, OAuth | None] = (None, None),
    request_deadline: float = REQUEST_DEADLINE_SECS,
) -> uvicorn.Server:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}{path}"
    tokens, oauth = access
    async with AsyncExitStack() as stack:
        served: ASGIApp = app if tokens is None else BearerAuth(app, tokens)
        if oauth is not None:
            served = await stack.enter_async_context(oauth.protecting(app, tokens, url))
        print(f"claimcheck: serving MCP over {label} at {url}", file=sys.stderr, flush=True)
        deadline = request_deadline
        server = edge_server(served, lifespan="on", request_deadline=deadline, graceful_secs=3, own_signals=True)
        await serve_until_cancelled(server, sock)
    return server
