"""`serve --shared`: start of a relay to its first answered `tools/list`, cold and warm, against today's
per-process claimcheck and the downstream alone; and the time one `tools/call` takes through each.

Each run spawns the process and drives stdio by hand, as a client does: `initialize`, then on its answer
`notifications/initialized` and `tools/list`; then `--calls` sequential `tools/call` of the demo's echo (median
reported). Paths, alternated within every round so machine noise lands on each alike:
  direct          python -m server.demo.server (the downstream alone, no proxy)
  per-process     python -m server serve --config TMP --no-api (today's default)
  relay cold      python -m server serve --shared ... with no shared claimcheck running (it starts one)
  relay warm      the same right after, with the shared claimcheck running
Run from the repo root with the project's venv:
  python bench/shared_relay.py [--runs N] [--calls N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}


def rpc(process: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()


def answer(process: subprocess.Popen[bytes], ident: int) -> dict[str, Any]:
    assert process.stdout is not None
    while True:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the process ended before answering {ident}")
        message = json.loads(line)
        if message.get("id") == ident:
            return message  # type: ignore[no-any-return]


def run(command: list[str], env: dict[str, str], tool: str, calls: int) -> tuple[float, float]:
    """(seconds from spawn to the tools/list answer, median seconds of one tools/call)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=ROOT)
    try:
        rpc(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO})
        answer(process, 1)
        rpc(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        rpc(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        tools = answer(process, 2)["result"]["tools"]
        listed = time.perf_counter() - started
        assert any(t["name"] == tool for t in tools), [t["name"] for t in tools]
        times = []
        for index in range(calls):
            before = time.perf_counter()
            params = {"name": tool, "arguments": {"text": f"call {index}"}}
            rpc(process, {"jsonrpc": "2.0", "id": 10 + index, "method": "tools/call", "params": params})
            answer(process, 10 + index)
            times.append(time.perf_counter() - before)
        return listed, statistics.median(times)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=60)


def stop_shared(runtime: Path) -> None:
    for pid_file in runtime.glob("claimcheck-shared-*/*.pid"):
        pid = int(pid_file.read_text().split()[0])
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 60
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
            if stat.rpartition(")")[2].split()[:1] == ["Z"]:
                break
            time.sleep(0.05)
        pid_file.unlink(missing_ok=True)  # stopped on purpose: not a lost-handles case for the bench


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cc-bench-", dir="/tmp") as tmp:
        work = Path(tmp)
        runtime = work / "rt"
        runtime.mkdir(mode=0o700)
        demo = {"command": sys.executable, "args": ["-m", "server.demo.server"]}
        settings = {"startupWaitSecs": 180, "stateDir": str(work / "state"), "asyncTimeoutSecs": 60}
        config = work / "config.json"
        config.write_text(json.dumps({"mcpServers": {"demo": demo}, "settings": settings}))
        env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "CLAIMCHECK_API_ENABLED": "false"}
        proxy = [sys.executable, "-m", "server", "serve", "--config", str(config), "--no-api"]
        paths = {
            "direct": ([sys.executable, "-m", "server.demo.server"], "echo"),
            "per-process": (proxy, "demo__echo"),
            "relay cold": ([*proxy, "--shared"], "demo__echo"),
            "relay warm": ([*proxy, "--shared"], "demo__echo"),
        }
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
        load = os.getloadavg()
        try:
            for _ in range(args.runs):
                for name, (command, tool) in paths.items():
                    if name == "relay cold":
                        stop_shared(runtime)
                    results[name].append(run(command, env, tool, args.calls))
        finally:
            stop_shared(runtime)
        load_after = os.getloadavg()
    print(f"load average {load[0]:.1f} before, {load_after[0]:.1f} after; {args.runs} runs, {args.calls} calls each")
    print(f"{'path':<12} {'to tools/list (median, min)':>30} {'one tools/call (median)':>26}")
    summary = {}
    for name, rows in results.items():
        lists = sorted(row[0] for row in rows)
        call = statistics.median(row[1] for row in rows)
        summary[name] = {"list_median": statistics.median(lists), "list_min": lists[0], "call": call}
        print(f"{name:<12} {statistics.median(lists):>20.3f} s {lists[0]:>6.3f} s {call * 1000:>22.2f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps({"load": [load, load_after], "results": summary}, indent=2))


if __name__ == "__main__":
    main()
