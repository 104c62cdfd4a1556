"""A stdio MCP server written by hand that answers with hostile outputs (tests/support/hostile.py's `OUTPUT_CASES`).

Tools: `hostile {case}` answers as the case says; `echo {text}` answers with the text. Run as
`python -m tests.support.servers.hostile_downstream` (stdio), or with `--http PORT` for streamable HTTP at `/mcp`,
the URL announced on stderr.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.hostile import OUTPUT_CASES, hostile_output
from tests.support.servers import raw_downstream
from tests.support.servers.raw_downstream import handshake

TOOLS = [
    {
        "name": "hostile",
        "inputSchema": {"type": "object", "properties": {"case": {"type": "string", "enum": sorted(OUTPUT_CASES)}}},
    },
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
]


def _answer(out: Any, request: dict[str, Any]) -> None:
    ident = request.get("id")
    if handshake(out, request, TOOLS, "hostile-downstream"):
        return
    if request.get("method") == "tools/call":
        params = request.get("params") or {}
        arguments = params.get("arguments") or {}
        if params.get("name") == "echo":
            content = [{"type": "text", "text": str(arguments.get("text", ""))}]
            line = {"jsonrpc": "2.0", "id": ident, "result": {"content": content}}
            out.write(json.dumps(line).encode() + b"\n")
        else:
            out.write(hostile_output(str(arguments.get("case", "")), ident))
        out.flush()
    elif ident is not None:
        error = {"code": -32601, "message": f"no method {request.get('method')}"}
        out.write(json.dumps({"jsonrpc": "2.0", "id": ident, "error": error}).encode() + b"\n")
        out.flush()


def main() -> None:
    raw_downstream.main(_answer, "hostile downstream")


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
