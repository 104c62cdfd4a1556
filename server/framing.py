"""Newline-delimited JSON-RPC framing shared by the stdio transports (downstream and upstream)."""

from __future__ import annotations

import logging

import mcp_types as types
from mcp.shared.message import SessionMessage

__all__ = ["LineSplitter", "encode", "parse_line"]

logger = logging.getLogger(__name__)


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


def parse_line(line: bytes, peer: str) -> SessionMessage | Exception:
    """One JSON-RPC message, or the validation error the session reports for a garbage line."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        logger.warning("%s wrote a line that is not JSON-RPC: %.200r", peer, line)
        return exc


def encode(message: SessionMessage) -> bytes:
    return message.message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"
