"""Large outputs end to end: time to a handle and peak memory, against the floor and other clients.

For each size (MiB) and downstream kind (stdio, streamable HTTP answering in JSON), in one run:
  floor      a bare reader drains the same bytes from the same downstream into a file (no MCP client; over
             stdio from a pipe as wide as claimcheck's (1 MiB), `os.read` a megabyte at a time and written, as `cat`
             does; over HTTP the request written on a socket by hand, the answer read from it a megabyte at a time
             until the server closes it, headers and chunk sizes and all; its CPU seconds per GiB beside);
             the producer is `fast` (one block escaped once, written as fast as the pipe takes it, ~1 GB/s),
             so the floor is the pipe's and the disk's, not a slow server's (`--tool big` for the old one);
  python floor  (stdio) the least a Python reader does to store the text (`python_floor.py`): the floor's reads, plus
             pydantic-core decoding the JSON string in 64 KiB slices, the UTF-8 encoding, and a thread writing;
  claimcheck `claimcheck serve` over stdio in front of it: time from the call to the too-large answer,
             and claimcheck's peak RSS (VmHWM) above its idle peak;
  direct     the mcp SDK's Client calling the downstream directly (time; its own peak RSS);
  fastmcp    FastMCP's proxy in front of it (time; its peak RSS), when bench/.venv-fastmcp exists
             (bash bench/setup_fastmcp.sh).
A path that runs out of its time limit (300 s) or memory (8 GiB address space) is reported as failed.
The downstream is tests/support/servers/raw_downstream.py, which streams any size without holding it.

floor, python floor and claimcheck are alternated `--repeat` times (medians reported, every sample kept); the others
run once. `--skip python-floor` leaves the python floor out.

claimcheck's CPU seconds per GiB (user and system, all its threads, around the measured call) are reported
beside its time; with `--settle S`, its RSS S seconds after the call too (steady memory: 70 s lets the
tokenizer's vocabulary go).

Usage: python bench/large_outputs.py [--sizes 1,10,100,1000] [--kinds stdio,http] [--skip direct,fastmcp,python-floor]
                                     [--repeat 3] [--tool fast|big] [--settle 70] [--ascii]
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import json
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from python_floor import decode_into

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RAW = str(ROOT / "tests" / "support" / "servers" / "raw_downstream.py")
FASTMCP = HERE / ".venv-fastmcp" / "bin" / "python"
PY = sys.executable
MIB = 1 << 20
LIMIT_S = 300
PIPE_BYTES = 1 << 20  # server.downstream.processes.PIPE_BYTES
TOOL = "fast"  # the downstream's tool that produces the output (--tool)
ARGUMENTS: dict[str, Any] = {}  # the tool's arguments besides its size (`--ascii`: {"ascii": True})
SETTLE_S = 0.0  # after the measured call, wait this long and report claimcheck's RSS (--settle)
MEMORY_LIMIT = 8 << 30  # the SDK client and FastMCP hold results whole: cap them so they cannot take the machine


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system seconds of a process so far (its threads included, its children not)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def per_gib(before: tuple[float, float], after: tuple[float, float], mib: int) -> dict[str, float]:
    """CPU seconds per GiB between two `cpu_seconds`: all of it, and the user and system parts (the kernel's part,
    copies into the page cache above all, varies from run to run on a virtual machine; the user part is the
    program's own work)."""
    user, system = after[0] - before[0], after[1] - before[1]
    gib = mib / 1024
    return {
        "cpu_s_per_gib": round((user + system) / gib, 3),
        "user_s_per_gib": round(user / gib, 3),
        "sys_s_per_gib": round(system / gib, 3),
    }


def own_cpu() -> tuple[float, float]:
    times = os.times()
    return times.user, times.system


def vm(pid: int, field: str) -> int:
    status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    match = re.search(rf"^{field}:\s+(\d+) kB$", status, re.M)
    return int(match.group(1)) * 1024 if match else 0


class Wire:
    """Blocking JSON-RPC over a process's stdin/stdout; answers read line by line, big ones to a file."""

    def __init__(self, command: list[str], **kwargs: Any) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, **kwargs)
        self._next = 0

    def send(self, method: str, params: dict[str, Any] | None = None, *, notify: bool = False) -> int:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self._next += 1
            message["id"] = self._next
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        return self._next

    def line(self, sink: Any = None) -> bytes:
        """The next line (returned), or streamed into `sink` when given (its size returned as bytes)."""
        assert self.process.stdout is not None
        if sink is None:
            return self.process.stdout.readline()
        size = 0
        while True:
            block = self.process.stdout.readline(MIB)
            if not block:
                raise EOFError("the process closed stdout")
            sink.write(block)
            size += len(block)
            if block.endswith(b"\n"):
                return str(size).encode()

    def handshake(self) -> None:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        self.send("initialize", init)
        self.line()
        self.send("notifications/initialized", notify=True)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def downstream(kind: str) -> tuple[dict[str, Any], subprocess.Popen[bytes] | None]:
    """A config entry for the raw downstream, and the HTTP server process to stop afterwards."""
    if kind == "stdio":
        return {"command": PY, "args": [RAW]}, None
    server = subprocess.Popen([PY, RAW, "--http", "0"], stderr=subprocess.PIPE)
    assert server.stderr is not None
    url = re.search(rb"(http://\S+/mcp)", server.stderr.readline())
    assert url is not None
    return {"url": url.group(1).decode()}, server


