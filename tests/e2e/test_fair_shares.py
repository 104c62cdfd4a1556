"""Fair shares by principal: one principal attacks on every axis at once (`SHARE_ATTACKS`: many `Claimcheck-Session`
headers and MCP sessions, scoped processes, catastrophic greps, waits on 64 handles, background calls that never
end, lists) a real claimcheck over HTTP with tight limits, while another principal of the same tokens file calls
every kind of tool. Hers are all served, none refused, each within a bound far above a normal call's and the
same for two sizes of attack; his meet the limits, which name their settings."""

from __future__ import annotations

import secrets
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.handles import handle_in
from tests.support.hostile import EVIL_TEXT, SHARE_ATTACKS, ShareAttack
from tests.support.processes import PYTHON, announced_url, demo_server_entry, write_config
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

SERVING = r"serving MCP over streamable HTTP at (http://\S+/mcp)"
ALICE, MALLORY = secrets.token_hex(32), secrets.token_hex(32)
SERVED_WITHIN = 60
"""Seconds for each of the other principal's calls: a normal one takes well under one; waiting behind the attack
(a grep timeout per queued grep, a process per session) would pass it."""


def serve(tmp_path: Path) -> list[str]:
    scoped = {**demo_server_entry(), "scope": "owner", "maxInstances": 4}
    limits = {"greps": 4, "grepWorkers": 1, "calls": 6}
    settings = {"asyncTokenThreshold": 1000, "asyncTimeoutSecs": 1, "waitMaxSecs": 5, "limits": limits}
    config = write_config(
        tmp_path, {"mcpServers": {"demo": demo_server_entry(), "scoped": scoped}, "settings": settings}
    )
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\nmallory {MALLORY}\n", encoding="utf-8")
    tokens.chmod(0o600)
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--no-api", "--transport", "http"]
    return [*command, "--port", "0", "--auth-tokens-file", str(tokens)]


def client(url: str, token: str, session: str = "") -> Client:
    headers = {"Authorization": f"Bearer {token}"} | ({"Claimcheck-Session": session} if session else {})
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=120)))


class Attack:
    """Mallory's calls: each of `SHARE_ATTACKS` `per_axis` times at once from each of `sessions` sessions, again
    and again until cancelled; `underway` is set once every kind has been answered."""

    def __init__(self, url: str, sessions: int, per_axis: int) -> None:
        self.url, self.sessions, self.per_axis = url, sessions, per_axis
        self.answers: dict[str, list[str]] = {attack.what: [] for attack in SHARE_ATTACKS}
        self.underway = anyio.Event()

    async def run(self) -> None:
        async with AsyncExitStack() as stack:
            agents: list[tuple[Client, list[str]]] = []
            for n in range(self.sessions):
                agent = await stack.enter_async_context(client(self.url, MALLORY, f"agent {n}"))
                agents.append((agent, [handle_in(text_of(await agent.call_tool("demo__echo", {"text": EVIL_TEXT})))]))
            async with anyio.create_task_group() as tg:
                for agent, handles in agents:
                    for attack in SHARE_ATTACKS:
                        for _ in range(self.per_axis):
                            tg.start_soon(self._again, agent, attack, handles)

    async def _again(self, agent: Client, attack: ShareAttack, handles: list[str]) -> None:
        while True:
            result = await agent.call_tool(attack.tool, attack.arguments(handles))
            self.answers[attack.what].append(text_of(result))
            if all(self.answers.values()):
                self.underway.set()


async def served(alice: Client, tool: str, arguments: dict[str, object]) -> str:
    with anyio.fail_after(SERVED_WITHIN):
        result = await alice.call_tool(tool, arguments)
    assert not result.is_error, (tool, text_of(result))
    return text_of(result)


@pytest.mark.parametrize(("sessions", "per_axis"), [(2, 1), (8, 2)])
async def test_one_principal_attacking_every_share_at_once_leaves_anothers_calls_served(
    tmp_path: Path, sessions: int, per_axis: int
) -> None:
    with anyio.fail_after(600):
        async with announced_url(serve(tmp_path), SERVING) as url, anyio.create_task_group() as tg:
            attack = Attack(url, sessions, per_axis)
            tg.start_soon(attack.run)
            await attack.underway.wait()
            async with client(url, ALICE) as alice:
                mine = await served(alice, "scoped__echo", {"text": "alice's"})
                stored = handle_in(await served(alice, "demo__echo", {"text": EVIL_TEXT}))
                await served(alice, "wait_for_tool_output", {"handles": [stored], "timeout_secs": 30})
                found = await served(alice, "Grep", {"file": stored, "regex": "ab$", "before": 0, "after": 0})
                running = handle_in(await served(alice, "demo__slow", {"seconds": 0.2, "background": True}))
                waited = await served(alice, "wait_for_tool_output", {"handles": [running], "timeout_secs": 30})
                listed = await served(alice, "list_tool_outputs", {})
                read = await served(alice, "tool_output", {"handle": stored, "mode": "truncate"})
            tg.cancel_scope.cancel()
    assert mine.startswith("alice's")
    assert found.startswith("1 matching line"), found
    assert "slept" in waited and stored in listed and "aaaa" in read
    refusals = "\n".join(answer for answers in attack.answers.values() for answer in answers)
    if sessions > 2:
        assert '"maxInstancesPerPrincipal" 2 of "maxInstances" 4' in refusals
    if sessions * per_axis > 4:
        assert 'at most 4: "limits.greps"' in refusals
        assert 'at most 6 ("limits.calls")' in refusals
