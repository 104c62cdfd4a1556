"""A minimal MCP server over stdio, written by hand so it can stream results of any size without holding them.

Tools: `big {mib}` answers with `mib` MiB of text (deterministic, with quotes, backslashes and non-ASCII that
JSON must escape), written in pieces; `fast {mib}` answers with the same kind of text as fast as the pipe
takes it (one 1 MiB block escaped once, written again and again: the floor a proxy is measured against;
with `ascii: true` the block is ASCII);
`mixed {mib}` answers with text, an image of `mib` MiB, text, `structuredContent` and `_meta` (`nan: true`: a NaN in
it); `endless {}` starts an answer and never finishes it; `echo {text}`. `big` and `fast` answer an error result
(`isError: true`) with `error: true`.
Run: `python tests/support/servers/raw_downstream.py` (stdio; stdlib only, so by path too), or `--http PORT` for
streamable HTTP at `/mcp` (answers as JSON bodies; `--sse` answers as SSE events), the URL announced on stderr.
Used by the bounded-memory tests and by bench/large_outputs.py.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "big_text_pieces",
    "big_text_sha256",
    "fast_text_pieces",
    "fast_text_sha256",
    "handshake",
    "mixed_message",
    "mixed_result",
]

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


def _sha256_of(pieces: Iterator[str]) -> tuple[str, int]:
    """The sha256 and size of the UTF-8 of `pieces`."""
    digest, size = hashlib.sha256(), 0
    for piece in pieces:
        data = piece.encode()
        digest.update(data)
        size += len(data)
    return digest.hexdigest(), size


def big_text_sha256(mib: float) -> tuple[str, int]:
    return _sha256_of(big_text_pieces(mib))


def _escaped(text: str) -> bytes:
    return json.dumps(text, ensure_ascii=False)[1:-1].encode()


def _fast_block(ascii_only: bool = False) -> str:
    """Exactly 1 MiB of UTF-8: the start of `big`'s text, padded with "x" where a character would be cut;
    `ascii_only`: with "e" for "é" and ":)" for the emoji."""
    text = next(big_text_pieces(1))
    if ascii_only:
        text = text.replace("é", "e").replace("\U0001f600", ":)")
    return text + "x" * ((1 << 20) - len(text.encode()))


_FAST_BLOCKS = {False: _fast_block(), True: _fast_block(ascii_only=True)}
_FAST_ESCAPED = {kind: _escaped(block) for kind, block in _FAST_BLOCKS.items()}  # raw UTF-8, as pydantic and Node write


def fast_text_pieces(mib: float, ascii_only: bool = False) -> Iterator[str]:
    """The text of `fast`: `mib` MiB of UTF-8, whole blocks then the start of one (cut on a character)."""
    block = _FAST_BLOCKS[ascii_only]
    size = int(mib * (1 << 20))
    for _ in range(size >> 20):
        yield block
    rest = size & ((1 << 20) - 1)
    if rest:
        yield block.encode()[:rest].decode("utf-8", "ignore")


def fast_text_sha256(mib: float, ascii_only: bool = False) -> tuple[str, int]:
    return _sha256_of(fast_text_pieces(mib, ascii_only))


def mixed_result(mib: float) -> dict[str, Any]:
    """The result of `mixed`: text, an image of `mib` MiB of base64, text, `structuredContent` and `_meta`."""
    image = base64.b64encode(hashlib.shake_256(b"mixed").digest(int(mib * (1 << 20)) * 3 // 4)).decode()
    return {
        "_meta": {"example.com/kept": True},
        "content": [
            {"type": "text", "text": 'before the "image" é 😀'},
            {"type": "image", "data": image, "mimeType": "image/png"},
            {"type": "text", "text": "after it"},
        ],
        "structuredContent": {"rows": [{"n": n, "name": f"row {n}"} for n in range(1000)], "deep": [[[1.5, True]]]},
        "isError": False,
    }


def mixed_message(ident: Any, mib: float, *, nan: bool = False) -> bytes:
    """`mixed`'s answer line, written as a server may write it: `result` first, spaces after separators; with
    `nan`, a NaN in its `structuredContent` (which Python's json writes and a strict reader refuses)."""
    result = mixed_result(mib)
    if nan:
        result["structuredContent"]["nan"] = float("nan")
    return json.dumps({"result": result, "id": ident, "jsonrpc": "2.0"}, ensure_ascii=False).encode() + b"\n"


_FLAG = {"type": "boolean"}
TOOLS = [
    {"name": "big", "inputSchema": {"type": "object", "properties": {"mib": {"type": "number"}, "error": _FLAG}}},
    {
        "name": "fast",
        "inputSchema": {"type": "object", "properties": {"mib": {"type": "number"}, "error": _FLAG, "ascii": _FLAG}},
    },
    {
        "name": "mixed",
        "inputSchema": {"type": "object", "properties": {"mib": {"type": "number"}, "nan": _FLAG}},
    },
    {"name": "endless", "inputSchema": {"type": "object"}},
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
]


def _send(out: Any, message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def handshake(out: Any, request: dict[str, Any], tools: list[dict[str, Any]], name: str) -> bool:
    """Answer `initialize` and `tools/list` as a server named `name` with `tools`; False for any other request."""
    method, ident = request.get("method"), request.get("id")
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": name, "version": "1"},
        }
        _send(out, {"jsonrpc": "2.0", "id": ident, "result": result})
    elif method == "tools/list":
        _send(out, {"jsonrpc": "2.0", "id": ident, "result": {"tools": tools}})
    else:
        return False
    return True


def _answer(out: Any, request: dict[str, Any]) -> None:
    method, ident = request.get("method"), request.get("id")
    if handshake(out, request, TOOLS, "raw-downstream"):
        return
    if method == "tools/call":
        name, args = request["params"]["name"], request["params"].get("arguments") or {}
        if name == "echo":
            content = [{"type": "text", "text": str(args.get("text", ""))}]
            _send(out, {"jsonrpc": "2.0", "id": ident, "result": {"content": content}})
            return
        if name == "mixed":
            out.write(mixed_message(ident, float(args.get("mib", 1)), nan=args.get("nan") is True))
            out.flush()
            return
        head = {"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": ""}]}}
        out.write(json.dumps(head).encode()[: -len('"}]}}')])  # the message up to the text's opening quote
        if name == "endless":
            filler = b"x" * (1 << 20)
            while True:
                out.write(filler)
        if name == "fast":
            ascii_only = args.get("ascii") is True
            block, escaped = _FAST_BLOCKS[ascii_only], _FAST_ESCAPED[ascii_only]
            for piece in fast_text_pieces(float(args.get("mib", 1)), ascii_only):
                out.write(escaped if piece is block else _escaped(piece))
        else:
            for piece in big_text_pieces(float(args.get("mib", 1))):
                out.write(json.dumps(piece)[1:-1].encode())
        out.write(b'"}], "isError": %s}}\n' % (b"true" if args.get("error") is True else b"false"))
        out.flush()
    elif ident is not None:
        error = {"code": -32601, "message": f"no method {method}"}
        _send(out, {"jsonrpc": "2.0", "id": ident, "error": error})


