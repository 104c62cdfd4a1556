"""A stdio client that does not read its answers cannot make claimcheck hold them all: past a few MiB of answers
waiting for stdout, claimcheck stops reading the client's requests (they wait in the pipe) until the answers
drain, so its memory stays bounded however many calls the client sends; once the client reads, every call
is answered, once. Before, the fast path queued answers without limit (RSS 86 → 228 MiB over 8 000 calls)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.support.wire import MIB, Wire, serving

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

CALLS = 4000
TEXT = "x" * 9000  # under the size rule's length bound: each answer is inline, about 9 KB
STALLED_S = 3
"""How long the pipe to claimcheck must stay full before the test takes it that claimcheck stopped reading
(a busy claimcheck mistaken for a stopped one only makes the test measure sooner)."""


async def _send_all(wire: Wire, sent: list[int], progress: list[anyio.Event]) -> None:
    for number in range(CALLS):
        ident = 1000 + number
        params = {"name": "demo__echo", "arguments": {"text": TEXT}}
        await wire.write(json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}).encode())
        sent.append(ident)
        progress[0].set()
        progress[0] = anyio.Event()


@pytest.mark.parametrize("fast", ["on", "off"])
async def test_a_client_that_reads_no_answers_leaves_claimcheck_memory_bounded_and_gets_all_later(
    tmp_path: Path, fast: str
) -> None:
    with anyio.fail_after(300):
        async with serving(tmp_path, fast) as wire, anyio.create_task_group() as tg:
            for _ in range(20):  # warm: what the calls need is loaded before the baseline
                await wire.call("demo__echo", {"text": TEXT})
            baseline = wire.memory("VmRSS")
            sent: list[int] = []
            progress = [anyio.Event()]
            tg.start_soon(_send_all, wire, sent, progress)
            while len(sent) < CALLS:
                with anyio.move_on_after(STALLED_S) as waiting:
                    await progress[0].wait()
                if waiting.cancelled_caught:
                    break  # claimcheck stopped reading: its answers are not being read
            peak_unread = wire.memory("VmHWM")
            stopped_after = len(sent)
            answered: list[int] = []
            while len(answered) < CALLS:
                message = await wire.read()
                if "method" not in message:
                    assert message["result"]["content"][0]["text"] == TEXT
                    answered.append(message["id"])
    assert sorted(answered) == list(range(1000, 1000 + CALLS))
    grown = (peak_unread - baseline) / MIB
    assert grown < 32, f"{grown:.0f} MiB more while {stopped_after} calls went unanswered"
    assert stopped_after < CALLS, "claimcheck read every request while no answer was read"
