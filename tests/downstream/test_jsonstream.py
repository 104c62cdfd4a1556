"""The incremental JSON tokenizer decodes exactly what json.loads decodes, however the bytes are split."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.downstream.jsonstream import JsonStream, JsonStreamError


class Rebuild:
    """Builds the Python value back from the tokens, counting string pieces."""

    def __init__(self) -> None:
        self.stack: list[Any] = []
        self.keys: list[str | None] = []
        self.value: Any = None
        self.parts: list[str] = []
        self.pieces = 0
        self.escaped = 0  # pieces that came with the bytes they were read from

    def _add(self, value: Any) -> None:
        if not self.stack:
            self.value = value
        elif isinstance(self.stack[-1], list):
            self.stack[-1].append(value)
        else:
            self.stack[-1][self.keys[-1]] = value

    def start_object(self) -> None:
        self.stack.append({})
        self.keys.append(None)

    def end_object(self) -> None:
        self.keys.pop()
        self._add(self.stack.pop())

    def start_array(self) -> None:
        self.stack.append([])
        self.keys.append(None)

    def end_array(self) -> None:
        self.keys.pop()
        self._add(self.stack.pop())

    def key(self, name: str) -> None:
        self.keys[-1] = name

    def scalar(self, value: int | float | bool | None) -> None:
        self._add(value)

    def string_start(self) -> None:
        self.parts = []

    def string_piece(self, text: str, escaped: bytes | None = None) -> None:
        self.pieces += 1
        self.parts.append(text)
        if escaped is not None:  # the piece as it came: a JSON string's inside that reads as `text`
            self.escaped += 1
            assert json.loads(b'"' + escaped + b'"') == text

    def string_end(self) -> None:
        self._add("".join(self.parts))


def feed_cut(stream: JsonStream, data: bytes, cuts: list[int]) -> None:
    """Feed `data` to `stream` in the pieces `cuts` makes, then finish it."""
    last = 0
    for cut in sorted({min(max(c, 0), len(data)) for c in cuts}):
        stream.feed(data[last:cut])
        last = cut
    stream.feed(data[last:])
    stream.finish()


def decode(data: bytes, cuts: list[int]) -> tuple[Any, int]:
    handler = Rebuild()
    feed_cut(JsonStream(handler), data, cuts)
    return handler.value, handler.pieces


def same(a: Any, b: Any) -> bool:
    """Equality that treats NaN-free floats and lone surrogates exactly."""
    return json.dumps(a, ensure_ascii=True, sort_keys=False) == json.dumps(b, ensure_ascii=True, sort_keys=False)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(value=json_values, ascii_only=st.booleans(), cuts=st.lists(st.integers(0, 400), max_size=12))
def test_any_value_split_anywhere_decodes_as_json_loads_does(value: Any, ascii_only: bool, cuts: list[int]) -> None:
    data = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    if not ascii_only and any(0xD800 <= ord(c) <= 0xDFFF for c in data.decode("utf-8", "surrogatepass")):
        data = json.dumps(value, ensure_ascii=True).encode()  # raw lone surrogates are not UTF-8
    decoded, _ = decode(data, cuts)
    assert same(decoded, json.loads(data))


escapes = st.sampled_from(
    ["\\n", '\\"', "\\\\", "\\/", "\\u00e9", "\\ud83d\\ude00", "\\ud800", "\\udc00", "\\t", "é", "😀", "a", "\\u0000"]
)


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(escapes, min_size=1, max_size=30), cuts=st.lists(st.integers(0, 200), max_size=20))
def test_escapes_surrogate_pairs_and_utf8_cut_at_every_boundary_decode_exactly(
    parts: list[str], cuts: list[int]
) -> None:
    data = ('{"k": ["' + "".join(parts) + '"]}').encode("utf-8")
    decoded, _ = decode(data, cuts)
    assert same(decoded, json.loads(data))


def test_every_single_byte_split_of_a_tricky_string_decodes_exactly() -> None:
    data = '"a\\ud83d\\ude00é😀\\\\\\"\\u00e9\\n\\ud800x"'.encode()
    for cut in range(len(data) + 1):
        assert same(decode(data, [cut])[0], json.loads(data)), cut


@settings(max_examples=150, deadline=None)
@given(
    parts=st.lists(escapes, min_size=1, max_size=12),
    filler=st.sampled_from(["a", "é", "😀", "\\\\", "\\u00e9", '\\"', "\x7f"]),
    repeat=st.integers(1500, 3000),
    cuts=st.lists(st.integers(0, 40_000), max_size=8),
)
def test_long_string_middles_taken_as_bytes_decode_exactly(
    parts: list[str], filler: str, repeat: int, cuts: list[int]
) -> None:
    """Pieces that start inside a long string go to pydantic-core's parser first (`_string_middle`): whatever the
    text holds (escapes cut anywhere, lone surrogates, NUL, raw UTF-8), the value is json.loads's."""
    middle = filler * repeat
    data = ('{"text": "' + middle + "".join(parts) + middle + '", "after": ["x"]}').encode("utf-8")
    decoded, _ = decode(data, sorted(cuts))
    assert same(decoded, json.loads(data))


def test_invalid_utf8_and_control_characters_in_a_long_string_read_as_json_reads_them() -> None:
    text = b"ab\\n" * 3000 + b"\xff\x01" + b"c\\u00e9" * 3000
    data = b'{"text": "' + text + b'"}'
    expected = json.loads(data.decode("utf-8", "replace"), strict=False)
    assert decode(data, list(range(0, len(data), 5000)))[0] == expected


