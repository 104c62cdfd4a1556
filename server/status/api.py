"""The local status API and dashboard, served by uvicorn in claimcheck's own event loop.

Read-only: GET (and HEAD, OPTIONS). Who may read it is `access`'s business (Host, Origin, token); how slow
or broken clients are kept from holding it is `server.http_edge`'s; this module is the routes and how they are served.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import secrets
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from starlette.applications import Starlette
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from server.handles.calls import STATUSES
from server.handles.meters import Meters
from server.http_edge import REQUEST_DEADLINE_SECS, edge_server, serve_until_cancelled
from server.status.access import Access, dashboard_url
from server.status.cluster import ClusterView, summed
from server.status.discovery import discovery_file
from server.status.events import EventHub
from server.status.history import History, TaskQuery
from server.status.metrics import MetricsUnavailable, PrometheusText
from server.status.outputs import GREP_MATCHES_MAX, HEAD_LINES_MAX, OutputUnavailable, OutputView
from server.status.ports import API_PORT_TRIES, bind_api_socket
from server.status.tasks import iso

__all__ = ["API_PORT_TRIES", "StatusApi", "bind_api_socket", "serve_api"]

logger = logging.getLogger(__name__)

_MAX_LIMIT = 200
_STATUS_WORDS = {
    **dict.fromkeys(("completed", "complete", "done", "finished", "succeeded", "success", "ok"), "ready"),
    **dict.fromkeys(("error", "errored", "failure"), "failed"),
    **dict.fromkeys(("canceled", "stopped"), "cancelled"),
    **dict.fromkeys(("active", "pending", "working"), "running"),
}
"""What other task APIs call a status, as claimcheck calls it."""
_MAX_OFFSET = 10**9
_INTEGER = re.compile(r"-?[0-9]{1,30}")
_DASHBOARD = Path(__file__).with_name("dashboard.html")
_MAX_REGEX = 500


class BadParameter(ValueError):
    """A query parameter that is not what the route takes; answered 400 with this message."""


def known_params(params: QueryParams, known: tuple[str, ...]) -> None:
    """Refuse a query parameter the route does not take (a misspelt filter would otherwise filter nothing)."""
    for name in params:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise BadParameter(f"unknown query parameter {name[:40]!r} (this route takes {', '.join(known)}){hint}")


def int_param(params: QueryParams, name: str, default: int, low: int, high: int) -> int:
    """The query parameter `name` as an integer in `low..high`, `default` when it is absent."""
    given = params.getlist(name)
    if not given:
        return default
    if len(given) > 1:
        raise BadParameter(f"{name} is given {len(given)} times; give it once")
    raw = given[0]
    value = int(raw) if _INTEGER.fullmatch(raw) else None
    if value is None or not low <= value <= high:
        raise BadParameter(f"{name} must be an integer in {low}..{high}, not {raw[:40]!r}")
    return value


class StatusApi:
    """The endpoints over the history and the live event hub."""

    def __init__(
        self,
        hub: EventHub,
        *,
        version: str,
        heartbeat_secs: float,
        usage: Any = None,
        servers: Any = None,
        token: str | None = None,
        allow_origins: Sequence[str] = (),
        relays: Any = None,
        outputs: OutputView | None = None,
        time_rule_secs: float | None = None,
        cluster: ClusterView | None = None,
        metrics: PrometheusText | None = None,
    ) -> None:
        self.hub = hub
        self.relays = relays  # a callable returning the shared claimcheck's attached relays, or None
        self.history: History = hub.history
        self.version = version
        self.heartbeat_secs = heartbeat_secs
        self.started = time.time()
        self.usage = usage  # a callable returning extraction usage totals, or None
        self.servers = servers  # a callable returning each downstream's state, or None
        self.token = token or secrets.token_urlsafe(32)
        self.allow_origins = list(allow_origins)
        self.outputs = outputs  # stored outputs, for the dashboard's output view
        self.time_rule_secs = time_rule_secs  # asyncTimeoutSecs: the dashboard marks it on the timeline
        self.cluster = cluster  # replicas sharing handles: the others' running calls join the live part
        self.metrics = metrics or PrometheusText(Meters(), servers, None)

    def app(self, port: int) -> ASGIApp:
        """The routes behind the access checks of an API served on 127.0.0.1:`port`."""
        routes = [
            Route("/", self.dashboard),
            Route("/healthz", self.healthz),
            Route("/v1/health", self.health),
            Route("/v1/stats", self.stats),
            Route("/v1/tasks", self.tasks),
            Route("/v1/tasks/{handle:path}/logs", self.logs),
            Route("/v1/tasks/{handle:path}/output/grep", self.output_grep),
            Route("/v1/tasks/{handle:path}/output", self.output),
            Route("/v1/tasks/{handle:path}", self.task),
            Route("/v1/task-groups/{batch}", self.group),
            Route("/v1/events", self.events),
            Route("/metrics", self.prometheus),
        ]
        return Access(Starlette(routes=routes), token=self.token, port=port, allow_origins=self.allow_origins)

    async def _run(self, function: Any, *args: Any) -> Any:
        await self.history.flush()
        return await anyio.to_thread.run_sync(function, *args)

    async def dashboard(self, request: Request) -> Response:
        try:
            page = _DASHBOARD.read_text(encoding="utf-8")
        except OSError:
            page = "<!doctype html><title>claimcheck</title><p>The dashboard page is missing from this install."
        return HTMLResponse(page)

    async def healthz(self, request: Request) -> Response:
        """Open to anyone who can reach 127.0.0.1: says the process answers, nothing about calls."""
        return JSONResponse({"status": "ok"})

    async def health(self, request: Request) -> Response:
        _, total = await self._run(self.history.tasks, TaskQuery(), 0, 0)
        uptime = round(time.time() - self.started, 1)
        body = {"status": "ok", "uptime": uptime, "version": self.version, "taskCount": total}
        if self.time_rule_secs is not None:
            body["timeRuleSecs"] = self.time_rule_secs
        if self.servers is not None:
            body["servers"] = self.servers()
        if self.relays is not None:  # the user's shared claimcheck: how many relays are attached
            body["relays"] = self.relays()
        if self.cluster is not None:
            body["replica"] = self.cluster.replica
        return JSONResponse(body)

    async def local_stats(self) -> dict[str, Any]:
        """This process's stats: its history's counts, and extraction's usage."""
        stats: dict[str, Any] = await self._run(self.history.stats)
        if self.usage is not None:
            stats["extraction"] = self.usage()
        return stats

    async def cluster_stats(self) -> dict[str, Any]:
        """This replica's stats; with replicas, every replica's too (`replicas`) and their sums (`cluster`)."""
        stats = await self.local_stats()
        if self.cluster is None or self.cluster.feed is None:
            return stats
        stats["replica"] = self.cluster.replica
        try:
            replicas = await self.cluster.feed.stats()
        except ConnectionError as exc:
            stats["clusterError"] = str(exc)
            replicas = {}
        replicas[self.cluster.replica] = {key: value for key, value in stats.items() if key != "replica"}
        stats["replicas"] = replicas
        stats["cluster"] = summed(list(replicas.values()))
        return stats

    async def stats(self, request: Request) -> Response:
        return JSONResponse(await self.cluster_stats())

    async def prometheus(self, request: Request) -> Response:
        """This process's counters in the Prometheus text format (`server.status.metrics`)."""
        try:
            body = self.metrics.render()
        except MetricsUnavailable as exc:
            return _error(501, str(exc))
        return Response(body, media_type=self.metrics.content_type)

    async def tasks(self, request: Request) -> Response:
        params = request.query_params
        filters = ("status", "server", "tool", "session", "search", "instance")
        try:
            known_params(params, ("limit", "offset", *filters))
            if (status := params.get("status")) and status not in STATUSES:
                close = [_STATUS_WORDS[word]] if (word := status.lower()) in _STATUS_WORDS else []
                close = close or difflib.get_close_matches(word, STATUSES, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise BadParameter(f"status must be {', '.join(STATUSES)}, not {status[:40]!r}{hint}")
            limit = int_param(params, "limit", 50, 1, _MAX_LIMIT)
            offset = int_param(params, "offset", 0, 0, _MAX_OFFSET)
        except BadParameter as exc:
            return _error(400, str(exc))
        query = TaskQuery(**{key: params.get(key) for key in filters})
        tasks, total = await self._run(self.history.tasks, query, limit, offset)
        body: dict[str, Any] = {"tasks": tasks, "total": total, "limit": limit, "offset": offset}
        if self.cluster is not None:  # the other replicas' running calls, marked with theirs, on the first page
            others, error = await self.cluster.tasks(query, limit) if offset == 0 else ([], None)
            for task in tasks:
                task["replica"] = self.cluster.replica
            body.update(tasks=others + tasks, total=total + len(others), replica=self.cluster.replica)
            if error is not None:
                body["clusterError"] = error
        return JSONResponse(body)

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

    async def output(self, request: Request) -> Response:
        """A stored output: its size, whether it was cut, its first `lines` lines (bounded)."""
        if self.outputs is None:
            return _error(404, "outputs are not served here")
        try:
            known_params(request.query_params, ("lines",))
            lines = int_param(request.query_params, "lines", 40, 1, HEAD_LINES_MAX)
            return JSONResponse(await self.outputs.head(request.path_params["handle"], lines))
        except BadParameter as exc:
            return _error(400, str(exc))
        except OutputUnavailable as exc:
            return _error(exc.status, await self._gone(request.path_params["handle"], exc))

    async def output_grep(self, request: Request) -> Response:
        """Grep over a stored output, the agent's Grep: `regex`, `maxMatches` (1..100), `caseSensitive`."""
        if self.outputs is None:
            return _error(404, "outputs are not served here")
        params = request.query_params
        try:
            known_params(params, ("regex", "maxMatches", "caseSensitive"))
        except BadParameter as exc:
            return _error(400, str(exc))
        regex = params.get("regex", "")
        if not regex or len(regex) > _MAX_REGEX:
            return _error(400, f"regex must be 1..{_MAX_REGEX} characters")
        try:
            limit = int_param(params, "maxMatches", 20, 1, GREP_MATCHES_MAX)
            case = params.get("caseSensitive", "false").lower() == "true"
            handle = request.path_params["handle"]
            return JSONResponse(await self.outputs.grep(handle, regex, max_matches=limit, case_sensitive=case))
        except BadParameter as exc:
            return _error(400, str(exc))
        except OutputUnavailable as exc:
            return _error(exc.status, await self._gone(request.path_params["handle"], exc))

    async def _gone(self, handle: str, exc: OutputUnavailable) -> str:
        """Why an output no live session holds is gone: the process that ran it ended (and when), or its session
        did; else the message as it is."""
        if exc.status != 404 or self.outputs is None:
            return str(exc)
        task = await self._run(self.history.get, handle)
        if task is None:
            return str(exc)
        ran = await self._run(self.history.instance_of, task)
        pid = task.get("instance")
        if pid == os.getpid() or ran is None:
            ended = self.outputs.session_ended(handle)
            if ended is None:
                return str(exc)
            return f"its session ended at {iso(ended)}, and its outputs were removed with it"
        _, _, stopped, clean = ran
        if stopped is None:
            return f"the claimcheck that ran it (pid {pid}) is another process: its own dashboard shows its outputs"
        how = "ended at" if clean else "ended without a clean stop (killed?); it was last heard of at"
        return f"the claimcheck that ran it (pid {pid}) {how} {iso(stopped)}, and its outputs went with it"

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
                stats = await self.cluster_stats()
                snapshot: dict[str, Any] = {"tasks": tasks, "stats": stats}
                if self.cluster is not None:  # the other replicas' running calls, marked with theirs
                    others, _ = await self.cluster.tasks(TaskQuery(status="running"), _MAX_LIMIT)
                    for task in tasks:
                        task["replica"] = self.cluster.replica
                    snapshot.update(tasks=others + tasks, replica=self.cluster.replica)
                yield _sse("snapshot", snapshot)
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


def start_line(url: str, discovery: Path) -> str:
    """What claimcheck says on stderr when its status API is up: where, and where to find the token it needs (never
    the token itself: whatever keeps stderr, a client's server log, would keep it)."""
    return (
        f"claimcheck: status API at {url} — dashboard: {url} (it needs the token: `claimcheck ps` prints the "
        f'address with it, as does "dashboard" in {discovery})'
    )


async def serve_api(
    api: StatusApi,
    port: int,
    state_dir: Path,
    *,
    request_deadline: float = REQUEST_DEADLINE_SECS,
    begin: Callable[[], Awaitable[None]] | None = None,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled, with a discovery file in `<state_dir>/instances/` for as long as it runs.

    Started (with the URL) once the port is bound and the discovery file written; with `begin`, requests are
    answered once it returns (they wait in the listen queue until then), so serving is off the start-up path.
    """
    sock = bind_api_socket(port)
    bound = sock.getsockname()[1]
    url = f"http://127.0.0.1:{bound}/"
    dashboard = dashboard_url(url, api.token)
    info = {
        "port": bound,
        "pid": os.getpid(),
        "startedAt": iso(api.started),
        "url": url,
        "dashboard": dashboard,
        "token": api.token,
        "version": api.version,
    }
    try:
        with discovery_file(state_dir, info) as discovery:
            print(start_line(url, discovery), file=sys.stderr, flush=True)
            task_status.started(url)
            if begin is not None:
                await begin()
            server = edge_server(api.app(bound), request_deadline=request_deadline, graceful_secs=2)
            await serve_until_cancelled(server, sock)
    finally:
        sock.close()
