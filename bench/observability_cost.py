"""What metrics and tracing cost per plain stdio call on the fast path: claimcheck's CPU per call, alternating.

Counting for `/metrics` is always on (a dict update and a bisect in `Call.settle`); what it costs alone is
measured in-process (`meters.finished`, ns per call), and against a checkout without it with `--tree`. Over
pipes (bench/raw_calls.py's client, which costs nothing), interleaved in rounds:

    plain              --no-api, no OTEL_*: the fast path as it is
    metrics scraped    the status API on, `/metrics` scraped every `--scrape-secs` by this script
    tracing            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set to a sink this script serves (a span per call,
                       three spans, exported in batches; the request written in the call's span)
    both               the two together

    python bench/observability_cost.py                     # 3000 calls a path, 2 rounds
    python bench/observability_cost.py --tree OLD_CHECKOUT # "plain" of another checkout too (before counting)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import threading
import time
import timeit
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from raw_calls import REPO, Server, _command, _config, measure  # the sibling bench (run from bench/)


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self) -> None:  # pragma: no cover - unused
        self.send_response(404)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _scraper(api_log: Path, every: float, stop: threading.Event) -> None:
    """Scrape `/metrics` of the claimcheck whose stderr is `api_log`, every `every` seconds."""
    found = None
    while found is None and not stop.is_set():
        found = re.search(r"dashboard: (http://127\.0\.0\.1:\d+/)\?token=([A-Za-z0-9_-]+)", api_log.read_text())
        stop.wait(0.1)
    if found is None:
        return
    url, token = found.group(1), found.group(2)
    request = urllib.request.Request(f"{url}metrics", headers={"Authorization": f"Bearer {token}"})
    while not stop.wait(every):
        with urllib.request.urlopen(request, timeout=5) as answer:
            answer.read()


def counting_ns() -> float:
    """`meters.finished` per call, in-process."""
    from server.handles.meters import Meters

    meters = Meters()
    runs = 200_000
    seconds = timeit.timeit(lambda: meters.finished("demo", "echo", "inline", 0.0004, 0), number=runs)
    return seconds / runs * 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tree", type=Path, default=None, help="also the plain path of this checkout")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--scrape-secs", type=float, default=1.0)
    args = parser.parse_args()
    print(f"counting alone (meters.finished, in-process): {counting_ns():.0f} ns per call\n")
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{sink.server_address[1]}/v1/traces"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    traced = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint}
    paths: list[tuple[str, Path, bool, dict[str, str]]] = [
        ("plain", REPO, False, {}),
        ("metrics scraped", REPO, True, {}),
        ("tracing", REPO, False, traced),
        ("both", REPO, True, traced),
    ]
    if args.tree is not None:
        paths.insert(0, (f"plain ({args.tree})", args.tree, False, {}))
    print("| round | path | p50 ms | user ms/call | system ms/call |\n|---:|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="claimcheck-obs-") as tmp:
        config = _config(Path(tmp))
        for round_no in range(1, args.rounds + 1):
            for name, tree, api, extra in paths:
                log = Path(tmp) / f"stderr-{round_no}-{len(name)}"
                env = {**clean, **extra, "CLAIMCHECK_API_ENABLED": "true" if api else "false"}
                env.update(CLAIMCHECK_API_PORT="0", XDG_STATE_HOME=tmp)
                with log.open("wb") as stderr:
                    server = Server(_command("claimcheck", config, api), tree, env, stderr=stderr)
                    stop = threading.Event()
                    if api:
                        threading.Thread(target=_scraper, args=(log, args.scrape_secs, stop), daemon=True).start()
                    try:
                        row = measure(server, "demo__echo", args.calls, args.warmup)
                    finally:
                        stop.set()
                        server.close()
                print(f"| {round_no} | {name} | {row['p50_ms']:.3f} | {row['user_ms']:.3f} | {row['system_ms']:.3f} |")
                time.sleep(0.2)
    sink.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
