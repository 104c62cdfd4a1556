"""Where a response's result and its content lie in a message, found by walking its brackets and strings; and what a
strict reader would refuse, which keeps a message from being passed on as it came."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from server.downstream.json_spans import NotPassable, result_spans, spans_in_file
from tests.support.hostile import hostile_output

RESULTS: list[Any] = [
    {"content": [{"type": "text", "text": 'a "quoted" \\ back\\" é 😀 [ { ] }'}], "isError": False},
    {"content": [], "structuredContent": {"content": [1], "result": {"content": []}}},
    {"structuredContent": {"n": 1}, "_meta": {"content": "not this one"}},
    {},
    {"content": [{"type": "image", "data": "QUJD" * 1000, "mimeType": "image/png"}, {"type": "text", "text": ""}]},
    {"content": [{"text": "\\" * 7 + '"' + "\\" * 8, "type": "text"}], "n": [1e300, -0.5, 123456789, True, None]},
    {"isError": True},
]


@pytest.mark.parametrize("indent", [None, 2], ids=["compact", "indented"])
@pytest.mark.parametrize("first", ["id", "result"])
@pytest.mark.parametrize("result", RESULTS, ids=[f"result{n}" for n in range(len(RESULTS))])
def test_the_result_and_its_content_are_found_however_the_message_is_written(
    result: dict[str, Any], first: str, indent: int | None
) -> None:
    message: dict[str, Any] = {"result": result, "id": {"result": {"content": []}}} if first == "result" else {"id": 5}
    message = {**message, "jsonrpc": "2.0", "result": result}
    data = json.dumps(message, indent=indent, ensure_ascii=False).encode()
    spans = result_spans(data)
    assert spans is not None
    assert all(result_spans(data, piece) == spans for piece in (1, 2, 3, 5, 8))  # cut anywhere, even mid-escape
    assert json.loads(data[spans.start : spans.end]) == result
    assert spans.result_empty == (result == {})
    if "content" not in result:
        assert spans.content_end is None and spans.items == []
        return
    assert spans.content_end is not None and data[spans.content_end : spans.content_end + 1] == b"]"
    assert spans.content_empty == (result["content"] == [])
    assert [json.loads(data[item.start : item.end]) for item in spans.items] == result["content"]
    assert [item.type for item in spans.items] == [item["type"] for item in result["content"]]


@pytest.mark.parametrize(
    "data",
    [
        b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x","data":{"result":{}}}}',
        b'{"jsonrpc":"2.0","id":1,"result":5}',
        b'[{"result":{}}]',
    ],
    ids=["error", "scalar", "array"],
)
def test_a_message_without_an_object_result_has_none(data: bytes) -> None:
    assert result_spans(data) is None


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("deep_structured", "nested more than 200 deep"),
        ("huge_int", "a number of 1 000 digits"),
        ("nan", "NaN"),
        ("invalid_utf8", "not UTF-8"),
        ("content_not_list", "content that is not an array"),
    ],
)
def test_what_a_strict_reader_refuses_is_not_passable(case: str, why: str) -> None:
    with pytest.raises(NotPassable, match=why):
        result_spans(hostile_output(case, 7))


@pytest.mark.parametrize(
    ("result", "why"),
    [
        ({"content": [{"type": "text", "text": "a"}, 5]}, "not an object"),
        ({"content": ["a"]}, "not an object"),
        ({"content": [], "structuredContent": [1]}, "structuredContent that is not an object"),
        ({"content": [{"type": "text", "text": "a\tb"}]}, None),  # escaped by json.dumps: fine
    ],
)
def test_content_a_client_would_refuse_is_not_passable(result: dict[str, Any], why: str | None) -> None:
    data = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()
    if why is None:
        assert result_spans(data) is not None
        return
    with pytest.raises(NotPassable, match=why):
        result_spans(data)


@pytest.mark.parametrize("piece", [1, 7, 1 << 20])
def test_a_number_of_1000_digits_is_found_across_pieces(piece: int) -> None:
    data = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"n":%s}}}'
    assert result_spans(data % (b"7" * 999), piece) is not None
    with pytest.raises(NotPassable, match="1 000 digits"):
        result_spans(data % (b"7" * 1000), piece)


def test_a_raw_control_character_is_not_passable_but_the_lines_own_newline_is() -> None:
    line = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a'
    assert result_spans(line + b'b"}]}}\n') is not None
    with pytest.raises(NotPassable, match="control character"):
        result_spans(line + b'\tb"}]}}\n')


def test_a_message_on_disk_is_read_through_a_map(tmp_path: Path) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "x" * 100_000}]}}
    path = tmp_path / "message.raw"
    path.write_bytes(json.dumps(message).encode() + b"\n")
    spans = spans_in_file(path)
    assert spans is not None and spans.items[0].end - spans.items[0].start > 100_000
    (tmp_path / "empty.raw").write_bytes(b"")
    assert spans_in_file(tmp_path / "empty.raw") is None
