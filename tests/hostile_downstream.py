"""A stdio MCP server written by hand that answers with hostile outputs (tests/hostile.py's `OUTPUT_CASES`).

Tools: `hostile {case}` answers as the case says; `echo {text}` answers with the text. Run as
`python tests/hostile_downstream.py`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from hostile import OUTPUT_CASES, hostile_output

TOOLS = [
    {
        "name": "hostile",
        "inputSchema": {"type": "object", "properties": {"case": {"type": "string", "enum": sorted(OUTPUT_CASES)}}},
    },
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
            "serverInfo": {"name": "hostile-downstream", "version": "1"},
        }
        _send(out, {"jsonrpc": "2.0", "id": ident, "result": result})
    elif method == "tools/list":
        _send(out, {"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        params = request.get("params") or {}
        arguments = params.get("arguments") or {}
        if params.get("name") == "echo":
            content = [{"type": "text", "text": str(arguments.get("text", ""))}]
            _send(out, {"jsonrpc": "2.0", "id": ident, "result": {"content": content}})
            return
        out.write(hostile_output(str(arguments.get("case", "")), ident))
        out.flush()
    elif ident is not None:
        _send(out, {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no method {method}"}})


def main() -> None:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if line.strip():
            try:
                request = json.loads(line)
            except ValueError:
                continue
            if isinstance(request, dict):
                _answer(out, request)


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
