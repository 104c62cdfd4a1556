"""What a large JSON-RPC message says, read token by token: the rendered output of a tool result, streamed.

`ResultRenderer` follows the tokens of one message (`jsonstream`) and writes the text a model would
have seen (the same text as `render_output` makes of a whole result: text items as they are, any other
item as compact JSON, items joined by newlines; `structuredContent` as JSON when there is no content)
to an `OutputSink` piece by piece, while it keeps the small parts (`id`, `method`, `error`,
`isError`) to say what kind of message it was.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from pydantic import TypeAdapter

from server.downstream.json_sinks import SMALL_CHARS, Buffer, Emitter, OutputSink, Skip, Skipper, Small
from server.framing import dump_json

__all__ = ["OutputSink", "ResultRenderer", "render_output"]

_CONTENT: TypeAdapter[types.ContentBlock] = TypeAdapter(types.ContentBlock)


class _Item:
    """One content item: a text item's `text` goes straight to the output; any other item is rendered as
    the JSON pydantic would write for it, or, when it is too big to hold, streamed as it came."""

    def __init__(self, output: OutputSink) -> None:
        self._output = output
        self._buffer = Buffer(SMALL_CHARS * 16, output)
        self._json = Emitter(self._buffer, drop_nulls=True)
        self._member: str | None = None
        self._type: Any = None
        self._type_parts: list[str] | None = None
        self._streaming_text = False
        self.text_seen = False
        self.depth = 0

    def start_object(self) -> None:
        self.depth += 1
        self._json.start_object()

    def start_array(self) -> None:
        self.depth += 1
        self._json.start_array()

    def end_object(self) -> None:
        self.depth -= 1
        self._json.end_object()
        if self.depth == 0:
            self._finish()

    def end_array(self) -> None:
        self.depth -= 1
        self._json.end_array()

    def key(self, name: str) -> None:
        if self.depth == 1:
            self._member = name
        self._json.key(name)

    def scalar(self, value: int | float | bool | None) -> None:
        self._json.scalar(value)

    def string_start(self) -> None:
        self.depth += 1
        if self.depth == 2 and self._member == "text" and self._type in (None, "text"):
            self._streaming_text = self.text_seen = True
            self._json.drop_key()
            return
        if self.depth == 2 and self._member == "type":
            self._type_parts = []
        self._json.string_start()

    def string_piece(self, text: str, escaped: bytes | None = None) -> None:
        if self._streaming_text:
            self._output.write(text, escaped)
            return
        if self._type_parts is not None:
            self._type_parts.append(text[:64])
        self._json.string_piece(text)

    def string_end(self) -> None:
        self.depth -= 1
        if self._streaming_text:
            self._streaming_text = False
            return
        if self._type_parts is not None:
            self._type, self._type_parts = "".join(self._type_parts), None
        self._json.string_end()

    def _finish(self) -> None:
        if self.text_seen and self._type in (None, "text"):
            return
        if self._buffer.spilled:
            return  # already streamed, members in the order they came
        raw = "".join(self._buffer.parts)
        try:
            item = _CONTENT.validate_json(raw)
        except ValueError:
            self._output.write(raw)
            return
        self._output.write(dump_json(item, exclude_unset=False, exclude_none=True))


_Capture = Emitter | Small | Skip | _Item


class ResultRenderer:
    """A `JsonHandler` for one whole JSON-RPC message (see the module docstring)."""

    def __init__(self, output: OutputSink, structured: OutputSink) -> None:
        self._output = output
        self._structured = structured
        self._depth = 0  # open containers outside any capture: the message, `result`, `content`
        self._path: list[str] = []  # their keys ("" for the message itself)
        self._key: str | None = None
        self._capture: _Capture | None = None
        self.stream: Skipper | None = None  # set by the owner of the JsonStream that feeds this renderer
        self.items = 0
        self.id: Any = None
        self.method: str | None = None
        self.error: Any = None
        self.error_overflow = False
        self.is_error = False
        self.has_result = False
        self.has_content = False
        self.has_structured = False

    def _start_value(self, kind: str) -> bool:
        """Route a value that starts here; True when a capture took it (and has seen its first token)."""
        capture = self._capture
        if capture is not None:
            getattr(capture, kind)()
            self._maybe_skip(capture, kind)
            return True
        where = (*self._path[1:], self._key)
        if self._depth == 0:
            if kind != "start_object":
                self._capture = Skip()
                getattr(self._capture, kind)()
                return True
            return False
        if where == ("result",) and kind == "start_object":
            self.has_result = True
            return False
        if where == ("result", "content") and kind == "start_array":
            self.has_content = True
            return False
        if self._path[1:] == ["result", "content"] and self._key is None:  # an item of content
            if self.items:
                self._output.write("\n")
            self.items += 1
            capture = _Item(self._output) if kind == "start_object" else Emitter(self._output)
        elif where in (("id",), ("method",), ("error",), ("result", "isError")):
            capture = Small()
        elif where == ("result", "structuredContent"):
            self.has_structured = True
            capture = Skip() if self.items else Emitter(self._structured, item=", ", key=": ")
        else:
            capture = Skip()
        self._capture = capture
        getattr(capture, kind)()
        self._maybe_skip(capture, kind)
        return True

    def _maybe_skip(self, capture: _Capture, kind: str) -> None:
        """Members of a skipped container need no tokens: let the stream go through them in C."""
        if self.stream is not None and isinstance(capture, Skip) and kind in ("start_object", "start_array"):
            self.stream.skip()

    def _captured(self) -> None:
        capture = self._capture
        if capture is None or capture.depth != 0:
            return
        self._capture = None
        if isinstance(capture, Small):
            where = (*self._path[1:], self._key)
            if where == ("id",):
                self.id = capture.value
            elif where == ("method",):
                self.method = str(capture.value)
            elif where == ("error",):
                self.error, self.error_overflow = capture.value, capture.overflow
            elif where == ("result", "isError"):
                self.is_error = capture.value is True

    # -- JsonHandler ------------------------------------------------------------------------------

    def start_object(self) -> None:
        if not self._start_value("start_object"):
            self._path.append(self._key or "")
            self._depth += 1
            self._key = None
        else:
            self._captured()

    def start_array(self) -> None:
        if not self._start_value("start_array"):
            self._path.append(self._key or "")
            self._depth += 1
            self._key = None
        else:
            self._captured()

    def _end(self, kind: str) -> None:
        capture = self._capture
        if capture is not None:
            getattr(capture, kind)()
            self._captured()
            return
        self._depth -= 1
        self._key = self._path.pop() or None
        if self._path[1:] == ["result", "content"]:
            self._key = None  # back among content's items

    def end_object(self) -> None:
        self._end("end_object")

    def end_array(self) -> None:
        self._end("end_array")

    def key(self, name: str) -> None:
        if self._capture is not None:
            self._capture.key(name)
        else:
            self._key = name

    def scalar(self, value: int | float | bool | None) -> None:
        if self._capture is None:
            self._start_value_scalar(value)
            return
        self._capture.scalar(value)
        self._captured()

    def _start_value_scalar(self, value: int | float | bool | None) -> None:
        where = (*self._path[1:], self._key)
        if where in (("id",), ("method",), ("error",), ("result", "isError")):
            small = Small()
            small.scalar(value)
            self._capture = small
            self._captured()
        elif where == ("result", "structuredContent") and not self.items and value is not None:
            self.has_structured = True
            self._structured.write(json.dumps(value))
        elif self._path[1:] == ["result", "content"] and self._key is None:
            if self.items:
                self._output.write("\n")
            self.items += 1
            self._output.write(json.dumps(value))

    def string_start(self) -> None:
        self._start_value("string_start")

    def string_piece(self, text: str, escaped: bytes | None = None) -> None:
        if self._capture is not None:
            self._capture.string_piece(text, escaped)

    def string_end(self) -> None:
        if self._capture is not None:
            self._capture.string_end()
            self._captured()


def render_output(result: types.CallToolResult) -> str:
    """The text a model would have seen: text items as they are, anything else as one line of JSON."""
    parts: list[str] = []
    for item in result.content:
        if isinstance(item, types.TextContent):
            parts.append(item.text)
        else:
            parts.append(dump_json(item, exclude_unset=False, exclude_none=True))
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)
