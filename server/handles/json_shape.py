"""The shape half of the JSON view (`server.handles.json_view`): what an output's JSON looks like at the top,
read as a stream. Values are measured and passed over, never built whole; a value too deep or too big to
build is passed over by counting brackets, so a shape may say less of it, never fail.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from extraction import Source, TextSource
from extraction.wording import plural
from server.handles.json_reader import (
    KEY_MAX_CHARS,
    VALUE_MAX_CHARS,
    Ends,
    Reader,
    TooBig,
    TooDeep,
    kind_of,
    lone_value,
    not_json,
    read_batch,
)

__all__ = ["SHAPE_KEYS", "head_shape", "shape"]

SHAPE_KEYS = 100  # keys of an object listed in a shape


@dataclass(slots=True)
class _Shape:
    top: str = ""
    count: int = 0  # members of the top value
    members: list[list[Any]] | None = None  # [key, kind, size] for the first keys of a top-level object
    first_keys: list[str] | None = None  # keys of the first element of a top-level array
    size: int | None = None  # characters of a top-level string


def _measure(reader: Reader) -> int | None:
    """Members of the container (or characters of the string) at the reader, passing over it."""
    char = reader.peek()
    if char == '"':
        try:
            return len(reader.value(VALUE_MAX_CHARS))
        except TooBig:
            reader.skip()
            return None
    if char not in "[{":
        reader.value(1024)
        return None
    reader.pos += 1
    closing = "}" if char == "{" else "]"
    if reader.peek() == closing:
        reader.pos += 1
        return 0
    if char == "[":
        return _count_elements(reader, 0)
    count = 0
    while True:
        reader.value(KEY_MAX_CHARS)
        reader.expect(":")
        reader.skip()
        count += 1
        if reader.expect(",}") == "}":
            return count


def _count_elements(reader: Reader, count: int) -> int:
    """`count` plus the elements left in the array at the reader (at an element's start), passing over them:
    runs of them in one C call where the text at hand allows (`read_batch`), else one by one."""
    batch_from = 0
    while True:
        if reader.dropped + reader.pos >= batch_from:
            batch = read_batch(reader)
            if batch is not None:
                count += len(batch[0])
                reader.pos = batch[2]
                continue
            batch_from = reader.dropped + len(reader.buf)
        reader.skip()
        count += 1
        if reader.expect(",]") == "]":
            return count


def _read_shape(reader: Reader, shape: _Shape, key_limit: int, measure: bool = True) -> None:
    """Fill `shape` as far as the text goes (it stays filled that far when the text ends early)."""
    char = reader.peek()
    shape.top = kind_of(char) if char else ""
    if char == "{":
        shape.members = []
        reader.pos += 1
        if reader.peek() == "}":
            reader.pos += 1
            return
        while True:
            key = reader.value(KEY_MAX_CHARS)
            reader.expect(":")
            shape.count += 1
            member = [key, kind_of(reader.peek()), None]
            if len(shape.members) < key_limit:
                shape.members.append(member)
            if measure:
                member[2] = _measure(reader)
            else:
                reader.skip()
            if reader.expect(",}") == "}":
                return
    elif char == "[":
        reader.pos += 1
        if reader.peek() == "]":
            reader.pos += 1
            return
        if reader.peek() == "{":
            try:
                first = reader.value(VALUE_MAX_CHARS)
                shape.first_keys = list(first)[:key_limit]
            except (TooBig, TooDeep):
                reader.skip()
        else:
            reader.skip()
        shape.count = 1
        if reader.expect(",]") == "]" or not measure:
            return
        shape.count = _count_elements(reader, 1)
    elif char == '"':
        shape.size = _measure(reader)
    elif char:
        reader.value(1024)


def shape(source: Source) -> tuple[str, str]:
    """The top-level shape: for an object its keys with each value's kind and size, for an array its
    length and the keys of its first element. Reads the whole output, building little."""
    reader = Reader(source)
    recorded = _Shape()
    note = ""
    try:
        _read_shape(reader, recorded, SHAPE_KEYS)
    except Ends as exc:
        if recorded.top not in ("object", "array") or not recorded.count:
            raise not_json(str(exc)) from None
        note = f"the JSON ends early or is broken ({exc}); the shape is of the part before that"
    if recorded.top not in ("object", "array"):
        lone_value(reader, recorded.top)
    elif reader.peek() and not note:
        note = f"there is more text after the JSON value, at {reader.where()}"
    return _shape_text(recorded), note


def _describe(kind: str, size: int | None) -> str:
    unit = {"object": "key", "array": "item", "string": "character"}.get(kind)
    return kind if unit is None or size is None else f"{kind} ({plural(size, unit)})"


def _shape_text(recorded: _Shape) -> str:
    if recorded.top == "object":
        members = recorded.members or []
        lines = [f"object with {plural(recorded.count, 'key')}:"]
        lines += [f"  {json.dumps(key, ensure_ascii=False)}: {_describe(kind, size)}" for key, kind, size in members]
        if recorded.count > len(members):
            lines.append(f"  … and {plural(recorded.count - len(members), 'more key')}")
        return "\n".join(lines)
    if recorded.top == "array":
        lines = [f"array with {plural(recorded.count, 'item')}"]
        if recorded.first_keys:
            keys = ", ".join(json.dumps(k, ensure_ascii=False) for k in recorded.first_keys)
            lines.append(f"  the first item is an object with keys: {keys}")
        return "\n".join(lines)
    return f"a single {_describe(recorded.top, recorded.size)}"


def head_shape(head: bytes) -> tuple[str, list[str], str | None] | None:
    """From the first bytes of an output: (top kind, its first keys or the first element's keys, the key of
    the first member that is an array), or None when they do not start a JSON object or array."""
    text = head.decode("utf-8", "ignore")
    if text.lstrip()[:1] not in ("{", "["):
        return None
    recorded = _Shape()
    try:
        _read_shape(Reader(TextSource.of(text)), recorded, 20, measure=False)
    except (Ends, TooBig, TooDeep):
        pass
    if recorded.top == "object":
        members = recorded.members or []
        arrays = [m[0] for m in members if m[1] == "array"]
        if not members:
            return None
        return "object", [m[0] for m in members], arrays[0] if arrays else None
    if recorded.top == "array" and (recorded.count or recorded.first_keys):
        return "array", recorded.first_keys or [], None
    return None
