"""The first calls of a fresh session: how long the first own-tool call and the first proxied call take.

Each run starts `claimcheck serve --no-api` over stdio (the demo server behind it), lists the tools, and at
once calls `list_tool_outputs` (claimcheck's own), then `demo__echo`, then each once more (warm). Whatever
the first use loads lazily shows as the first call's excess over the second. Runs are sequential.

Run from the repo root in the project's venv:  python bench/first_call.py [--runs 5] [--wait 0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parent.parent


async def one_run(config: Path, wait: float) -> dict[str, float]:
    serve = ["-m", "server", "serve", "--no-api", "--config", str(config)]
    params = StdioServerParameters(command=sys.executable, args=serve, cwd=str(REPO))
    times: dict[str, float] = {}
    async with Client(params, mode="legacy") as client:
        start = time.perf_counter()
        await client.list_tools()
        times["tools/list"] = time.perf_counter() - start
        await anyio.sleep(wait)
        for label, tool, arguments in (
            ("first own", "list_tool_outputs", {}),
            ("first proxied", "demo__echo", {"text": "x"}),
            ("second own", "list_tool_outputs", {}),
            ("second proxied", "demo__echo", {"text": "x"}),
        ):
            start = time.perf_counter()
            await client.call_tool(tool, arguments)
            times[label] = time.perf_counter() - start
    return {label: seconds * 1000 for label, seconds in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--wait", type=float, default=0.0, help="seconds between the listing and the first call")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="claimcheck-first-call-") as tmp:
        config = Path(tmp) / "claimcheck.json"
        servers = {"demo": {"command": sys.executable, "args": ["-m", "server.demo.server"]}}
        config.write_text(json.dumps({"mcpServers": servers, "settings": {"startupWaitSecs": 120}}))
        runs = [anyio.run(one_run, config, args.wait) for _ in range(args.runs)]
    print("| call | median ms | all runs ms |\n|---|---:|---|")
    for label in runs[0]:
        values = [run[label] for run in runs]
        print(f"| {label} | {statistics.median(values):.1f} | {' '.join(f'{v:.0f}' for v in values)} |")
    print(f"\n- load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
