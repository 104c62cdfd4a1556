"""Per-call overhead of claimcheck (and of FastMCP's proxy) over a direct stdio connection.

The paths, all stdio, each driven by an mcp 2.3 `Client(StdioServerParameters(...), mode="legacy")`:
  direct          the server itself                                 tool `echo`
  claimcheck      python -m server serve --config TMP (server behind) tool `demo__echo` (claimcheck-sdk: fast path off)
  chain-2         claimcheck → claimcheck → server                  tool `demo__echo`
  relay-floor     bench/relay_floor.py: a bare asyncio relay         tool `demo__echo` (the least a Python proxy adds)
  fastmcp         bench/fastmcp_proxy.py (FastMCP create_proxy)      tool `echo`
The server is the demo server (`--downstream demo`, Python, mcp SDK) or server-everything (`--downstream
everything`, Node; installed from npm into .cache/npm-peers by tests/support/peers.py on first use).
All stay connected for the whole run. After a warm-up, the calls are made in rounds: each round
makes a block of calls on every path, in an order that rotates from round to round, so machine noise
lands on all paths alike. Path (c) is skipped when bench/.venv-fastmcp is missing (bench/setup_fastmcp.sh).

Run from the repo root with the project's venv:  python bench/overhead.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
FASTMCP_PYTHON = REPO / "bench" / ".venv-fastmcp" / "bin" / "python"
FASTMCP_PROXY = REPO / "bench" / "fastmcp_proxy.py"
RELAY_FLOOR = REPO / "bench" / "relay_floor.py"
TARGET_ADDED_MEDIAN_MS = 0.3
TEXT = "hello, claimcheck"
ECHO = {"demo": ("text", TEXT), "everything": ("message", f"Echo: {TEXT}")}
"""Per downstream: the echo tool's argument, and the text it answers."""
DOWNSTREAM = "demo"