def _stdio_call(entry: dict[str, Any], mib: int, drain: Callable[[int], int]) -> dict[str, Any]:
    """One call of the tool on a fresh stdio downstream, its answer read by `drain` from the stdout pipe (widened as
    claimcheck widens its pipes; the bytes it stored returned): seconds, bytes, this process's CPU per GiB."""
    wire = Wire([entry["command"], *entry["args"]])
    try:
        wire.handshake()
        assert wire.process.stdout is not None
        stdout = wire.process.stdout.fileno()  # the handshake's answer was one read: nothing waits in the buffer
        fcntl.fcntl(stdout, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
        start, cpu = time.perf_counter(), own_cpu()
        wire.send("tools/call", {"name": TOOL, "arguments": {"mib": mib, **ARGUMENTS}})
        size = drain(stdout)
        elapsed, cpu_after = time.perf_counter() - start, own_cpu()
    finally:
        wire.close()
    return {"seconds": elapsed, "bytes": size, **per_gib(cpu, cpu_after, mib)}


def _cat(stdout: int, target: Path) -> int:
    """What `cat` does: a megabyte read, then written, until the line's end; the bytes written."""
    size = 0
    with target.open("wb", buffering=0) as out:
        while True:
            block = os.read(stdout, MIB)
            if not block:
                raise EOFError("the downstream closed stdout")
            out.write(block)
            size += len(block)
            if block.endswith(b"\n"):
                return size


def floor(kind: str, mib: int, entry: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """A bare reader: the downstream's answer drained into a file, nothing parsed."""
    target = scratch / "floor.out"
    if kind == "stdio":
        try:
            return _stdio_call(entry, mib, functools.partial(_cat, target=target))
        finally:
            target.unlink(missing_ok=True)
    url = urllib.parse.urlsplit(entry["url"])
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": TOOL, "arguments": {"mib": mib, **ARGUMENTS}},
        }
    )
    head = (
        f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    size = 0
    with socket.create_connection((url.hostname, url.port)) as connection, target.open("wb", buffering=0) as out:
        start, cpu = time.perf_counter(), own_cpu()
        connection.sendall(head.encode() + body.encode())
        while block := connection.recv(MIB):  # what `cat` does with a socket: the server closes it after the answer
            out.write(block)
            size += len(block)
        elapsed, cpu_after = time.perf_counter() - start, own_cpu()
    target.unlink()
    return {"seconds": elapsed, "bytes": size, **per_gib(cpu, cpu_after, mib)}


def decoding_floor(entry: dict[str, Any], mib: int, scratch: Path) -> dict[str, Any]:
    """The least a Python reader does to store the text (`python_floor.py`): the bare reader plus pydantic-core's
    decoding and the UTF-8 encoding, a thread writing."""
    target = scratch / "python-floor.out"
    try:
        taken = _stdio_call(entry, mib, functools.partial(decode_into, target=target))
    finally:
        target.unlink(missing_ok=True)
    return {**taken, "size_ok": taken["bytes"] == mib * MIB}


def claimcheck(entry: dict[str, Any], mib: int, scratch: Path) -> dict[str, Any]:
    config = scratch / "claimcheck.json"
    settings = {"root": str(scratch / "out"), "asyncTimeoutSecs": 3600}  # the size rule is measured, not the time rule
    config.write_text(json.dumps({"mcpServers": {"raw": entry}, "settings": settings}))
    wire = Wire([PY, "-m", "server", "serve", "--no-api", "--config", str(config)], cwd=ROOT)
    try:
        wire.handshake()
        wire.send("tools/list")
        wire.line()
        wire.send("tools/call", {"name": "raw__echo", "arguments": {"text": "warm"}})
        wire.line()
        wire.send("tools/call", {"name": f"raw__{TOOL}", "arguments": {"mib": 2}})  # the spool's path, and the
        wire.line()  # size rule's vocabulary (loaded in the background after the listing), before the idle peak
        idle = vm(wire.process.pid, "VmHWM")
        cpu = cpu_seconds(wire.process.pid)
        start = time.perf_counter()
        wire.send("tools/call", {"name": f"raw__{TOOL}", "arguments": {"mib": mib, **ARGUMENTS}})
        answer = json.loads(wire.line())
        elapsed = time.perf_counter() - start
        cpu_after = cpu_seconds(wire.process.pid)
        peak = vm(wire.process.pid, "VmHWM")
        text = answer["result"]["content"][0]["text"]
        if not text.startswith("Tool output is too large"):
            return {"failed": text[:200]}
        row = {"seconds": elapsed, "peak_above_idle_mib": (peak - idle) / MIB, "idle_mib": idle / MIB}
        row.update(per_gib(cpu, cpu_after, mib))
        if SETTLE_S:  # what stays once the process is left alone (the vocabulary goes a minute after its last count)
            time.sleep(SETTLE_S)
            row["rss_settled_mib"] = vm(wire.process.pid, "VmRSS") / MIB
        return row
    finally:
        wire.close()


_DIRECT = """
import anyio, json, sys, time, re
from pathlib import Path
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
async def main(entry, mib, tool):
    target = (stdio_client(StdioServerParameters(command=entry["command"], args=entry["args"]))
              if "command" in entry else entry["url"])
    async with Client(target, mode="legacy") as client:
        start = time.perf_counter()
        result = await client.call_tool(tool, {"mib": mib, **json.loads(sys.argv[4])})
        elapsed = time.perf_counter() - start
    size = sum(len(c.text.encode()) for c in result.content)
    peak = int(re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1)) * 1024
    print(json.dumps({"seconds": elapsed, "bytes": size, "peak_mib": peak / 2**20}))
anyio.run(main, json.loads(sys.argv[1]), float(sys.argv[2]), sys.argv[3])
"""


def direct(entry: dict[str, Any], mib: int) -> dict[str, Any]:
    return _child([PY, "-c", _DIRECT, json.dumps(entry), str(mib), TOOL, json.dumps(ARGUMENTS)])


def fastmcp(entry: dict[str, Any], mib: int) -> dict[str, Any]:
    if not FASTMCP.exists():
        return {"failed": "bench/.venv-fastmcp is missing (bash bench/setup_fastmcp.sh)"}
    target = ["--url", entry["url"]] if "url" in entry else [entry["command"], *entry["args"]]
    wire = Wire([str(FASTMCP), str(HERE / "fastmcp_proxy.py"), *target], stderr=subprocess.DEVNULL, preexec_fn=_capped)
    timer = threading.Timer(LIMIT_S, wire.process.kill)
    timer.start()
    try:
        wire.handshake()
        idle = vm(wire.process.pid, "VmHWM")
        start = time.perf_counter()
        wire.send("tools/call", {"name": TOOL, "arguments": {"mib": mib, **ARGUMENTS}})
        with open(os.devnull, "wb") as sink:
            size = int(wire.line(sink))
        elapsed = time.perf_counter() - start
        peak = vm(wire.process.pid, "VmHWM")
        return {"seconds": elapsed, "bytes": size, "peak_above_idle_mib": (peak - idle) / MIB}
    except (EOFError, OSError, ValueError) as exc:
        if not timer.is_alive():
            return {"failed": f"no answer within {LIMIT_S} s"}
        return {"failed": f"{type(exc).__name__}: {exc}"}
    finally:
        timer.cancel()
        if wire.process.poll() is None:
            wire.close()


def _child(command: list[str]) -> dict[str, Any]:
    try:
        done = subprocess.run(command, capture_output=True, timeout=LIMIT_S, cwd=ROOT, preexec_fn=_capped)
    except subprocess.TimeoutExpired:
        return {"failed": f"no answer within {LIMIT_S} s"}
    if done.returncode != 0:
        return {"failed": done.stderr.decode(errors="replace").strip().splitlines()[-1:]}
    return json.loads(done.stdout.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]


def _median_of(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The sample with the median time, and every time (a failure, when any sample failed)."""
    failed = [sample for sample in samples if "failed" in sample]
    if failed:
        return failed[0]
    ordered = sorted(samples, key=lambda sample: sample["seconds"])
    return {**ordered[len(ordered) // 2], "samples": [round(sample["seconds"], 4) for sample in samples]}


def main() -> None:
    global TOOL, SETTLE_S, ARGUMENTS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100,1000")
    parser.add_argument("--kinds", default="stdio,http")
    parser.add_argument("--skip", default="")
    parser.add_argument("--repeat", type=int, default=3, help="alternations of floor and claimcheck per size")
    parser.add_argument("--tool", choices=("fast", "big"), default="fast")
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument("--ascii", action="store_true", help="`fast`'s text in ASCII (no é, no emoji)")
    parser.add_argument("--settle", type=float, default=0.0, help="then wait this long and report claimcheck's RSS")
    args = parser.parse_args()
    TOOL, SETTLE_S = args.tool, args.settle
    ARGUMENTS = {"ascii": True} if args.ascii else {}
    skip = set(filter(None, args.skip.split(",")))
    results = []
    for kind in args.kinds.split(","):
        gave_up: set[str] = set()  # paths that failed at a smaller size are not tried at larger ones
        for mib in [int(size) for size in args.sizes.split(",")]:
            entry, server = downstream(kind)
            try:
                with tempfile.TemporaryDirectory(prefix="bench-large-") as tmp:
                    paths = {
                        "floor": functools.partial(floor, kind, mib, entry, Path(tmp)),
                        "python_floor": functools.partial(decoding_floor, entry, mib, Path(tmp)),
                        "claimcheck": functools.partial(claimcheck, entry, mib, Path(tmp)),
                    }
                    if kind != "stdio" or "python-floor" in skip:
                        del paths["python_floor"]
                    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in paths}
                    for round_ in range(args.repeat):
                        names = list(paths)
                        if round_ % 2:
                            names.reverse()
                        for name in names:
                            samples[name].append(paths[name]())
                    row: dict[str, Any] = {"kind": kind, "mib": mib, "tool": TOOL}
                    row.update({name: _median_of(taken) for name, taken in samples.items()})
                    if "seconds" in row["floor"] and "seconds" in row["claimcheck"]:
                        row["ratio"] = round(row["claimcheck"]["seconds"] / row["floor"]["seconds"], 2)
                    if "seconds" in row.get("python_floor", {}):
                        seconds = row["python_floor"]["seconds"]
                        row["python_floor_ratio"] = round(seconds / row["floor"]["seconds"], 2)
                        row["ratio_to_python_floor"] = round(row["claimcheck"]["seconds"] / seconds, 2)
                    for name, run in (("direct", direct), ("fastmcp", fastmcp)):
                        if name in skip:
                            continue
                        if name in gave_up:
                            row[name] = {"failed": "not tried: it failed at a smaller size"}
                            continue
                        row[name] = run(entry, mib)
                        if "failed" in row[name]:
                            gave_up.add(name)
            finally:
                if server is not None:
                    server.kill()
                    server.wait()
            results.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
