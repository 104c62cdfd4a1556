"""Small token handlers the renderer builds on: write tokens back out as JSON, build a small value, skip one.

Each follows one JSON value through the `jsonstream` tokens it is given and keeps `depth`, so its owner
knows when the value has ended.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from server.downstream.json_cuts import escape

__all__ = ["SMALL_CHARS", "Buffer", "Emitter", "OutputSink", "Skip", "Skipper", "Small"]

SMALL_CHARS = 64 * 1024  # the most kept of a small part such as `id` or `error`


class OutputSink(Protocol):
    def write(self, text: str, escaped: bytes | None = None) -> None:
        """`text` goes out; `escaped`, when given, is how the message wrote it inside its JSON string."""
        ...


class Skipper(Protocol):
    def skip(self) -> None: ...


class Emitter:
    """Writes the tokens it is given back out as JSON, dropping null members as pydantic's exclude_none does."""

    def __init__(self, sink: OutputSink, *, item: str = ",", key: str = ":", drop_nulls: bool = False) -> None:
        self._sink = sink
        self._item, self._key = item, key
        self._drop_nulls = drop_nulls
        self._first: list[bool] = []  # per open container: nothing written in it yet
        self._pending_key: str | None = None
        self.depth = 0

    def _before_value(self) -> None:
        if not self._first:
            return
        separator = "" if self._first[-1] else self._item
        self._first[-1] = False
        if self._pending_key is not None:
            self._sink.write(f"{separator}{json.dumps(self._pending_key, ensure_ascii=False)}{self._key}")
            self._pending_key = None
        elif separator:
            self._sink.write(separator)

    def start_object(self) -> None:
        self._before_value()
        self._sink.write("{")
        self._first.append(True)
        self.depth += 1

    def end_object(self) -> None:
        self._pending_key = None
        self._first.pop()
        self._sink.write("}")
        self.depth -= 1

    def start_array(self) -> None:
        self._before_value()
        self._sink.write("[")
        self._first.append(True)
        self.depth += 1

    def end_array(self) -> None:
        self._first.pop()
        self._sink.write("]")
        self.depth -= 1

    def key(self, name: str) -> None:
        self._pending_key = name

    def drop_key(self) -> None:
        """Forget the member whose key was just given: its value goes elsewhere."""
        self._pending_key = None

    def scalar(self, value: int | float | bool | None) -> None:
        if value is None and self._drop_nulls and self._pending_key is not None:
            self._pending_key = None
            return
        self._before_value()
        self._sink.write(json.dumps(value))

    def string_start(self) -> None:
        self._before_value()
        self._sink.write('"')
        self.depth += 1

    def string_piece(self, text: str, escaped: bytes | None = None) -> None:
        self._sink.write(escape(text).decode())

    def string_end(self) -> None:
        self._sink.write('"')
        self.depth -= 1


class Small:
    """Builds a small value from tokens, keeping at most SMALL_CHARS of strings (`overflow` when it had to stop)."""

    def __init__(self) -> None:
        self._stack: list[Any] = []
        self._keys: list[str | None] = []
        self._parts: list[str] = []
        self._chars = 0
        self.value: Any = None
        self.overflow = False
        self.depth = 0

    def _add(self, value: Any) -> None:
        if not self._stack:
            self.value = value
        elif isinstance(self._stack[-1], list):
            self._stack[-1].append(value)
        else:
            self._stack[-1][self._keys[-1]] = value

    def start_object(self) -> None:
        self._stack.append({})
        self._keys.append(None)
        self.depth += 1

    def end_object(self) -> None:
        self._keys.pop()
        self.depth -= 1
        self._add(self._stack.pop())

    def start_array(self) -> None:
        self._stack.append([])
        self._keys.append(None)
        self.depth += 1

    def end_array(self) -> None:
        self._keys.pop()
        self.depth -= 1
        self._add(self._stack.pop())

    def key(self, name: str) -> None:
        self._keys[-1] = name

    def scalar(self, value: int | float | bool | None) -> None:
        self._add(value)

    def string_start(self) -> None:
        self._parts = []
        self.depth += 1

    def string_piece(self, text: str, escaped: bytes | None = None) -> None:
        room = SMALL_CHARS - self._chars
        if len(text) > room:
            text, self.overflow = text[: max(room, 0)], True
        self._chars += len(text)
        self._parts.append(text)

    def string_end(self) -> None:
        self.depth -= 1
        self._add("".join(self._parts))


class Skip:
    """Swallows one value."""

    def __init__(self) -> None:
        self.depth = 0

    def start_object(self) -> None:
        self.depth += 1

    start_array = string_start = start_object

    def end_object(self) -> None:
        self.depth -= 1

    end_array = string_end = end_object

    def key(self, name: str) -> None:
        pass

    def scalar(self, value: int | float | bool | None) -> None:
        pass

    def string_piece(self, text: str, escaped: bytes | None = None) -> None:
        pass


class Buffer:
    """An `OutputSink` in memory, until it grows past `limit`; then it hands over to `then`."""

    def __init__(self, limit: int, then: OutputSink) -> None:
        self.parts: list[str] = []
        self._size = 0
        self._limit = limit
        self._then = then
        self.spilled = False

    def write(self, text: str, escaped: bytes | None = None) -> None:
        if self.spilled:
            self._then.write(text, escaped)
            return
        self.parts.append(text)
        self._size += len(text)
        if self._size > self._limit:
            self.spilled = True
            for part in self.parts:
                self._then.write(part)
            self.parts.clear()
