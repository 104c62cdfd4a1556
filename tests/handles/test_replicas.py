"""Several claimcheck replicas sharing handles through a real redis-server, alone and behind a real haproxy:
a handle made on one replica is waited on, read and cancelled from the others; a replica killed
with SIGKILL fails its handles within about a lease and wakes their waiters; a Redis restarted mid-wait
leaves no waiter hanging and loses no completion; without a state URL, redis is never imported.

redis-server and haproxy are Debian's, installed by .ci/install-replicas when missing. Leases are short here
(3 s) so the file runs in seconds.
"""

from __future__ import annotations

import os
import re
import signal
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
import httpx2
import mcp_types as types
import os_packages
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import API_LINE, PYTHON, demo_server_entry, discovered, text_of, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

ROOT = Path(__file__).resolve().parents[2]
_API = API_LINE
HANDLE = re.compile(r'handle: "(session-[0-9a-f]{32}/[0-9a-f]{32})"')
STATE = {"leaseSecs": 3, "pollSecs": 0.3}  # a lease well above the event-loop stalls of a loaded machine
# A big output answers with its size however loaded the machine is; slow calls ask for the background.
SETTINGS = {"asyncTimeoutSecs": 60, "asyncTokenThreshold": 2000, "state": STATE}


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    """redis-server and haproxy (Debian's, from .ci/install-replicas); a skip locally where they are missing."""
    os_packages.require("install-replicas", os_packages.commands("redis-server", "haproxy"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _announced(stream: anyio.abc.ByteReceiveStream, *patterns: str) -> list[re.Match[bytes]]:
    """Read `stream` until each of `patterns` has matched it; their matches."""
    seen = b""
    async for chunk in stream:
        seen += chunk
        matches = [re.search(pattern.encode(), seen) for pattern in patterns]
        if all(matches):
            return [m for m in matches if m is not None]
    raise AssertionError(f"exited before it was ready: {seen.decode(errors='replace')}")


async def _drain(stream: anyio.abc.ByteReceiveStream) -> None:
    try:
        async for _ in stream:
            pass
    except anyio.BrokenResourceError:
        pass


async def _stop(processes: list[anyio.abc.Process]) -> None:
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
            await _stop([self._process])


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
            found = await _announced(stderr, r"(http://127\.0\.0\.1:\d+/mcp)", *([_API] if api else []))
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
        await _stop(processes)


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


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Cluster:
    redis: RedisServer
    replicas: list[Replica]
    balancer: str  # haproxy's /mcp in front of them
    directory: Path  # the config and the shared root


@pytest.fixture(scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Cluster]:
    """One Redis, three replicas and haproxy, shared by the tests of this file (none stops them for good)."""
    directory = tmp_path_factory.mktemp("cluster")
    redis = RedisServer(directory)
    await redis.start()
    try:
        async with replicas(directory, redis.url, api=True) as backends, haproxy(directory, backends) as url:
            yield Cluster(redis, backends, url, directory)
    finally:
        await redis.stop()


async def test_a_handle_made_on_one_replica_is_waited_on_read_listed_and_cancelled_from_the_others(
    cluster: Cluster,
) -> None:
    a, b, c = cluster.replicas
    async with client(a.url) as on_a, client(b.url) as on_b, client(c.url) as on_c:
        with anyio.fail_after(120):
            quick = await background(on_a, "slow", {"seconds": 1})
            waited = await call_text(on_b, "wait_for_tool_output", {"handles": [quick], "timeout_secs": 30})
            assert "1 finished" in waited and "ready" in waited
            assert "slept 1 s" in waited  # a small output comes back inline, read from the shared file

            big = await call_text(on_a, "demo__big", {"kb": 200})
            found = re.search(r'tool_output\(handle = "([^"]+)"', big)
            assert found is not None and "too large" in big, big
            piece = await call_text(
                on_c,
                "tool_output",
                {"handle": found.group(1), "mode": "slice", "slice": {"start": 0, "length": 40}},
            )
            assert "00000000 INFO demo log line" in piece
            read = await call_text(on_b, "Read", {"file": found.group(1), "lines": 2})
            assert "00000001 INFO demo log line" in read, read

            long = await background(on_a, "slow", {"seconds": 120})
            cancelled = await call_text(on_b, "cancel_tool_output", {"handle": long})
            assert cancelled.startswith("Cancelled demo__slow")
            after = await call_text(on_c, "wait_for_tool_output", {"handles": [long], "timeout_secs": 30})
            assert "cancelled" in after and "1 finished" in after

            listed = await call_text(on_c, "list_tool_outputs", {})
            assert all(h in listed for h in (quick, found.group(1), long)), listed
            raw = await call_text(on_b, "tool_output", {"handle": quick, "mode": "raw"})
            assert "slept 1 s" in raw


async def test_the_status_api_of_a_replica_shows_the_calls_running_on_the_others(cluster: Cluster) -> None:
    a, b, _ = cluster.replicas
    async with client(a.url) as on_a, httpx2.AsyncClient(timeout=60) as http:
        with anyio.fail_after(120):
            handle = await background(on_a, "slow", {"seconds": 120})
            try:
                health = (await http.get(f"{a.api}v1/health", headers=_bearer(a))).json()
                listed = (await http.get(f"{b.api}v1/tasks", headers=_bearer(b))).json()
                own_only = (await http.get(f"{b.api}v1/tasks?instance={b.process.pid}", headers=_bearer(b))).json()
                history = await http.get(f"{b.api}v1/tasks/{handle}", headers=_bearer(b))
                refused = await http.get(f"{b.api}v1/tasks")
            finally:
                await call_text(on_a, "cancel_tool_output", {"handle": handle})
    rows = [task for task in listed["tasks"] if task["handle"] == handle]
    assert len(rows) == 1, listed
    assert rows[0]["replica"] == health["replica"] != listed["replica"]  # marked as A's, answered by B
    assert rows[0]["status"] == "running" and rows[0]["name"] == "demo__slow" and rows[0]["tool"] == "slow"
    assert rows[0]["arguments"] is None and rows[0]["live"] is True  # arguments stay on the replica that runs it
    assert all(task["handle"] != handle for task in own_only["tasks"])  # `instance` is a local process
    assert history.status_code == 404  # the history stays local: B never recorded A's call
    assert refused.status_code == 401


def _bearer(replica: Replica) -> dict[str, str]:
    return {"Authorization": f"Bearer {replica.token}"}


async def test_another_principals_handle_is_unknown_on_every_replica(cluster: Cluster) -> None:
    a, b, _ = cluster.replicas
    async with client(a.url) as on_a:
        with anyio.fail_after(60):
            handle = await background(on_a, "slow", {"seconds": 0.1})
    async with (
        httpx2.AsyncClient(headers={"Claimcheck-Session": "someone-else"}) as http,
        Client(streamable_http_client(b.url, http_client=http), mode="2026-07-28") as on_b,
    ):
        with anyio.fail_after(60):
            result = await on_b.call_tool("tool_output", {"handle": handle, "mode": "raw"})
    assert result.is_error and "Unknown handle" in text_of(result)


async def test_a_killed_owner_fails_its_handles_and_wakes_their_waiters(cluster: Cluster) -> None:
    _, b, _ = cluster.replicas
    async with replicas(cluster.directory, cluster.redis.url, 1) as (victim,), client(b.url) as on_b:
        async with client(victim.url) as on_victim:
            handle = await background(on_victim, "slow", {"seconds": 120})
        waited: list[str] = []

        async def wait() -> None:
            waited.append(await call_text(on_b, "wait_for_tool_output", {"handles": [handle], "timeout_secs": 50}))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                victim.process.send_signal(signal.SIGKILL)
        assert "failed" in waited[0] and "stopped" in waited[0], waited[0]


async def test_a_redis_restart_mid_wait_leaves_no_waiter_hanging_and_loses_no_completion(cluster: Cluster) -> None:
    a, b, _ = cluster.replicas
    async with client(a.url) as on_a, client(b.url) as on_b:
        finishing = await background(on_a, "slow", {"seconds": 2})
        endless = await background(on_a, "slow", {"seconds": 120})
        results: dict[str, str] = {}
        waiting = {finishing: anyio.Event(), endless: anyio.Event()}

        async def wait(handle: str, secs: float) -> None:
            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                waiting[handle].set()  # the wait is in its loop, past reading the handle

            args = {"handles": [handle], "timeout_secs": secs}
            result = await on_b.call_tool("wait_for_tool_output", args, progress_callback=on_progress)
            results[handle] = text_of(result)

        with anyio.fail_after(90):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait, finishing, 40)
                tg.start_soon(wait, endless, 8)
                for event in waiting.values():
                    await event.wait()
                await cluster.redis.kill()
                await anyio.sleep(3)  # Redis stays down across the completion of `finishing` (the fault, not a sync)
                await cluster.redis.start()
        assert "1 finished" in results[finishing] and "slept 2 s" in results[finishing], results[finishing]
        assert "The output did not finish within 8 s" in results[endless], results[endless]
        await call_text(on_b, "cancel_tool_output", {"handle": endless})


async def test_a_task_made_on_one_replica_is_read_and_cancelled_from_another(cluster: Cluster) -> None:
    token = "replica-test-token"
    bearer = {"Authorization": f"Bearer {token}"}
    async with (
        replicas(cluster.directory, cluster.redis.url, 2, token=token) as (a, b),
        httpx2.AsyncClient(headers=bearer) as http_a,
        httpx2.AsyncClient(headers=bearer) as http_b,
        Client(streamable_http_client(a.url, http_client=http_a), mode="legacy") as on_a,
        Client(streamable_http_client(b.url, http_client=http_b), mode="legacy") as on_b,
    ):

        async def create(seconds: float) -> str:
            params = {"name": "demo__slow", "arguments": {"seconds": seconds}, "task": {"ttl": 60_000}}
            raw = await on_a.session._dispatcher.send_raw_request("tools/call", params)
            return types.CreateTaskResult.model_validate(raw, by_name=False).task.task_id

        with anyio.fail_after(120):
            await on_a.list_tools()  # the demo server is up behind A
            quick = await create(1)
            got = await on_b.session.send_request(
                types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=quick)), types.GetTaskResult
            )
            assert got.task_id == quick
            payload = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=quick))
            result = await on_b.session.send_request(payload, types.CallToolResult)
            assert "slept 1 s" in text_of(result)

            long = await create(120)
            cancel = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=long))
            cancelled = await on_b.session.send_request(cancel, types.CancelTaskResult)
            assert cancelled.status == "cancelled"


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
        await _stop([process])


