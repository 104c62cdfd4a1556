"""Start-up to the first answered `tools/list` over stdio: claimcheck with 1 and 5 downstreams, against the
downstreams alone and FastMCP's proxy with the same config.

Each run spawns the process(es) and drives stdio by hand, as a client does: `initialize`, then on its answer
`notifications/initialized` and `tools/list`. The figure is the time from spawning to the `tools/list` answer
(for `alone` with N servers: N spawned at once, until the last one answered). Every process spawned here runs in
a session of its own, as claimcheck's (and the SDK's) stdio downstreams do: with the kernel's autogroup
scheduling each session gets a fair share of a busy machine, so `alone` is not starved beside a proxy's
downstreams. Paths:
  alone          the downstream server(s) themselves, no proxy
  claimcheck     python -m server serve --config TMP, status API on (port 0), history in a temp stateDir
  claimcheck-no-api  the same with --no-api
  fastmcp        bench/fastmcp_config_proxy.py (FastMCP create_proxy over the same mcpServers), when
                 bench/.venv-fastmcp exists (bash bench/setup_fastmcp.sh)
Downstreams: `demo` = python -m server.demo.server (an mcp SDK server; its imports dominate), or `raw` =
tests/support/servers/raw_downstream.py (hand-written, starts in tens of milliseconds, so the figures show the
proxy's own start). Runs of all paths alternate, so machine noise lands on every path alike. `CPU` is the CPU time the
spawned process itself had used when the answer came (a proxy's downstreams not counted; for `alone`, all of
them). `RSS` (with `--idle SECS`): the spawned processes' resident memory SECS after the answer, idle (a proxy's
downstreams not counted; for `alone`, all of them summed). `listed` is how many tools the first answer held,
claimcheck's 6 own included: claimcheck answers after `startupWaitSecs` (default 3 s) without a server that is
slower, and announces it by list_changed later.

Run from the repo root with the project's venv:
  python bench/startup.py [--runs N] [--downstream demo|raw] [--servers 1 5] [--before DIR] [--only PATH ...]
                          [--startup-wait SECS] [--idle SECS] [--tree DIR] [--json PATH]
(--before DIR adds claimcheck from another checkout, e.g. `git archive <commit> | tar -x -C DIR`, as paths
"claimcheck (before)", run interleaved with the others; --tree runs the main paths from another checkout.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FASTMCP_PYTHON = REPO / "bench" / ".venv-fastmcp" / "bin" / "python"
FASTMCP_PROXY = REPO / "bench" / "fastmcp_config_proxy.py"
DOWNSTREAMS = {
    "demo": [sys.executable, "-m", "server.demo.server"],
    "raw": [sys.executable, str(REPO / "tests" / "support" / "servers" / "raw_downstream.py")],
}
TOOLS_PER_SERVER = {"demo": 5, "raw": 3}
RUN_TIMEOUT_S = 180.0  # a loaded machine starting 5 Python servers behind a proxy can take a minute
INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "startup-bench", "version": "1"},
}


@dataclass
class Peer:
    """One spawned process driven through initialize and tools/list."""

    process: subprocess.Popen[bytes]
    buffer: bytes = b""
    listed_at: float | None = None
    cpu_s: float = 0.0
    tools: list[str] = field(default_factory=list)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
        self.process.stdin.flush()

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if message.get("id") == 1:
                self.send({"method": "notifications/initialized"})
                self.send({"id": 2, "method": "tools/list", "params": {}})
            elif message.get("id") == 2:
                self.listed_at = time.perf_counter()
                self.cpu_s = _cpu_seconds(self.process.pid)
                self.tools = [tool["name"] for tool in message["result"]["tools"]]


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process itself has used so far, its children not counted."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drive(commands: list[list[str]], env: dict[str, str], cwd: Path, idle_s: float = 0.0) -> dict[str, float]:
    """Spawn every command at once; until each answered tools/list: seconds, CPU seconds of the spawned
    processes themselves (a proxy's downstreams not counted), and how many tools were listed; with `idle_s`,
    their resident memory that long after (MiB)."""
    started = time.perf_counter()
    peers = [
        Peer(
            subprocess.Popen(
                c, stdin=-1, stdout=-1, stderr=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True
            )
        )
        for c in commands
    ]
    selector = selectors.DefaultSelector()
    try:
        for peer in peers:
            assert peer.process.stdout is not None
            os.set_blocking(peer.process.stdout.fileno(), False)
            selector.register(peer.process.stdout, selectors.EVENT_READ, peer)
            peer.send({"id": 1, "method": "initialize", "params": INITIALIZE})
        while any(peer.listed_at is None for peer in peers):
            remaining = started + RUN_TIMEOUT_S - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError(f"no tools/list answer within {RUN_TIMEOUT_S:g} s from {commands}")
            for key, _ in selector.select(remaining):
                data = os.read(key.fd, 1 << 20)
                if not data:
                    raise RuntimeError(f"{key.data.process.args} closed stdout before answering tools/list")
                key.data.feed(data)
        if idle_s:
            time.sleep(idle_s)
            rss_mib = sum(_rss_bytes(peer.process.pid) for peer in peers) / (1 << 20)
    finally:
        selector.close()
        for peer in peers:
            _stop(peer.process)
    last = max(peers, key=lambda peer: peer.listed_at or 0.0)
    assert last.listed_at is not None
    figures = {
        "ms": (last.listed_at - started) * 1000,
        "cpu_ms": sum(peer.cpu_s for peer in peers) * 1000,
        "tools": sum(len(peer.tools) for peer in peers),
    }
    if idle_s:
        figures["rss_mib"] = rss_mib
    return figures


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="utf-8") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _stop(process: subprocess.Popen[bytes]) -> None:
    assert process.stdin is not None
    try:
        process.stdin.close()
    except BrokenPipeError:
        pass
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()


def main(
    runs: int,
    downstream: str,
    counts: list[int],
    tree: Path,
    before: Path | None,
    only: list[str] | None,
    startup_wait: float | None,
    idle_s: float = 0.0,
) -> dict[str, list[dict[str, float]]]:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        env = {**os.environ, "CLAIMCHECK_API_ENABLED": "true", "CLAIMCHECK_API_PORT": "0"}
        paths: dict[str, tuple[list[list[str]], Path]] = {}
        for count in counts:
            servers = {f"s{i}": {"command": DOWNSTREAMS[downstream][0], "args": DOWNSTREAMS[downstream][1:]}
                       for i in range(count)}  # fmt: skip
            settings: dict[str, Any] = {"stateDir": str(base / "state"), "root": str(base)}
            if startup_wait is not None:
                settings["startupWaitSecs"] = startup_wait
            config = base / f"config-{count}.json"
            config.write_text(json.dumps({"mcpServers": servers, "settings": settings}), encoding="utf-8")
            serve = [sys.executable, "-m", "server", "serve", "--config", str(config)]
            paths[f"{count} alone"] = ([DOWNSTREAMS[downstream]] * count, tree)
            paths[f"{count} claimcheck"] = ([serve], tree)
            paths[f"{count} claimcheck-no-api"] = ([[*serve, "--no-api"]], tree)
            if before is not None:
                paths[f"{count} claimcheck (before)"] = ([serve], before)
                paths[f"{count} claimcheck-no-api (before)"] = ([[*serve, "--no-api"]], before)
            if FASTMCP_PYTHON.exists():
                paths[f"{count} fastmcp"] = ([[str(FASTMCP_PYTHON), str(FASTMCP_PROXY), str(config)]], tree)
        if only:
            paths = {label: path for label, path in paths.items() if label.split(" ", 1)[1] in only}
        results: dict[str, list[dict[str, float]]] = {label: [] for label in paths}
        for run in range(runs):
            order = list(paths)
            order = order[run % len(order) :] + order[: run % len(order)]
            for label in order:
                commands, cwd = paths[label]
                results[label].append(drive(commands, env, cwd, idle_s))
    where = f"{tree}" + (f" against {before}" if before else "")
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    machine = f"{platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, load {load} at the end"
    print(f"{machine}, {runs} runs, {downstream} downstreams, {where}")
    print(f"{'path':<32}{'median':>9}{'min':>8}{'max':>8}{'CPU':>8}{'RSS':>8}  listed  every run (ms)")
    for label, samples in results.items():
        ms = [s["ms"] for s in samples]
        cpu = statistics.median(s["cpu_ms"] for s in samples)
        rss = f"{statistics.median(s['rss_mib'] for s in samples):.0f}" if "rss_mib" in samples[0] else "-"
        listed = sorted({int(s["tools"]) for s in samples})
        every = " ".join(f"{m:.0f}" for m in ms)
        head = f"{label:<32}{statistics.median(ms):>9.0f}{min(ms):>8.0f}{max(ms):>8.0f}{cpu:>8.0f}{rss:>8}"
        print(f"{head}  {listed!s:<6}  {every}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--downstream", choices=sorted(DOWNSTREAMS), default="demo")
    parser.add_argument("--servers", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--tree", type=Path, default=REPO, help="run claimcheck from this source tree")
    parser.add_argument("--before", type=Path, help="also run claimcheck from this tree, interleaved (an A/B)")
    parser.add_argument("--only", nargs="+", help="only these paths, e.g. claimcheck fastmcp")
    parser.add_argument("--startup-wait", type=float, metavar="SECS", help="claimcheck's startupWaitSecs (default 3)")
    parser.add_argument("--idle", type=float, default=0.0, metavar="SECS", help="RSS this long after the listing")
    parser.add_argument("--json", help="also write the samples here")
    arguments = parser.parse_args()
    before = arguments.before.resolve() if arguments.before else None
    tree = arguments.tree.resolve()
    samples = main(
        arguments.runs,
        arguments.downstream,
        arguments.servers,
        tree,
        before,
        arguments.only,
        arguments.startup_wait,
        arguments.idle,
    )
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(samples, indent=2), encoding="utf-8")
