"""A call cancelled as it runs, at any point of its life, leaves nothing behind that no handle names: every
output stored for it is either reported by a handle (in its answer, or by list_tool_outputs) or removed, and
no call of it runs on unreported. Real claimcheck processes, calls of a tool whose output is over the size rule
(so it is stored), each followed by its `notifications/cancelled` after 0 to 9 other round trips."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from fs_sandbox import INDEX_SUFFIX
from tests.support.wire import Wire, serving

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

RACES = 200
SETTLE_S = 20
"""How long a cancelled call may take to end and remove what it stored."""
HANDLE = re.compile(r"session-[0-9a-f]{32}/[0-9a-f]{32}")
NEXT_PAGE = re.compile(r'list_tool_outputs\(cursor = "([^"]+)"\)')


async def _listed(wire: Wire) -> set[str]:
    """Every handle list_tool_outputs reports, page after page."""
    handles: set[str] = set()
    arguments: dict[str, str] = {}
    while True:
        answer = await wire.call("list_tool_outputs", arguments)
        text = "\n".join(item["text"] for item in answer["result"]["content"] if item["type"] == "text")
        handles |= set(HANDLE.findall(text))
        more = NEXT_PAGE.search(text)
        if more is None:
            return handles
        arguments = {"cursor": more.group(1)}


def _stored(root: Path) -> set[str]:
    """The handle each file in the session directories under `root` is of: an output, its line index, or an
    output still being written (`.<name>.part`)."""
    found = set()
    for path in root.glob("claimcheck-run-*/session-*/*"):
        name = path.name.removeprefix(".").removesuffix(".part").removesuffix(INDEX_SUFFIX)
        found.add(f"{path.parent.name}/{name}")
    return found


@pytest.mark.parametrize("fast", ["on", "off"])
async def test_every_stored_output_of_a_cancelled_call_is_named_by_a_handle(tmp_path: Path, fast: str) -> None:
    with anyio.fail_after(240):
        async with serving(tmp_path, fast) as wire:
            await wire.call("demo__echo", {"text": "warm"})
            for number in range(RACES):
                kb = 48 + number % 7 * 8  # outputs of several sizes take several times to settle
                ident = await wire.send("tools/call", {"name": "demo__big", "arguments": {"kb": kb}})
                for _ in range(number % 10):
                    await wire.call("demo__echo", {"text": "meanwhile"})
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": ident}}
                await wire.write(json.dumps(cancel).encode())
            await wire.call("wait_for_tool_output", {})  # whatever was handed out and still runs
            answered = {h for message in wire.seen for h in HANDLE.findall(json.dumps(message.get("result", "")))}
            listed = await _listed(wire)
            stored = _stored(tmp_path / "out")
            with anyio.move_on_after(SETTLE_S):  # a cancelled call may still be ending: its output goes then
                while not stored <= listed:
                    listed = await _listed(wire)
                    stored = _stored(tmp_path / "out")
    assert answered <= listed, "a handle given in an answer is not listed"
    assert stored <= listed, f"{len(stored - listed)} stored output(s) no handle names: {sorted(stored - listed)[:3]}"
