"""Several claimcheck replicas sharing handles through a real redis-server, alone and behind a real haproxy:
a handle made on one replica is waited on, read and cancelled from the others; a replica killed
with SIGKILL fails its handles within about a lease and wakes their waiters; a Redis restarted mid-wait
leaves no waiter hanging and loses no completion; without a state URL, redis is never imported.

redis-server and haproxy are Debian's, installed by .ci/install-replicas when missing. Leases are short here
(3 s) so the file runs in seconds.
"""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.processes import PYTHON
from tests.support.proxies import text_of
from tests.support.replicas import RedisServer, Replica, background, call_text, client, haproxy, replicas

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.usefixtures("redis_and_haproxy")]

ROOT = Path(__file__).resolve().parents[2]


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


async def test_a_handle_not_yet_written_back_after_a_redis_restart_says_to_try_again(cluster: Cluster) -> None:
    a, b, _ = cluster.replicas
    async with client(a.url) as on_a, client(b.url) as on_b:
        with anyio.fail_after(60):
            handle = await background(on_a, "slow", {"seconds": 0.1})
            a.process.send_signal(signal.SIGSTOP)  # its heartbeat cannot write the handle back
            try:
                await cluster.redis.kill()
                await cluster.redis.start()  # empty: no persistence
                found = await on_b.call_tool("tool_output", {"handle": handle, "mode": "raw"})
            finally:
                a.process.send_signal(signal.SIGCONT)
    text = text_of(found)
    assert found.is_error and f'Unknown handle "{handle}"' in text, text
    assert "The shared state (Redis) restarted" in text and "try again in a few seconds" in text, text


async def test_a_handle_handed_out_while_redis_is_down_says_it_is_this_replicas_alone(cluster: Cluster) -> None:
    a, _, _ = cluster.replicas
    async with client(a.url) as on_a:
        with anyio.fail_after(60):
            await cluster.redis.kill()
            try:
                text = await call_text(on_a, "demo__slow", {"seconds": 0.1, "background": True})
            finally:
                await cluster.redis.start()
            later = await call_text(on_a, "demo__slow", {"seconds": 0.1, "background": True})
    assert "is running in the background" in text and "known to this replica only" in text, text
    assert "known to this replica only" not in later, later


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
    config = parse_config({"mcpServers": {}, "settings": {"root": sys.argv[1], "api": {"enabled": False}}})
    async with Proxy.start(config) as proxy:
        assert type(proxy.sessions.backend).__name__ == "LocalBackend"
anyio.run(main)
print(sorted(m for m in sys.modules if m == "redis" or m.startswith("redis.")))
"""
    done = subprocess.run([PYTHON, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
