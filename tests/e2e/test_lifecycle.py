"""The run root of a real claimcheck process: made at start, holding session files, gone at every kind of exit."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import anyio.abc
import pytest
from mcp import Client, StdioServerParameters

from tests.support.processes import PYTHON, demo_server_entry, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]


async def send(process: anyio.abc.Process, message: dict[str, Any]) -> None:
    assert process.stdin is not None
    await process.stdin.send((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())


async def response(process: anyio.abc.Process, request_id: int) -> dict[str, Any]:
    assert process.stdout is not None
    buffer = b""
    async for chunk in process.stdout:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            message = json.loads(line)
            if message.get("id") == request_id:
                return message  # type: ignore[no-any-return]
    raise AssertionError("claimcheck closed stdout before answering")


@pytest.mark.parametrize("how", ["stdin closed", "SIGTERM", "SIGINT"])
async def test_claimcheck_removes_its_run_root_and_discovery_file_and_keeps_its_history_when_it_exits(
    tmp_path: Path, how: str
) -> None:
    root, state = tmp_path / "outputs", tmp_path / "state"
    settings = {"root": str(root), "stateDir": str(state)}
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": settings})
    command = [PYTHON, "-m", "server", "serve", "--config", str(config)]
    env = {**os.environ, "CLAIMCHECK_API_ENABLED": "true", "CLAIMCHECK_API_PORT": "0"}
    with anyio.fail_after(60):
        async with await anyio.open_process(command, stderr=subprocess.DEVNULL, env=env) as process:
            client = {"name": "lifecycle-test", "version": "1"}
            await send(
                process,
                {
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client},
                },
            )
            await response(process, 1)
            await send(process, {"method": "notifications/initialized"})
            await send(
                process, {"id": 2, "method": "tools/call", "params": {"name": "demo__big", "arguments": {"kb": 512}}}
            )
            answer = await response(process, 2)
            (run_root,) = root.glob("claimcheck-run-*")
            outputs = [path for path in run_root.glob("session-*/*") if path.suffix != ".lines"]  # not the line index
            stored = [path.stat().st_size for path in outputs]
            owner = (run_root / ".claimcheck-run").read_text(encoding="utf-8")
            discovery = list((state / "instances").glob("*.json"))

            if how == "stdin closed":
                assert process.stdin is not None
                await process.stdin.aclose()
            else:
                process.send_signal(signal.SIGTERM if how == "SIGTERM" else signal.SIGINT)
            code = await process.wait()

    assert "Tool output is too large (524288 bytes" in answer["result"]["content"][0]["text"]
    assert f"\npid={process.pid}\n" in owner
    assert stored == [512 * 1024]
    assert code in (0, -signal.SIGTERM, -signal.SIGINT, 128 + signal.SIGINT)
    assert not run_root.exists()
    assert list(root.iterdir()) == []
    assert [path.name for path in discovery] == [f"{process.pid}.json"] and not discovery[0].exists()
    with sqlite3.connect(state / "history.sqlite3") as db:
        rows = db.execute("SELECT name, status, bytes FROM tasks").fetchall()
    assert rows == [("demo__big", "ready", 512 * 1024)]  # the history was flushed before exit


async def test_a_downstream_that_ignores_stdin_and_sigterm_does_not_outlive_claimcheck(tmp_path: Path) -> None:
    """The SDK's stdio client gives claimcheck 2 s after closing stdin, then kills its process group;
    downstreams live in their own groups, so claimcheck must have killed them by then."""
    fifo = tmp_path / "pid"
    os.mkfifo(fifo)
    stubborn = (
        "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"open({str(fifo)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    )
    config = write_config(tmp_path, {"mcpServers": {"stubborn": {"command": PYTHON, "args": ["-c", stubborn]}}})
    command = ["-m", "server", "serve", "--config", str(config)]
    params = StdioServerParameters(command=PYTHON, args=command, env=dict(os.environ))
    with anyio.fail_after(60):
        async with Client(params, mode="legacy"):
            pid = int(await anyio.to_thread.run_sync(fifo.read_text))  # blocks until the downstream wrote it
            ended = os.pidfd_open(pid)  # readable once the process has ended (a zombie counts)
        try:
            with anyio.move_on_after(10) as waited:
                await anyio.wait_readable(ended)
        finally:
            os.close(ended)
    if waited.cancelled_caught:
        os.kill(pid, signal.SIGKILL)  # leave no process behind on this machine
    assert not waited.cancelled_caught, "the downstream outlived claimcheck"


async def test_the_start_up_line_hides_the_token_and_claimcheck_ps_gives_the_dashboard_address_with_auth_token_env_s(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": {"stateDir": str(state)}})
    secret = "t0ken/with+odd&chars"
    env = {**os.environ, "CLAIMCHECK_API_ENABLED": "true", "CLAIMCHECK_API_PORT": "0", "CC_TOKEN": secret}
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--auth-token-env", "CC_TOKEN"]
    with anyio.fail_after(60):
        async with await anyio.open_process(command, env=env) as process:
            assert process.stderr is not None
            seen = b""
            async for chunk in process.stderr:
                seen += chunk
                if b"dashboard: " in seen and b"\n" in seen.split(b"dashboard: ", 1)[1]:
                    break
            line = seen.decode().split("dashboard: ", 1)[1].splitlines()[0]
            ps = await anyio.run_process([PYTHON, "-m", "server", "ps", "--config", str(config)], env=env)
            (discovery,) = (state / "instances").glob("*.json")
            info = json.loads(discovery.read_text(encoding="utf-8"))
            assert process.stdin is not None
            await process.stdin.aclose()
            async for chunk in process.stderr:  # all it says, to its exit
                seen += chunk
            await process.wait()
    assert line == (
        f'{info["url"]} (it needs the token: `claimcheck ps` prints the address with it, as does "dashboard" in '
        f"{discovery})"
    )
    for shown in (secret, quote(secret, safe=""), "?token="):
        assert shown not in seen.decode()  # whatever keeps claimcheck's stderr keeps no secret
    assert info["dashboard"] == f"{info['url']}?token=t0ken%2Fwith%2Bodd%26chars"
    assert info["token"] == secret  # --auth-token-env's token opens the status API too
    assert ps.stdout.decode().startswith(f"pid {process.pid}  {info['dashboard']}  since ")
    assert ps.stdout.decode().rstrip().endswith("0 running")  # ps read the token: the API answered it
