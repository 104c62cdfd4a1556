"""A minimal MCP server over stdio, written by hand so it can stream results of any size without holding them.

Tools: `big {mib}` answers with `mib` MiB of text (deterministic, with quotes, backslashes and non-ASCII that
JSON must escape), written in pieces; `endless {}` starts an answer and never finishes it; `echo {text}`.
Run: `python tests/raw_downstream.py`. Used by the bounded-memory tests and by bench/large_outputs.py.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["big_text_pieces", "big_text_sha256"]

_LINE = 'line {:09d} "quoted" \\ back é 😀 {}\n'
_PIECE_LINES = 4096


def big_text_pieces(mib: float) -> Iterator[str]:
    """The text of `big`, in pieces: exactly `mib` MiB of UTF-8."""
    target = int(mib * (1 << 20))
    produced, number = 0, 0
    while produced < target:
        lines = []
        for _ in range(_PIECE_LINES):
            lines.append(_LINE.format(number, "x" * (number % 40)))
            number += 1
        piece = "".join(lines)
        data = piece.encode()
        if produced + len(data) > target:
            piece = data[: target - produced].decode("utf-8", "ignore")
            data = piece.encode()
        produced += len(data)
        yield piece
        if not data:
            break


def big_text_sha256(mib: float) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    for piece in big_text_pieces(mib):
        data = piece.encode()
        digest.update(data)
        size += len(data)
    return digest.hexdigest(), size


TOOLS = [
    {"name": "big", "inputSchema": {"type": "object", "properties": {"mib": {"type": "number"}}}},
    {"name": "endless", "inputSchema": {"type": "object"}},
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
]


def _send(out: Any, message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def _answer(out: Any, request: dict[str, Any]) -> None:
    method, ident = request.get("method"), request.get("id")
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-downstream", "version": "1"},
        }
        _send(out, {"jsonrpc": "2.0", "id": ident, "result": result})
    elif method == "tools/list":
        _send(out, {"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name, args = request["params"]["name"], request["params"].get("arguments") or {}
        if name == "echo":
            content = [{"type": "text", "text": str(args.get("text", ""))}]
            _send(out, {"jsonrpc": "2.0", "id": ident, "result": {"content": content}})
            return
        head = {"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": ""}]}}
        out.write(json.dumps(head).encode()[: -len('"}]}}')])  # the message up to the text's opening quote
        if name == "endless":
            filler = b"x" * (1 << 20)
            while True:
                out.write(filler)
        for piece in big_text_pieces(float(args.get("mib", 1))):
            out.write(json.dumps(piece)[1:-1].encode())
        out.write(b'"}], "isError": false}}\n')
        out.flush()
    elif ident is not None:
        error = {"code": -32601, "message": f"no method {method}"}
        _send(out, {"jsonrpc": "2.0", "id": ident, "error": error})


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
