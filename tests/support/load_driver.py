"""Many MCP clients hammering one `claimcheck serve --transport http`: every answer must be the caller's own.

Shared by `tests/e2e/test_load.py` (a size CI can afford) and `bench/load.py` (the full 2 000 calls).
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.processes import PYTHON, announced_url, demo_server_entry, write_config

__all__ = ["LoadResult", "claimcheck_http", "peak_rss_kib", "run_load"]

HANDLE = re.compile(r'handle(?: =|:) "(session-[0-9a-f]+/[0-9a-f]+)"')


@dataclass
class LoadResult:
    calls: int = 0
    ok: int = 0
    wrong: list[str] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0


@asynccontextmanager
async def claimcheck_http(directory: Path) -> AsyncIterator[str]:
    # The status API runs too (CLAIMCHECK_API_ENABLED must be true): load with history on, and its
    # discovery file says which process to measure.
    settings = {"asyncTimeoutSecs": 0.3, "asyncTokenThreshold": 2000, "root": str(directory)}
    settings["stateDir"] = str(directory / "state")
    config = write_config(directory, {"mcpServers": {"demo": demo_server_entry()}, "settings": settings})
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--transport", "http", "--port", "0"]
    async with announced_url(command, r"(http://127\.0\.0\.1:\d+/mcp)") as url:
        yield url


def peak_rss_kib(directory: Path) -> int:
    """VmHWM of the claimcheck process, found through its status API discovery file (Linux), else 0."""
    for discovery in (directory / "state" / "instances").glob("*.json"):
        pid = json.loads(discovery.read_text(encoding="utf-8"))["pid"]
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


async def run_load(url: str, *, clients: int, calls: int, concurrency: int, seed: int = 1) -> LoadResult:
    """`calls` calls spread over `clients` MCP sessions, at most `concurrency` in flight; each one checked."""
    result = LoadResult()
    limiter = anyio.CapacityLimiter(concurrency)
    rng = random.Random(seed)
    plan = [(i, rng.choices(["fast", "slow", "large"], weights=[6, 2, 2])[0]) for i in range(calls)]
    started = time.perf_counter()

    async def one(client: Client, number: int, kind: str) -> None:
        async with limiter:
            result.calls += 1
            result.kinds[kind] = result.kinds.get(kind, 0) + 1
            try:
                ok = await _checked_call(client, number, kind)
            except Exception as exc:  # boundary: a load run reports every failure rather than stopping at one
                ok = False
                result.wrong.append(f"{kind} #{number}: {type(exc).__name__}: {exc}"[:300])
            if ok:
                result.ok += 1
            elif not result.wrong or not result.wrong[-1].startswith(f"{kind} #{number}"):
                result.wrong.append(f"{kind} #{number}: wrong answer")

    async with httpx2.AsyncClient(timeout=120) as http, AsyncExitStack() as stack:
        sessions = [
            await stack.enter_async_context(
                Client(streamable_http_client(url, http_client=http, max_sse_event_size=None), mode="legacy")
            )
            for _ in range(clients)
        ]
        async with anyio.create_task_group() as tg:
            for number, kind in plan:
                tg.start_soon(one, sessions[number % clients], number, kind)
    result.wall_s = time.perf_counter() - started
    return result


async def _checked_call(client: Client, number: int, kind: str) -> bool:
    """Make one call and check its answer, following a hand-off to the background when one happens."""
    kb = 16 + number % 8
    if kind == "fast":
        expected, first = (
            f"call {number} says hello",
            await client.call_tool("demo__echo", {"text": f"call {number} says hello"}),
        )
    elif kind == "slow":
        expected, first = "slept 0.6 s", await client.call_tool("demo__slow", {"seconds": 0.6})
    else:
        expected, first = f"({kb * 1024} bytes", await client.call_tool("demo__big", {"kb": kb})
    text = _first_text(first)
    handle = HANDLE.search(text)
    if "is running in the background" in text and handle is not None:
        if not await _wait_until_done(client, handle.group(1)):
            return False
        if kind == "large":
            return await _starts_like_big(client, handle.group(1))
        raw = await client.call_tool("tool_output", {"handle": handle.group(1), "mode": "raw"})
        return expected in _first_text(raw)
    if kind == "large":
        return expected in text and handle is not None and await _starts_like_big(client, handle.group(1))
    return text.startswith(expected)


def _first_text(result: types.CallToolResult) -> str:
    item = result.content[0] if result.content else None  # a status footer may follow while other calls run
    return item.text if isinstance(item, types.TextContent) else ""


async def _wait_until_done(client: Client, handle: str) -> bool:
    for _ in range(20):
        waited = _first_text(await client.call_tool("wait_for_tool_output", {"handles": [handle], "timeout_secs": 30}))
        if f'"{handle}"' in waited and "finished" in waited.split("\n", 1)[0]:
            return f'"{handle}" ' in waited and ": ready" in waited
    return False


async def _starts_like_big(client: Client, handle: str) -> bool:
    piece = await client.call_tool(
        "tool_output", {"handle": handle, "mode": "slice", "slice": {"start": 0, "length": 63}}
    )
    return _first_text(piece).endswith("00000000 INFO demo log line with some words in it..............")
