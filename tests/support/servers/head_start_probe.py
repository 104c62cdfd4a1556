"""A stdio MCP server that says, when it starts, what its parent (claimcheck) had loaded by then.

On start it appends one JSON line to the file named by its first argument: its pid, and which of claimcheck's
markers its parent had mapped (Linux `/proc/<ppid>/maps`): `sdk` (cryptography's `_rust` extension, which the mcp
SDK's import loads) and `re2` (google-re2's `_re2`, which claimcheck's own modules load). Its one tool, `pid`,
answers its pid. Used by tests/e2e/test_head_start.py.
"""

from __future__ import annotations

import json
import os
import sys

from tests.support.servers.raw_downstream import handshake

MARKERS = {"sdk": "/_rust.abi3.so", "re2": "/_re2."}
TOOLS = [{"name": "pid", "description": "This server's process id.", "inputSchema": {"type": "object"}}]


def _loaded_by_parent() -> list[str]:
    try:
        with open(f"/proc/{os.getppid()}/maps", encoding="utf-8", errors="replace") as maps:
            text = maps.read()
    except OSError:
        return ["unknown"]
    return sorted(name for name, marker in MARKERS.items() if marker in text)


def main() -> None:
    with open(sys.argv[1], "a", encoding="utf-8") as log:
        log.write(json.dumps({"pid": os.getpid(), "parent_had": _loaded_by_parent()}) + "\n")
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if handshake(out, request, TOOLS, "head-start-probe") or "id" not in request:
            continue
        result = {"content": [{"type": "text", "text": str(os.getpid())}]}
        out.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
