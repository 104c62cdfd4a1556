"""Several claimcheck replicas over streamable HTTP sharing one real redis-server (Debian's, from
.ci/install-replicas), and haproxy in front of them."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.processes import API_LINE, PYTHON, announced, demo_server_entry, discovered, write_config
from tests.support.proxies import text_of

_API = API_LINE


HANDLE = re.compile(r'handle: "(session-[0-9a-f]{32}/[0-9a-f]{32})"')


STATE = {"leaseSecs": 3, "pollSecs": 0.3}  # a lease well above the event-loop stalls of a loaded machine


# A big output answers with its size however loaded the machine is; slow calls ask for the background.
SETTINGS = {"asyncTimeoutSecs": 60, "asyncTokenThreshold": 2000, "state": STATE}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _drain(stream: anyio.abc.ByteReceiveStream) -> None:
    try:
        async for _ in stream:
            pass
    except anyio.BrokenResourceError:
        pass


async def stop_processes(processes: list[anyio.abc.Process]) -> None:
    with anyio.CancelScope(shield=True):
        for process in processes:
            if process.returncode is None:
                process.terminate()
        for process in processes:
            with anyio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


async def _accepting(port: int, greeting: bytes = b"", answer: bytes = b"") -> None:
    """Return once 127.0.0.1:`port` accepts a connection (and answers `greeting` with `answer`)."""
    while True:
        try:
            stream = await anyio.connect_tcp("127.0.0.1", port)
        except OSError:
            await anyio.sleep(0.05)  # polling for readiness: nothing else announces it
            continue
        async with stream:
            if not greeting:
                return
            try:
                await stream.send(greeting)
                if (await stream.receive()).startswith(answer):
                    return
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                pass
        await anyio.sleep(0.05)


class RedisServer:
    """A redis-server on 127.0.0.1 that keeps nothing on disk, so a restart loses every key."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._directory = directory
        self._process: anyio.abc.Process | None = None

    async def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
        command += ["no", "--dir", str(self._directory), "--logfile", str(self._directory / "redis.log")]
        self._process = await anyio.open_process(command, stdin=subprocess.DEVNULL, stdout=None, stderr=None)
        with anyio.fail_after(60):
            await _accepting(self.port, b"PING\r\n", b"+PONG")

    async def kill(self) -> None:
        assert self._process is not None
        self._process.kill()
        await self._process.wait()

    async def stop(self) -> None:
        if self._process is not None:
            await stop_processes([self._process])


@dataclass
class Replica:
    process: anyio.abc.Process
    url: str
    api: str = ""  # its status API, when it serves one
    token: str = ""  # and the token that opens it


@asynccontextmanager
async def replicas(
    tmp_path: Path,
    redis_url: str,
    count: int = 3,
    *,
    token: str | None = None,
    api: bool = False,
    servers: dict[str, Any] | None = None,
    extra: tuple[str, ...] = (),
    settings: dict[str, Any] | None = None,
) -> AsyncIterator[list[Replica]]:
    """`count` claimcheck processes over streamable HTTP with one shared root and one Redis, started together;
    with `api`, each serves its status API on a free port from its own state directory (its own history).
    `servers`: the downstreams (the demo server by default); `extra`: more `serve` arguments; `settings`: more
    settings."""
    shared = tmp_path / "shared"
    shared.mkdir(exist_ok=True)
    servers = servers if servers is not None else {"demo": demo_server_entry()}
    settings = {**SETTINGS, **(settings or {}), "root": str(shared)}
    config = write_config(tmp_path, {"mcpServers": servers, "settings": settings})
    command = [PYTHON, "-m", "server", "serve", *([] if api else ["--no-api"]), "--config", str(config)]
    command += ["--transport", "http", "--port", "0", "--state-url", redis_url, *extra]
    env = dict(os.environ)
    if token is not None:  # every request must carry it; its principal owns the handles
        command += ["--auth-token-env", "REPLICA_TOKEN"]
        env["REPLICA_TOKEN"] = token
    states = [Path(tempfile.mkdtemp(dir=tmp_path, prefix="state-")) for _ in range(count)]
    if api:
        env.update(CLAIMCHECK_API_ENABLED="true", CLAIMCHECK_API_PORT="0")
    processes = [
        await anyio.open_process(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=-1,
            env={**env, "XDG_STATE_HOME": str(state)},
        )
        for state in states
    ]
    try:
        urls = [""] * count
        apis = [("", "")] * count

        async def announce(index: int) -> None:
            stderr = processes[index].stderr
            assert stderr is not None
            found = await announced(stderr, r"(http://127\.0\.0\.1:\d+/mcp)", *([_API] if api else []), said=[])
            urls[index] = found[0].group(1).decode()
            if api:  # its status API and the token that opens it
                apis[index] = (found[1].group(1).decode(), discovered(found[1].group(2))["token"])

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for index in range(count):
                    tg.start_soon(announce, index)
        async with anyio.create_task_group() as tg:
            for process in processes:
                assert process.stderr is not None
                tg.start_soon(_drain, process.stderr)
            yield [Replica(p, url, *status) for p, url, status in zip(processes, urls, apis, strict=True)]
            tg.cancel_scope.cancel()
    finally:
        await stop_processes(processes)


@asynccontextmanager
async def client(url: str, mode: str = "2026-07-28") -> AsyncIterator[Client]:
    async with Client(streamable_http_client(url), mode=mode) as connected:
        await connected.list_tools()  # the demo server is up behind this replica
        yield connected


async def call_text(connected: Client, name: str, arguments: dict[str, Any]) -> str:
    return text_of(await connected.call_tool(name, arguments))


async def background(connected: Client, tool: str, arguments: dict[str, Any]) -> str:
    text = await call_text(connected, f"demo__{tool}", {**arguments, "background": True})
    found = HANDLE.search(text)
    assert found is not None, text
    return found.group(1)


@asynccontextmanager
async def haproxy(tmp_path: Path, backends: list[Replica]) -> AsyncIterator[str]:
    port = free_port()
    servers = "\n".join(
        f"    server r{i} {r.url.removeprefix('http://').removesuffix('/mcp')}" for i, r in enumerate(backends)
    )
    config = tmp_path / "haproxy.cfg"
    config.write_text(HAPROXY.format(port=port, servers=servers), encoding="utf-8")
    process = await anyio.open_process(["haproxy", "-db", "-f", str(config)], stdin=subprocess.DEVNULL)
    try:
        with anyio.fail_after(60):
            await _accepting(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        await stop_processes([process])


HAPROXY = """
global
    maxconn 512
defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s
frontend mcp
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance roundrobin
    stick-table type string len 64 size 100k expire 30m
    stick on req.hdr(mcp-session-id)
    stick store-response res.hdr(mcp-session-id)
{servers}
"""
