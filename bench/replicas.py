"""Replicas sharing handles through Redis: wake-up across replicas, kill -9 to failed, throughput
through haproxy with 1 and 3 replicas, and missed wake-ups with Redis connections dropped.

  a) wake:   `demo__slow {"seconds": S, "background": true}` on replica A, then `wait_for_tool_output` on
             replica B (cross) or on A itself (local), interleaved; the figure is the wait's return minus the
             call's start minus S, so what the two paths share cancels in the difference.
  b) kill:   a replica with a running handle is killed with SIGKILL while B waits on it; time from the kill
             to B's wait returning "failed", against leaseSecs.
  c) load:   32 concurrent sessionless clients through haproxy (round-robin) in front of 1 and of 3
             replicas: small calls (`demo__echo`) and 1 MiB outputs (`demo__big` kb=1024, a handle each,
             then `tool_output` slice on whichever replica the balancer picks); calls/s, p50/p95, and Redis
             commands per call (INFO commandstats before and after).
  d) drops:  two RedisBackend instances on one Redis, in process: B waits (pub/sub + re-read + poll, as
             `wait_for_tool_output` does) for 10 000 completions that A records, while every 250 completions
             all pub/sub connections are killed (CLIENT KILL TYPE pubsub); counts waits that missed.

Needs redis-server and haproxy (bash .ci/install-replicas). Run from the repo root with the project's venv:
    python bench/replicas.py [--json PATH] [--only wake,kill,load,drops]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from server.config import StateSettings  # noqa: E402
from server.handles.state import HandleState, StateUnavailable  # noqa: E402

PYTHON = sys.executable
HANDLE = re.compile(r'handle(?: = |: )"(session-[0-9a-f]{32}/[0-9a-f]{32})"')
LEASE_SECS = 3.0  # a lease well above the event-loop stalls of a loaded machine


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def accepting(port: int) -> None:
    while True:
        try:
            stream = await anyio.connect_tcp("127.0.0.1", port)
        except OSError:
            await anyio.sleep(0.05)
            continue
        await stream.aclose()
        return


@asynccontextmanager
async def redis_server(directory: Path) -> AsyncIterator[int]:
    port = free_port()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    command += ["--dir", str(directory), "--logfile", str(directory / "redis.log")]
    process = await anyio.open_process(command, stdin=subprocess.DEVNULL)
    try:
        with anyio.fail_after(60):
            await accepting(port)
        yield port
    finally:
        process.terminate()
        await process.wait()


@asynccontextmanager
async def replica(directory: Path, redis_url: str) -> AsyncIterator[tuple[anyio.abc.Process, str]]:
    config = directory / "claimcheck.json"
    settings = {
        "asyncTimeoutSecs": 120,  # a 1 MiB output under load answers with its size, not as a background call
        "asyncTokenThreshold": 2000,
        "startupWaitSecs": 120,
        "root": str(directory / "shared"),
        "api": {"enabled": False},
        "state": {"leaseSecs": LEASE_SECS, "pollSecs": 0.5},
    }
    demo = {"command": PYTHON, "args": ["-m", "server.demo.server"]}
    config.write_text(json.dumps({"mcpServers": {"demo": demo}, "settings": settings}), encoding="utf-8")
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--transport", "http", "--port", "0"]
    process = await anyio.open_process(
        [*command, "--state-url", redis_url], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=-1, cwd=REPO
    )
    try:
        assert process.stderr is not None
        seen = b""
        with anyio.fail_after(180):
            async for chunk in process.stderr:
                seen += chunk
                if match := re.search(rb"(http://127\.0\.0\.1:\d+/mcp)", seen):
                    break
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain, process.stderr)
            yield process, match.group(1).decode()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.terminate()
                with anyio.move_on_after(10):
                    await process.wait()


async def drain(stream: anyio.abc.ByteReceiveStream) -> None:
    async for _ in stream:
        pass


@asynccontextmanager
async def haproxy(directory: Path, urls: list[str]) -> AsyncIterator[str]:
    port = free_port()
    servers = "\n".join(f"    server r{i} {u.removeprefix('http://').removesuffix('/mcp')}" for i, u in enumerate(urls))
    config = directory / f"haproxy-{port}.cfg"
    config.write_text(
        "global\n    maxconn 1024\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 300s\n"
        f"    timeout server 300s\nfrontend mcp\n    bind 127.0.0.1:{port}\n    default_backend replicas\n"
        "backend replicas\n    balance roundrobin\n    stick-table type string len 64 size 100k expire 30m\n"
        "    stick on req.hdr(mcp-session-id)\n    stick store-response res.hdr(mcp-session-id)\n"
        f"{servers}\n",
        encoding="utf-8",
    )
    process = await anyio.open_process(["haproxy", "-db", "-f", str(config)], stdin=subprocess.DEVNULL)
    try:
        with anyio.fail_after(60):
            await accepting(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        await process.wait()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def handle_of(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    text = text_of(await client.call_tool(tool, arguments))
    found = HANDLE.search(text)
    assert found is not None, text
    return found.group(1)


async def bench_wake(a: str, b: str, rounds: int, seconds: float) -> dict[str, Any]:
    lateness: dict[str, list[float]] = {"local": [], "cross": []}
    async with Client(streamable_http_client(a)) as on_a, Client(streamable_http_client(b)) as on_b:
        for i in range(rounds):
            for path in ("local", "cross") if i % 2 == 0 else ("cross", "local"):
                waiter = on_a if path == "local" else on_b
                start = time.perf_counter()
                handle = await handle_of(on_a, "demo__slow", {"seconds": seconds, "background": True})
                args = {"handles": [handle], "timeout_secs": 30}
                text = text_of(await waiter.call_tool("wait_for_tool_output", args))
                assert "1 finished" in text and "ready" in text, text  # finished, never reaped
                lateness[path].append((time.perf_counter() - start - seconds) * 1000)
    return {path: {"n": len(v), "p50_ms": statistics.median(v), "p99_ms": pct(v, 0.99)} for path, v in lateness.items()}


async def bench_kill(directory: Path, redis_url: str, b: str, rounds: int) -> dict[str, Any]:
    took: list[float] = []
    async with Client(streamable_http_client(b)) as on_b:
        for _ in range(rounds):
            async with replica(directory, redis_url) as (process, url):
                async with Client(streamable_http_client(url)) as on_victim:
                    handle = await handle_of(on_victim, "demo__slow", {"seconds": 300, "background": True})
                result: list[str] = []

                async def wait(handle: str = handle, result: list[str] = result) -> None:
                    args = {"handles": [handle], "timeout_secs": 50}
                    result.append(text_of(await on_b.call_tool("wait_for_tool_output", args)))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(wait)
                    await anyio.sleep(0.5)  # the wait is under way
                    killed = time.perf_counter()
                    process.send_signal(signal.SIGKILL)
                took.append(time.perf_counter() - killed)
                assert "failed" in result[0], result[0]
    return {"lease_s": LEASE_SECS, "n": len(took), "median_s": statistics.median(took), "max_s": max(took)}


CALL_COMMANDS = ("evalsha", "eval", "hgetall", "zrange")  # what handles send: the rest is heartbeats and reaping
SCRIPTED = ("hset", "hget", "hmget", "zadd", "sadd", "srem", "persist", "publish")  # run inside the scripts


async def commands(port: int) -> dict[str, int]:
    """Commands Redis has run so far, by name (INFO commandstats)."""
    import redis.asyncio as aioredis

    connection = aioredis.Redis(port=port)
    try:
        stats = await connection.info("commandstats")
    finally:
        await connection.aclose()
    return {name.removeprefix("cmdstat_").split("|")[0]: int(entry["calls"]) for name, entry in stats.items()}


async def bench_load(url: str, redis_port: int, clients: int, calls: int, kind: str) -> dict[str, Any]:
    latencies: list[float] = []
    before = await commands(redis_port)

    async def one_client(index: int) -> None:
        async with Client(streamable_http_client(url, http_client=None)) as client:
            for i in range(calls):
                start = time.perf_counter()
                if kind == "small":
                    text = text_of(await client.call_tool("demo__echo", {"text": f"{index}-{i}"}))
                    assert text.startswith(f"{index}-{i}"), text
                else:
                    handle = await handle_of(client, "demo__big", {"kb": 1024})
                    piece = {"handle": handle, "mode": "slice", "slice": {"start": 0, "length": 30}}
                    text = text_of(await client.call_tool("tool_output", piece))
                    assert "00000000 INFO" in text, text
                latencies.append(time.perf_counter() - start)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for index in range(clients):
            tg.start_soon(one_client, index)
    elapsed = time.perf_counter() - started
    total = clients * calls
    after = await commands(redis_port)
    used = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    per_call = sum(used.get(name, 0) for name in CALL_COMMANDS) / total
    heartbeats = sum(n for name, n in used.items() if name not in CALL_COMMANDS and name not in SCRIPTED) / elapsed
    return {
        "calls": total,
        "calls_per_s": total / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p95_ms": pct(latencies, 0.95) * 1000,
        "redis_commands_per_call": per_call,
        "other_commands_per_s": heartbeats,
    }


async def bench_drops(redis_url: str, redis_port: int, completions: int, every: int) -> dict[str, Any]:
    from server.handles.redis_state import RedisBackend

    settings = StateSettings(pollSecs=0.5, keyPrefix="bench:")  # the default lease: no stall reaps the owner
    owner = RedisBackend(redis_url, settings, set())
    waiter = RedisBackend(redis_url, settings, set())
    missed = 0
    woken_late: list[float] = []
    drops = 0

    async def wait_for(handle: str, done_at: dict[str, float]) -> bool:
        """True once the handle reads done; False (missed) when 10 s passed since it was recorded done."""
        while handle not in done_at or time.monotonic() - done_at[handle] < 10:
            changed = waiter.changed()
            try:
                (state,) = await waiter.get([handle])
            except StateUnavailable:  # read again at the next poll
                state = None
            if state is not None and state.done:
                return True
            with anyio.move_on_after(waiter.poll_secs):
                await changed.wait()
        return False

    async with anyio.create_task_group() as tg:
        await tg.start(owner.run)
        await tg.start(waiter.run)
        session = "session-" + "b" * 32
        batch = 50
        for start in range(0, completions, batch):
            states = []
            for i in range(start, min(start + batch, completions)):
                handle = f"{session}/{i:032x}"
                state = HandleState(handle, session, owner.replica, "bench", "bench", "running", time.time())
                await owner.put(state)
                states.append(state)
            done_at: dict[str, float] = {}

            async def waited(state: HandleState, done_at: dict[str, float] = done_at) -> None:
                nonlocal missed
                if not await wait_for(state.handle, done_at):
                    missed += 1
                else:
                    woken_late.append(time.monotonic() - done_at.get(state.handle, time.monotonic()))

            async with anyio.create_task_group() as waits:
                for state in states:
                    waits.start_soon(waited, state)
                for state in states:
                    if (start + states.index(state)) % every == 0:
                        stream = await anyio.connect_tcp("127.0.0.1", redis_port)
                        async with stream:
                            await stream.send(b"CLIENT KILL TYPE pubsub\r\n")
                            await stream.receive()
                        drops += 1
                    done_at[state.handle] = time.monotonic()
                    final = HandleState(state.handle, session, owner.replica, "bench", "bench", "ready", state.started)
                    await owner.put(final)
        tg.cancel_scope.cancel()
    await owner.aclose()
    await waiter.aclose()
    return {
        "completions": completions,
        "pubsub_drops": drops,
        "missed": missed,
        "wake_p50_ms": statistics.median(woken_late) * 1000,
        "wake_p99_ms": pct(woken_late, 0.99) * 1000,
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    only = set(args.only.split(","))
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        async with redis_server(directory) as port, AsyncExitStack() as stack:
            redis_url = f"redis://127.0.0.1:{port}/0"
            needed = 3 if only & {"wake", "kill", "load"} else 0
            reps = [await stack.enter_async_context(replica(directory, redis_url)) for _ in range(needed)]
            urls = [url for _, url in reps]
            if "wake" in only:
                results["wake"] = await bench_wake(urls[0], urls[1], args.wake_rounds, 1.0)
                print("wake", results["wake"], flush=True)
            if "kill" in only:
                results["kill"] = await bench_kill(directory, redis_url, urls[1], args.kill_rounds)
                print("kill", results["kill"], flush=True)
            if "load" in only:
                for count in (1, 3):
                    async with haproxy(directory, urls[:count]) as balanced:
                        for kind in ("small", "1MiB"):
                            calls = args.load_calls if kind == "small" else max(1, args.load_calls // 5)
                            found = await bench_load(balanced, port, args.clients, calls, kind)
                            results[f"load_{count}_{kind}"] = found
                            print(f"load {count} replica(s) {kind}", found, flush=True)
            if "drops" in only:
                results["drops"] = await bench_drops(redis_url, port, args.completions, 250)
                print("drops", results["drops"], flush=True)
    results["load_after"] = os.getloadavg()
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", default="wake,kill,load,drops")
    parser.add_argument("--wake-rounds", type=int, default=20)
    parser.add_argument("--kill-rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--load-calls", type=int, default=10)
    parser.add_argument("--completions", type=int, default=10_000)
    found = anyio.run(main, parser.parse_args())
    print(json.dumps(found, indent=2))
    if parser.parse_args().json:
        parser.parse_args().json.write_text(json.dumps(found, indent=2), encoding="utf-8")
