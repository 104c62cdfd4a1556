"""A scripted agent with no LLM finds one needle in a big log or JSON output, guided only by claimcheck's messages.

It starts `claimcheck serve` over stdio (no extraction endpoint; the agent declares no sampling) in front of
bench/needle_downstream.py and calls its `log` or `json` tool. It follows the running message
(wait_for_tool_output) until it gets the too-large message, then tries the calls that message suggests, in
its order, putting its search term where the example word is (a query's quoted literal, Grep's regex,
slice's anchor). It skips Read (reading lines from the top is not a search). Found: an answer shows the
needle's secret, which sits next to the needle only. Counted: the calls from the too-large message on
(that call included), the waits before it, and wall times. Floor, in the same run: GNU grep -c on the
stored file.

Usage: python bench/needle_agent.py [--mib 1000] [--kinds log,json] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
NEEDLE, SECRET = "NEEDLE-7f3a9c", "K9-TANGO-42"
LIMIT_S = 1800


class Wire:
    """Blocking JSON-RPC over a process's stdin/stdout."""

    def __init__(self, command: list[str], **kwargs: Any) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, **kwargs)
        self._next = 0

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next += 1
        self._write({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params or {}})
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise EOFError("claimcheck closed stdout")
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == self._next:
                return message

    def _write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def handshake(self) -> None:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "needle", "version": "1"}}
        self.request("initialize", init)
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        answer = self.request("tools/call", {"name": name, "arguments": arguments})
        if "error" in answer:
            return f"JSON-RPC error: {answer['error'].get('message')}"
        return "\n".join(c.get("text", "") for c in answer["result"]["content"])

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


_QUOTED = r'("(?:[^"\\]|\\.)*")'


def suggestions(message: str) -> list[tuple[str, dict[str, Any]]]:
    """The searching calls a too-large message suggests, in its order, with the agent's term put in."""
    found: list[tuple[str, dict[str, Any]]] = []
    for line in message.splitlines():
        if not line.startswith("- "):
            continue
        if match := re.search(r'tool_output\(handle = "([^"]+)", mode = "json", query = ' + _QUOTED + r"\)", line):
            query = re.sub(r"'(?:[^'\\]|\\.)*'", f"'{NEEDLE}'", json.loads(match[2]), count=1)
            found.append(("tool_output", {"handle": match[1], "mode": "json", "query": query}))
        elif match := re.search(r'Grep\(file = "([^"]+)", regex = ' + _QUOTED + r"\)", line):
            found.append(("Grep", {"file": match[1], "regex": re.escape(NEEDLE)}))
        elif match := re.search(r'tool_output\(handle = "([^"]+)", mode = "slice", slice = (\{.*?\})\)', line):
            piece = {**json.loads(match[2]), "anchor": NEEDLE}
            found.append(("tool_output", {"handle": match[1], "mode": "slice", "slice": piece}))
    return found


def run(kind: str, mib: float, scratch: Path) -> dict[str, Any]:
    config = scratch / f"{kind}.json"
    entry = {"command": PY, "args": [str(HERE / "needle_downstream.py")]}
    settings = {"root": str(scratch / "out")}  # everything else as shipped: no extraction endpoint
    config.write_text(json.dumps({"mcpServers": {"needle": entry}, "settings": settings}))
    wire = Wire([PY, "-m", "server", "serve", "--no-api", "--config", str(config)], cwd=ROOT)
    steps: list[dict[str, Any]] = []
    try:
        wire.handshake()
        wire.request("tools/list")
        start = time.perf_counter()
        text = wire.call(f"needle__{kind}", {"mib": mib, "needle": NEEDLE, "secret": SECRET})
        waits = 0
        while "is running in the background" in text or "None of the" in text:
            handle = re.search(r"session-[0-9a-f]{32}/[0-9a-f]{32}", text)
            assert handle, text
            text = wire.call("wait_for_tool_output", {"handles": [handle[0]]})
            waits += 1
        ready = time.perf_counter()
        message = text
        calls, found_at = 1, None
        for name, arguments in suggestions(message):
            began = time.perf_counter()
            answer = wire.call(name, arguments)
            calls += 1
            steps.append({"call": name, "arguments": arguments, "seconds": round(time.perf_counter() - began, 2),
                          "found": SECRET in answer, "answer_head": answer[:300]})  # fmt: skip
            if SECRET in answer:
                found_at = time.perf_counter()
                break
        stored = next(p for p in (scratch / "out").glob("claimcheck-run-*/session-*/*") if p.suffix != ".lines")
        floor_start = time.perf_counter()
        subprocess.run(["grep", "-c", NEEDLE, str(stored)], capture_output=True, check=False)
        floor = time.perf_counter() - floor_start
        return {
            "kind": kind,
            "mib": mib,
            "names_extract": "extract =" in message,
            "waits_before_message": waits,
            "seconds_to_message": round(ready - start, 1),
            "calls_from_message": calls if found_at else None,
            "seconds_searching": round(found_at - ready, 2) if found_at else None,
            "found": found_at is not None,
            "floor_grep_seconds": round(floor, 2),
            "steps": steps,
            "message": message[:1500],
        }
    finally:
        wire.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=float, default=1000)
    parser.add_argument("--kinds", default="log,json")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    print(f"load: {os.getloadavg()}", flush=True)
    for kind in args.kinds.split(","):
        with tempfile.TemporaryDirectory(prefix="needle-") as scratch:
            result = run(kind, args.mib, Path(scratch))
        results.append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "message"}, indent=1), flush=True)
    print(f"load: {os.getloadavg()}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
