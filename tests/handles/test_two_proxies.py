"""Two proxies in one process share nothing: each counts its own calls, keeps its own sessions and LLM backends,
its sessions' questions wait in their own inboxes, and its fast paths remember their own envelopes."""

from __future__ import annotations

import json
import re
from typing import cast

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from pydantic import BaseModel

from extraction import LLM
from server import sdk_compat
from server.upstream.plain_call import Envelopes
from server.upstream.sessionless import SessionlessClients
from server.upstream.surface import build_server
from tests.support.proxies import running_proxy, text_of

pytestmark = pytest.mark.anyio

QUESTION = re.compile(r'question "(q-[0-9a-f]{8})"')


class Confirm(BaseModel):
    ok: bool


def downstream(gate: anyio.Event) -> MCPServer:
    """`echo`, and `confirm`, which asks the client once `gate` is open."""
    server = MCPServer("down")

    @server.tool(structured_output=False)
    def echo(text: str) -> str:
        return text

    @server.tool(structured_output=False)
    async def confirm(ctx: Context) -> str:
        await gate.wait()
        answer = await ctx.elicit("Really?", Confirm)
        return f"answered: {answer.action}"

    return server


async def test_two_proxies_in_one_process_count_keep_sessions_and_hold_questions_apart() -> None:
    gate = anyio.Event()
    settings = {"asyncTimeoutSecs": 5}
    async with (
        running_proxy({"down": downstream(gate)}, settings=settings) as first,
        running_proxy({"down": downstream(gate)}, settings=settings) as second,
        Client(build_server(first), mode="auto") as one,
        Client(build_server(second), mode="auto") as two,
    ):
        with anyio.fail_after(20):
            await one.call_tool("down__echo", {"text": "a"})
            await one.call_tool("down__echo", {"text": "b"})
            await two.call_tool("down__echo", {"text": "c"})
            await one.call_tool("down__confirm", {"background": True})
            gate.set()
            asked = await one.call_tool("wait_for_tool_output", {})
            elsewhere = await two.call_tool("wait_for_tool_output", {"timeout_secs": 0})
        (mine,) = first.sessions.live
        (theirs,) = second.sessions.live
        assert first.meters.calls[("down", "echo", "inline")] == 2
        assert second.meters.calls[("down", "echo", "inline")] == 1
        assert first.meters is not second.meters
        assert mine.id != theirs.id and mine not in second.sessions.live
        assert [q.kind for q in mine.inbox.pending.values()] == ["elicitation"] and not theirs.inbox.pending
        assert QUESTION.search(text_of(asked)) and not QUESTION.search(text_of(elsewhere))
        assert first.sessions.store.run_root != second.sessions.store.run_root


async def test_two_proxies_keep_their_own_llm_backends() -> None:
    async with (
        running_proxy({"down": downstream(anyio.Event())}) as first,
        running_proxy({"down": downstream(anyio.Event())}) as second,
    ):
        key = ("http://127.0.0.1:1/v1", "model")
        made = first.extractor.backend(key, lambda: cast(LLM, object()))
        theirs = second.extractor.backend(key, lambda: cast(LLM, object()))
        assert first.extractor.backend(key, lambda: cast(LLM, object())) is made
        assert theirs is not made


def test_two_fast_paths_keep_their_own_envelopes_and_sessionless_clients() -> None:
    """What each fast path makes in its constructor (`Envelopes`, `SessionlessClients`): one proxy's memo of
    the sessionless envelopes it read, and the clients made of them, are not another's."""
    meta = {
        PROTOCOL_VERSION_META_KEY: "2026-07-28",
        CLIENT_INFO_META_KEY: {"name": "mcp", "version": "0.1.0"},
        CLIENT_CAPABILITIES_META_KEY: {},
    }
    params = {"name": "down__echo", "arguments": {"text": "a"}, "_meta": meta}
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode() + b"\n"
    mine, theirs = Envelopes(), Envelopes()
    first, again, other = mine.envelope_of(line), mine.envelope_of(line), theirs.envelope_of(line)
    assert first is not None and again is not None and other is not None
    assert first.sessionless is not None and other.sessionless is not None
    assert again.sessionless is first.sessionless  # read once per fast path
    assert other.sessionless is not first.sessionless
    my_clients, their_clients = SessionlessClients(), SessionlessClients()
    one, two = my_clients.client_of(first.sessionless, 1), my_clients.client_of(first.sessionless, 2)
    elsewhere = their_clients.client_of(first.sessionless, 3)
    assert one is not None and two is not None and elsewhere is not None
    assert sdk_compat.connection_of(one) is sdk_compat.connection_of(two)
    assert sdk_compat.connection_of(elsewhere) is not sdk_compat.connection_of(one)
