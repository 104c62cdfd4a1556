"""The stdio transport tells each request it hands the SDK where its streamed outputs go and which relay link it
came over (`streamed.LineLink`, the request's `ctx.request`): what a ContextVar said before."""

from __future__ import annotations

import socket

import anyio
import pytest
from mcp.shared.message import ServerMessageMetadata, SessionMessage

from server.downstream.spooled import SpooledOutputs
from server.upstream.stdio import fd_streams
from server.upstream.streamed import LineLink, streaming_of

pytestmark = pytest.mark.anyio

PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'


async def _first_message(outputs: SpooledOutputs | None, link: str) -> SessionMessage:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    try:
        with anyio.fail_after(5):
            async with fd_streams(ours.fileno(), ours.fileno(), 1 << 20, outputs=outputs, link=link) as (read, _):
                theirs.sendall(PING)
                message = await read.receive()
    finally:
        ours.close()
        theirs.close()
    assert isinstance(message, SessionMessage)
    return message


async def test_a_request_carries_the_outputs_its_transport_streams_even_while_none_waits() -> None:
    outputs = SpooledOutputs()  # empty: it has a length of 0, and still streams
    message = await _first_message(outputs, "")
    assert isinstance(message.metadata, ServerMessageMetadata)
    assert message.metadata.request_context == LineLink(outputs, "")
    assert streaming_of(message.metadata.request_context) is outputs


async def test_a_relays_request_carries_its_link() -> None:
    message = await _first_message(SpooledOutputs(), "relay-1")
    assert isinstance(message.metadata, ServerMessageMetadata)
    assert getattr(message.metadata.request_context, "link", None) == "relay-1"


async def test_a_transport_that_streams_nothing_and_serves_no_relay_says_nothing() -> None:
    message = await _first_message(None, "")
    assert message.metadata is None
    assert streaming_of(None) is None
