"""The dashboard's output view against the agent's own Read and Grep, on one large stored output.

Run from the repo root in the project's venv:  python bench/dashboard_output.py [--mib 100] [--rounds 5]

One `claimcheck serve --transport http` with the status API in front of the demo server; `demo__big` makes
an output of `--mib` MiB (64-byte log lines), stored under a handle. Then, in interleaved rounds:
the dashboard's `GET /v1/tasks/{handle}/output?lines=40` against the agent's `Read` of 40 lines, and the
dashboard's `GET …/output/grep` for the last line against the agent's `Grep` for it (both through MCP over
HTTP, the same door and the same fs_sandbox Read/Grep underneath). Prints medians, their ratios, the load
average, and claimcheck's peak RSS (VmHWM) before the first request and after the last.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parent.parent
MCP_URL = re.compile(rb"serving MCP over streamable HTTP at (http://\S+/mcp)")
API_URL = re.compile(rb"status API at (http://127\.0\.0\.1:\d+/) \xe2\x80\x94 dashboard: \S+\?token=(\S+)")


def vm_hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


async def timed(results: dict[str, list[float]], name: str, action: Any) -> Any:
    start = time.perf_counter()
    value = await action
    results.setdefault(name, []).append((time.perf_counter() - start) * 1000)
    return value


async def main(mib: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "claimcheck.json"
        demo = {"command": sys.executable, "args": ["-m", "server.demo.server"]}
        settings = {"stateDir": str(Path(tmp) / "state"), "asyncTimeoutSecs": 600, "startupWaitSecs": 120}
        config.write_text(f'{{"mcpServers": {{"demo": {json.dumps(demo)}}}, "settings": {json.dumps(settings)}}}')
        env = {**os.environ, "CLAIMCHECK_API_ENABLED": "true", "CLAIMCHECK_API_PORT": "0"}
        command = [
            sys.executable,
            "-m",
            "server",
            "serve",
            "--config",
            str(config),
            "--transport",
            "http",
            "--port",
            "0",
        ]
        process = await anyio.open_process(command, env=env, cwd=REPO, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            assert process.stderr is not None
            seen = b""
            with anyio.fail_after(120):
                async for chunk in process.stderr:
                    seen += chunk
                    mcp, api = MCP_URL.search(seen), API_URL.search(seen)
                    if mcp and api:
                        break
            assert mcp and api, seen.decode(errors="replace")
            await run(process.pid, mcp.group(1).decode(), api.group(1).decode(), api.group(2).decode(), mib, rounds)
        finally:
            process.terminate()
            await process.wait()


async def run(pid: int, mcp_url: str, api_url: str, token: str, mib: int, rounds: int) -> None:
    lines = mib * 1024 * 1024 // 64
    needle = f"{lines - 1:08d} INFO"
    results: dict[str, list[float]] = {}
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        Client(streamable_http_client(mcp_url), mode="legacy") as client,
        httpx2.AsyncClient(base_url=api_url, headers=headers, timeout=600) as http,
    ):
        await client.list_tools()
        made = await client.call_tool("demo__big", {"kb": mib * 1024})
        text = "\n".join(getattr(item, "text", "") for item in made.content)
        handle = re.search(r"session-[0-9a-f]{32}/[0-9a-f]{32}", text)
        assert handle, text
        path = f"/v1/tasks/{handle.group(0)}/output"
        before = vm_hwm_kib(pid)
        for _ in range(rounds):
            head = await timed(results, "dashboard head (40 lines)", http.get(path, params={"lines": 40}))
            assert head.status_code == 200 and len(head.json()["head"]) == 40, head.text
            read = await timed(
                results, "agent Read (40 lines)", client.call_tool("Read", {"file": handle.group(0), "lines": 40})
            )
            assert not read.is_error
            grep = await timed(
                results, "dashboard grep (last line)", http.get(f"{path}/grep", params={"regex": needle})
            )
            assert grep.json().get("matches") == 1, grep.text
            found = await timed(
                results, "agent Grep (last line)", client.call_tool("Grep", {"file": handle.group(0), "regex": needle})
            )
            assert not found.is_error
        after = vm_hwm_kib(pid)
    medians = {name: statistics.median(values) for name, values in results.items()}
    print(f"output {mib} MiB ({lines} lines), {rounds} interleaved rounds; load average {os.getloadavg()}")
    for name, value in medians.items():
        print(f"  {name:28s} median {value:9.1f} ms  (min {min(results[name]):.1f}, max {max(results[name]):.1f})")
    head_ratio = medians["dashboard head (40 lines)"] / medians["agent Read (40 lines)"]
    grep_ratio = medians["dashboard grep (last line)"] / medians["agent Grep (last line)"]
    print(f"  ratio dashboard/agent: head {head_ratio:.2f}, grep {grep_ratio:.2f}")
    print(
        f"  claimcheck VmHWM: {before / 1024:.1f} MiB before the first request, {after / 1024:.1f} MiB after the last"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    anyio.run(main, arguments.mib, arguments.rounds)
