"""The status API on a real uvicorn on 127.0.0.1: every endpoint, SSE, Host check, history across restarts, ps."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.handles import Downstream, client_of, start_in_background
from tests.support.proxies import running_proxy
from tests.support.status_api import api_proxy

pytestmark = pytest.mark.anyio


async def test_a_background_call_is_listed_filtered_and_detailed_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = Downstream()
    async with api_proxy(tmp_path, down, monkeypatch) as (proxy, http), client_of(proxy) as client:
        with anyio.fail_after(20):
            await client.call_tool("down__echo", {"text": "quick"})
            handle = await start_in_background(client, text="slow one")
            running = (await http.get("/v1/tasks", params={"status": "running"})).json()
            down.release.set()
            await client.call_tool("wait_for_tool_output", {})
            everything = (await http.get("/v1/tasks")).json()
            searched = (await http.get("/v1/tasks", params={"search": "slow one"})).json()
            detail = (await http.get(f"/v1/tasks/{handle}")).json()
            logs = (await http.get(f"/v1/tasks/{handle}/logs")).json()
            group = await http.get(f"/v1/task-groups/{detail['batchId']}")
    assert [t["handle"] for t in running["tasks"]] == [handle]
    assert running["total"] == 1
    assert everything["total"] == 2
    assert [t["name"] for t in everything["tasks"]] == ["down__gated", "down__echo"]  # newest first
    assert [t["handle"] for t in searched["tasks"]] == [handle]
    assert detail["status"] == "ready" and detail["handedOut"] and detail["arguments"] == {"text": "slow one"}
    assert detail["durationMs"] > 0 and detail["bytes"] == len("slow one")
    kinds = [entry["kind"] for entry in logs["logs"]]
    assert kinds[0] == "created" and "handed-out" in kinds and kinds[-1] == "finished"
    assert group.status_code == 200 and group.json()["completed"] == 1


async def test_unknown_tasks_groups_and_bad_paging_are_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    down = Downstream()
    async with api_proxy(tmp_path, down, monkeypatch) as (_, http):
        with anyio.fail_after(10):
            missing = await http.get("/v1/tasks/session-x/y")
            missing_logs = await http.get("/v1/tasks/session-x/y/logs")
            group = await http.get("/v1/task-groups/nope")
            too_many = await http.get("/v1/tasks", params={"limit": 201})
            not_a_number = await http.get("/v1/tasks", params={"offset": "x"})
            post = await http.post("/v1/tasks")
    assert (missing.status_code, missing.json()) == (404, {"error": "no such task"})
    assert missing_logs.status_code == 404 and group.status_code == 404
    assert too_many.status_code == 400 and "limit must be an integer in 1..200" in too_many.json()["error"]
    assert not_a_number.status_code == 400
    assert post.status_code == 405


async def test_paging_returns_slices_of_the_newest_first_list_and_the_total(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = Downstream()
    async with api_proxy(tmp_path, down, monkeypatch) as (proxy, http), client_of(proxy) as client:
        with anyio.fail_after(20):
            for i in range(5):
                await client.call_tool("down__echo", {"text": f"call {i}"})
            page = (await http.get("/v1/tasks", params={"limit": 2, "offset": 1})).json()
    assert page["total"] == 5 and page["limit"] == 2 and page["offset"] == 1
    assert [t["arguments"]["text"] for t in page["tasks"]] == ["call 3", "call 2"]


async def test_health_and_stats_count_calls_by_status_and_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = Downstream()
    async with api_proxy(tmp_path, down, monkeypatch) as (proxy, http), client_of(proxy) as client:
        with anyio.fail_after(20):
            await client.call_tool("down__echo", {"text": "a"})
            handle = await start_in_background(client)
            await client.call_tool("cancel_tool_output", {"handle": handle})
            await down.cancelled.wait()
            await client.call_tool("wait_for_tool_output", {"handles": [handle]})
            health = (await http.get("/v1/health")).json()
            stats = (await http.get("/v1/stats")).json()
    assert health["status"] == "ok" and health["taskCount"] == 2 and health["version"] == "0.1.0"
    assert stats["byStatus"] == {"ready": 1, "cancelled": 1}
    assert stats["byServer"] == {"down": 2}
    assert stats["duration"]["min"] <= stats["duration"]["avg"] <= stats["duration"]["max"]
    assert stats["extraction"] == {"calls": 0, "inputTokens": 0, "outputTokens": 0}


async def test_events_stream_a_snapshot_then_deltas_then_heartbeats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = Downstream()
    async with api_proxy(tmp_path, down, monkeypatch, heartbeatSecs=0.2) as (proxy, http), client_of(proxy) as client:
        with anyio.fail_after(20):
            await client.call_tool("down__echo", {"text": "before"})
            events: list[tuple[str, Any]] = []
            async with http.stream("GET", "/v1/events") as stream:
                lines = stream.aiter_lines()
                events.append(await next_event(lines))
                handle = await start_in_background(client)
                down.release.set()
                while not any(name == "task.completed" for name, _ in events):
                    events.append(await next_event(lines))
                while events[-1][0] != "heartbeat":
                    events.append(await next_event(lines))
            again = []
            async with http.stream("GET", "/v1/events") as stream:
                again.append(await next_event(stream.aiter_lines()))
    name, snapshot = events[0]
    assert name == "snapshot"
    assert [t["arguments"] for t in snapshot["tasks"]] == [{"text": "before"}]
    assert snapshot["stats"]["totalTasks"] == 1
    names = [n for n, data in events[1:] if n != "heartbeat" and data["handle"] == handle]
    assert names[0] == "task.created" and names[-1] == "task.completed"
    assert "ts" in events[-1][1]
    assert again[0][0] == "snapshot" and len(again[0][1]["tasks"]) == 2  # a reconnect starts from a new snapshot


async def next_event(lines: Any) -> tuple[str, Any]:
    name = ""
    async for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            return name, json.loads(line.removeprefix("data: "))
    raise AssertionError("the event stream ended")


async def test_a_foreign_host_is_refused_and_no_cors_headers_are_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = Downstream()
    async with api_proxy(tmp_path, down, monkeypatch) as (proxy, http):
        with anyio.fail_after(10):
            plain = await http.get("/v1/health")
            rebound = await http.get("/v1/health", headers={"Host": "attacker.example:5165"})
            bare = await http.get("/v1/health", headers={"Host": "localhost"})  # no port: no rebinding page sends it
            ipv6 = await http.get("/v1/health", headers={"Host": "[::1]"})
    assert proxy.api_url is not None
    port = int(proxy.api_url.rstrip("/").rsplit(":", 1)[1])
    assert bare.status_code == 200 and ipv6.status_code == 200
    assert plain.status_code == 200
    assert not [name for name in plain.headers if name.startswith("access-control-")]
    assert rebound.status_code == 421 and rebound.json() == {
        "error": "misdirected request: this status API answers only requests for 127.0.0.1, localhost or [::1] (this "
        "one came for attacker.example:5165), so that no web page reaches it through DNS rebinding",
        "hint": f"open http://127.0.0.1:{port}/; a proxy in front must send Host: 127.0.0.1:{port}",
    }


async def test_history_survives_a_restart_and_the_discovery_file_lives_as_long_as_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = Downstream()
    async with api_proxy(tmp_path, down, monkeypatch) as (proxy, http), client_of(proxy) as client:
        with anyio.fail_after(20):
            handle = await start_in_background(client)
            await client.call_tool("down__echo", {"text": "kept"})
            discovery = json.loads((tmp_path / "instances" / f"{os.getpid()}.json").read_text(encoding="utf-8"))
            down.release.set()
            await client.call_tool("wait_for_tool_output", {})
            url = proxy.api_url
    assert discovery["url"] == url and discovery["pid"] == os.getpid() and discovery["token"] == proxy.api_token
    assert discovery["dashboard"] == f"{url}?token={proxy.api_token}"
    assert not (tmp_path / "instances" / f"{os.getpid()}.json").exists()

    async with api_proxy(tmp_path, Downstream(), monkeypatch) as (_, http):
        with anyio.fail_after(10):
            after = (await http.get("/v1/tasks")).json()
            detail = (await http.get(f"/v1/tasks/{handle}")).json()
    assert after["total"] == 2
    assert detail["status"] == "ready" and detail["live"] is False and detail["handedOut"]


async def test_the_dashboard_page_is_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    down = Downstream()
    async with api_proxy(tmp_path, down, monkeypatch) as (_, http):
        with anyio.fail_after(10):
            page = await http.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "claimcheck" in page.text


async def test_the_status_api_stays_off_when_disabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAIMCHECK_API_ENABLED", "false")
    async with running_proxy({"down": Downstream().server}, settings={"stateDir": str(tmp_path)}) as proxy:
        assert proxy.api_url is None
    assert not (tmp_path / "instances").exists()


async def test_ps_lists_the_running_instance_and_its_live_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from server.status.ps import print_ps

    down = Downstream()
    stale = tmp_path / "instances" / "999999999.json"
    async with api_proxy(tmp_path, down, monkeypatch) as (proxy, _), client_of(proxy) as client:
        with anyio.fail_after(20):
            stale.write_text(json.dumps({"pid": 999999999, "url": "http://127.0.0.1:1/"}), encoding="utf-8")
            handle = await start_in_background(client)
            await print_ps(tmp_path)
            down.release.set()
    out = capsys.readouterr().out.splitlines()
    dashboard = f"{proxy.api_url}?token={proxy.api_token}"
    assert out[0].startswith(f"pid {os.getpid()}  {dashboard}  since ") and out[0].endswith("1 running")
    assert out[1].startswith(f"  down__gated  {handle}  running ")
    assert len(out) == 2
    assert not stale.exists()  # a dead instance's file is cleaned up


def test_calls_a_crashed_instance_left_running_are_marked_cancelled_at_the_next_start(tmp_path: Path) -> None:
    from server.status.history import History, TaskQuery

    path = tmp_path / "history.sqlite3"
    History(path).close()
    dead = 2**22 + 12345  # above the default pid_max: no process has it
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO tasks (handle, name, status, started, instance) VALUES (?, ?, 'running', 1.0, ?)",
            ("session-a/b", "x__y", dead),
        )
        db.execute(
            "INSERT INTO tasks (handle, name, status, started, instance) VALUES (?, ?, 'running', 2.0, ?)",
            ("session-c/d", "x__z", os.getpid()),
        )
    history = History(path)
    try:
        tasks = {task["handle"]: task for task in history.tasks(TaskQuery(), 10, 0)[0]}
    finally:
        history.close()
    assert tasks["session-a/b"]["status"] == "cancelled"
    assert tasks["session-a/b"]["error"] == "claimcheck stopped before the call finished"
    assert tasks["session-c/d"]["status"] == "running"  # a live instance's calls are left alone


def test_a_history_made_before_owners_were_recorded_gains_the_column_and_its_old_rows_have_no_owner(
    tmp_path: Path,
) -> None:
    from server.status.history import History, TaskQuery

    path = tmp_path / "history.sqlite3"
    with sqlite3.connect(path) as db:  # the first schema: neither `produced` nor `owner`
        db.execute(
            "CREATE TABLE tasks (handle TEXT PRIMARY KEY, session TEXT, server TEXT, tool TEXT, name TEXT, "
            "arguments TEXT, status TEXT, started REAL, finished REAL, bytes INTEGER, lines INTEGER, tokens INTEGER, "
            "progress TEXT, error TEXT, batch TEXT, handed_out INTEGER, retrievals INTEGER, instance INTEGER)"
        )
        db.execute("INSERT INTO tasks (handle, name, status, started) VALUES ('session-a/b', 'x__y', 'ready', 1.0)")
    history = History(path)
    try:
        [task] = history.tasks(TaskQuery(), 10, 0)[0]
    finally:
        history.close()
    with sqlite3.connect(path) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(tasks)")}
    assert {"produced", "owner"} <= columns
    assert task["owner"] is None and task["handle"] == "session-a/b" and task["cut"] is False


async def test_a_misspelt_or_unknown_query_parameter_is_a_400_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with api_proxy(tmp_path, Downstream(), monkeypatch) as (_, http):
        with anyio.fail_after(10):
            misspelt = await http.get("/v1/tasks", params={"statuss": "running"})
            unknown = await http.get("/v1/tasks", params={"colour": "red"})
            known = await http.get("/v1/tasks", params={"status": "running", "limit": 5})
            grep = await http.get("/v1/tasks/session-x/y/output/grep", params={"regex": "a", "max": 3})
            no_status = await http.get("/v1/tasks", params={"status": "completed"})
    assert no_status.status_code == 400
    assert no_status.json()["error"] == (
        "status must be running, ready, failed, cancelled, not 'completed'; did you mean 'ready'?"
    )
    assert misspelt.status_code == 400
    assert misspelt.json()["error"].startswith("unknown query parameter 'statuss'")
    assert misspelt.json()["error"].endswith("did you mean 'status'?")
    assert unknown.status_code == 400 and "did you mean" not in unknown.json()["error"]
    assert known.status_code == 200
    assert grep.status_code == 400 and "'max'" in grep.json()["error"]
