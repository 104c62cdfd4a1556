"""The status API is private by default: its token on every route, no cross-origin reads, and a history that
holds metadata only (errors and arguments capped, none with storeArguments false), kept 0600/0700 and trimmed."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from server.config import HistorySettings
from server.proxy import Proxy
from server.status.history import History, TaskQuery
from tests.support.handles import client_of, handle_in
from tests.support.proxies import running_proxy

pytestmark = pytest.mark.anyio

EARLY = "needle-in-the-first-kilobyte"
LATE = "needle-far-past-two-kilobytes"


def downstream() -> MCPServer:
    server = MCPServer("down")

    @server.tool(structured_output=False)
    def echo(text: str) -> str:
        return text

    @server.tool(structured_output=False)
    def explode(size: int) -> str:
        raise ToolError(EARLY + "x" * size + LATE)

    return server


@asynccontextmanager
async def private_api(
    state: Path, monkeypatch: pytest.MonkeyPatch, **settings: Any
) -> AsyncIterator[tuple[Proxy, httpx2.AsyncClient]]:
    """claimcheck with the status API on port 0 and an HTTP client that sends no token by itself."""
    monkeypatch.setenv("CLAIMCHECK_API_ENABLED", "true")
    monkeypatch.setenv("CLAIMCHECK_API_PORT", "0")
    everything = {"stateDir": str(state), "asyncTokenThreshold": 1000, **settings}
    async with running_proxy({"down": downstream()}, settings=everything) as proxy:
        assert proxy.api_url is not None and proxy.api_token
        async with httpx2.AsyncClient(base_url=proxy.api_url, timeout=10) as http:
            yield proxy, http


def bearer(proxy: Proxy) -> dict[str, str]:
    return {"Authorization": f"Bearer {proxy.api_token}"}


def history_files(state: Path) -> bytes:
    """Every byte of the history database, its write-ahead log and shared memory file."""
    return b"".join(path.read_bytes() for path in state.glob("history.sqlite3*"))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_without_the_token_every_v1_route_and_the_dashboard_answer_401_and_with_it_200(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with private_api(tmp_path, monkeypatch) as (proxy, http), client_of(proxy) as client:
        with anyio.fail_after(20):
            await client.call_tool("down__echo", {"text": "private"})
            (task,) = (await http.get("/v1/tasks", headers=bearer(proxy))).json()["tasks"]
            routes = [
                "/",
                "/v1/health",
                "/v1/stats",
                "/v1/tasks",
                f"/v1/tasks/{task['handle']}",
                f"/v1/tasks/{task['handle']}/logs",
                f"/v1/task-groups/{task['batchId']}",
                "/v1/events",
                "/v1/no-such-route",
            ]
            without = {route: await status_of(http, route, {}) for route in routes}
            wrong = {route: await status_of(http, route, {"Authorization": "Bearer not-it"}) for route in routes}
            basic = await status_of(http, "/v1/tasks", {"Authorization": f"Basic {proxy.api_token}"})
            with_token = {route: await status_of(http, route, bearer(proxy)) for route in routes}
            healthz = await http.get("/healthz")
            refused = await http.get("/v1/tasks")
    assert without == dict.fromkeys(routes, 401)
    assert wrong == dict.fromkeys(routes, 401)
    assert basic == 401
    assert with_token == {**dict.fromkeys(routes, 200), "/v1/no-such-route": 404}
    assert refused.headers["www-authenticate"] == "Bearer" and "private" not in refused.text
    assert (healthz.status_code, healthz.json()) == (200, {"status": "ok"})  # open, and says nothing about calls


async def status_of(http: httpx2.AsyncClient, route: str, headers: dict[str, str]) -> int:
    async with http.stream("GET", route, headers=headers) as reply:  # /v1/events never ends: the status is enough
        return reply.status_code


async def test_the_token_in_the_address_becomes_an_http_only_strict_cookie_and_a_redirect_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with private_api(tmp_path, monkeypatch) as (proxy, http):
        with anyio.fail_after(10):
            assert proxy.api_token is not None
            wrong = await http.get("/", params={"token": "guessed"})
            swapped = await http.get("/", params={"token": proxy.api_token})
            page = await http.get("/")  # the client keeps the cookie
            tasks = await http.get("/v1/tasks")
            http.cookies.clear()
            after = await http.get("/v1/tasks")
    assert wrong.status_code == 401 and "token" in wrong.text and "set-cookie" not in wrong.headers
    assert swapped.status_code == 303 and swapped.headers["location"] == "/"
    cookie = swapped.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert proxy.api_token not in cookie  # a value derived from the token: other ports on 127.0.0.1 see cookies
    assert page.status_code == 200 and "<title>claimcheck" in page.text
    assert tasks.status_code == 200 and after.status_code == 401


async def test_a_foreign_origin_is_refused_and_only_a_listed_origin_gets_cors_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = "http://localhost:3000"
    async with private_api(tmp_path, monkeypatch, api={"allowOrigins": [listed]}) as (proxy, http):
        own = str(proxy.api_url).rstrip("/")
        token = bearer(proxy)
        with anyio.fail_after(10):
            foreign = await http.get("/v1/tasks", headers={**token, "Origin": "http://evil.example"})
            null = await http.get("/v1/tasks", headers={**token, "Origin": "null"})
            other_port = await http.get("/v1/tasks", headers={**token, "Origin": "http://127.0.0.1:1"})
            same = await http.get("/v1/tasks", headers={**token, "Origin": own})
            allowed = await http.get("/v1/tasks", headers={**token, "Origin": listed})
            preflight = await http.options(
                "/v1/tasks", headers={"Origin": listed, "Access-Control-Request-Headers": "authorization"}
            )
            foreign_preflight = await http.options("/v1/tasks", headers={"Origin": "http://evil.example"})
            no_cors = await http.get("/v1/tasks", headers={"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"})
            navigation = await http.get("/", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"})
            listed_without_token = await http.get("/v1/tasks", headers={"Origin": listed})
    assert [foreign.status_code, null.status_code, other_port.status_code] == [403, 403, 403]
    assert "settings.api.allowOrigins" in foreign.json()["hint"]
    assert same.status_code == 200 and "access-control-allow-origin" not in same.headers
    assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == listed
    assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == listed
    assert "Authorization" in preflight.headers["access-control-allow-headers"]
    assert foreign_preflight.status_code == 403 and "access-control-allow-origin" not in foreign_preflight.headers
    assert no_cors.status_code == 403  # a no-cors read from another port of 127.0.0.1 carries no Origin
    assert navigation.status_code == 401  # a navigation may reach the page, but not without the token
    assert listed_without_token.status_code == 401  # a listed origin still needs the token


async def test_a_failed_call_with_a_2_mb_error_keeps_2_kb_of_it_and_search_cannot_find_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with private_api(tmp_path, monkeypatch) as (proxy, http), client_of(proxy) as client:
        http.headers.update(bearer(proxy))
        with anyio.fail_after(30):
            result = await client.call_tool("down__explode", {"size": 2 << 20})
            handle = handle_in(result.content[0].text)  # type: ignore[union-attr]  # a text item, or the test fails
            early = (await http.get("/v1/tasks", params={"search": EARLY})).json()
            late = (await http.get("/v1/tasks", params={"search": LATE})).json()
            detail = (await http.get(f"/v1/tasks/{handle}")).json()
            logs = (await http.get(f"/v1/tasks/{handle}/logs")).text
            async with http.stream("GET", "/v1/events") as events:
                snapshot = await next_data(events.aiter_lines())
    assert result.is_error
    assert early["total"] == 1 and late["total"] == 0
    error = detail["error"]
    assert detail["status"] == "failed" and EARLY in error
    assert len(error.split("…")[0].encode()) <= 2048
    cut = re.search(r"… \[error cut: (\d+) bytes in full\]$", error)
    assert cut and int(cut.group(1)) > 2 << 20
    assert LATE not in logs and LATE not in json.dumps(snapshot)
    database = tmp_path / "history.sqlite3"
    with sqlite3.connect(database) as db:
        (stored,) = db.execute("SELECT length(CAST(error AS BLOB)) FROM tasks").fetchone()
    assert stored <= 2048 + 80
    assert LATE.encode() not in history_files(tmp_path)


async def next_data(lines: AsyncIterator[str]) -> Any:
    async for line in lines:
        if line.startswith("data: "):
            return json.loads(line.removeprefix("data: "))
    raise AssertionError("the event stream ended")


async def test_arguments_over_4_kb_are_cut_and_marked_and_small_ones_kept_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_text = "é" * 6000 + LATE  # two bytes a character: the cap is in bytes
    async with private_api(tmp_path, monkeypatch) as (proxy, http), client_of(proxy) as client:
        http.headers.update(bearer(proxy))
        with anyio.fail_after(30):
            await client.call_tool("down__echo", {"text": "small"})
            async with http.stream("GET", "/v1/events") as events:
                lines = events.aiter_lines()
                await next_data(lines)  # the snapshot
                await client.call_tool("down__echo", {"text": long_text})
                created = await next_data(lines)
            tasks = (await http.get("/v1/tasks")).json()["tasks"]
            late = (await http.get("/v1/tasks", params={"search": LATE})).json()
    cut, small = tasks
    assert small["arguments"] == {"text": "small"}
    assert isinstance(cut["arguments"], str) and cut["arguments"].startswith('{"text": "éé')
    size = len(json.dumps({"text": long_text}, ensure_ascii=False).encode())
    assert cut["arguments"].endswith(f"… [arguments cut: {size} bytes in full]")
    assert len(cut["arguments"].split("…")[0].encode()) <= 4096
    assert created["arguments"] == cut["arguments"]  # live events show what the history keeps
    assert late["total"] == 0


async def test_store_arguments_false_stores_none_and_clears_those_stored_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with private_api(tmp_path, monkeypatch) as (proxy, _), client_of(proxy) as client:
        with anyio.fail_after(20):
            await client.call_tool("down__echo", {"text": "stored-before"})
    async with (
        private_api(tmp_path, monkeypatch, history={"storeArguments": False}) as (proxy, http),
        client_of(proxy) as client,
    ):
        http.headers.update(bearer(proxy))
        with anyio.fail_after(20):
            async with http.stream("GET", "/v1/events") as events:
                lines = events.aiter_lines()
                await next_data(lines)  # the snapshot
                await client.call_tool("down__echo", {"text": "never-stored"})
                created = await next_data(lines)
            tasks = (await http.get("/v1/tasks")).json()["tasks"]
    assert created["arguments"] is None
    assert [task["arguments"] for task in tasks] == [None, None]
    with sqlite3.connect(tmp_path / "history.sqlite3") as db:
        assert db.execute("SELECT COUNT(*) FROM tasks WHERE arguments IS NOT NULL").fetchone() == (0,)
    on_disk = history_files(tmp_path)
    assert b"never-stored" not in on_disk and b"stored-before" not in on_disk


async def test_the_state_directory_history_and_discovery_file_are_private_even_if_they_were_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    (state / "instances").mkdir(parents=True, mode=0o755)
    state.chmod(0o755)
    (state / "history.sqlite3").touch(mode=0o644)
    async with private_api(state, monkeypatch) as (proxy, _), client_of(proxy) as client:
        with anyio.fail_after(20):
            await client.call_tool("down__echo", {"text": "x"})
            discovery = state / "instances" / f"{os.getpid()}.json"
            modes = {path.name: mode(path) for path in [state, state / "instances", discovery]}
            files = {path.name: mode(path) for path in state.glob("history.sqlite3*")}
            info = json.loads(discovery.read_text(encoding="utf-8"))
    assert modes == {"state": 0o700, "instances": 0o700, f"{os.getpid()}.json": 0o600}
    assert set(files) >= {"history.sqlite3", "history.sqlite3-wal", "history.sqlite3-shm"}
    assert set(files.values()) == {0o600}
    assert info["token"] == proxy.api_token and info["dashboard"].endswith(f"?token={proxy.api_token}")


def old_row(db: sqlite3.Connection, handle: str, started: float, **columns: Any) -> None:
    values = {"handle": handle, "name": "down__echo", "status": "ready", "started": started, "instance": 1, **columns}
    names = ", ".join(values)
    db.execute(f"INSERT INTO tasks ({names}) VALUES ({', '.join('?' * len(values))})", list(values.values()))
    db.execute("INSERT INTO logs (handle, ts, kind, detail) VALUES (?, ?, 'created', 'x')", (handle, started))


@asynccontextmanager
async def run_history(path: Path, settings: HistorySettings, **options: Any) -> AsyncIterator[History]:
    history = History(path, settings, **options)
    async with anyio.create_task_group() as tg:
        await tg.start(history.run)
        yield history
        tg.cancel_scope.cancel()


async def test_retention_removes_calls_older_than_max_age_and_beyond_max_rows_with_their_logs(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    History(path).close()
    now = time.time()
    day = 86_400
    with sqlite3.connect(path) as db:
        for i in range(3):
            old_row(db, f"old-{i}", now - 40 * day + i)
        for i in range(12):
            old_row(db, f"new-{i}", now - day + i)
    with anyio.fail_after(10):
        async with run_history(path, HistorySettings(maxAgeDays=30, maxRows=5)) as history:
            tasks, total = history.tasks(TaskQuery(), 50, 0)
    assert total == 5 and [task["handle"] for task in tasks] == [f"new-{i}" for i in range(11, 6, -1)]
    with sqlite3.connect(path) as db:
        logged = {handle for (handle,) in db.execute("SELECT DISTINCT handle FROM logs")}
    assert logged == {f"new-{i}" for i in range(7, 12)}


async def test_retention_runs_again_on_its_schedule_while_claimcheck_runs(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    with anyio.fail_after(10):
        async with run_history(path, HistorySettings(maxAgeDays=1), retention_every_secs=0.01) as history:
            with sqlite3.connect(path) as db:
                old_row(db, "stale", time.time() - 5 * 86_400)
            await history.retention_pass()
            await history.retention_pass()  # one pass began after the row was written
            _, total = history.tasks(TaskQuery(), 50, 0)
    assert total == 0


async def test_an_existing_database_with_oversized_rows_is_trimmed_at_first_start(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    History(path).close()
    error = EARLY + "e" * (2 << 20) + LATE
    arguments = json.dumps({"text": "a" * 100_000 + LATE})
    progress = json.dumps([1, 2, "p" * 10_000 + LATE])
    with sqlite3.connect(path) as db:
        old_row(db, "big", time.time(), status="failed", error=error, arguments=arguments, progress=progress)
        db.execute("UPDATE logs SET detail = ?", ("d" * 10_000 + LATE,))
    size_before = len(history_files(tmp_path))
    with anyio.fail_after(20):
        async with run_history(path, HistorySettings()) as history:
            task = history.get("big")
            logs = history.logs("big")
    assert task is not None and task["error"].startswith(EARLY) and "[error cut: " in task["error"]
    assert isinstance(task["arguments"], str) and "[arguments cut: " in task["arguments"]
    assert task["progress"]["message"].endswith(" bytes in full]") and "[detail cut: " in logs[0][2]
    after = history_files(tmp_path)
    assert LATE.encode() not in after
    assert len(after) < size_before // 10  # compacted: what was cut is not left in free pages either