async def test_behind_haproxy_handshake_clients_stick_and_sessionless_clients_share_handles(
    cluster: Cluster,
) -> None:
    url = cluster.balancer
    with anyio.fail_after(120):
        async with client(url, mode="legacy") as legacy:  # its Mcp-Session-Id must reach the replica that made it
            handle = await background(legacy, "slow", {"seconds": 0.5})
            for _ in range(4):
                await legacy.list_tools()
            waited = await call_text(legacy, "wait_for_tool_output", {"handles": [handle], "timeout_secs": 30})
            assert "slept 0.5 s" in waited
        async with client(url) as modern:  # round-robin: each request may land on another replica
            handles = [await background(modern, "slow", {"seconds": 0.5}) for _ in range(3)]
            for handle in handles:
                waited = await call_text(modern, "wait_for_tool_output", {"handles": [handle], "timeout_secs": 30})
                assert "slept 0.5 s" in waited, waited


def test_without_a_state_url_redis_is_never_imported(tmp_path: Path) -> None:
    script = """
import sys, anyio
from server.config import parse_config
from server.proxy import Proxy

async def main():
    proxy = Proxy(parse_config({"mcpServers": {}, "settings": {"root": sys.argv[1], "api": {"enabled": False}}}))
    async with proxy.running():
        assert type(proxy.sessions.backend).__name__ == "LocalBackend"
anyio.run(main)
print(sorted(m for m in sys.modules if m == "redis" or m.startswith("redis.")))
"""
    done = subprocess.run([PYTHON, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
