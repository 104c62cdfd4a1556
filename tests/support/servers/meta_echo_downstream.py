"""A stdio server whose one tool is marked as a claimcheck's forwarded tool (`io.claimcheck/proxied`), and which
answers each call with the `_meta` of its request as text: what a claimcheck in front sends the one behind (over
HTTP, with the request's `traceparent` header as `header:traceparent`).
Run: `python -m tests.support.servers.meta_echo_downstream` (stdio), or with `--http PORT`."""

from __future__ import annotations

import json
from typing import Any

from tests.support.servers.raw_downstream import handshake, main

TOOLS = [{"name": "meta", "inputSchema": {"type": "object"}, "_meta": {"io.claimcheck/proxied": {}}}]


def _answer(out: Any, request: dict[str, Any]) -> None:
    if handshake(out, request, TOOLS, "meta-echo") or "id" not in request:
        return
    if request.get("method") == "tools/call":
        meta = request["params"].get("_meta")
        if "http_traceparent" in request:  # over HTTP, the `traceparent` header as well
            meta = {**(meta or {}), "header:traceparent": request["http_traceparent"]}
        text = json.dumps(meta, sort_keys=True)
        message = {"jsonrpc": "2.0", "id": request["id"], "result": {"content": [{"type": "text", "text": text}]}}
    else:
        message = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no such method"}}
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


if __name__ == "__main__":
    main(_answer, "meta echo")
