"""Load: several HTTP clients, 2 000 calls at concurrency 64 through one claimcheck, every answer checked.

Run from the repo root in the project's venv:  python bench/load.py [--calls 2000] [--clients 8] [--concurrency 64]

The mix (seeded): 60 % fast `echo` calls (the answer must be the caller's own text), 20 % `slow` calls
that go to the background after 0.3 s and are collected with `wait_for_tool_output`, 20 % `big` outputs
over the token threshold that become handles and are read back with a slice. claimcheck runs as
`claimcheck serve --transport http` with the status API and history on; its peak RSS (VmHWM) is read
from /proc at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from tests.support.load_driver import claimcheck_http, peak_rss_kib, run_load  # noqa: E402


async def main(calls: int, clients: int, concurrency: int) -> int:
    os.environ["CLAIMCHECK_API_ENABLED"] = "true"
    os.environ["CLAIMCHECK_API_PORT"] = "0"
    with tempfile.TemporaryDirectory() as tmp:
        async with claimcheck_http(Path(tmp)) as url:
            result = await run_load(url, clients=clients, calls=calls, concurrency=concurrency)
            rss = peak_rss_kib(Path(tmp))
    print("| calls | clients | concurrency | correct | wrong | wall s | calls/s | claimcheck peak RSS MiB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {result.calls} | {clients} | {concurrency} | {result.ok} | {len(result.wrong)} | {result.wall_s:.1f} "
        f"| {result.calls / result.wall_s:.0f} | {rss / 1024:.0f} |"
    )
    print(f"\nmix: {result.kinds}")
    for line in result.wrong[:20]:
        print(f"- {line}")
    return 0 if not result.wrong else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    sys.exit(anyio.run(main, args.calls, args.clients, args.concurrency))
