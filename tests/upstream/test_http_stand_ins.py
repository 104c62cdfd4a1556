"""`StandInSend` over the ASGI messages the SDK's HTTP transports send: a stand-in answer's SSE event keeps its id
and other fields with the output's text in its data; a stand-in JSON body loses its length and carries the text;
every other message goes out as it came, and an output no longer held is said to be so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.types import Message

from server.downstream.spooled import SpooledOutput, SpooledOutputs
from server.upstream.http_stand_ins import StandInSend
from server.upstream.streamed import GONE, stand_in

pytestmark = pytest.mark.anyio

TEXT = 'a "quoted" line\nthen é and \U0001f600 ' * 40_000  # about 1.3 MB: more than one piece


def _stored(tmp_path: Path, text: str = TEXT, *, error: bool = False) -> SpooledOutput:
    path = tmp_path / "output"
    data = text.encode()
    path.write_bytes(data)
    return SpooledOutput(path, len(data), len(data), text.count("\n"), error, text[:100], None, None, False)


def _answer(ident: int | str, token: str, *, error: bool = False) -> bytes:
    result = {"content": [{"type": "text", "text": token}], "isError": error, "_meta": {"claimcheck/streamed": token}}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}).encode()


async def _sent(messages: list[Message], outputs: SpooledOutputs) -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    wrapped = StandInSend(send, outputs)
    for message in messages:
        await wrapped(message)
    return sent


def _body(sent: list[Message]) -> bytes:
    return b"".join(message.get("body", b"") for message in sent if message["type"] == "http.response.body")


def _start(content_type: bytes, length: int | None = None) -> Message:
    headers = [(b"content-type", content_type), (b"mcp-session-id", b"s1")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return {"type": "http.response.start", "status": 200, "headers": headers}


async def test_a_stand_in_event_keeps_its_id_and_carries_the_output_in_its_data(tmp_path: Path) -> None:
    outputs = SpooledOutputs()
    spooled = _stored(tmp_path)
    token = stand_in(outputs, spooled).meta["claimcheck/streamed"]  # type: ignore[index]
    event = b"id: 17\r\nevent: message\r\ndata: " + _answer(4, token) + b"\r\n\r\n"
    ping = b": ping - 2026-11-28\r\n\r\n"
    messages = [
        _start(b"text/event-stream; charset=utf-8"),
        {"type": "http.response.body", "body": ping, "more_body": True},
        {"type": "http.response.body", "body": event, "more_body": False},
    ]
    sent = await _sent(messages, outputs)
    assert sent[:2] == messages[:2]  # the start and the ping as they came
    assert sent[-1]["more_body"] is False and all(message.get("more_body") for message in sent[2:-1])
    head, _, data = _body(sent[2:]).partition(b"data: ")
    assert head == b"id: 17\r\nevent: message\r\n"
    line, _, blank = data.partition(b"\r\n")
    assert blank == b"\r\n"  # the event ends where it ended, its lines as the SDK's writer ends them
    assert b"\n" not in line
    result = {"content": [{"type": "text", "text": TEXT}], "isError": False}
    assert json.loads(line) == {"jsonrpc": "2.0", "id": 4, "result": result}
    assert not spooled.path.exists()  # type: ignore[union-attr]  # written once, then removed
    assert len(outputs) == 0


async def test_a_stand_in_json_body_is_sent_chunked_with_the_output(tmp_path: Path) -> None:
    outputs = SpooledOutputs()
    token = stand_in(outputs, _stored(tmp_path, error=True)).meta["claimcheck/streamed"]  # type: ignore[index]
    body = _answer("x", token, error=True)
    sent = await _sent([_start(b"application/json", len(body)), {"type": "http.response.body", "body": body}], outputs)
    assert sent[0]["status"] == 200
    assert sent[0]["headers"] == [(b"content-type", b"application/json"), (b"mcp-session-id", b"s1")]
    result = json.loads(_body(sent))["result"]
    assert result == {"content": [{"type": "text", "text": TEXT}], "isError": True}
    assert _body(sent).endswith(b"}")  # as the SDK's body ends: no newline added
    assert sent[-1].get("more_body", False) is False


@pytest.mark.parametrize(
    "messages",
    [
        [_start(b"application/json", 2), {"type": "http.response.body", "body": b"{}"}],
        [_start(b"text/event-stream"), {"type": "http.response.body", "body": b"data: {}\r\n\r\n", "more_body": True}],
        [  # the key, but not a stand-in's (a tool's text that names it)
            _start(b"application/json", 60),
            {"type": "http.response.body", "body": b'{"jsonrpc":"2.0","id":1,"result":{"x":"claimcheck/streamed"}}'},
        ],
        [{"type": "http.response.start", "status": 202, "headers": []}, {"type": "http.response.body", "body": b""}],
    ],
    ids=["json", "event", "named", "accepted"],
)
async def test_everything_else_goes_out_as_it_came(messages: list[Message]) -> None:
    assert await _sent(messages, SpooledOutputs()) == messages


async def test_a_stand_in_whose_output_is_no_longer_held_says_so() -> None:
    """Sent once already (a stream resumed after its answer), or expired: an error answer, never the token."""
    event = b"id: 3\r\nevent: message\r\ndata: " + _answer(9, "f" * 32) + b"\r\n\r\n"
    sent = await _sent([{"type": "http.response.body", "body": event, "more_body": True}], SpooledOutputs())
    data = _body(sent).partition(b"data: ")[2]
    answer: dict[str, Any] = json.loads(data)
    assert answer["id"] == 9 and answer["result"]["isError"] is True
    assert answer["result"]["content"] == [{"type": "text", "text": GONE}]
    assert _body(sent).startswith(b"id: 3\r\nevent: message\r\ndata: ") and sent[-1]["more_body"] is True
