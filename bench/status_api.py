"""Status API numbers: MCP call latency with the API and history on vs off, and `/v1/tasks` on 100 000 rows.

Run from the repo root in the project's venv:  python bench/status_api.py [--json PATH] [--latency-only]

(a) Added latency: two `claimcheck serve` processes over stdio in front of the demo server, one with the
    status API and SQLite history on (`CLAIMCHECK_API_ENABLED=true`), one with it off; 500 small `echo`
    calls each, in 5 interleaved rounds. Target: the medians within noise, at most 5 % apart. Beside the
    latency, each claimcheck process's own CPU time (user + system, from /proc on Linux) per call: on a
    loaded machine latency medians swing by ±15 % from run to run, CPU time per call much less.
(b) History at scale: a history database filled with 100 000 calls (10 servers, 4 statuses), served by
    the real API on 127.0.0.1; p50 and p90 of `GET /v1/tasks?status=failed&server=s3&limit=50`, of the
    unfiltered first page, and of a search, 50 requests each.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from server.status.api import StatusApi, serve_api  # noqa: E402
from server.status.events import EventHub  # noqa: E402
from server.status.history import History  # noqa: E402


def quantile(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[int(q * 100) - 1]


async def added_latency(calls: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        demo = {"command": sys.executable, "args": ["-m", "server.demo.server"]}
        config.write_text(json.dumps({"mcpServers": {"demo": demo}, "settings": {"stateDir": tmp}}), encoding="utf-8")
        paths = {}
        for label, enabled in (("api on", "true"), ("api off", "false")):
            env = {**os.environ, "CLAIMCHECK_API_ENABLED": enabled, "CLAIMCHECK_API_PORT": "0"}
            paths[label] = StdioServerParameters(
                command=sys.executable, args=["-m", "server", "serve", "--config", str(config)], env=env, cwd=str(REPO)
            )
        samples: dict[str, list[float]] = {label: [] for label in paths}
        async with Client(paths["api on"], mode="legacy") as on, Client(paths["api off"], mode="legacy") as off:
            clients = {"api on": on, "api off": off}
            for client in clients.values():
                for _ in range(20):
                    await client.call_tool("demo__echo", {"text": "warm"})
            pids = claimcheck_pids()
            cpu_before = {label: cpu_seconds(pid) for label, pid in pids.items()}
            for round_no in range(rounds):
                order = list(clients) if round_no % 2 == 0 else list(reversed(clients))
                for label in order:
                    for _ in range(calls // rounds):
                        start = time.perf_counter()
                        await clients[label].call_tool("demo__echo", {"text": "hello"})
                        samples[label].append((time.perf_counter() - start) * 1000)
            cpu_ms = {
                label: (cpu_seconds(pid) - cpu_before[label]) * 1000 / len(samples[label])
                for label, pid in pids.items()
            }
    medians = {label: statistics.median(values) for label, values in samples.items()}
    return {
        "median_ms": medians,
        "p99_ms": {label: quantile(values, 0.99) for label, values in samples.items()},
        "added_percent": (medians["api on"] / medians["api off"] - 1) * 100,
        "cpu_ms_per_call": cpu_ms,
        "added_cpu_percent": (cpu_ms["api on"] / cpu_ms["api off"] - 1) * 100 if len(cpu_ms) == 2 else None,
    }


def claimcheck_pids() -> dict[str, int]:
    """The two `claimcheck serve` children of this process, by whether their status API is on (Linux /proc)."""
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) != os.getpid():
                continue
            if b"serve" not in (proc / "cmdline").read_bytes():
                continue
            environ = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        found["api on" if b"CLAIMCHECK_API_ENABLED=true" in environ else "api off"] = int(proc.name)
    return found


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def fill_history(path: Path, rows: int) -> None:
    History(path)  # creates the schema
    statuses = ["ready"] * 7 + ["failed", "cancelled", "running"]
    rng = random.Random(7)
    now = time.time()
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO tasks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    f"session-{i // 100:032x}/{i:032x}", f"session-{i // 100:032x}", f"s{i % 10}", f"tool{i % 25}",
                    f"s{i % 10}__tool{i % 25}", json.dumps({"query": f"item {i}"}), status, now - rows + i,
                    None if status == "running" else now - rows + i + rng.random() * 5, rng.randint(10, 10**7),
                    rng.randint(1, 10**5), rng.randint(1, 10**6), None, "boom" if status == "failed" else None,
                    f"{i // 7:012x}", 1, 0, 1,
                )
                for i in range(rows)
                for status in [statuses[rng.randrange(len(statuses))]]
            ),
        )  # fmt: skip


async def history_at_scale(rows: int, requests: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.sqlite3"
        fill_history(path, rows)
        history = History(path)
        api = StatusApi(EventHub(history), version="bench", heartbeat_secs=30)
        results: dict[str, dict[str, float]] = {}
        async with anyio.create_task_group() as tg:
            await tg.start(history.run)
            url = await tg.start(serve_api, api, 0, Path(tmp))
            token = {"Authorization": f"Bearer {api.token}"}  # the API is private: every /v1 route needs it
            async with httpx2.AsyncClient(base_url=url, timeout=30, headers=token) as http:
                for label, params in {
                    "status=failed&server=s3, limit 50": {"status": "failed", "server": "s3", "limit": "50"},
                    "first page, no filter": {},
                    "search=item 4242": {"search": "item 4242"},
                }.items():
                    times = []
                    for _ in range(requests):
                        start = time.perf_counter()
                        reply = await http.get("/v1/tasks", params=params)
                        times.append((time.perf_counter() - start) * 1000)
                        reply.raise_for_status()
                    results[label] = {"p50_ms": statistics.median(times), "p90_ms": quantile(times, 0.9)}
            tg.cancel_scope.cancel()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--latency-only", action="store_true", help="(a) only; runs against older trees too")
    args = parser.parse_args()
    latency = anyio.run(added_latency, args.calls, 5)
    scale = {} if args.latency_only else anyio.run(history_at_scale, args.rows, 50)
    print("### MCP call latency, status API and history on vs off\n")
    print("| claimcheck | median ms | p99 ms |\n|---|---:|---:|")
    for label in ("api off", "api on"):
        print(f"| {label} | {latency['median_ms'][label]:.2f} | {latency['p99_ms'][label]:.2f} |")
    verdict = "met" if latency["added_percent"] <= 5 else "NOT met"
    print(f"\nAdded by the API and history: {latency['added_percent']:+.1f} % (target ≤ 5 %: **{verdict}**)")
    if latency["added_cpu_percent"] is not None:
        cpu = latency["cpu_ms_per_call"]
        print(
            f"claimcheck's CPU per call: {cpu['api off']:.2f} ms off, {cpu['api on']:.2f} ms on "
            f"({latency['added_cpu_percent']:+.1f} %)\n"
        )
    if scale:
        print(f"### `GET /v1/tasks` with {args.rows} calls in history\n")
        print("| query | p50 ms | p90 ms |\n|---|---:|---:|")
        for label, row in scale.items():
            print(f"| {label} | {row['p50_ms']:.1f} | {row['p90_ms']:.1f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"latency": latency, "scale": scale}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
