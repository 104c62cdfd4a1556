"""A hand-written stdio MCP server whose tools stream a big output with one needle in it (bench/needle_agent.py).

Tools: `log {mib, needle, secret}` answers with `mib` MiB of log lines, one of which (at 70 %) holds
`needle` and `secret=<secret>`; `json {mib, needle, secret}` answers with `mib` MiB of minified JSON on one
line, `{"source": …, "count": …, "records": [{"id", "level", "worker", "message"}, …]}`, one record of
which holds them in its message. Written in pieces, so no size is ever held whole.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

_PIECE_ITEMS = 4096
TOOLS = [
    {"name": name, "inputSchema": {"type": "object", "properties": {"mib": {"type": "number"}}}}
    for name in ("log", "json")
]


def _log_line(n: int) -> str:
    return f"2026-11-23T10:{n // 60 % 60:02d}:{n % 60:02d}Z INFO worker-{n % 16} processed batch {n} in {n % 97} ms\n"


def _record(n: int, message: str | None = None) -> str:
    text = message or f"processed batch {n} in {n % 97} ms"
    return json.dumps({"id": n, "level": "info", "worker": f"worker-{n % 16}", "message": text})


def pieces(kind: str, mib: float, needle: str, secret: str) -> Iterator[str]:
    """The output in pieces: about `mib` MiB, the needle at 70 % of it."""
    target = int(mib * (1 << 20))
    unit = len(_log_line(10**6)) if kind == "log" else len(_record(10**6)) + 1
    count = max(1, target // unit)
    at = count * 7 // 10
    if kind == "json":
        yield f'{{"source":"needle-bench","count":{count},"records":['
    for start in range(0, count, _PIECE_ITEMS):
        items = []
        for n in range(start, min(count, start + _PIECE_ITEMS)):
            if kind == "log":
                items.append(
                    _log_line(n) if n != at else f"2026-11-23T10:00:00Z ERROR worker-3 {needle} secret={secret}\n"
                )
            else:
                message = f"{needle} secret={secret}" if n == at else None
                items.append(("," if n else "") + _record(n, message))
        yield "".join(items)
    if kind == "json":
        yield "]}"


def _send(out: Any, message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def _answer(out: Any, request: dict[str, Any]) -> None:
    method, ident = request.get("method"), request.get("id")
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "needle-downstream", "version": "1"},
        }
        _send(out, {"jsonrpc": "2.0", "id": ident, "result": result})
    elif method == "tools/list":
        _send(out, {"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name, args = request["params"]["name"], request["params"].get("arguments") or {}
        head = {"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": ""}]}}
        out.write(json.dumps(head).encode()[: -len('"}]}}')])  # the message up to the text's opening quote
        needle, secret = str(args.get("needle", "NEEDLE")), str(args.get("secret", "s3cr3t"))
        for piece in pieces(name, float(args.get("mib", 1)), needle, secret):
            out.write(json.dumps(piece)[1:-1].encode())
        out.write(b'"}], "isError": false}}\n')
        out.flush()
    elif ident is not None:
        _send(out, {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no method {method}"}})


def main() -> None:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if line.strip():
            _answer(out, json.loads(line))


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
