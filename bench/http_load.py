"""Plain `echo` calls over streamable HTTP at 1, 8 and 32 concurrent clients: claimcheck, FastMCP, and a floor.

Servers (each a process of its own, all on 127.0.0.1):
  claimcheck  `python -m server serve --transport http --no-api`, the demo server behind it over stdio
  claimcheck-sdk  the same with its fast path off (CLAIMCHECK_FAST_PATH=off)
  fastmcp     bench/fastmcp_http_proxy.py (FastMCP create_proxy) in front of the same demo server
  direct      the demo server serving streamable HTTP itself, answering each call as one JSON body
              (`json_response=True`): what a client gets with no proxy at all, the mark for claimcheck's HTTP
              in, stdio out at one client
  direct-sse  the same with the SDK's default, each answer an SSE stream (`python -m server.demo.server http`)
  floor       a bare uvicorn ASGI app answering the same JSON-RPC (initialize, tools/call echo) itself:
              what one HTTP round trip costs on this machine, with no MCP machinery and no downstream
Each client is a plain httpx2 client (not an MCP SDK client, so the load generator stays light). In the
handshake era (2025-11-25) it initializes a session, then makes sequential `tools/call`s; in the sessionless
era (2026-07-28, what the SDK's `Client` speaks by default) each call is a self-contained POST with the
envelope and routing headers the SDK's client sends. Accept is JSON and SSE, as SDK clients send, and every
answer is checked to be its own text. claimcheck is measured in each era of `--eras` (the others speak the
handshake era only); for each level the (server, era) pairs are run in a rotating order, so the eras are
measured alternately in one run. The measure is calls/s, p50 and p95 per call, the server process's CPU ms
per call (/proc), its downstream's (the demo server, a child of the proxy; none for the direct ones and the
floor), and the load generator's own.

Run from the repo root in the project's venv:
  python bench/http_load.py [--calls 400] [--levels 1,8,32] [--eras 2025-11-25,2026-07-28]
                            [--fastmcp-python bench/.venv-fastmcp/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2

REPO = Path(__file__).resolve().parent.parent
FASTMCP_PYTHON = REPO / "bench" / ".venv-fastmcp" / "bin" / "python"
DEMO = [sys.executable, "-m", "server.demo.server"]
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
VERSION = "2025-11-25"
SESSIONLESS = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": SESSIONLESS,
    "io.modelcontextprotocol/clientInfo": {"name": "http-load", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def server(name: str, directory: Path, fastmcp_python: Path | None) -> AsyncIterator[tuple[str, int]]:
    """Start one server; yield its URL and pid once it answers."""
    port = _free_port()
    env = {**os.environ, "FASTMCP_LOG_LEVEL": "WARNING", "FASTMCP_CHECK_FOR_UPDATES": "off"}
    if name.startswith("claimcheck"):
        env["CLAIMCHECK_FAST_PATH"] = "off" if name == "claimcheck-sdk" else "on"
        config = directory / "claimcheck-http.json"
        servers = {"demo": {"command": DEMO[0], "args": DEMO[1:]}}
        config.write_text(json.dumps({"mcpServers": servers, "settings": {"startupWaitSecs": 120}}))
        command = [sys.executable, "-m", "server", "serve", "--no-api", "--config", str(config)]
        command += ["--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
        tool = "demo__echo"
    elif name == "direct-sse":
        command = [*DEMO, "http", str(port)]
        tool = "echo"
    elif name == "direct":
        command = [sys.executable, __file__, "--direct-server", str(port)]
        tool = "echo"
    elif name == "fastmcp":
        assert fastmcp_python is not None
        command = [str(fastmcp_python), str(REPO / "bench" / "fastmcp_http_proxy.py"), str(port), *DEMO]
        tool = "echo"
    else:
        command = [sys.executable, __file__, "--floor-server", str(port)]
        tool = "echo"
    process = await anyio.open_process(command, cwd=REPO, env=env, stdout=None, stderr=None)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with httpx2.AsyncClient(timeout=5) as http:
            with anyio.fail_after(180):
                while True:
                    try:
                        session = await _initialize(http, url)
                        await _call(http, url, session, tool, "ready?")  # the downstream is up
                        break
                    except (httpx2.HTTPError, RuntimeError, KeyError, ValueError):
                        await anyio.sleep(0.3)
        yield url + "#" + tool, process.pid
    finally:
        process.terminate()
        with anyio.move_on_after(5, shield=True):
            await process.wait()
        if process.returncode is None:
            process.kill()


async def _post(
    http: httpx2.AsyncClient, url: str, session: str | None, body: dict[str, Any], era: str = VERSION
) -> httpx2.Response:
    headers = dict(ACCEPT)
    if era == SESSIONLESS:  # what the SDK's client sends: its envelope in `_meta`, and the routing headers
        body["params"]["_meta"] = ENVELOPE
        headers |= {"mcp-protocol-version": SESSIONLESS, "mcp-method": body["method"]}
        if body["method"] == "tools/call":
            headers["mcp-name"] = body["params"]["name"]
    elif session:
        headers["mcp-session-id"] = session
        headers["mcp-protocol-version"] = VERSION
    return await http.post(url, content=json.dumps(body), headers=headers)


def _message(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC response in a JSON body or in the SSE stream's data lines."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and '"id"' in line:
                found: dict[str, Any] = json.loads(line[5:])
                if "result" in found or "error" in found:
                    return found
        raise RuntimeError("no response in the stream")
    result: dict[str, Any] = response.json()
    return result


async def _initialize(http: httpx2.AsyncClient, url: str, era: str = VERSION) -> str:
    if era == SESSIONLESS:
        return ""  # no handshake, no session
    params = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "http-load", "version": "1"}}
    response = await _post(http, url, None, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
    _message(response)
    session = response.headers.get("mcp-session-id", "")
    await _post(http, url, session, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return session


async def _call(
    http: httpx2.AsyncClient, url: str, session: str, tool: str, text: str, ident: int = 1, era: str = VERSION
) -> None:
    params = {"name": tool, "arguments": {"text": text}}
    body = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}
    response = await _post(http, url, session, body, era)
    message = _message(response)
    content = message["result"]["content"]
    if content[0]["text"] != text:
        raise RuntimeError(f"wrong answer: {message!r}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (the downstream server behind a proxy)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def tree_cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except OSError:
            continue
    return total


async def level(url_tool: str, pid: int, clients: int, calls: int, era: str = VERSION) -> dict[str, float]:
    url, tool = url_tool.split("#")
    samples: list[float] = []
    per_client = max(1, calls // clients)
    limits = httpx2.Limits(max_connections=clients + 4, max_keepalive_connections=clients + 4)
    async with httpx2.AsyncClient(timeout=60, limits=limits) as http:
        sessions = [await _initialize(http, url, era) for _ in range(clients)]
        if era == SESSIONLESS:  # the owner's session is opened by its first call (on the SDK's path): not measured
            await _call(http, url, "", tool, "opening", era=era)

        async def one(number: int, session: str) -> None:
            for i in range(per_client):
                start = time.perf_counter()
                await _call(http, url, session, tool, f"client {number} call {i}", ident=i + 1, era=era)
                samples.append((time.perf_counter() - start) * 1000)

        downstream = children(pid)
        cpu_before, started = cpu_seconds(pid), time.perf_counter()
        downstream_before, client_before = tree_cpu_seconds(downstream), time.process_time()
        async with anyio.create_task_group() as tg:
            for number, session in enumerate(sessions):
                tg.start_soon(one, number, session)
        wall, cpu = time.perf_counter() - started, cpu_seconds(pid) - cpu_before
        downstream_cpu = tree_cpu_seconds(downstream) - downstream_before
        client_cpu = time.process_time() - client_before
    quantiles = statistics.quantiles(samples, n=100, method="inclusive")
    return {
        "calls": len(samples),
        "calls_per_s": len(samples) / wall,
        "p50_ms": quantiles[49],
        "p95_ms": quantiles[94],
        "cpu_ms_per_call": 1000 * cpu / len(samples),
        "downstream_cpu_ms_per_call": 1000 * downstream_cpu / len(samples),
        "client_cpu_ms_per_call": 1000 * client_cpu / len(samples),
    }


def targets(names: Sequence[str], eras: Sequence[str]) -> list[tuple[str, str]]:
    """Each (server, era) to measure: claimcheck in every era asked for, the others in the handshake era."""
    return [(name, era) for name in names for era in (eras if name.startswith("claimcheck") else [VERSION])]


def label(name: str, era: str) -> str:
    return f"{name} {era}"


async def run(
    names: Sequence[str], levels: Sequence[int], calls: int, fastmcp: Path | None, eras: Sequence[str] = (VERSION,)
) -> dict[str, Any]:
    pairs = targets(names, eras)
    results: dict[str, dict[int, dict[str, float]]] = {label(*pair): {} for pair in pairs}
    with tempfile.TemporaryDirectory(prefix="claimcheck-http-load-") as tmp:
        running: dict[str, tuple[str, int]] = {}
        async with anyio.create_task_group() as tg:
            stops: list[anyio.Event] = []

            async def keep(name: str, started: anyio.Event, stop: anyio.Event) -> None:
                async with server(name, Path(tmp), fastmcp) as found:
                    running[name] = found
                    started.set()
                    await stop.wait()

            for name in names:
                started, stop = anyio.Event(), anyio.Event()
                stops.append(stop)
                tg.start_soon(keep, name, started, stop)
                await started.wait()
            for name, era in pairs:  # warm-up
                await level(*running[name], 2, 40, era)
            for round_no, clients in enumerate(levels):
                order = [*pairs[round_no % len(pairs) :], *pairs[: round_no % len(pairs)]]
                for name, era in order:
                    results[label(name, era)][clients] = await level(*running[name], clients, calls, era)
                    print(f"{label(name, era)} x{clients}: {results[label(name, era)][clients]}", file=sys.stderr)
            for stop in stops:
                stop.set()
    return results


def markdown(results: dict[str, Any], levels: Sequence[int]) -> str:
    lines = [
        "| server | era | clients | calls/s | p50 ms | p95 ms | server CPU ms/call | downstream CPU ms/call "
        "| load generator CPU ms/call |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for clients in levels:
        for key, by_level in results.items():
            row = by_level[clients]
            name, era = key.rsplit(" ", 1)
            lines.append(
                f"| {name} | {era} | {clients} | {row['calls_per_s']:.0f} | {row['p50_ms']:.2f} | {row['p95_ms']:.2f} "
                f"| {row['cpu_ms_per_call']:.2f} | {row['downstream_cpu_ms_per_call']:.2f} "
                f"| {row['client_cpu_ms_per_call']:.2f} |"
            )
    return "\n".join(lines)


# -- the floor: a bare ASGI JSON-RPC echo --------------------------------------------------------


async def floor_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        event = await receive()
        body += event.get("body", b"")
        if not event.get("more_body"):
            break
    message = json.loads(body)
    if "id" not in message:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    if message["method"] == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "floor", "version": "1"},
        }
    else:
        result = {"content": [{"type": "text", "text": message["params"]["arguments"]["text"]}]}
    data = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
    headers = [(b"content-type", b"application/json"), (b"mcp-session-id", b"floor")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=400, help="calls per server and level (default 400)")
    parser.add_argument("--levels", default="1,8,32", help="concurrent clients, comma-separated (default 1,8,32)")
    parser.add_argument(
        "--eras",
        default=f"{VERSION},{SESSIONLESS}",
        help=f"protocol eras to measure claimcheck in, comma-separated (default {VERSION},{SESSIONLESS})",
    )
    parser.add_argument("--fastmcp-python", type=Path, default=FASTMCP_PYTHON)
    parser.add_argument("--no-fastmcp", action="store_true")
    parser.add_argument("--json", type=Path, metavar="PATH")
    parser.add_argument("--floor-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--direct-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.direct_server:
        import uvicorn

        from server.demo.server import build_demo_server

        app = build_demo_server().streamable_http_app(json_response=True)
        uvicorn.run(app, host="127.0.0.1", port=args.direct_server, log_level="warning")
        return 0
    if args.floor_server:
        import uvicorn

        uvicorn.run(floor_app, host="127.0.0.1", port=args.floor_server, log_level="warning", lifespan="on")
        return 0
    levels = [int(level) for level in args.levels.split(",")]
    fastmcp = None if args.no_fastmcp or not args.fastmcp_python.exists() else args.fastmcp_python
    names = ["claimcheck", "claimcheck-sdk", *(["fastmcp"] if fastmcp else []), "direct", "direct-sse", "floor"]
    print(f"load average before: {os.getloadavg()}", file=sys.stderr)
    eras = [era for era in args.eras.split(",") if era]
    if not set(eras) <= {VERSION, SESSIONLESS}:
        parser.error(f"--eras: each one of {VERSION}, {SESSIONLESS}")
    results = anyio.run(run, names, levels, args.calls, fastmcp, eras)
    print(markdown(results, levels))
    print(f"\n- load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"levels": levels, "eras": eras, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