class _Chunked:
    """A file-like body writer in HTTP/1.1 chunked encoding, optionally as one SSE `data:` line."""

    def __init__(self, wfile: Any, sse: bool) -> None:
        self._wfile = wfile
        self._sse = sse
        self._started = False

    def write(self, data: bytes) -> None:
        if self._sse and not self._started:
            data = b"event: message\ndata: " + data
        self._started = True
        if self._sse and data.endswith(b"\n"):
            data += b"\n"
        if data:
            self._wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def flush(self) -> None:
        self._wfile.flush()

    def end(self) -> None:
        self._wfile.write(b"0\r\n\r\n")
        self._wfile.flush()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    sse = False
    answer = staticmethod(_answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.headers.get("traceparent"):  # for meta_echo_downstream: what came in the header
            request["http_traceparent"] = self.headers["traceparent"]
        if "id" not in request:
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream" if self.sse else "application/json")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        body = _Chunked(self.wfile, self.sse)
        self.answer(body, request)
        body.end()

    def do_GET(self) -> None:
        self.send_response(405)
        self.send_header("content-length", "0")
        self.end_headers()

    do_DELETE = do_GET


def main(answer: Callable[[Any, dict[str, Any]], None] | None = None, name: str = "raw downstream") -> None:
    """Serve `answer` (this server's own by default) over stdio, or over HTTP with `--http PORT`."""
    answer = answer or _answer
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--sse", action="store_true", help="answer as SSE events instead of JSON bodies")
    args = parser.parse_args()
    if args.http is not None:
        handler = type("Handler", (_Handler,), {"sse": args.sse, "answer": staticmethod(answer)})
        server = ThreadingHTTPServer(("127.0.0.1", args.http), handler)
        print(f"{name} at http://127.0.0.1:{server.server_address[1]}/mcp", file=sys.stderr, flush=True)
        server.serve_forever()
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if line.strip():
            answer(out, json.loads(line))


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
