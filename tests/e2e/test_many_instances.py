"""Many claimcheck processes started at once with one config (sub-agents do this) share the machine cleanly."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from tests.support.processes import PYTHON, program_entry, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

INSTANCES = 8
API_LINE = b"claimcheck: status API at "


@dataclass
class Instance:
    """One `claimcheck serve` over stdio, driven by hand as a client would."""

    process: anyio.abc.Process
    stdout: bytes = b""
    stderr: bytearray = field(default_factory=bytearray)
    api_announced: anyio.Event = field(default_factory=anyio.Event)

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())

    async def request(self, request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        await self.send({"id": request_id, "method": method, "params": params})
        assert self.process.stdout is not None
        while True:
            while b"\n" in self.stdout:
                line, self.stdout = self.stdout.split(b"\n", 1)
                message = json.loads(line)
                if message.get("id") == request_id:
                    assert "result" in message, message
                    return message["result"]  # type: ignore[no-any-return]
            self.stdout += await self.process.stdout.receive()

    async def collect_stderr(self) -> None:
        assert self.process.stderr is not None
        async for chunk in self.process.stderr:
            self.stderr += chunk
            if API_LINE in self.stderr:
                self.api_announced.set()


def a_free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def serve_and_call(instance: Instance, number: int) -> list[str]:
    """initialize, tools/list, and one call; the names listed."""
    client = {"name": f"sub-agent-{number}", "version": "1"}
    await instance.request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client})
    await instance.send({"method": "notifications/initialized"})
    listed = await instance.request(2, "tools/list", {})
    echoed = await instance.request(3, "tools/call", {"name": "raw__echo", "arguments": {"text": f"agent {number}"}})
    assert echoed["content"][0]["text"] == f"agent {number}"
    await instance.api_announced.wait()
    return [tool["name"] for tool in listed["tools"]]


async def test_eight_instances_started_at_once_each_serve_record_once_show_in_ps_and_leave_nothing_behind(
    tmp_path: Path,
) -> None:
    root, state = tmp_path / "root", tmp_path / "state"
    root.mkdir()
    settings = {"root": str(root), "stateDir": str(state)}  # a history database that does not exist yet
    raw = program_entry("raw_downstream")  # stdlib only: starts in milliseconds
    config = write_config(tmp_path, {"mcpServers": {"raw": raw}, "settings": settings})
    # One first port for all: they race for it and the nine after it, at the same moment.
    env = {**os.environ, "CLAIMCHECK_API_ENABLED": "true", "CLAIMCHECK_API_PORT": str(a_free_port())}
    command = [PYTHON, "-m", "server", "serve", "--config", str(config)]
    instances: list[Instance] = []
    listed: dict[int, list[str]] = {}

    async def start(number: int) -> None:
        listed[number] = await serve_and_call(instances[number], number)

    with anyio.fail_after(180):
        async with anyio.create_task_group() as readers:
            for _ in range(INSTANCES):
                instances.append(Instance(await anyio.open_process(command, env=env)))
            for instance in instances:
                readers.start_soon(instance.collect_stderr)
            async with anyio.create_task_group() as clients:
                for number in range(INSTANCES):
                    clients.start_soon(start, number)
            pids = {instance.process.pid: f"agent {number}" for number, instance in enumerate(instances)}
            run_roots = sorted(root.iterdir())
            discovery = [json.loads(path.read_text(encoding="utf-8")) for path in (state / "instances").glob("*.json")]
            ps = await anyio.run_process([*command[:3], "ps", "--config", str(config)], env=env)
            for instance in instances:
                assert instance.process.stdin is not None
                await instance.process.stdin.aclose()  # the client goes: claimcheck ends
            codes = [await instance.process.wait() for instance in instances]

    assert all("raw__echo" in names and "tool_output" in names for names in listed.values())
    assert len(listed) == INSTANCES
    assert len(run_roots) == INSTANCES  # each its own run root
    assert {info["pid"] for info in discovery} == set(pids)
    assert len({info["port"] for info in discovery}) == INSTANCES  # each its own port, none lost to the race
    shown = [line.split()[1] for line in ps.stdout.decode().splitlines() if line.startswith("pid ")]
    assert sorted(map(int, shown)) == sorted(pids)  # each instance once
    assert "not answering" not in ps.stdout.decode()
    assert codes == [0] * INSTANCES
    logs = [bytes(instance.stderr).decode(errors="replace") for instance in instances]
    assert not [log for log in logs if "Traceback" in log or " ERROR " in log or "locked" in log], logs
    assert list(root.iterdir()) == []  # every run root removed at exit
    assert list((state / "instances").iterdir()) == []  # and every discovery file
    with sqlite3.connect(state / "history.sqlite3") as db:
        rows = db.execute("SELECT handle, name, status, instance, arguments FROM tasks").fetchall()
    assert len(rows) == INSTANCES and len({row[0] for row in rows}) == INSTANCES
    assert {row[3]: json.loads(row[4])["text"] for row in rows} == pids  # each call exactly once, by its instance
    assert {(row[1], row[2]) for row in rows} == {("raw__echo", "ready")}
