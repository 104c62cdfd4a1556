"""tools/list latency of claimcheck with 5 healthy downstreams, alone and beside 1 that never answers.

Each run starts `python -m server serve --config TMP --no-api` over stdio with an mcp 2.3
`Client(..., mode="legacy")` and measures:
  first   from spawning claimcheck to the answer of the client's first tools/list (the start-up a user sees)
  after   from the end of `initialize` to that answer (what the listing itself waited)
  steady  the median of 20 further tools/list calls
The 5 healthy servers are tests/support/servers/raw_downstream.py (a hand-written stdio server that starts in tens of
milliseconds, so the numbers show claimcheck's waiting, not Python's imports); the hung one is
tests/support/servers/slow_start_server.py `hang`, which never answers `initialize`. Runs of the two configurations
alternate, so machine noise lands on both alike. `settings.startupWaitSecs` is the default, 3 s.

Run from the repo root with the project's venv:  python bench/startup_listing.py [--runs N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
HUNG = [str(REPO / "tests" / "support" / "servers" / "slow_start_server.py"), "hang"]
HEALTHY_SERVER = [str(REPO / "tests" / "support" / "servers" / "raw_downstream.py")]
HEALTHY = 5
STEADY_CALLS = 20


def config(hung: bool) -> dict[str, Any]:
    servers: dict[str, Any] = {f"ok{i}": {"command": sys.executable, "args": HEALTHY_SERVER} for i in range(HEALTHY)}
    if hung:
        servers["hung"] = {"command": sys.executable, "args": HUNG}
    return {"mcpServers": servers}


async def one_run(path: Path) -> dict[str, float]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "server", "serve", "--config", str(path), "--no-api"], cwd=REPO
    )
    spawned = time.perf_counter()
    with anyio.fail_after(120):
        async with Client(params, mode="legacy") as client:
            initialized = time.perf_counter()
            tools = (await client.list_tools(cache_mode="bypass")).tools
            listed = time.perf_counter()
            assert sum(1 for t in tools if t.name.startswith("ok")) >= HEALTHY, [t.name for t in tools]
            steady = []
            for _ in range(STEADY_CALLS):
                started = time.perf_counter()
                await client.list_tools(cache_mode="bypass")
                steady.append((time.perf_counter() - started) * 1000)
    return {
        "first_ms": (listed - spawned) * 1000,
        "after_initialize_ms": (listed - initialized) * 1000,
        "steady_median_ms": statistics.median(steady),
    }


async def main(runs: int) -> dict[str, list[dict[str, float]]]:
    results: dict[str, list[dict[str, float]]] = {"5 healthy": [], "5 healthy + 1 hung": []}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for label, hung in (("5 healthy", False), ("5 healthy + 1 hung", True)):
            paths[label] = Path(tmp) / f"{'hung' if hung else 'healthy'}.json"
            paths[label].write_text(json.dumps(config(hung)), encoding="utf-8")
        for run in range(runs):
            order = list(results) if run % 2 == 0 else list(reversed(results))
            for label in order:
                results[label].append(await one_run(paths[label]))
    print(f"{platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, {runs} runs each")
    print(f"{'configuration':<22}{'first (median)':>16}{'after init':>12}{'steady':>10}   first, every run (ms)")
    for label, samples in results.items():
        first = statistics.median(s["first_ms"] for s in samples)
        after = statistics.median(s["after_initialize_ms"] for s in samples)
        steady = statistics.median(s["steady_median_ms"] for s in samples)
        every = " ".join(f"{s['first_ms']:.0f}" for s in samples)
        print(f"{label:<22}{first:>13.0f} ms{after:>9.0f} ms{steady:>7.2f} ms   {every}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", help="also write the samples here")
    arguments = parser.parse_args()
    samples = anyio.run(main, arguments.runs)
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(samples, indent=2), encoding="utf-8")
