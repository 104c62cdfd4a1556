"""Large downstream messages are decoded on their way to disk: the stored output is what a client would have seen."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.downstream.json_cuts import escape
from server.downstream.render import render_output
from server.downstream.spool import CUT_MARKER, MessageSpool, SpoolPolicy
from server.downstream.spooled import SpooledOutput, SpooledOutputs

pytestmark = pytest.mark.anyio

OUTPUTS = SpooledOutputs()  # what these tests' spools made, claimed by `claimed`


async def spool(directory: Path, message: Any, *, piece: int = 65536, **policy: Any) -> bytes | Exception | None:
    data = message if isinstance(message, bytes) else json.dumps(message).encode()
    defaults: dict[str, Any] = {"max_output_bytes": 1 << 30, "outputs": OUTPUTS}
    spooler = MessageSpool(SpoolPolicy(directory, **(defaults | policy)), "test")
    for start in range(0, len(data), piece):
        await spooler.feed(data[start : start + piece])
    return await spooler.finish()


def claimed(answer: bytes | Exception | None) -> SpooledOutput:
    assert isinstance(answer, bytes)
    message = json.loads(answer)
    spooled = OUTPUTS.claim(types.CallToolResult.model_validate(message["result"]))
    assert spooled is not None
    return spooled


def expected(result: dict[str, Any]) -> bytes:
    return render_output(types.CallToolResult.model_validate(result)).encode("utf-8", "replace")


def response(result: dict[str, Any], id: int = 7) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": result}


PNG = "iVBORw0KGgo" * 10
ITEMS = [
    {"type": "text", "text": 'commit 1\nAuthor: é 😀 \u2028 "quoted" \\ back\n' * 3},
    {"type": "image", "data": PNG, "mimeType": "image/png"},
    {"type": "resource", "resource": {"uri": "file:///x", "mimeType": "text/plain", "text": "inside\n"}},
    {"type": "audio", "data": "UklGR", "mimeType": "audio/wav", "annotations": {"priority": 0.5}},
    {"type": "resource_link", "uri": "file:///y", "name": "y"},
    {"text": "text before type", "type": "text"},
]


async def test_a_tool_result_is_stored_as_render_output_would_write_it(tmp_path: Path) -> None:
    result = {"content": ITEMS, "isError": False, "structuredContent": {"a": [1, 2]}, "_meta": {"x": 1}}
    spooled = claimed(await spool(tmp_path, response(result), piece=7))
    assert spooled.path is not None
    stored = spooled.path.read_bytes()
    assert stored == expected(result)
    assert spooled.bytes == len(stored)
    assert spooled.lines == stored.count(b"\n") + (not stored.endswith(b"\n"))
    assert not spooled.is_error and not spooled.cut and spooled.failure is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    items=st.lists(st.sampled_from(ITEMS) | st.builds(lambda t: {"type": "text", "text": t}, st.text()), max_size=5),
    piece=st.integers(1, 300),
)
async def test_any_mix_of_items_split_anywhere_is_stored_exactly(tmp_path: Path, items: list[Any], piece: int) -> None:
    result = {"content": items}
    spooled = claimed(await spool(tmp_path, response(result), piece=piece))
    assert spooled.path is not None and spooled.path.read_bytes() == expected(result)


async def test_structured_content_alone_is_stored_as_json_dumps_writes_it(tmp_path: Path) -> None:
    structured = {"rows": [{"name": "é", "n": 1.5, "ok": True, "none": None}] * 3}
    result = {"content": [], "structuredContent": structured}
    spooled = claimed(await spool(tmp_path, response(result), piece=5))
    assert spooled.path is not None
    assert spooled.path.read_bytes() == json.dumps(structured, ensure_ascii=False).encode()


async def test_an_error_result_keeps_its_flag(tmp_path: Path) -> None:
    spooled = claimed(await spool(tmp_path, response({"content": [{"type": "text", "text": "bad"}], "isError": True})))
    assert spooled.is_error


async def test_past_max_output_bytes_the_first_part_is_kept_with_the_marker(tmp_path: Path) -> None:
    text = "0123456789é" * 1000
    spooled = claimed(
        await spool(tmp_path, response({"content": [{"type": "text", "text": text}]}), max_output_bytes=1001)
    )
    assert spooled.path is not None
    total = len(text.encode())
    kept = text.encode()[:1001]
    assert spooled.path.read_bytes() == kept + CUT_MARKER.format(limit=1001, total=total).encode()
    assert spooled.cut and spooled.total == total


async def test_a_small_message_of_another_kind_is_passed_on_whole(tmp_path: Path) -> None:
    message = {"jsonrpc": "2.0", "id": 3, "result": {"contents": [{"uri": "x", "text": "y" * 1000}]}}
    answer = await spool(tmp_path, message)
    assert answer == json.dumps(message).encode()
    assert os.listdir(tmp_path) == []


async def test_a_too_big_answer_of_another_kind_becomes_an_error_naming_its_size(tmp_path: Path) -> None:
    message = {"jsonrpc": "2.0", "id": 3, "result": {"contents": [{"uri": "x", "text": "y" * 5000}]}}
    answer = await spool(tmp_path, message, raw_keep=1000)
    assert isinstance(answer, bytes)
    error = json.loads(answer)
    assert error["id"] == 3 and error["error"]["code"] == types.INTERNAL_ERROR
    assert f"was {len(json.dumps(message))} bytes" in error["error"]["message"]
    assert os.listdir(tmp_path) == []


async def test_a_too_big_notification_is_dropped(tmp_path: Path) -> None:
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "z" * 5000}}
    assert await spool(tmp_path, message, raw_keep=1000) is None
    assert os.listdir(tmp_path) == []


async def test_garbage_is_reported_as_an_error_and_leaves_nothing_behind(tmp_path: Path) -> None:
    answer = await spool(tmp_path, b'{"jsonrpc": "2.0", "id": 1, "result": {"content": [' + b"x" * 5000)
    assert isinstance(answer, ValueError)
    assert os.listdir(tmp_path) == []


async def test_a_forged_stand_in_claims_nothing() -> None:
    forged = types.CallToolResult(content=[], _meta={"claimcheck/spooled": "0" * 32})
    assert OUTPUTS.claim(forged) is None


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(codec=None)) | st.text(alphabet='\x00\x1f\x7f"\\/\u2028\ud800\udfffé😀 ab\n\t'))
def test_escape_writes_what_json_dumps_writes_lone_surrogates_included(text: str) -> None:
    expected = json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8", "replace")
    assert escape(text) == expected
