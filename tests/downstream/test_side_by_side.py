"""Instances side by side, piece by piece: ports taken at the same moment, discovery files of dead instances,
one history written by many, and the start-up work kept off the first listing's path."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from server.handles.calls import Call, Description
from server.handles.outcome import Inline
from server.status import shared_db
from server.status.discovery import discovery_file, instances
from server.status.history import History, TaskQuery
from server.status.ports import bind_api_socket
from server.upstream.surface import build_server
from tests.support.proxies import proxied_names, running_proxy, text_of

pytestmark = pytest.mark.anyio

DEAD_PID = 2**22 + 12345  # above the default pid_max: no process has it


def a_free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def take_ports_at_once(first: int, takers: int) -> list[socket.socket | OSError]:
    """`takers` threads ask for a status API port starting at `first`, all at the same moment."""
    barrier = threading.Barrier(takers)
    taken: list[socket.socket | OSError] = []

    def take() -> None:
        barrier.wait()
        try:
            taken.append(bind_api_socket(first))
        except OSError as exc:
            taken.append(exc)

    threads = [threading.Thread(target=take) for _ in range(takers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return taken


def test_instances_taking_a_port_at_the_same_moment_each_get_a_listening_port_of_their_own() -> None:
    for _ in range(25):  # one of these collisions in about five made the second `listen` fail before
        taken = take_ports_at_once(a_free_port(), 8)
        sockets = [sock for sock in taken if isinstance(sock, socket.socket)]
        try:
            assert len(sockets) == 8, [sock for sock in taken if isinstance(sock, OSError)]
            assert len({sock.getsockname()[1] for sock in sockets}) == 8
        finally:
            for sock in sockets:
                sock.close()


def test_discovery_files_of_dead_instances_are_ignored_and_removed_even_when_their_pid_was_reused(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "instances"
    directory.mkdir(mode=0o700)
    dead = directory / f"{DEAD_PID}.json"
    dead.write_text(json.dumps({"pid": DEAD_PID, "url": "http://127.0.0.1:1/"}), encoding="utf-8")
    reused_pid = os.getppid()  # alive, but not the process that wrote this file
    reused = directory / f"{reused_pid}.json"
    reused.write_text(json.dumps({"pid": reused_pid, "processStart": "1", "url": "x"}), encoding="utf-8")
    with discovery_file(tmp_path, {"pid": os.getpid(), "url": "http://127.0.0.1:2/"}) as mine:
        left = sorted(path.name for path in directory.iterdir())
        found = instances(tmp_path)
    assert [info["pid"] for info in found] == [os.getpid()]
    assert left == [mine.name]  # both stale files went when this instance wrote its own
    assert list(directory.iterdir()) == []


def finished_call(number: int) -> Call:
    call = Call(Description(f"session-a/{number}", "down__echo", "down", "echo", {"n": number}))
    call.settle(Inline(), "ready")
    return call


async def test_rows_recorded_while_another_process_holds_the_lock_past_the_busy_timeout_are_written_not_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "history.sqlite3"
    monkeypatch.setattr(shared_db, "BUSY_TIMEOUT_S", 0.01)
    outsider = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    waited: list[float] = []

    def pause(seconds: float) -> None:  # the first backoff: the outsider lets go then
        if not waited:
            outsider.execute("COMMIT")
        waited.append(seconds)

    monkeypatch.setattr(shared_db, "_pause", pause)
    history = History(path, coalesce_secs=0)
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                await tg.start(history.run)
                outsider.execute("BEGIN IMMEDIATE")  # e.g. a sqlite3 shell in a transaction
                history.record(finished_call(1), "finished")
                await history.flush()
                tasks, total = await anyio.to_thread.run_sync(history.tasks, TaskQuery(), 10, 0)
                tg.cancel_scope.cancel()
    finally:
        outsider.close()
    assert waited, "the write never met the lock"
    assert total == 1 and tasks[0]["handle"] == "session-a/1"


def test_a_new_database_that_another_process_is_switching_to_wal_is_opened_once_it_can_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "history.sqlite3"
    monkeypatch.setattr(shared_db, "BUSY_TIMEOUT_S", 0.01)
    outsider = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    outsider.execute("BEGIN EXCLUSIVE")  # a new file, locked by an instance that is making it
    waited: list[float] = []

    def pause(seconds: float) -> None:
        if not waited:
            outsider.execute("COMMIT")
        waited.append(seconds)

    monkeypatch.setattr(shared_db, "_pause", pause)
    history = History(path)
    try:
        history.open()
        _, total = history.tasks(TaskQuery(), 10, 0)
    finally:
        history.close()
        outsider.close()
    assert waited and total == 0
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_each_instance_is_asked_for_its_own_calls_in_the_shared_history(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    History(path).close()
    with sqlite3.connect(path) as db:
        for handle, instance in (("session-a/1", 101), ("session-b/1", 202), ("session-b/2", 202)):
            db.execute(
                "INSERT INTO tasks (handle, name, status, started, instance) VALUES (?, 'x__y', 'ready', 1.0, ?)",
                (handle, instance),
            )
    history = History(path)
    try:
        mine = history.tasks(TaskQuery(instance="202"), 10, 0)
        nonsense = history.tasks(TaskQuery(instance="9" * 40), 10, 0)
    finally:
        history.close()
    assert sorted(task["handle"] for task in mine[0]) == ["session-b/1", "session-b/2"]
    assert nonsense == ([], 0)


def one_tool() -> MCPServer:
    down = MCPServer("down")

    @down.tool(structured_output=False)
    def hello() -> str:
        return "hello"

    return down


async def test_the_first_listing_and_calls_are_answered_while_the_start_up_work_off_their_path_is_still_going(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAIMCHECK_API_ENABLED", "true")
    monkeypatch.setenv("CLAIMCHECK_API_PORT", "0")
    gate = threading.Event()  # holds the history's maintenance

    def held(*_: Any) -> int:
        gate.wait(30)
        return 0

    monkeypatch.setattr(History, "maintain", held)
    try:
        with anyio.fail_after(20):
            async with (
                running_proxy({"down": one_tool()}, settings={"stateDir": str(tmp_path)}) as proxy,
                Client(build_server(proxy), mode="legacy") as client,
            ):
                names = proxied_names((await client.list_tools()).tools)
                answer = await client.call_tool("down__hello", {})
                gate.set()
                await proxy.warmed()
                assert proxy.api_url is not None
                headers = {"Authorization": f"Bearer {proxy.api_token}"}
                async with httpx2.AsyncClient(base_url=proxy.api_url, headers=headers, timeout=10) as http:
                    tasks = (await http.get("/v1/tasks")).json()
    finally:
        gate.set()
    assert names == ["down__hello"] and text_of(answer) == "hello"
    assert [task["name"] for task in tasks["tasks"]] == ["down__hello"]  # recorded before the history was ready
