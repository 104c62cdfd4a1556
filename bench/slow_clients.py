"""A normal `tools/call` over HTTP while 200 idle and slow connections hang on the same `claimcheck serve`.

Run from the repo root in the project's venv:  python bench/slow_clients.py [--json PATH]

`claimcheck serve --transport http --no-api` in front of the demo server; one mcp 2.3 `Client` over
streamable HTTP makes small `demo__echo` calls in rounds of `--calls`, alternating "quiet" (no other
connection) and "loaded": a separate process (this script with `--hold`) keeps `--slow` connections open,
half idle (connected, nothing sent) and half slow (a request line, then one header byte a second), and
opens a new one whenever the server closes one (at its 10 s request deadline). The holder runs in its own
process so its work does not land on the client's event loop. Target: loaded p50 within 20 % of quiet p50.
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

import anyio
import anyio.abc
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parent.parent
TARGET_PERCENT = 20.0


# ---- the holder: a separate process that keeps `count` idle or slow connections open


async def hold(port: int, count: int) -> None:
    async def one(slow: bool) -> None:
        while True:  # the server closes us at its deadline: come back, as an attacker would
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.1)
                continue
            async with stream:
                try:
                    if slow:
                        await stream.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                        while True:
                            await anyio.sleep(1)
                            await stream.send(b"X")
                    else:
                        await stream.receive()  # returns (or raises) only when the server closes
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    pass

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(one, i % 2 == 1)
        await anyio.sleep(0.5)
        print("holding", flush=True)
        await anyio.sleep_forever()


# ---- the measurement


async def calls(client: Client, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        await client.call_tool("demo__echo", {"text": "hello"})
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def start_holder(port: int, count: int) -> anyio.abc.Process:
    command = [sys.executable, __file__, "--hold", str(port), "--slow", str(count)]
    holder = await anyio.open_process(command, stdout=subprocess.PIPE)
    assert holder.stdout is not None
    with anyio.fail_after(30):
        async for line in holder.stdout:
            if b"holding" in line:
                break
    return holder


async def stop(process: anyio.abc.Process) -> None:
    process.send_signal(signal.SIGTERM)
    with anyio.move_on_after(10):
        await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()


async def measure(rounds: int, per_round: int, slow: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        demo = {"command": sys.executable, "args": ["-m", "server.demo.server"]}
        config.write_text(json.dumps({"mcpServers": {"demo": demo}, "settings": {"stateDir": tmp}}), encoding="utf-8")
        command = [sys.executable, "-m", "server", "serve", "--config", str(config), "--transport", "http"]
        command += ["--port", "0", "--no-api"]
        server = await anyio.open_process(command, stderr=subprocess.PIPE, cwd=str(REPO), env=dict(os.environ))
        assert server.stderr is not None
        seen = b""
        with anyio.fail_after(60):
            async for chunk in server.stderr:
                seen += chunk
                if b"/mcp" in seen:
                    break
        url = seen.decode().split("at ", 1)[1].split()[0]
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        samples: dict[str, list[float]] = {"quiet": [], "loaded": []}
        round_p50: dict[str, list[float]] = {"quiet": [], "loaded": []}
        try:
            async with Client(streamable_http_client(url), mode="legacy") as client:
                await calls(client, 20)  # warm up
                for round_no in range(rounds):
                    order = ["quiet", "loaded"] if round_no % 2 == 0 else ["loaded", "quiet"]
                    for phase in order:
                        holder = await start_holder(port, slow) if phase == "loaded" else None
                        try:
                            taken = await calls(client, per_round)
                        finally:
                            if holder is not None:
                                await stop(holder)
                        samples[phase] += taken
                        round_p50[phase].append(statistics.median(taken))
        finally:
            await stop(server)
    p50 = {phase: statistics.median(values) for phase, values in samples.items()}
    return {
        "p50_ms": p50,
        "p90_ms": {phase: statistics.quantiles(v, n=10, method="inclusive")[8] for phase, v in samples.items()},
        "round_p50_ms": round_p50,
        "change_percent": (p50["loaded"] / p50["quiet"] - 1) * 100,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=100, help="calls per round and phase")
    parser.add_argument("--slow", type=int, default=200, help="idle and slow connections held while loaded")
    parser.add_argument("--hold", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.hold:
        anyio.run(hold, args.hold, args.slow)
        return 0
    result = anyio.run(measure, args.rounds, args.calls, args.slow)
    print(f"### `demo__echo` over streamable HTTP, alone and beside {args.slow} idle and slow connections\n")
    print("| connections | calls | p50 ms | p90 ms | per-round p50 ms |\n|---|---:|---:|---:|---|")
    for phase, label in (("quiet", "the client alone"), ("loaded", f"+ {args.slow} idle/slow")):
        rounds = " ".join(f"{value:.2f}" for value in result["round_p50_ms"][phase])
        row = f"| {label} | {args.rounds * args.calls} | {result['p50_ms'][phase]:.2f} | {result['p90_ms'][phase]:.2f}"
        print(f"{row} | {rounds} |")
    verdict = "met" if abs(result["change_percent"]) < TARGET_PERCENT else "NOT met"
    change = result["change_percent"]
    print(f"\np50 change under load: {change:+.1f} % (target < {TARGET_PERCENT:.0f} %: **{verdict}**)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
