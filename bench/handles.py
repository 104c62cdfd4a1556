"""Handles: a 10 MiB output, the size decision, waking a waiter, and 200 background calls.

  a) big:    time to the handle message for `demo__big {"kb": 10240}` through `claimcheck serve` (stdio)
             vs a direct client receiving the same 10 MiB from `big`; 5 interleaved repetitions each.
  b) size:   `extraction.exceeds(text, 10_000)` on a 10 MiB string, on 400 KB (counted in pieces until
             the limit), and on a text of just under 10 000 tokens (counted to its end); median of 50.
  c) wake:   in-process proxy; from `event.set()` releasing a background call to the pending
             `wait_for_tool_output` result reaching the client; 50 repetitions.
  d) fanout: in-process proxy; 200 concurrent `background: true` calls, drained with
             `wait_for_tool_output`, then every handle read back with `tool_output` raw and checked.

Run from the repo root with the project's venv:  python bench/handles.py [--json PATH]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import platform
import random
import re
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import date
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # first: `python bench/handles.py` puts bench/ (and its extraction.py) on sys.path

from extraction import estimate_tokens, exceeds  # noqa: E402
from server.config import parse_config  # noqa: E402
from server.downstream.connect import DownstreamSpec  # noqa: E402
from server.downstream.pool import specs_from_config  # noqa: E402
from server.proxy import Proxy  # noqa: E402
from server.upstream.surface import build_server  # noqa: E402

BIG_KB = 10 * 1024
THRESHOLD = 10_000
HANDLE = re.compile(r"session-[0-9a-f]{32}/[0-9a-f]{32}")
TARGET_SIZE_MS = 10.0
TARGET_WAKE_MEDIAN_MS = 20.0
NOTHING_LEFT = "No outputs are running in this session, and none is waiting to be read."


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def handle_in(result: types.CallToolResult) -> str:
    match = HANDLE.search(text_of(result))
    if match is None:
        raise RuntimeError(f"no handle in {text_of(result)[:500]!r}")
    return match.group(0)


def varied_text(chars: int) -> str:
    """At least `chars` characters of distinct words (about 3.3 characters per cl100k token)."""
    words, total, i = [], 0, 0
    while total <= chars:  # the join has one space fewer than the words counted here
        word = f"word{i}"
        words.append(word)
        total += len(word) + 1
        i += 1
    return " ".join(words)[:chars]


def percentile(samples: Sequence[float], p: int) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[p - 1]


def timed_ms(fn: Callable[[], object], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


# a) a 10 MiB output: handle through claimcheck vs the bytes themselves, direct


async def bench_big(config_dir: Path, reps: int) -> dict[str, Any]:
    """Interleave `reps` calls on each path; both clients stay connected for the whole run."""
    demo = [sys.executable, "-m", "server.demo.server"]
    config = config_dir / "claimcheck-bench.json"
    config.write_text(json.dumps({"mcpServers": {"demo": {"command": demo[0], "args": demo[1:]}}}))
    direct_params = StdioServerParameters(command=demo[0], args=demo[1:], cwd=str(REPO))
    cc_params = StdioServerParameters(
        command=sys.executable, args=["-m", "server", "serve", "--config", str(config), "--no-api"], cwd=str(REPO)
    )
    expected_bytes = BIG_KB * 1024
    samples: dict[str, list[float]] = {"claimcheck": [], "direct": []}
    async with Client(direct_params, mode="legacy") as direct, Client(cc_params, mode="legacy") as cc:
        await direct.call_tool("big", {"kb": 1})  # warm both paths up
        await cc.call_tool("demo__big", {"kb": 1})
        for rep in range(reps):
            order = ["claimcheck", "direct"] if rep % 2 == 0 else ["direct", "claimcheck"]
            for path in order:
                start = time.perf_counter()
                if path == "direct":
                    result = await direct.call_tool("big", {"kb": BIG_KB})
                    elapsed = time.perf_counter() - start
                    if len(text_of(result)) != expected_bytes:
                        raise RuntimeError(f"direct big returned {len(text_of(result))} characters")
                else:
                    result = await cc.call_tool("demo__big", {"kb": BIG_KB})
                    elapsed = time.perf_counter() - start
                    message = text_of(result)
                    if not message.startswith(f"Tool output is too large ({expected_bytes} bytes"):
                        raise RuntimeError(f"claimcheck did not answer with a too-large handle: {message[:300]!r}")
                    handle_in(result)
                samples[path].append(elapsed * 1000)
    cc_ms, direct_ms = statistics.median(samples["claimcheck"]), statistics.median(samples["direct"])
    return {
        "reps": reps,
        "bytes": expected_bytes,
        "samples_ms": samples,
        "claimcheck_median_ms": cc_ms,
        "direct_median_ms": direct_ms,
        "ratio_claimcheck_over_direct": cc_ms / direct_ms,
        "target_met": cc_ms < direct_ms,
    }


# b) the size decision


def bench_size(reps: int) -> dict[str, Any]:
    """Time `exceeds` where a length bound decides, where pieces are counted until the limit, and to the end."""
    big = varied_text(10 * 1024 * 1024)
    medium = varied_text(400_000)
    under = varied_text(31_800)  # 9 970 tokens: over the character bound, under the token limit
    cases = {
        "10 MiB varied words (length bound)": (big, True),
        "400 KB varied words (pieces, early exit)": (medium, True),
        f"{len(under) // 1000} KB, just under {THRESHOLD} tokens (pieces, to the end)": (under, False),
    }
    exceeds(medium, THRESHOLD)  # load the encoding outside the timings
    rows: list[dict[str, Any]] = []
    for name, (text, want) in cases.items():
        if exceeds(text, THRESHOLD) is not want:
            raise RuntimeError(f"exceeds({name}) is not {want}")
        ms = timed_ms(functools.partial(exceeds, text, THRESHOLD), reps)
        rows.append({"case": name, "chars": len(text), "median_ms": statistics.median(ms), "max_ms": max(ms)})
    estimate_ms = timed_ms(lambda: estimate_tokens(big), 5)
    return {
        "reps": reps,
        "rows": rows,
        "estimate_tokens_10mib_median_ms": statistics.median(estimate_ms),
        "target_met": all(row["median_ms"] <= TARGET_SIZE_MS for row in rows),
    }


# c) and d): an in-process proxy (the same wiring as tests/support/proxies.py `running_proxy`)


@asynccontextmanager
async def in_process(server: Any) -> AsyncIterator[tuple[Proxy, Client]]:
    """claimcheck in memory in front of `server` (as downstream `down`), and a legacy client of it."""
    config = parse_config({"mcpServers": {"down": {"command": "in-process"}}, "settings": {}})
    specs = [DownstreamSpec(s.name, s.config, target=lambda: server) for s in specs_from_config(config)]
    proxy = Proxy(config, specs=specs, connect_timeout=10)
    async with proxy.running(), Client(build_server(proxy), mode="legacy") as client:
        yield proxy, client


async def bench_wake(reps: int) -> dict[str, Any]:
    """From releasing a background call to the pending wait's result arriving, `reps` times."""
    gates: dict[int, anyio.Event] = {}
    down = MCPServer("down")

    @down.tool(structured_output=False)
    async def gated(n: int) -> str:
        await gates[n].wait()
        return f"released {n}"

    samples: list[float] = []
    early = 0
    async with in_process(down) as (_, client):
        for n in range(reps):
            gates[n] = anyio.Event()
            handle = handle_in(await client.call_tool("down__gated", {"n": n, "background": True}))
            arrived: list[float] = []

            async def wait(handle: str = handle, arrived: list[float] = arrived, n: int = n) -> None:
                result = await client.call_tool("wait_for_tool_output", {"handles": [handle]})
                arrived.append(time.perf_counter())
                if f"released {n}" not in text_of(result):
                    raise RuntimeError(f"wait returned without the output: {text_of(result)[:300]!r}")

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(wait)
                    await anyio.sleep(0.02)  # let the wait request reach the proxy and block there
                    if arrived:
                        early += 1
                    released = time.perf_counter()
                    gates[n].set()
            samples.append((arrived[0] - released) * 1000)
    median = statistics.median(samples)
    return {
        "reps": reps,
        "samples_ms": samples,
        "median_ms": median,
        "p90_ms": percentile(samples, 90),
        "max_ms": max(samples),
        "returned_before_release": early,
        "target_met": median <= TARGET_WAKE_MEDIAN_MS and early == 0,
    }


