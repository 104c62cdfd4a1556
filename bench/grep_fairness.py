r"""Fair Grep: session B's one grep alone, and while session A floods 20 slow greps.

Run from the repo root in the project's venv:  python bench/grep_fairness.py [--rounds 7] [--json PATH]

Through claimcheck: a proxy in this process (the real Grep tool, real worker processes, the default grep
timeout of 2 s and one worker per core, at least 2) with two MCP sessions (SDK clients). A stores an
output on which `(a+)+\Z` backtracks past any timeout, B a 400-line output. Each round measures B's grep
alone (a worker up), then B's grep once all 20 of A's greps are queued or running; A's greps are then
cancelled and the round waits until none is in flight. Rounds are interleaved so load changes hit both
alike. Under the flood B's grep waits for a worker to come free (at most one timeout) and, as the one
that came free was killed at its timeout, for a new worker process to start.
Target: B's p50 under the flood within one grep timeout of its p50 alone (before the fair queue: +19.8 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from server.config import parse_config  # noqa: E402
from server.downstream.connect import DownstreamSpec  # noqa: E402
from server.downstream.pool import specs_from_config  # noqa: E402
from server.proxy import Proxy  # noqa: E402
from server.upstream.surface import build_server  # noqa: E402

FLOOD = 20
CATASTROPHIC = "(a+)+\\Z"  # \Z needs the backtracking engine; on "aaa…ab" it backtracks past any timeout
EVIL_TEXT = "a" * 50_000 + "b"


def downstream() -> MCPServer:
    server = MCPServer("down")

    @server.tool(structured_output=False)
    def echo(text: str) -> str:
        return text

    @server.tool(structured_output=False)
    def lines(count: int) -> str:
        return "".join(f"line {i:05d} of a small output\n" for i in range(count))

    return server


def handle_in(result: Any) -> str:
    text = "\n".join(item.text for item in result.content if hasattr(item, "text"))
    for word in text.replace('"', " ").split():
        if word.startswith("session-") and "/" in word:
            return word.rstrip(").,")
    raise SystemExit(f"no handle in: {text[:300]}")


async def measure(rounds: int) -> dict[str, Any]:
    config = parse_config(
        {
            "mcpServers": {"down": {"command": "in-process"}},
            "settings": {"asyncTokenThreshold": 100, "asyncTimeoutSecs": 5},
        }
    )
    server: Any = downstream()  # an in-process target (tests/support/proxies.py does the same)
    specs = [DownstreamSpec(spec.name, spec.config, target=lambda: server) for spec in specs_from_config(config)]
    proxy = Proxy(config, specs=specs)
    alone: list[float] = []
    flooded: list[float] = []
    async with proxy.running():
        async with Client(build_server(proxy), mode="legacy") as a, Client(build_server(proxy), mode="legacy") as b:
            evil = handle_in(await a.call_tool("down__echo", {"text": EVIL_TEXT}))
            fine = handle_in(await b.call_tool("down__lines", {"count": 400}))
            assert proxy.sandbox is not None
            sandbox = proxy.sandbox
            owner_a = evil.split("/")[0]
            grep_b = {"file": fine, "regex": "line 00399", "before": 0, "after": 0}
            await b.call_tool("Grep", grep_b)  # warm: a worker is up

            async def timed() -> float:
                start = time.perf_counter()
                result = await b.call_tool("Grep", grep_b)
                took = time.perf_counter() - start
                text = "\n".join(item.text for item in result.content if hasattr(item, "text"))
                assert text.startswith("1 matching line(s)"), text[:200]
                return took

            for _ in range(rounds):
                await b.call_tool("Grep", grep_b)  # a worker is up again (the flood's were killed)
                alone.append(await timed())
                async with anyio.create_task_group() as tg:
                    for _ in range(FLOOD):
                        tg.start_soon(a.call_tool, "Grep", {"file": evil, "regex": CATASTROPHIC})
                    while sandbox.in_flight(owner_a) < FLOOD:  # noqa: ASYNC110  # A's greps all queued or running
                        await anyio.sleep(0.01)
                    flooded.append(await timed())
                    tg.cancel_scope.cancel()
                while sandbox.in_flight(owner_a) > 0:  # noqa: ASYNC110  # a bench polls the sandbox's count
                    await anyio.sleep(0.05)
            timeout = sandbox.timeout
    p50_alone, p50_flooded = statistics.median(alone), statistics.median(flooded)
    return {
        "rounds": rounds,
        "flood": FLOOD,
        "grep_timeout_s": timeout,
        "workers": max(2, os.cpu_count() or 2),
        "alone_s": [round(x, 3) for x in alone],
        "flooded_s": [round(x, 3) for x in flooded],
        "p50_alone_s": round(p50_alone, 3),
        "p50_flooded_s": round(p50_flooded, 3),
        "max_flooded_s": round(max(flooded), 3),
        "added_p50_s": round(p50_flooded - p50_alone, 3),
        "within_one_timeout": p50_flooded - p50_alone <= timeout,
        "load": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = anyio.run(measure, args.rounds)
    print(f"load average at the end: {result['load'][0]:.2f} {result['load'][1]:.2f} {result['load'][2]:.2f}")
    print(f"B's grep alone:       p50 {result['p50_alone_s'] * 1000:8.1f} ms  {result['alone_s']}")
    print(f"B's grep, A flooding: p50 {result['p50_flooded_s'] * 1000:8.1f} ms  {result['flooded_s']}")
    print(
        f"added by the flood: {result['added_p50_s']:.3f} s at p50 (max {result['max_flooded_s']:.3f} s); "
        f"one grep timeout is {result['grep_timeout_s']:g} s: {'within' if result['within_one_timeout'] else 'OVER'}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
