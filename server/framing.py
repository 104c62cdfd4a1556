"""Newline-delimited JSON-RPC framing shared by the stdio transports (downstream and upstream)."""

from __future__ import annotations

import json
import logging
import re

import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import BaseModel

from server.budget import response_id
from server.errors import clip

__all__ = [
    "Framer",
    "LineSplitter",
    "LongLine",
    "dump_json",
    "encode",
    "lone_surrogates_replaced",
    "parse_line",
    "unreadable_answer",
]

logger = logging.getLogger(__name__)

_ESCAPED_SURROGATE = re.compile(
    rb"(?<!\\)((?:\\\\)*)\\u([dD][89abAB][0-9a-fA-F]{2})(\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
    rb"|(?<!\\)((?:\\\\)*)\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
"""A surrogate escape in JSON text (after an even run of backslashes): a high one with its low half or alone,
or a low one alone."""


class LineSplitter:
    """Cuts a byte stream into lines in linear time: the pieces of a line are joined once, at its end.

    mcp 2.3.0's stdio transports re-split their whole buffer on every chunk, which is quadratic in the
    size of one message; a proxy moves 10 MiB results, so this matters.
    """

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """The complete non-blank lines that `chunk` finishes, without their newlines."""
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._parts.append(chunk[start:end])
            line = b"".join(self._parts)
            self._parts.clear()
            start = end + 1
            if line.strip():
                lines.append(line)
        if start < len(chunk):
            self._parts.append(chunk[start:])
        return lines


class LongLine:
    """The parts of a line longer than a `Framer`'s limit: `first` once, then `more` pieces, then `end`."""

    __slots__ = ("data", "kind")

    def __init__(self, kind: str, data: bytes) -> None:
        self.kind = kind  # "first" | "more" | "end"
        self.data = data


class Framer:
    """Cuts a byte stream into lines like `LineSplitter`, but never joins more than `limit` bytes: a longer
    line is handed on in pieces (`LongLine`), so memory does not grow with a message that never ends."""

    def __init__(self, limit: int, *, keep_blank: bool = False) -> None:
        self._limit = limit
        self._keep_blank = keep_blank  # SSE: a blank line ends an event
        self._parts: list[bytes] = []
        self._size = 0
        self._long = False

    @property
    def in_long_line(self) -> bool:
        return self._long

    def feed(self, chunk: bytes) -> list[bytes | LongLine]:
        """Complete non-blank short lines (without newlines) and the parts of long ones, in order."""
        out: list[bytes | LongLine] = []
        start = 0
        size = len(chunk)
        while start < size:
            end = chunk.find(b"\n", start)
            piece = chunk[start : size if end < 0 else end]
            if self._long:
                if piece:
                    out.append(LongLine("more", piece))
            else:
                self._parts.append(piece)
                self._size += len(piece)
                if self._size > self._limit:
                    out.append(LongLine("first", b"".join(self._parts)))
                    self._parts.clear()
                    self._size = 0
                    self._long = True
            if end < 0:
                break
            if self._long:
                out.append(LongLine("end", b""))
                self._long = False
            else:
                line = b"".join(self._parts)
                self._parts.clear()
                self._size = 0
                if self._keep_blank or line.strip():
                    out.append(line)
            start = end + 1
        return out

    def rest(self) -> bytes | LongLine | None:
        """What is left at the end of the stream: an unfinished short line, or the end of a long one."""
        if self._long:
            self._long = False
            return LongLine("end", b"")
        line = b"".join(self._parts)
        self._parts.clear()
        self._size = 0
        return line or None


def lone_surrogates_replaced(line: bytes) -> bytes:
    """`line` with each lone surrogate escape replaced by U+FFFD's: JSON may escape one, but no UTF-8 text can
    hold it, so a message carrying one could not be written on to the other side (the SDK's serializer refuses
    it). Surrogate pairs are kept; a line without a surrogate escape is returned as it is, at the cost of a find."""
    if b"\\ud" not in line and b"\\uD" not in line:
        return line

    def replace(match: re.Match[bytes]) -> bytes:
        if match.group(2) is not None:
            return match.group(0) if match.group(3) is not None else match.group(1) + b"\\ufffd"
        return match.group(4) + b"\\ufffd"

    return _ESCAPED_SURROGATE.sub(replace, line)


def parse_line(line: bytes, peer: str) -> SessionMessage | Exception:
    """One JSON-RPC message, or the validation error the session reports for a garbage line."""
    line = lone_surrogates_replaced(line)
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        logger.warning("%s wrote a line that is not JSON-RPC: %.200r", peer, line)
        return exc


def unreadable_answer(line: bytes, error: Exception) -> bytes | None:
    """For a downstream line the SDK cannot read (nested past its parser's limit, a number out of range, bytes
    that are not UTF-8) that is the response to a request whose id it shows: an error response to that id, so
    the waiting call fails at once with the reason instead of waiting for the server's timeout. None otherwise."""
    ident = response_id(line)
    if ident is None:
        return None
    details = getattr(error, "errors", None)
    reason = details()[0].get("msg", "") if callable(details) and details() else ""
    message = f"claimcheck could not read the server's answer ({clip(reason or type(error).__name__, 200)})"
    body = {"jsonrpc": "2.0", "id": ident, "error": {"code": types.INTERNAL_ERROR, "message": message}}
    return json.dumps(body).encode()


def dump_json(model: BaseModel, *, exclude_unset: bool = True, exclude_none: bool = False) -> str:
    """A model as JSON text, as the SDK writes it; a lone surrogate in a string is written escaped, which JSON
    allows, where the SDK's serializer would refuse the whole message."""
    try:
        return model.model_dump_json(by_alias=True, exclude_unset=exclude_unset, exclude_none=exclude_none)
    except ValueError:  # pydantic_core.PydanticSerializationError: a lone surrogate in a string
        dumped = model.model_dump(mode="json", by_alias=True, exclude_unset=exclude_unset, exclude_none=exclude_none)
        return json.dumps(dumped, separators=(",", ":"))


def encode(message: SessionMessage) -> bytes:
    return dump_json(message.message).encode("utf-8") + b"\n"
