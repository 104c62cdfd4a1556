"""claimcheck's user-space instructions per plain call over streamable HTTP, in each protocol era, under callgrind.

CPU time per call varies too much from run to run on a small shared machine to tell two eras apart within 10 %;
instructions do not. For each era, `claimcheck serve --transport http` (the demo server behind it over stdio) runs
under `valgrind --tool=callgrind` twice: 50 and 300 measured `echo` calls from one client, after a warm-up and
a settling time (the tokenizer's background start-up work done, and its vocabulary let go, in both runs alike);
the difference of the two totals over 250 is what one call costs claimcheck (its own process only: the downstream
and the client are not traced). A 2025-11-25 client initializes a session; a 2026-07-28 client sends each call
with its envelope and routing headers, as `bench/http_load.py` does.

    python bench/http_instructions.py [--eras 2025-11-25,2026-07-28] [--settle 100]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from http_load import DEMO, REPO, _call, _free_port, _initialize  # the same client as the load bench

ERAS = ("2025-11-25", "2026-07-28")


async def _drive(url: str, era: str, calls: int, warmup: int, settle: float) -> None:
    async with httpx2.AsyncClient(timeout=120) as http:
        with anyio.fail_after(600):
            while True:  # under callgrind the server takes a while to listen, and the demo server to start
                try:
                    session = await _initialize(http, url, era)
                    await _call(http, url, session, "demo__echo", "ready?", era=era)
                    break
                except (httpx2.HTTPError, RuntimeError, KeyError, ValueError):
                    await anyio.sleep(1)
        for ident in range(warmup):
            await _call(http, url, session, "demo__echo", f"warm {ident}", 10 + ident, era)
        await anyio.sleep(settle)
        for ident in range(calls):
            await _call(http, url, session, "demo__echo", f"call {ident}", 100_000 + ident, era)


def _total(era: str, calls: int, settle: float, directory: Path) -> int:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind is not installed (apt-get install -y valgrind)")
    config = directory / "claimcheck.json"
    servers = {"demo": {"command": DEMO[0], "args": DEMO[1:]}}
    config.write_text(json.dumps({"mcpServers": servers, "settings": {"startupWaitSecs": 300}}))
    out = directory / f"callgrind.{era}.{calls}"
    port = _free_port()
    command = [valgrind, "--tool=callgrind", "--cache-sim=no", f"--callgrind-out-file={out}"]
    command += [sys.executable, "-m", "server", "serve", "--no-api", "--config", str(config)]
    command += ["--transport", "http", "--port", str(port)]
    process = subprocess.Popen(command, cwd=REPO, stderr=subprocess.DEVNULL)
    try:
        anyio.run(_drive, f"http://127.0.0.1:{port}/mcp", era, calls, 20, settle)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
    line = next(line for line in out.read_text().splitlines() if line.startswith("totals:"))
    return int(line.split()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--eras", default=",".join(ERAS), help="comma-separated (default both)")
    parser.add_argument("--settle", type=float, default=100.0, help="seconds between the warm-up and the calls")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="claimcheck-http-instructions-") as tmp:
        for era in args.eras.split(","):
            totals = {calls: _total(era, calls, args.settle, Path(tmp)) for calls in (50, 300)}
            per_call = (totals[300] - totals[50]) // 250
            print(f"claimcheck over streamable HTTP ({era}): {per_call:,} instructions per call", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
