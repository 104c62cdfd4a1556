"""Large outputs through a chain: claimcheck → producer against claimcheck → claimcheck → producer.

For each size (MiB), the two paths alternate in one run (`--rounds` times each, the order flipped every round):
  single  `claimcheck serve` over stdio in front of tests/support/servers/raw_downstream.py;
  chain   `claimcheck serve` in front of another `claimcheck serve` in front of it: the outer sends its calls
          as pass-throughs, and the inner passes the output on as it reads it (`--paths` adds chain-http: the
          inner serves streamable HTTP, the outer calls it there; chain-http-sdk: the same with the inner's
          fast path off, so its SDK path answers; and chain-sse: the inner serves legacy SSE, whose only path
          is the SDK's. On the SDK's path the inner stores the whole output, then sends it from the file);
  plain   (`--paths plain`) one `claimcheck serve` with its rules off for the producer (`"async": false`): the
          whole output comes back in the answer, streamed from the spool's file past the 16 MiB kept whole.
The tool is `fast {mib}` (the producer writes as fast as the pipe takes it). Each run starts its processes anew,
makes a 20 MiB call (the spool and, in the chain, the streaming path warm up; the inner keeps 20 MiB whole in no
case: its spool keeps at most 16 MiB of a message), then takes each claimcheck's idle peak RSS (VmHWM) and times
one call of the size: seconds from the call to the too-large answer (the handle), each process's VmHWM above
its idle peak, the CPU seconds each claimcheck spent on the call (/proc/PID/stat), and whether the answer names
the size the producer wrote.

Usage: python bench/chain_large.py [--sizes 200,1000] [--rounds 3] [--json PATH] [--ascii]
                                   [--paths single,plain,chain,chain-http,chain-http-sdk,chain-sse]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from large_outputs import MIB, PY, RAW, ROOT, Wire, vm

sys.path.insert(0, str(ROOT))
from tests.support.servers.raw_downstream import fast_text_pieces

WARM_MIB = 20
SETTINGS = {"asyncTimeoutSecs": 3600}  # the size rule is measured, not the time rule


def _config(directory: Path, servers: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "claimcheck.json"
    settings = {**SETTINGS, "root": str(directory / "out")}
    config.write_text(json.dumps({"mcpServers": servers, "settings": settings}), encoding="utf-8")
    return config


def _serve(config: Path) -> list[str]:
    return [PY, "-m", "server", "serve", "--no-api", "--config", str(config)]


def _inner_pid(outer: int) -> int:
    """The inner claimcheck: the outer's child that serves."""
    for task in Path(f"/proc/{outer}/task").iterdir():
        for child in (task / "children").read_text(encoding="utf-8").split():
            if b"\0serve\0" in Path(f"/proc/{child}/cmdline").read_bytes():
                return int(child)
    raise RuntimeError("the inner claimcheck is not running")


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) `pid` has used so far, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


ASCII = False  # the producer's text in ASCII (`--ascii`)


def _call(wire: Wire, tool: str, mib: int) -> str:
    wire.send("tools/call", {"name": tool, "arguments": {"mib": mib, "ascii": ASCII}})
    answer = json.loads(wire.line())
    return str(answer["result"]["content"][0]["text"])