def unique_text(n: int) -> str:
    """About 2 KB that only call `n` returns."""
    digest = hashlib.sha256(str(n).encode()).hexdigest()
    line = f"call {n:03d} {digest}\n"
    return (line * (2048 // len(line) + 1))[:2048]


async def bench_fanout(calls: int, seed: int) -> dict[str, Any]:
    """`calls` concurrent background calls, drained by waiting, then each read back and compared."""
    rng = random.Random(seed)
    delays = [rng.uniform(0, 0.2) for _ in range(calls)]
    down = MCPServer("down")

    @down.tool(structured_output=False)
    async def work(n: int) -> str:
        await anyio.sleep(delays[n])
        return unique_text(n)

    handles: dict[int, str] = {}
    waits = 0
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    async with in_process(down) as (_, client):
        with anyio.fail_after(120):
            start = time.perf_counter()

            async def launch(n: int) -> None:
                handles[n] = handle_in(await client.call_tool("down__work", {"n": n, "background": True}))

            async with anyio.create_task_group() as tg:
                for n in range(calls):
                    tg.start_soon(launch, n)
            started = time.perf_counter()
            while True:
                waited = await client.call_tool("wait_for_tool_output", {})
                waits += 1
                if text_of(waited) == NOTHING_LEFT:
                    break
            drained = time.perf_counter()
            mismatched = []
            for n, handle in handles.items():
                raw = await client.call_tool("tool_output", {"handle": handle, "mode": "raw"})
                first = raw.content[0]  # the answer; a status footer may follow it
                body = first.text.split("STRATEGY:raw:\n\n", 1)[-1] if isinstance(first, types.TextContent) else ""
                if raw.is_error or body != unique_text(n):
                    mismatched.append(n)
            verified = time.perf_counter()
    return {
        "calls": calls,
        "distinct_handles": len(set(handles.values())),
        "start_all_s": started - start,
        "start_to_drained_s": drained - start,
        "verify_s": verified - drained,
        "wait_calls": waits,
        "mismatched": mismatched,
        "all_found": len(set(handles.values())) == calls and not mismatched,
        "rss_before_mib": rss_before,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def markdown(results: dict[str, Any], facts: dict[str, Any]) -> str:
    big, size, wake, fan = results["big"], results["size"], results["wake"], results["fanout"]

    def verdict(met: bool) -> str:
        return "met" if met else "NOT met"

    def ms(value: float) -> str:
        return f"{value:.3f}" if value >= 0.001 else f"{value * 1000:.1f} µs"

    lines = [
        f"**a) 10 MiB output** ({big['reps']} interleaved repetitions per path, stdio)",
        "",
        "| path | what the client receives | median ms | samples ms |",
        "|---|---|---:|---|",
        f"| claimcheck → demo `big` | the too-large message with a handle | {big['claimcheck_median_ms']:.0f} "
        f"| {' '.join(f'{s:.0f}' for s in big['samples_ms']['claimcheck'])} |",
        f"| direct → demo `big` | {big['bytes']} bytes of text | {big['direct_median_ms']:.0f} "
        f"| {' '.join(f'{s:.0f}' for s in big['samples_ms']['direct'])} |",
        "",
        f"- claimcheck / direct: {big['ratio_claimcheck_over_direct']:.2f}; target (handle path faster): "
        f"**{verdict(big['target_met'])}**",
        "",
        f"**b) size decision** (`exceeds(text, {THRESHOLD})`, median of {size['reps']})",
        "",
        "| text | characters | median ms | max ms |",
        "|---|---:|---:|---:|",
        *(f"| {r['case']} | {r['chars']} | {ms(r['median_ms'])} | {ms(r['max_ms'])} |" for r in size["rows"]),
        "",
        f"- target ≤ {TARGET_SIZE_MS:g} ms: **{verdict(size['target_met'])}**; for comparison, "
        f"`estimate_tokens` (the count shown in the message) on the 10 MiB text: "
        f"{size['estimate_tokens_10mib_median_ms']:.0f} ms",
        "",
        f"**c) wake-up** (in-process, {wake['reps']} repetitions, `event.set()` → wait result at the client)",
        "",
        "| median ms | p90 ms | max ms | waits that returned before the release |",
        "|---:|---:|---:|---:|",
        f"| {wake['median_ms']:.2f} | {wake['p90_ms']:.2f} | {wake['max_ms']:.2f} "
        f"| {wake['returned_before_release']} |",
        "",
        f"- target ≤ {TARGET_WAKE_MEDIAN_MS:g} ms median: **{verdict(wake['target_met'])}**",
        "",
        f"**d) {fan['calls']} concurrent background calls in one session** (in-process, 0–200 ms each, ~2 KB each)",
        "",
        "| all started s | started → all finished and read s | wait calls | verify (raw each) s "
        "| all found, none mixed | peak RSS MiB |",
        "|---:|---:|---:|---:|---|---:|",
        f"| {fan['start_all_s']:.2f} | {fan['start_to_drained_s']:.2f} | {fan['wait_calls']} | {fan['verify_s']:.2f} "
        f"| {'yes' if fan['all_found'] else 'NO: ' + str(fan['mismatched'][:10])} "
        f"| {fan['peak_rss_mib']:.0f} ({fan['rss_before_mib']:.0f} before the calls) |",
        "",
        f"- machine: {facts['cpus']} vCPU, {facts['machine']}, Python {facts['python']}, mcp {facts['mcp']}; "
        f"{facts['date']}; wall {facts['wall_s']} s",
    ]
    return "\n".join(lines)


async def run_all(args: argparse.Namespace, config_dir: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    results["fanout"] = await bench_fanout(args.calls, args.seed)  # first: the RSS peak is then its own
    results["wake"] = await bench_wake(args.wake_reps)
    results["size"] = bench_size(args.size_reps)
    results["big"] = await bench_big(config_dir, args.big_reps)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--big-reps", type=int, default=5, help="10 MiB calls per path (default 5)")
    parser.add_argument("--size-reps", type=int, default=50, help="timings per size case (default 50)")
    parser.add_argument("--wake-reps", type=int, default=50, help="wake-up measurements (default 50)")
    parser.add_argument("--calls", type=int, default=200, help="concurrent background calls (default 200)")
    parser.add_argument("--seed", type=int, default=3, help="seed of the random delays (default 3)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)

    facts: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "machine": f"{platform.system()} {platform.machine()}",
        "python": platform.python_version(),
        "mcp": version("mcp"),
        "date": date.today().isoformat(),
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="claimcheck-bench-") as tmp:
        results = anyio.run(run_all, args, Path(tmp))
    facts["wall_s"] = round(time.perf_counter() - started, 1)
    print(markdown(results, facts))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"facts": facts, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
