"""The local status API and dashboard (DESIGN §7), served by uvicorn in claimcheck's own event loop.

Read-only: GET and OPTIONS only, CORS `*`, and the Host header must name the loopback address it is
bound to (a page on another site cannot reach it through DNS rebinding).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import uvicorn
from starlette.applications import Starlette
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.status.events import EventHub
from server.status.history import History, TaskQuery
from server.status.tasks import iso

__all__ = ["API_PORT_TRIES", "StatusApi", "bind_api_socket"]

logger = logging.getLogger(__name__)

API_PORT_TRIES = 10
_MAX_LIMIT = 200
_DASHBOARD = Path(__file__).with_name("dashboard.html")
_CORS = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"GET, OPTIONS"),
    (b"access-control-allow-headers", b"Content-Type"),
]


class _Cors:
    """`*` CORS headers on every response; OPTIONS answered 204 at once."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS":
            await send({"type": "http.response.start", "status": 204, "headers": _CORS})
            await send({"type": "http.response.body", "body": b""})
            return

        async def with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_CORS]
            await send(message)

        await self.app(scope, receive, with_cors)


class StatusApi:
    """The endpoints over the history and the live event hub."""

    def __init__(
        self, hub: EventHub, *, version: str, heartbeat_secs: float, usage: Any = None, servers: Any = None
    ) -> None:
        self.hub = hub
        self.history: History = hub.history
        self.version = version
        self.heartbeat_secs = heartbeat_secs
        self.started = time.time()
        self.usage = usage  # a callable returning extraction usage totals, or None
        self.servers = servers  # a callable returning each downstream's state, or None

    def app(self) -> Starlette:
        routes = [
            Route("/", self.dashboard),
            Route("/v1/health", self.health),
            Route("/v1/stats", self.stats),
            Route("/v1/tasks", self.tasks),
            Route("/v1/tasks/{handle:path}/logs", self.logs),
            Route("/v1/tasks/{handle:path}", self.task),
            Route("/v1/task-groups/{batch}", self.group),
            Route("/v1/events", self.events),
        ]
        app = Starlette(routes=routes)
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost", "[::1]"])
        return _Cors(app)  # type: ignore[return-value]  # an ASGI app around the Starlette one

    async def _run(self, function: Any, *args: Any) -> Any:
        await self.history.flush()
        return await anyio.to_thread.run_sync(function, *args)

    async def dashboard(self, request: Request) -> Response:
        try:
            page = _DASHBOARD.read_text(encoding="utf-8")
        except OSError:
            page = "<!doctype html><title>claimcheck</title><p>The dashboard page is missing from this install."
        return HTMLResponse(page)

    async def health(self, request: Request) -> Response:
        _, total = await self._run(self.history.tasks, TaskQuery(), 0, 0)
        uptime = round(time.time() - self.started, 1)
        body = {"status": "ok", "uptime": uptime, "version": self.version, "taskCount": total}
        if self.servers is not None:
            body["servers"] = self.servers()
        return JSONResponse(body)

    async def stats(self, request: Request) -> Response:
        stats = await self._run(self.history.stats)
        if self.usage is not None:
            stats["extraction"] = self.usage()
        return JSONResponse(stats)

    async def tasks(self, request: Request) -> Response:
        params = request.query_params
        try:
            limit = int(params.get("limit", "50"))
            offset = int(params.get("offset", "0"))
        except ValueError:
            return _error(400, "limit and offset must be integers")
        if not 1 <= limit <= _MAX_LIMIT or offset < 0:
            return _error(400, f"limit must be 1..{_MAX_LIMIT} and offset at least 0")
        query = TaskQuery(**{key: params.get(key) for key in ("status", "server", "tool", "session", "search")})
        tasks, total = await self._run(self.history.tasks, query, limit, offset)
        return JSONResponse({"tasks": tasks, "total": total, "limit": limit, "offset": offset})

    async def task(self, request: Request) -> Response:
        found = await self._run(self.history.get, request.path_params["handle"])
        return JSONResponse(found) if found is not None else _error(404, "no such task")

    async def logs(self, request: Request) -> Response:
        handle = request.path_params["handle"]
        if await self._run(self.history.get, handle) is None:
            return _error(404, "no such task")
        entries = await anyio.to_thread.run_sync(self.history.logs, handle)
        logs = [{"ts": iso(ts), "kind": kind, "detail": detail} for ts, kind, detail in entries]
        return JSONResponse({"handle": handle, "logs": logs})

    async def group(self, request: Request) -> Response:
        tasks = await self._run(self.history.group, request.path_params["batch"])
        if not tasks:
            return _error(404, "no such task group")
        counts = {
            status: sum(t["status"] == status for t in tasks) for status in ("ready", "running", "failed", "cancelled")
        }
        finished = [t for t in tasks if t["durationMs"] is not None]
        summary = {
            "completed": counts["ready"],
            "running": counts["running"],
            "error": counts["failed"],
            "cancelled": counts["cancelled"],
            "total": len(tasks),
            "completionRate": round(counts["ready"] / len(tasks), 3),
            "totalToolCalls": len(tasks),
            "duration": round(sum(t["durationMs"] for t in finished), 1),
        }
        return JSONResponse({"batchId": request.path_params["batch"], "tasks": tasks, **summary})

    async def events(self, request: Request) -> Response:
        async def stream() -> AsyncIterator[str]:
            with self.hub.subscribe() as updates:
                tasks, _ = await self._run(self.history.tasks, TaskQuery(), _MAX_LIMIT, 0)
                stats = await anyio.to_thread.run_sync(self.history.stats)
                yield _sse("snapshot", {"tasks": tasks, "stats": stats})
                while True:
                    with anyio.move_on_after(self.heartbeat_secs):
                        try:
                            name, data = await updates.receive()
                        except anyio.EndOfStream:
                            return  # dropped for falling behind; the client reconnects to a new snapshot
                        yield _sse(name, data)
                        continue
                    yield _sse("heartbeat", {"ts": iso(time.time())})

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)


