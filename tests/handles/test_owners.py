"""Handles that outlive their connection: owned by the user of the shared
claimcheck, or by the principal over HTTP; running calls go on after the connection closes; outputs are kept
`keepOutputsSecs` after they were last touched, then forgotten."""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from server.handles.owners import ANONYMOUS, USER, client_owner, owner_name, principal, principal_of
from tests.support.handles import Downstream, client_of, handle_in, handles_proxy, linked_client, start_in_background
from tests.support.processes import PYTHON, announced_url, demo_server_entry, write_config
from tests.support.proxies import text_of

pytestmark = pytest.mark.anyio

URL = r"(http://127\.0\.0\.1:\d+/\w+)"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_in_the_shared_claimcheck_a_running_call_outlives_its_session_and_another_session_reads_it(
    mode: str,
) -> None:
    down = Downstream()
    async with handles_proxy(down, {"keepOutputsSecs": 60}) as proxy:
        proxy.sessions.shared = True  # what `serve --shared` makes its claimcheck
        with anyio.fail_after(30):
            # the link is how the shared claimcheck tells its connections apart in either era
            async with linked_client(proxy, "first relay", mode) as first:
                running = await start_in_background(first, text="finished after its session closed")
                big = handle_in(text_of(await first.call_tool("down__big", {"lines": 400})))
            assert not down.cancelled.is_set()
            async with linked_client(proxy, "second relay", mode) as second:
                listed = text_of(await second.call_tool("list_tool_outputs", {}))
                down.release.set()
                waited = text_of(await second.call_tool("wait_for_tool_output", {"handles": [running]}))
                sliced = await second.call_tool(
                    "tool_output", {"handle": big, "mode": "slice", "slice": {"start": 0, "length": 40}}
                )
                own = await start_in_background(second, text="mine")
                relisted = text_of(await second.call_tool("list_tool_outputs", {}))
    assert listed.startswith("This session has no tool outputs yet.\nOutputs of your other sessions (all 2;")
    assert f'- (another session) "{running}" down__gated: running' in listed
    assert f'- (another session) "{big}" down__big: ready' in listed
    assert "finished after its session closed" in waited
    assert "line 00000 of the big output" in text_of(sliced) and not sliced.is_error
    assert relisted.index(f'- "{own}" down__gated') < relisted.index("Outputs of your other sessions")


async def test_owned_outputs_are_forgotten_keep_secs_after_their_last_use_with_no_session_open() -> None:
    down = Downstream()
    async with handles_proxy(down, {"keepOutputsSecs": 600}) as proxy:
        proxy.sessions.shared = True
        with anyio.fail_after(30):
            async with client_of(proxy) as first:
                big = handle_in(text_of(await first.call_tool("down__big", {"lines": 400})))
                await proxy.sessions.expire(time.time() + 3600)  # a connection is open: nothing goes
                kept = await first.call_tool("tool_output", {"handle": big, "mode": "truncate"})
            await proxy.sessions.expire(time.time() + 300)  # closed, but not long enough
            async with client_of(proxy) as second:
                still = await second.call_tool("tool_output", {"handle": big, "mode": "truncate"})
            await proxy.sessions.expire(time.time() + 601)
            async with client_of(proxy) as third:
                gone = await third.call_tool("tool_output", {"handle": big, "mode": "truncate"})
    assert not kept.is_error and not still.is_error
    assert gone.is_error
    assert f'Unknown handle "{big}"' in text_of(gone)
    assert "Outputs are kept 600 s after their last use once no session of yours is open." in text_of(gone)


async def test_without_an_owner_a_stdio_session_still_cancels_its_calls_when_it_closes() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy:
        with anyio.fail_after(30):
            async with client_of(proxy) as first:
                await start_in_background(first)
            await down.cancelled.wait()
            async with client_of(proxy) as second:
                listed = text_of(await second.call_tool("list_tool_outputs", {}))
    assert listed == "This session has no tool outputs yet."


