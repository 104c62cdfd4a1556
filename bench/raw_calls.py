"""claimcheck's own cost per plain stdio call, with a client that costs nothing: raw JSON-RPC lines on pipes.

bench/overhead.py drives every path with the mcp SDK's client, whose own latency is in every figure. Here
a blocking client writes each `tools/call` line and reads the answer line, so what is measured is the
server: its CPU per call (user and system, from /proc, around the measured calls only) and the round trip.

    python bench/raw_calls.py                      # claimcheck (fast path), the bare relay, the demo server
    python bench/raw_calls.py --tree OLD_CHECKOUT  # the same for another checkout (before/after)
    python bench/raw_calls.py --instructions       # per-call instructions under valgrind (deterministic; --eras too)
    python bench/raw_calls.py --eras handshake,2026-07-28   # both protocol eras, alternated in each round
    python bench/raw_calls.py --no-async           # the demo server with its rules off (a plain pass-through)

A `2026-07-28` client sends no `initialize`: every request carries its own envelope in `params._meta`.

`--instructions` runs claimcheck under `valgrind --tool=callgrind` twice (50 and 300 measured calls, after
the background start-up work has settled) and prints the difference per call: user-space instructions,
which do not depend on the machine's load as CPU time does (system calls' kernel time is not in them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TEXT = "hello, claimcheck"
SESSIONLESS = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw_calls", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _command(kind: str, config: Path, api: bool) -> list[str]:
    demo = [sys.executable, "-m", "server.demo.server"]
    if kind == "direct":
        return demo
    if kind == "floor":
        return [sys.executable, str(REPO / "bench" / "relay_floor.py"), "demo", *demo]
    return [sys.executable, "-m", "server", "serve", "--config", str(config), *([] if api else ["--no-api"])]


class Server:
    """One server on pipes, initialized, with a blocking line client."""

    def __init__(
        self,
        command: list[str],
        tree: Path,
        env: dict[str, str],
        stderr: Any = subprocess.DEVNULL,
        era: str = "handshake",
    ) -> None:
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=tree, env=env
        )
        self.meta = SESSIONLESS if era == "2026-07-28" else None
        if self.meta is None:
            self.send({"id": 0, "method": "initialize", "params": _initialize()})
            self.receive(0)
            self.send({"method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.process.stdin.flush()

    def receive(self, ident: int) -> dict[str, Any]:
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its stdout")
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == ident:
                return message

    def call(self, ident: int, tool: str) -> dict[str, Any]:
        params: dict[str, Any] = {"name": tool, "arguments": {"text": TEXT}}
        if self.meta is not None:
            params["_meta"] = self.meta
        self.send({"id": ident, "method": "tools/call", "params": params})
        return self.receive(ident)

    def cpu(self) -> tuple[float, float]:
        """User and system seconds of the server process itself (not its children)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _initialize() -> dict[str, Any]:
    return {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw_calls", "version": "1"}}


def measure(server: Server, tool: str, calls: int, warmup: int, settle: float = 0.0) -> dict[str, float]:
    for ident in range(warmup):
        answer = server.call(10 + ident, tool)
        if TEXT not in json.dumps(answer):
            raise RuntimeError(f"unexpected answer: {answer}")
    time.sleep(settle)  # background start-up work (the tokenizer's warm-up) done before measuring
    user0, system0 = server.cpu()
    samples = []
    for ident in range(calls):
        start = time.perf_counter()
        server.call(100_000 + ident, tool)
        samples.append((time.perf_counter() - start) * 1000)
    user1, system1 = server.cpu()
    return {
        "p50_ms": statistics.median(samples),
        "user_ms": 1000 * (user1 - user0) / calls,
        "system_ms": 1000 * (system1 - system0) / calls,
    }


def _config(directory: Path, rules: bool = True) -> Path:
    config = directory / "claimcheck.json"
    demo: dict[str, Any] = {"command": sys.executable, "args": ["-m", "server.demo.server"]}
    if not rules:
        demo["async"] = False
    settings = {"startupWaitSecs": 120, "asyncTimeoutSecs": 600}  # under valgrind a call may take seconds
    config.write_text(json.dumps({"mcpServers": {"demo": demo}, "settings": settings}))
    return config


def instructions(tree: Path, config: Path, api: bool, era: str = "handshake") -> int:
    """User-space instructions per call of `era`: the difference of a 300-call and a 50-call run under callgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind is not installed (apt-get install -y valgrind)")
    totals = {}
    with tempfile.TemporaryDirectory() as tmp:
        for calls in (50, 300):
            out = Path(tmp) / f"callgrind.{calls}"
            command = [valgrind, "--tool=callgrind", "--cache-sim=no", f"--callgrind-out-file={out}"]
            server = Server([*command, *_command("claimcheck", config, api)], tree, dict(os.environ), era=era)
            try:
                measure(server, "demo__echo", calls, warmup=20, settle=100)
            finally:
                server.close()
            line = next(line for line in out.read_text().splitlines() if line.startswith("totals:"))
            totals[calls] = int(line.split()[1])
    return (totals[300] - totals[50]) // 250


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose claimcheck runs (default: this)")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds of every path")
    parser.add_argument("--api", action="store_true", help="claimcheck with its status API and history on")
    parser.add_argument("--instructions", action="store_true", help="instructions per call under valgrind")
    parser.add_argument("--eras", default="handshake", help="handshake and/or 2026-07-28, comma-separated")
    parser.add_argument("--no-async", action="store_true", help='the demo server with its rules off ("async": false)')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="claimcheck-raw-") as tmp:
        config = _config(Path(tmp), rules=not args.no_async)
        if args.instructions:
            for era in args.eras.split(","):
                count = instructions(args.tree, config, args.api, era)
                print(f"claimcheck ({args.tree}, {era}): {count:,} instructions per call")
            return 0
        paths = [("claimcheck", "on"), ("claimcheck", "off"), ("floor", ""), ("direct", "")]
        eras = args.eras.split(",")
        print("| round | era | path | p50 ms | user ms/call | system ms/call |\n|---:|---|---|---:|---:|---:|")
        for round_no in range(1, args.rounds + 1):
            for kind, fast in paths:
                for era in eras:
                    env = {**os.environ, "CLAIMCHECK_FAST_PATH": fast or "on"}
                    server = Server(_command(kind, config, args.api), args.tree, env, era=era)
                    tool = "echo" if kind == "direct" else "demo__echo"
                    try:
                        row = measure(server, tool, args.calls, args.warmup)
                    finally:
                        server.close()
                    name = {"on": "claimcheck", "off": "claimcheck, fast path off"}.get(fast, kind)
                    figures = f"{row['p50_ms']:.3f} | {row['user_ms']:.3f} | {row['system_ms']:.3f}"
                    print(f"| {round_no} | {era} | {name} | {figures} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