@dataclass
class Target:
    """One way of reaching the demo server's `echo` tool."""

    name: str
    params: StdioServerParameters
    tool: str
    marker: str = ""
    """A piece of the command line of the process whose CPU time is this path's (the server the client runs)."""
    samples_ms: list[float] = field(default_factory=list)
    round_medians_ms: list[float] = field(default_factory=list)
    pid: int | None = None
    cpu_s: float = 0.0

    @property
    def median(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def p99(self) -> float:
        return statistics.quantiles(self.samples_ms, n=100, method="inclusive")[98]


def demo_command() -> tuple[str, list[str]]:
    """The downstream: the demo server run by the project's interpreter (the one running this script), or
    server-everything."""
    if DOWNSTREAM == "everything":
        sys.path.insert(0, str(REPO))
        from tests.support.peers import everything_command

        node, *args = everything_command()
        return node, args
    return sys.executable, ["-m", "server.demo.server"]


def direct_marker() -> str:
    return "server-everything" if DOWNSTREAM == "everything" else "server.demo.server"


def build_targets(config_file: Path, fastmcp_python: Path | None, chain_config: Path | None = None) -> list[Target]:
    command, args = demo_command()

    def claimcheck(name: str, config: Path, fast: str) -> Target:
        serve = ["-m", "server", "serve", "--config", str(config)]
        env = {"CLAIMCHECK_FAST_PATH": fast}
        params = StdioServerParameters(command=sys.executable, args=serve, env=env, cwd=str(REPO))
        return Target(name, params, "demo__echo", str(config))

    paths = [
        Target("direct", StdioServerParameters(command=command, args=args, cwd=str(REPO)), "echo", direct_marker()),
        claimcheck("claimcheck", config_file, "on"),
        claimcheck("claimcheck-sdk", config_file, "off"),
        Target(
            "relay-floor",
            StdioServerParameters(
                command=sys.executable, args=[str(RELAY_FLOOR), "demo", command, *args], cwd=str(REPO)
            ),
            "demo__echo",
            "relay_floor.py",
        ),
    ]
    if chain_config is not None:
        paths.append(claimcheck("chain-2", chain_config, "on"))
    if fastmcp_python is not None:
        quiet = {"FASTMCP_LOG_LEVEL": "WARNING", "FASTMCP_CHECK_FOR_UPDATES": "off"}
        paths.append(
            Target(
                "fastmcp",
                StdioServerParameters(
                    command=str(fastmcp_python), args=[str(FASTMCP_PROXY), command, *args], env=quiet, cwd=str(REPO)
                ),
                "echo",
                "fastmcp_proxy",
            )
        )
    return paths


def write_claimcheck_config(directory: Path, name: str = "claimcheck-bench.json") -> Path:
    command, args = demo_command()
    servers = {"demo": {"command": command, "args": args}}
    settings = {"startupWaitSecs": 120}  # a loaded machine may take more than the default 3 s to start the demo
    config = directory / name
    config.write_text(json.dumps({"mcpServers": servers, "settings": settings}, indent=2))
    return config


def write_chain_config(directory: Path) -> Path:
    """claimcheck → claimcheck → demo: the outer one fronts the inner one without a prefix (`demo__echo`)."""
    inner = write_claimcheck_config(directory, "claimcheck-inner.json")
    serve = ["-m", "server", "serve", "--no-api", "--config", str(inner)]
    servers = {"inner": {"command": sys.executable, "args": serve, "prefix": ""}}
    config = directory / "claimcheck-chain.json"
    config.write_text(json.dumps({"mcpServers": servers, "settings": {"startupWaitSecs": 120}}, indent=2))
    return config


def _children() -> dict[int, str]:
    """This process's children: pid → command line."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == os.getpid():
            found[int(entry.name)] = cmdline
    return found


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of one process (not its children), from /proc."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def call_once(client: Client, tool: str) -> float:
    argument, expected = ECHO[DOWNSTREAM]
    start = time.perf_counter()
    result = await client.call_tool(tool, {argument: TEXT})
    elapsed = time.perf_counter() - start
    text = getattr(result.content[0], "text", None) if result.content else None
    if result.is_error or text != expected:
        raise RuntimeError(f"{tool}: unexpected result {result!r}")
    return elapsed * 1000


async def run(paths: Sequence[Target], *, calls: int, rounds: int, warmup: int) -> dict[str, Any]:
    per_round = calls // rounds
    async with AsyncExitStack() as stack:
        clients: dict[str, Client] = {}
        connect_s: dict[str, float] = {}
        for path in paths:
            start = time.perf_counter()
            client = await stack.enter_async_context(Client(path.params, mode="legacy"))
            names = [tool.name for tool in (await client.list_tools()).tools]
            connect_s[path.name] = time.perf_counter() - start
            if path.tool not in names:
                raise RuntimeError(f"{path.name}: no tool {path.tool!r} among {names}")
            clients[path.name] = client
            claimed = {p.pid for p in paths}
            path.pid = next(
                (pid for pid, cmd in _children().items() if path.marker in cmd and pid not in claimed), None
            )
        for path in paths:
            for _ in range(warmup):
                await call_once(clients[path.name], path.tool)
        for round_no in range(rounds):
            shift = round_no % len(paths)
            for path in [*paths[shift:], *paths[:shift]]:
                cpu_before = cpu_seconds(path.pid)
                block = [await call_once(clients[path.name], path.tool) for _ in range(per_round)]
                path.cpu_s += cpu_seconds(path.pid) - cpu_before
                path.samples_ms.extend(block)
                path.round_medians_ms.append(statistics.median(block))
    return {"connect_s": connect_s}


def summarize(paths: Sequence[Target]) -> dict[str, Any]:
    by_name = {path.name: path for path in paths}
    direct = by_name["direct"].median
    summary: dict[str, Any] = {
        "paths": {
            path.name: {
                "tool": path.tool,
                "calls": len(path.samples_ms),
                "median_ms": path.median,
                "p99_ms": path.p99,
                "mean_ms": statistics.fmean(path.samples_ms),
                "min_ms": min(path.samples_ms),
                "added_median_ms": path.median - direct,
                "server_cpu_ms_per_call": 1000 * path.cpu_s / len(path.samples_ms) if path.pid else None,
                "round_medians_ms": path.round_medians_ms,
            }
            for path in paths
        }
    }
    cc = summary["paths"]["claimcheck"]
    summary["target_added_median_ms"] = TARGET_ADDED_MEDIAN_MS
    summary["target_met"] = cc["added_median_ms"] <= TARGET_ADDED_MEDIAN_MS
    if "relay-floor" in summary["paths"]:
        floor = summary["paths"]["relay-floor"]
        summary["added_median_claimcheck_minus_floor_ms"] = cc["added_median_ms"] - floor["added_median_ms"]
    if "fastmcp" in summary["paths"]:
        fm = summary["paths"]["fastmcp"]
        summary["ratio_median_claimcheck_over_fastmcp"] = cc["median_ms"] / fm["median_ms"]
        summary["ratio_added_median_claimcheck_over_fastmcp"] = cc["added_median_ms"] / fm["added_median_ms"]
    return summary


def markdown(summary: dict[str, Any], facts: dict[str, Any]) -> str:
    lines = [
        "| path | tool | calls | median ms | p99 ms | added median ms (vs direct) | server CPU ms/call "
        "| per-round medians ms |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, row in summary["paths"].items():
        added = "—" if name == "direct" else f"{row['added_median_ms']:+.2f}"
        rounds = " ".join(f"{m:.2f}" for m in row["round_medians_ms"])
        cpu = "?" if row["server_cpu_ms_per_call"] is None else f"{row['server_cpu_ms_per_call']:.2f}"
        lines.append(
            f"| {name} | `{row['tool']}` | {row['calls']} | {row['median_ms']:.2f} | {row['p99_ms']:.2f} "
            f"| {added} | {cpu} | {rounds} |"
        )
    lines.append("")
    cc = summary["paths"]["claimcheck"]
    verdict = "met" if summary["target_met"] else "NOT met"
    lines.append(
        f"- claimcheck added median: {cc['added_median_ms']:.2f} ms; target ≤ {summary['target_added_median_ms']:g} ms:"
        f" **{verdict}**"
    )
    if "added_median_claimcheck_minus_floor_ms" in summary:
        floor = summary["paths"]["relay-floor"]
        lines.append(
            f"- a bare asyncio relay (the floor) adds {floor['added_median_ms']:+.2f} ms; claimcheck adds"
            f" {summary['added_median_claimcheck_minus_floor_ms']:+.2f} ms more"
        )
    if "ratio_median_claimcheck_over_fastmcp" in summary:
        ratio, added_ratio = (
            summary["ratio_median_claimcheck_over_fastmcp"],
            summary["ratio_added_median_claimcheck_over_fastmcp"],
        )
        lines.append(f"- claimcheck / FastMCP: medians {ratio:.2f}, added medians {added_ratio:.2f}")
    else:
        lines.append(f"- FastMCP path skipped: {facts['fastmcp_note']}")
    lines.append(
        f"- machine: {facts['cpus']} vCPU, {facts['machine']}, Python {facts['python']}, mcp {facts['mcp']}"
        + (f", fastmcp {facts['fastmcp']}" if facts.get("fastmcp") else "")
    )
    return "\n".join(lines)


def fastmcp_version(python: Path) -> str:
    code = "from importlib.metadata import version; print(version('fastmcp'), version('mcp'))"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return f"{out[0]} (on mcp {out[1]})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=500, help="measured calls per path (default 500)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--warmup", type=int, default=20, help="warm-up calls per path (default 20)")
    parser.add_argument("--fastmcp-python", type=Path, default=FASTMCP_PYTHON, help="python of the FastMCP venv")
    parser.add_argument("--no-fastmcp", action="store_true", help="skip the FastMCP path")
    parser.add_argument("--no-chain", action="store_true", help="skip claimcheck → claimcheck → demo")
    parser.add_argument("--no-sdk-path", action="store_true", help="skip claimcheck with its fast path off")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--downstream", choices=sorted(ECHO), default="demo", help="the server behind (default demo)")
    parser.add_argument("--no-floor", action="store_true", help="skip the bare asyncio relay")
    args = parser.parse_args(argv)
    global DOWNSTREAM
    DOWNSTREAM = args.downstream
    if args.calls % args.rounds:
        parser.error("--calls must be a multiple of --rounds")

    facts: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "machine": f"{platform.system()} {platform.machine()}",
        "python": platform.python_version(),
        "mcp": version("mcp"),
        "calls": args.calls,
        "rounds": args.rounds,
        "warmup": args.warmup,
        "downstream": args.downstream,
    }
    fastmcp_python: Path | None = None
    if args.no_fastmcp:
        facts["fastmcp_note"] = "--no-fastmcp given"
    elif not args.fastmcp_python.exists():
        facts["fastmcp_note"] = f"{args.fastmcp_python} not found (run bash bench/setup_fastmcp.sh)"
    else:
        fastmcp_python = args.fastmcp_python
        facts["fastmcp"] = fastmcp_version(fastmcp_python)
    if "fastmcp_note" in facts:
        print(f"note: FastMCP path skipped: {facts['fastmcp_note']}", file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="claimcheck-bench-") as tmp:
        chain = None if args.no_chain else write_chain_config(Path(tmp))
        paths = build_targets(write_claimcheck_config(Path(tmp)), fastmcp_python, chain)
        if args.no_sdk_path:
            paths = [path for path in paths if path.name != "claimcheck-sdk"]
        if args.no_floor:
            paths = [path for path in paths if path.name != "relay-floor"]
        started = time.perf_counter()
        extra = anyio.run(lambda: run(paths, calls=args.calls, rounds=args.rounds, warmup=args.warmup))
        facts["wall_s"] = round(time.perf_counter() - started, 1)
    facts["connect_s"] = {name: round(seconds, 2) for name, seconds in extra["connect_s"].items()}
    summary = summarize(paths)
    print(markdown(summary, facts))
    if args.json:
        samples = {path.name: path.samples_ms for path in paths}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"facts": facts, "summary": summary, "samples_ms": samples}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
