"""One view of the cluster: two real claimcheck replicas and a real redis-server (Debian's, .ci/install-replicas);
a call on one shows in the other's `/v1/events` and `/v1/stats` and in `claimcheck ps` run beside the other,
each marked with the replica that ran it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import redis.asyncio

from server.status.ps import print_ps
from tests.support.replicas import RedisServer, Replica, background, call_text, client, replicas

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.usefixtures("redis_and_haproxy")]


@pytest.fixture(scope="module")
async def pair(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Path, list[Replica], str]]:
    directory = tmp_path_factory.mktemp("pair")
    redis = RedisServer(directory)
    await redis.start()
    try:
        async with replicas(directory, redis.url, count=2, api=True) as both:
            yield directory, both, redis.url
    finally:
        await redis.stop()


def _bearer(replica: Replica) -> dict[str, str]:
    return {"Authorization": f"Bearer {replica.token}"}


async def _replica_id(http: httpx2.AsyncClient, replica: Replica) -> str:
    health = (await http.get(f"{replica.api}v1/health", headers=_bearer(replica))).json()
    found: str = health["replica"]
    return found


async def _events(
    http: httpx2.AsyncClient, replica: Replica, seen: list[tuple[str, Any]], ready: anyio.Event, until: str
) -> None:
    """Read `replica`'s /v1/events into `seen` until an event of replica `until` completes; `ready` once its
    snapshot came."""
    async with http.stream("GET", f"{replica.api}v1/events", headers=_bearer(replica)) as stream:
        name = ""
        async for line in stream.aiter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                seen.append((name, json.loads(line.removeprefix("data: "))))
                if name == "snapshot":
                    ready.set()
                elif name == "task.completed" and seen[-1][1].get("replica") == until:
                    return


async def test_a_call_on_one_replica_shows_in_the_others_events_and_stats_marked_with_its_replica(
    pair: tuple[Path, list[Replica], str],
) -> None:
    _, (a, b), redis_url = pair
    seen: list[tuple[str, Any]] = []
    raw = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    async with httpx2.AsyncClient(timeout=60) as http, client(a.url) as on_a, raw.pubsub() as channel:
        with anyio.fail_after(60):
            id_a, id_b = await _replica_id(http, a), await _replica_id(http, b)
            await channel.subscribe("cc:events")  # what the replicas publish, as it goes by
            await call_text(on_a, "demo__echo", {"text": "while nobody watches"})
            async with anyio.create_task_group() as tg:
                ready, heard = anyio.Event(), anyio.Event()

                async def watch_b() -> None:
                    await _events(http, b, seen, ready, id_a)
                    heard.set()

                tg.start_soon(watch_b)
                await ready.wait()
                while not heard.is_set():  # a replica learns within 2 s that another is watched
                    await call_text(on_a, "demo__echo", {"text": "seen from b"})
                    with anyio.move_on_after(0.2):
                        await heard.wait()
            published = []
            while (message := await channel.get_message(timeout=0.5)) is not None:
                if message["type"] == "message":
                    published.append(message["data"])
            while True:  # each replica shares its stats every 2 s
                stats = (await http.get(f"{b.api}v1/stats", headers=_bearer(b))).json()
                if id_a in stats.get("replicas", {}) and stats["replicas"][id_a]["byServer"].get("demo"):
                    break
                await anyio.sleep(0.2)
    completed = [data for name, data in seen[1:] if name == "task.completed" and data["replica"] == id_a]
    assert completed[0]["name"] == "demo__echo" and completed[0]["status"] == "ready"
    assert published and all("while nobody watches" not in data for data in published)  # unwatched: unpublished
    assert seen[0][1]["replica"] == id_b  # the snapshot says whose view it is
    assert stats["replica"] == id_b and set(stats["replicas"]) == {id_a, id_b}
    own = stats["replicas"][id_b]["totalTasks"]
    assert stats["cluster"]["totalTasks"] == own + stats["replicas"][id_a]["totalTasks"]
    assert stats["cluster"]["replicas"] == 2


async def test_ps_beside_one_replica_lists_the_calls_the_other_runs_marked_with_its_replica(
    pair: tuple[Path, list[Replica], str], capsys: pytest.CaptureFixture[str]
) -> None:
    directory, (a, b), _ = pair
    pid_a = a.process.pid
    state_a = next(
        path.parent.parent
        for path in directory.glob("state-*/claimcheck/instances/*.json")
        if json.loads(path.read_text())["pid"] == pid_a
    )
    async with httpx2.AsyncClient(timeout=60) as http, client(b.url) as on_b:
        with anyio.fail_after(60):
            id_b = await _replica_id(http, b)
            handle = await background(on_b, "slow", {"seconds": 120})
            try:
                await print_ps(state_a)
            finally:
                await call_text(on_b, "cancel_tool_output", {"handle": handle})
    printed = capsys.readouterr().out
    line = next(line for line in printed.splitlines() if handle in line)
    assert f"pid {pid_a}" in printed
    assert "demo__slow" in line and line.endswith(f"on replica {id_b}")