def bind_api_socket(port: int) -> socket.socket:
    """127.0.0.1:`port`, else the next ports, else one the OS picks (port 0 asks the OS at once)."""
    candidates = [port + i for i in range(API_PORT_TRIES)] if port else []
    for candidate in [*candidates, 0]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # TIME-WAIT from a dashboard of the previous run must not push us off our port;
        # Linux still refuses a port that a live instance listens on.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", candidate))
        except OSError:
            sock.close()
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it: no 40 ms stalls
        sock.listen(128)
        sock.setblocking(False)
        return sock
    raise OSError("no port is free for the status API")  # pragma: no cover - port 0 always binds


class _QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers: the process's own transport owns SIGINT/SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_api(
    api: StatusApi, port: int, state_dir: Path, *, task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Serve until cancelled, with a discovery file in `<state_dir>/instances/` for as long as it runs."""
    sock = bind_api_socket(port)
    bound = sock.getsockname()[1]
    url = f"http://127.0.0.1:{bound}/"
    discovery = state_dir / "instances" / f"{os.getpid()}.json"
    discovery.parent.mkdir(parents=True, exist_ok=True)
    info = {"port": bound, "pid": os.getpid(), "startedAt": iso(api.started), "url": url, "version": api.version}
    discovery.write_text(json.dumps(info), encoding="utf-8")
    print(f"claimcheck: status API at {url}", file=sys.stderr, flush=True)
    config = uvicorn.Config(api.app(), log_level="warning", lifespan="off", timeout_graceful_shutdown=2)
    server = _QuietServer(config)
    stopped = anyio.Event()

    async def serve() -> None:
        # Shielded: cancelling uvicorn mid-flight leaves its listening socket registered with the event loop,
        # and a later socket that reuses the descriptor would be served by the dead server.
        with anyio.CancelScope(shield=True):
            try:
                await server.serve(sockets=[sock])
            finally:
                stopped.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            task_status.started(url)
            try:
                await stopped.wait()
            finally:
                server.should_exit = True  # uvicorn notices within 0.1 s; open streams get 2 s to finish
    finally:
        discovery.unlink(missing_ok=True)
        sock.close()