def _inner_http(config: Path, transport: str = "http", fast: bool = True) -> tuple[subprocess.Popen[bytes], str]:
    """An inner claimcheck serving streamable HTTP (or legacy SSE) on a free port, its fast path on or off: its
    process and URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [*_serve(config), "--transport", transport, "--port", str(port)]
    env = {**os.environ, "CLAIMCHECK_FAST_PATH": "on" if fast else "off"}
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, f"http://127.0.0.1:{port}/" + ("sse" if transport == "sse" else "mcp")
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("the inner claimcheck did not start serving HTTP") from None
            time.sleep(0.05)


def run(path: str, mib: int, scratch: Path) -> dict[str, Any]:
    """One call of `mib` MiB on `path` ("single", "chain", "chain-http", "chain-http-sdk" or "chain-sse"), on
    processes started for it."""
    producer = {"command": PY, "args": [RAW]}
    served: subprocess.Popen[bytes] | None = None
    if path == "single":
        servers, tool = {"raw": producer}, "raw__fast"
    elif path == "plain":
        servers, tool = {"raw": {**producer, "async": False}}, "raw__fast"
    elif path == "chain":
        inner = _config(scratch / "inner", {"raw": producer})
        servers, tool = {"inner": {"command": PY, "args": _serve(inner)[1:]}}, "inner__raw__fast"
    else:
        transport = "sse" if path == "chain-sse" else "http"
        inner = _config(scratch / "inner", {"raw": producer})
        served, url = _inner_http(inner, transport, fast=path != "chain-http-sdk")
        entry: dict[str, Any] = {"url": url, **({"transport": "sse"} if transport == "sse" else {})}
        servers, tool = {"inner": entry}, "inner__raw__fast"
    wire = Wire(_serve(_config(scratch / "outer", servers)), cwd=ROOT)
    try:
        wire.handshake()
        wire.send("tools/list")
        wire.line()
        if path == "plain":
            return _plain(wire, tool, mib)
        warm = _call(wire, tool, WARM_MIB)
        if not warm.startswith("Tool output is too large"):
            return {"path": path, "mib": mib, "failed": warm[:200]}
        pids = {"outer": wire.process.pid}
        if path == "chain":
            pids["inner"] = _inner_pid(wire.process.pid)
        elif served is not None:
            pids["inner"] = served.pid
        idle = {name: vm(pid, "VmHWM") for name, pid in pids.items()}
        cpu_before = {name: _cpu(pid) for name, pid in pids.items()}
        start = time.perf_counter()
        text = _call(wire, tool, mib)
        seconds = time.perf_counter() - start
        cpu = {name: _cpu(pid) - cpu_before[name] for name, pid in pids.items()}
        peaks = {name: (vm(pid, "VmHWM") - idle[name]) / MIB for name, pid in pids.items()}
    finally:
        wire.close()
        if served is not None:
            served.terminate()
            served.wait(timeout=10)
    return {
        "path": path,
        "mib": mib,
        "seconds": round(seconds, 3),
        "cpu_s": {name: round(value, 2) for name, value in cpu.items()},
        "peak_above_idle_mib": {name: round(value, 1) for name, value in peaks.items()},
        "idle_mib": {name: round(value / MIB, 1) for name, value in idle.items()},
        "size_ok": text.startswith(f"Tool output is too large ({mib * MIB} bytes, "),
    }


def _plain(wire: Wire, tool: str, mib: int) -> dict[str, Any]:
    """The `plain` path's call: the whole output in the answer, read to a counter (its size checked against the
    producer's text escaped), after a warm-up call of `WARM_MIB`."""
    counted = _Counter()
    wire.send("tools/call", {"name": tool, "arguments": {"mib": WARM_MIB, "ascii": ASCII}})
    wire.line(counted)
    pid = wire.process.pid
    idle, cpu_before = vm(pid, "VmHWM"), _cpu(pid)
    start = time.perf_counter()
    wire.send("tools/call", {"name": tool, "arguments": {"mib": mib, "ascii": ASCII}})
    size = int(wire.line(_Counter()))
    seconds = time.perf_counter() - start
    cpu, grown = _cpu(pid) - cpu_before, vm(pid, "VmHWM") - idle
    escaped = sum(len(json.dumps(piece, ensure_ascii=False).encode()) - 2 for piece in fast_text_pieces(mib, ASCII))
    return {
        "path": "plain",
        "mib": mib,
        "seconds": round(seconds, 3),
        "cpu_s": {"outer": round(cpu, 2)},
        "peak_above_idle_mib": {"outer": round(grown / MIB, 1)},
        "idle_mib": {"outer": round(idle / MIB, 1)},
        "size_ok": escaped < size < escaped + 200,  # the text, escaped as the producer did, in its JSON-RPC line
    }


class _Counter:
    def write(self, block: bytes) -> None:
        pass


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per size and path: the median seconds, and the largest peak of each process."""
    table = []
    for mib in sorted({row["mib"] for row in rows}):
        for path in ("single", "plain", "chain", "chain-http", "chain-http-sdk", "chain-sse"):
            done = [row for row in rows if row["mib"] == mib and row["path"] == path and "failed" not in row]
            if not done:
                continue
            names = done[0]["peak_above_idle_mib"]
            table.append(
                {
                    "mib": mib,
                    "path": path,
                    "runs": len(done),
                    "median_seconds": round(statistics.median(row["seconds"] for row in done), 3),
                    "median_cpu_s": {n: statistics.median(row["cpu_s"][n] for row in done) for n in names},
                    "max_peak_above_idle_mib": {n: max(row["peak_above_idle_mib"][n] for row in done) for n in names},
                    "sizes_ok": all(row["size_ok"] for row in done),
                }
            )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="200,1000", help="MiB, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each path per size")
    parser.add_argument("--json", help="write the runs and the summary here too")
    parser.add_argument(
        "--paths",
        default="single,chain",
        help="of single, plain, chain, chain-http, chain-http-sdk, chain-sse (comma-separated)",
    )
    parser.add_argument("--ascii", action="store_true", help="the producer's text in ASCII (no é, no emoji)")
    args = parser.parse_args()
    global ASCII
    ASCII = args.ascii
    paths = args.paths.split(",")
    rows: list[dict[str, Any]] = []
    for mib in [int(size) for size in args.sizes.split(",")]:
        for round_number in range(args.rounds):
            order = paths if round_number % 2 == 0 else paths[::-1]
            for path in order:
                with tempfile.TemporaryDirectory(prefix="bench-chain-") as tmp:
                    row = run(path, mib, Path(tmp))
                rows.append(row)
                print(json.dumps(row), flush=True)
    table = summary(rows)
    for line in table:
        print(json.dumps(line), file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": rows, "summary": table}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
