"""The pass-through calls an inner claimcheck answers on its fast path and on its SDK path alike (over stdio and
over HTTP), and what their answers must be: an inner whose outputs are cut at `CUT_MIB`, in front of the raw and
demo servers."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from server.downstream.spool import CUT_MARKER
from tests.support.servers.raw_downstream import big_text_sha256
from tests.support.wire import MIB

__all__ = ["CALLS", "CUT_MIB", "UNKNOWN", "Shape", "check_shapes", "check_stored_big", "shape"]

CUT_MIB = 24
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("raw__echo", {"text": "small"}),
    ("demo__fail", {"message": "it failed"}),  # an error result: the note says where it came from
    ("demo__echo", {}),  # the server's own error
    ("raw__nope", {}),  # claimcheck's error
    ("demo__big", {"kb": 2048}),  # spooled, its message kept whole (under 16 MiB): answered from it
    ("raw__big", {"mib": 20}),  # spooled past the 16 MiB kept whole: passed on from the file, never whole
    ("raw__fast", {"mib": 30}),  # cut at maxOutputBytes, the marker at its end
    ("raw__big", {"mib": 18, "error": True}),  # an error, passed on from the file: the note follows it
]
UNKNOWN = 3
"""The index in `CALLS` of the call to a tool no server has (the SDK's path says so, even with the fast path on)."""

Shape = tuple[bool, list[tuple[str, int, str]]]


def shape(answer: bytes) -> Shape:
    """An answer's error flag and items (type, size, and the text if short, else its hash)."""
    result = json.loads(answer)["result"]
    items = []
    for item in result["content"]:
        data = item.get("text", "").encode()
        items.append((item["type"], len(data), data.decode() if len(data) < 4096 else hashlib.sha256(data).hexdigest()))
    return bool(result.get("isError")), items


def check_shapes(shapes: list[Shape]) -> None:
    """The answers to `CALLS` are what they must be."""
    echo, fail, _, nope, demo_big, big, cut, big_error = shapes
    note = '[claimcheck] the error above came from tool "{}" of server "{}".'
    assert echo == (False, [("text", 5, "small")])
    assert fail[0] is True and fail[1][1][2] == note.format("fail", "demo")
    assert nope[0] is True and nope[1][0][2].startswith('Unknown tool "raw__nope"')
    assert demo_big[0] is False and demo_big[1][0][1] == 2048 * 1024
    assert big == (False, [("text", 20 * MIB, big_text_sha256(20)[0])])
    limit = CUT_MIB * MIB
    assert cut[0] is False and cut[1][0][1] == limit + len(CUT_MARKER.format(limit=limit, total=30 * MIB))
    big_note = note.format("big", "raw")
    assert big_error == (True, [("text", 18 * MIB, big_text_sha256(18)[0]), ("text", len(big_note), big_note)])


def check_stored_big(answer: dict[str, Any], outer: Path, mib: int) -> None:
    """`answer` (the outer claimcheck's to `inner__raw__big` of `mib` MiB, its outputs under `outer / "out"`) is a
    handle to the text stored whole and identical."""
    text = answer["result"]["content"][0]["text"]
    assert answer["result"].get("isError", False) is False, text[:500]
    assert text.startswith(f"Tool output is too large ({mib * MIB} bytes, ")
    match = re.search(r'handle = "(session-[0-9a-f]{32}/[0-9a-f]{32})"', text)
    assert match is not None, text[:500]
    (run,) = (outer / "out").glob("claimcheck-run-*")
    digest = hashlib.sha256()
    with (run / match.group(1)).open("rb") as stored:
        while block := stored.read(MIB):
            digest.update(block)
    assert digest.hexdigest() == big_text_sha256(mib)[0]