@pytest.mark.subprocess
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_over_http_a_client_that_reconnects_with_its_token_reads_its_handles_and_another_token_cannot(
    tmp_path: Path, mode: str
) -> None:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": {"asyncTimeoutSecs": 1}})
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--transport", "http", "--port", "0"]

    def client(url: str, token: str) -> Client:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        return Client(streamable_http_client(url, http_client=http), mode=mode)

    with anyio.fail_after(120):
        async with announced_url(command, URL) as url:
            async with client(url, "alice") as before:
                slow = handle_in(text_of(await before.call_tool("demo__slow", {"seconds": 3, "background": True})))
                big = handle_in(text_of(await before.call_tool("demo__big", {"kb": 1024})))
            async with client(url, "alice") as after:
                waited = text_of(await after.call_tool("wait_for_tool_output", {"handles": [slow]}))
                grep = await after.call_tool("Grep", {"file": big, "regex": "00000007 INFO"})
            async with client(url, "mallory") as other:
                refused = await other.call_tool("tool_output", {"handle": big, "mode": "truncate"})
                listed = text_of(await other.call_tool("list_tool_outputs", {}))
    assert "slept 3 s" in waited
    assert "00000007 INFO demo log line" in text_of(grep) and not grep.is_error
    assert refused.is_error and f'Unknown handle "{big}"' in text_of(refused)
    assert listed == "This session has no tool outputs yet."


def test_an_owner_is_shown_by_its_tokens_file_name_else_by_its_kind_and_a_connections_session_by_none() -> None:
    named = principal("Bearer t", "", "alice")
    agent = principal("Bearer t", "agent 2", "alice")
    assert named == "principal:alice" and agent.startswith("principal:alice:") and agent != named
    assert [owner_name(key) for key in (named, agent, USER, None)] == ["alice", "alice", "user", None]


def test_unnamed_tokens_are_told_apart_by_a_label_that_shows_nothing_of_them() -> None:
    one, again, agent, other = (
        owner_name(principal(header, session))
        for header, session in (("Bearer t", ""), ("Bearer t", ""), ("Bearer t", "agent 2"), ("Bearer u", ""))
    )
    assert one is not None and re.fullmatch(r"token-[0-9a-f]{8}", one), one
    assert one == again == agent != other  # one token, whatever its agents; another token, another label
    digest = hashlib.sha256(b"Bearer t\0").hexdigest()
    assert one[6:] not in digest and one[6:] not in hashlib.sha256(b"Bearer t").hexdigest()


def test_an_oauth_user_is_keyed_by_issuer_and_subject_and_shown_by_the_subject() -> None:
    alice = principal("Bearer one token", "", identity=("https://id.test", "alice"))
    again = principal("Bearer another token", "", identity=("https://id.test", "alice"))
    agent = principal("Bearer one token", "agent 2", identity=("https://id.test", "alice"))
    elsewhere = principal("Bearer one token", "", identity=("https://other.test", "alice"))
    odd = principal("Bearer t", "", identity=("https://id.test", "CN=Alice Smith, O=Example:" + "x" * 99))
    assert alice == again and alice.startswith("oauth:alice:")
    assert len({alice, agent, elsewhere, principal("Bearer one token", "")}) == 4
    assert [owner_name(key) for key in (alice, agent, elsewhere)] == ["alice"] * 3
    assert owner_name(odd) == "CN_Alice_Smith__O_Example_" + "x" * 37


def test_a_principal_is_its_owner_key_without_the_claimcheck_session_header_and_tokenless_clients_are_one() -> None:
    named = [principal("Bearer t", session, "alice") for session in ("", "agent 2", "agent 3")]
    unnamed = [principal("Bearer t", session) for session in ("", "agent 2")]
    oauth = [principal("Bearer t", session, identity=("https://id.test", "alice")) for session in ("", "x:y")]
    assert {principal_of(key) for key in named} == {"principal:alice"}
    assert {principal_of(key) for key in unnamed} == {unnamed[0]}
    assert {principal_of(key) for key in oauth} == {oauth[0]}
    assert principal_of(principal("Bearer u", "agent 2")) != unnamed[0]
    assert principal_of(principal("Bearer t", "", "bob")) == "principal:bob"
    tokenless = [None, client_owner("claude-code", ""), client_owner("cursor", "agent 2")]  # any connection, any name
    assert principal_of(USER) == USER
    assert {principal_of(key) for key in tokenless} == {ANONYMOUS}  # however many names or headers they send
    assert principal_of(principal("Bearer anonymous", "", "anonymous")) != ANONYMOUS  # a tokens file's name stays its
