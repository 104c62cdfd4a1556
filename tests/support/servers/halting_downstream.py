"""A stdio server whose one tool writes half of a long text answer, waits for a file, then ends it as it is told.

`halting {mib, gate, end}` writes the start of a tool result and `mib` MiB of `big`'s text (see `raw_downstream`),
then waits until the file `gate` exists, then: `end: "finish"` writes the same text again and ends the result (a
whole answer of 2 × `mib` MiB); `"break"` writes a newline inside the text (the line is not JSON any more); `"die"`
exits with the answer unfinished. What a proxy that passes an answer on as it arrives must get right.
Run: `python -m tests.support.servers.halting_downstream` (stdio).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from tests.support.servers.raw_downstream import big_text_pieces, handshake, main

_PROPERTIES = {"mib": {"type": "number"}, "gate": {"type": "string"}, "end": {"type": "string"}}
TOOLS = [{"name": "halting", "inputSchema": {"type": "object", "properties": _PROPERTIES}}]
_GATE_POLL_S = 0.02


def _text(out: Any, mib: float) -> None:
    for piece in big_text_pieces(mib):
        out.write(json.dumps(piece, ensure_ascii=False)[1:-1].encode())


def _answer(out: Any, request: dict[str, Any]) -> None:
    if handshake(out, request, TOOLS, "halting") or "id" not in request:
        return
    args = request["params"].get("arguments") or {}
    head = {"jsonrpc": "2.0", "id": request["id"], "result": {"content": [{"type": "text", "text": ""}]}}
    out.write(json.dumps(head).encode()[: -len('"}]}}')])  # the message up to the text's opening quote
    mib = float(args.get("mib", 1))
    _text(out, mib)
    out.flush()
    gate = Path(str(args["gate"]))
    while not gate.exists():  # a server's own wait, not a test's: the test creates the file when it is ready
        time.sleep(_GATE_POLL_S)
    end = args.get("end", "finish")
    if end == "die":
        os._exit(3)
    if end == "break":
        out.write(b"\n")
    else:
        _text(out, mib)
        out.write(b'"}]}}\n')
    out.flush()


if __name__ == "__main__":
    try:
        main(_answer, "halting")
    except (BrokenPipeError, KeyboardInterrupt):
        pass