def test_a_long_string_arrives_in_pieces_without_being_joined() -> None:
    data = json.dumps({"text": "line\n" * 200_000}).encode()
    value, pieces = decode(data, list(range(0, len(data), 65536)))
    assert value == {"text": "line\n" * 200_000}
    assert pieces >= len(data) // 65536


def test_a_long_string_s_middles_come_with_the_bytes_they_were_read_from() -> None:
    """What a reader may pass on as it came (`escaped`): each such piece reads as its text (checked in
    `Rebuild`), and a long clean string's middles all come with theirs."""
    handler = Rebuild()
    text = 'line "quoted" \\ back é 😀\n' * 40_000
    data = json.dumps({"text": text}, ensure_ascii=False).encode()
    feed_cut(JsonStream(handler), data, list(range(0, len(data), 65536)))
    assert handler.value == {"text": text}
    assert handler.escaped >= handler.pieces - 2 > 0  # all but where it begins and ends


@pytest.mark.parametrize(
    "bad",
    [b"{", b'{"a" 1}', b"[1,]", b"[1 2]", b'{"a":1,}', b"nul", b'"\\x"', b"{}}", b"]", b'{"a":tru}', b"[1}"],
)
def test_malformed_json_is_an_error(bad: bytes) -> None:
    with pytest.raises(JsonStreamError):
        decode(bad, [])


def test_invalid_utf8_becomes_the_replacement_character() -> None:
    assert decode(b'"a\xffb"', [2])[0] == "a\ufffdb"


class SkipUnderS(Rebuild):
    """Rebuilds the value but asks the stream to skip every container under a key "s" (kept as empty)."""

    def __init__(self) -> None:
        super().__init__()
        self.stream: JsonStream | None = None
        self.ignoring = 0  # depth inside a skipped container

    def _open(self, empty: Any) -> bool:
        if self.ignoring:
            self.ignoring += 1
            return True
        if self.stack and isinstance(self.stack[-1], dict) and self.keys[-1] == "s":
            assert self.stream is not None
            self.stream.skip()
            self._add(empty)
            self.ignoring = 1
            return True
        return False

    def start_object(self) -> None:
        if not self._open({}):
            super().start_object()

    def start_array(self) -> None:
        if not self._open([]):
            super().start_array()

    def end_object(self) -> None:
        if self.ignoring:
            self.ignoring -= 1
        else:
            super().end_object()

    def end_array(self) -> None:
        if self.ignoring:
            self.ignoring -= 1
        else:
            super().end_array()

    def key(self, name: str) -> None:
        if not self.ignoring:
            super().key(name)

    def scalar(self, value: int | float | bool | None) -> None:
        if not self.ignoring:
            super().scalar(value)

    def string_start(self) -> None:
        if not self.ignoring:
            super().string_start()

    def string_piece(self, text: str, escaped: bytes | None = None) -> None:
        if not self.ignoring:
            super().string_piece(text, escaped)

    def string_end(self) -> None:
        if not self.ignoring:
            super().string_end()


def emptied(value: Any) -> Any:
    """`value` with every container under a key "s" emptied."""
    if isinstance(value, dict):
        return {k: (type(v)() if k == "s" and isinstance(v, (dict, list)) else emptied(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [emptied(v) for v in value]
    return value


def decode_skipping(data: bytes, cuts: list[int]) -> Any:
    handler = SkipUnderS()
    handler.stream = JsonStream(handler)
    feed_cut(handler.stream, data, cuts)
    return handler.value


skippable = st.recursive(
    json_values,
    lambda children: (
        st.dictionaries(st.sampled_from(["s", "k", "t"]), children, max_size=3) | st.lists(children, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(value=skippable, cuts=st.lists(st.integers(0, 300), max_size=10))
def test_skipped_containers_are_gone_through_and_everything_after_them_decodes(value: Any, cuts: list[int]) -> None:
    data = json.dumps(value).encode()
    assert same(decode_skipping(data, cuts), emptied(json.loads(data)))


def test_a_skipped_container_with_members_too_big_for_one_piece_is_tokenized_and_still_skipped() -> None:
    value = {"s": {"big": "x" * 600_000, "list": [{"a": "y" * 300_000}] * 2, "n": 1}, "k": "after"}
    data = json.dumps(value).encode()
    assert decode_skipping(data, list(range(0, len(data), 65536))) == {"s": {}, "k": "after"}


def test_a_malformed_skipped_container_is_still_an_error() -> None:
    with pytest.raises(JsonStreamError):
        decode_skipping(b'{"s": {"a": 1,, "b": 2}}', [])
    with pytest.raises(JsonStreamError):
        decode_skipping(b'{"s": [1, 2', [])


@pytest.mark.parametrize("cuts", [[], list(range(0, 200_000, 4096))])
def test_a_skipped_member_too_deep_for_the_c_scanner_is_tokenized_and_everything_after_it_decodes(
    cuts: list[int],
) -> None:
    deep = "[" * 5000 + "]" * 5000
    data = f'{{"s": [{deep}, {{"x": {deep}}}, 1], "k": "after"}}'.encode()
    assert decode_skipping(data, cuts) == {"s": [], "k": "after"}


def test_a_value_past_the_depth_budget_is_an_error_not_memory_without_end(monkeypatch: pytest.MonkeyPatch) -> None:
    from server.downstream import jsonstream

    monkeypatch.setattr(jsonstream, "MAX_DEPTH", 100)
    assert decode_skipping(b"[" * 100 + b"]" * 100, []) is not None
    with pytest.raises(JsonStreamError, match="nests deeper than 100 levels"):
        decode_skipping(b"[" * 101 + b"]" * 101, [])
