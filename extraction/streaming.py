"""A streamed chat completion read piece by piece: server-sent events in, one `Completion` out.

Everything the endpoint sends is bounded: a line of the stream, the answer's text and its tool calls' arguments
(`ANSWER_LIMIT_CHARS`), so an endpoint that never stops talking ends in a clear error, not in memory.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from extraction.errors import LLMBadResponse

__all__ = ["ANSWER_LIMIT_CHARS", "LINE_LIMIT_BYTES", "Answer", "events"]

LINE_LIMIT_BYTES = 1 << 20
ANSWER_LIMIT_CHARS = 1 << 20  # an answer of max_tokens tokens is far shorter: past this the endpoint misbehaves


async def events(pieces: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """The `data:` payloads of a server-sent event stream (comments such as pings are skipped)."""
    buffer = bytearray()
    async for piece in pieces:
        buffer += piece
        while (end := buffer.find(b"\n")) >= 0:
            line = bytes(buffer[:end]).rstrip(b"\r")
            del buffer[: end + 1]
            if line.startswith(b"data:"):
                yield line[5:].strip().decode("utf-8", "replace")
        if len(buffer) > LINE_LIMIT_BYTES:
            raise LLMBadResponse(f"the endpoint sent a stream line longer than {LINE_LIMIT_BYTES} bytes")
    if buffer.startswith(b"data:"):
        yield bytes(buffer[5:]).strip().decode("utf-8", "replace")


@dataclass
class Answer:
    """The deltas of one streamed choice, put together."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)  # by the delta's index
    usage: dict[str, Any] = field(default_factory=dict)
    chunks: int = 0  # data chunks that carried something: about one per token where usage is not sent
    size: int = 0

    def add(self, payload: str) -> None:
        try:
            data = json.loads(payload)
        except (ValueError, RecursionError):
            raise LLMBadResponse(f"the endpoint streamed something that is not JSON: {payload[:200]!r}") from None
        if not isinstance(data, dict):
            raise LLMBadResponse("the endpoint streamed a chunk that is not an object")
        if isinstance(data.get("error"), dict | str):
            raise LLMBadResponse(f"the endpoint reported an error mid-answer: {str(data['error'])[:300]}")
        if isinstance(data.get("usage"), dict):
            self.usage = data["usage"]
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        delta = choices[0].get("delta") or choices[0].get("message") or {}
        if not isinstance(delta, dict):
            return
        self.chunks += 1
        if isinstance(content := delta.get("content"), str):
            self._grow(len(content))
            self.text.append(content)
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            if isinstance(call, dict):
                self._call(call)

    def _call(self, delta: dict[str, Any]) -> None:
        index = delta.get("index", len(self.calls))
        index = index if isinstance(index, int) else len(self.calls)
        call = self.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        function: dict[str, Any] = delta["function"] if isinstance(delta.get("function"), dict) else {}
        if isinstance(delta.get("id"), str):
            call["id"] = delta["id"]
        if isinstance(function.get("name"), str):
            call["name"] += function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # some servers send the arguments whole, as an object
            arguments = json.dumps(arguments)
        if isinstance(arguments, str):
            self._grow(len(arguments))
            call["arguments"] += arguments

    def _grow(self, chars: int) -> None:
        self.size += chars
        if self.size > ANSWER_LIMIT_CHARS:
            raise LLMBadResponse(f"the endpoint's answer went past {ANSWER_LIMIT_CHARS} characters")

    def as_message(self) -> dict[str, Any]:
        """The answer in the shape of a non-streamed completion's `choices[0].message`."""
        calls = [
            {
                "id": c["id"] or c["name"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for _, c in sorted(self.calls.items())
        ]
        return {"role": "assistant", "content": "".join(self.text), "tool_calls": calls}


def _function(call: dict[str, Any]) -> dict[str, Any]:
    return {"name": call["name"], "arguments": call["arguments"]}
