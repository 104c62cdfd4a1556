"""`serve --auth-tokens-file`: several static tokens, each a named principal whose handles and sessions no other
token reaches; a bad file stops claimcheck at start, naming its line. A real claimcheck over streamable HTTP."""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from server.status.discovery import instances
from server.status.ps import print_ps
from tests.support.handles import handle_in
from tests.support.processes import PYTHON, announced_url, demo_server_entry, write_config
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

SERVING = r"serving MCP over streamable HTTP at (http://\S+/mcp)"
ALICE, BOB = secrets.token_hex(32), secrets.token_hex(32)


def serve_with_tokens(tmp_path: Path, tokens: str, settings: dict[str, Any] | None = None) -> list[str]:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": settings or {}})
    path = tmp_path / "tokens"
    path.write_text(tokens, encoding="utf-8")
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--no-api", "--transport", "http"]
    return [*command, "--port", "0", "--auth-tokens-file", str(path)]


def client(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return Client(streamable_http_client(url, http_client=http))


async def test_two_users_of_one_tokens_file_never_see_each_others_handles_and_one_users_clients_share_theirs(
    tmp_path: Path,
) -> None:
    tokens = f"# the team\nalice {ALICE}\n\nbob   {BOB}\n"
    with anyio.fail_after(120):
        async with announced_url(serve_with_tokens(tmp_path, tokens), SERVING) as url:
            async with client(url, ALICE) as alice:
                big = handle_in(text_of(await alice.call_tool("demo__big", {"kb": 1024})))
            async with client(url, ALICE) as alice_again:
                own = text_of(await alice_again.call_tool("list_tool_outputs", {}))
            async with client(url, BOB) as bob:
                refused = await bob.call_tool("tool_output", {"handle": big, "mode": "truncate"})
                listed = text_of(await bob.call_tool("list_tool_outputs", {}))
    assert big in own
    assert refused.is_error and f'Unknown handle "{big}"' in text_of(refused)
    assert listed == "This session has no tool outputs yet."


async def test_the_status_api_and_ps_show_each_calls_principal_by_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    command = serve_with_tokens(tmp_path, f"alice {ALICE}\nbob {BOB}\n", {"stateDir": str(state)})
    command.remove("--no-api")
    api_token = secrets.token_hex(32)  # --auth-token-env with the file: one more principal, and the API's token
    environment = ["env", "CLAIMCHECK_API_ENABLED=true", "CLAIMCHECK_API_PORT=0", f"API_TOKEN={api_token}"]
    with anyio.fail_after(120):
        async with announced_url([*environment, *command, "--auth-token-env", "API_TOKEN"], SERVING) as url:
            async with client(url, ALICE) as alice:
                running = handle_in(text_of(await alice.call_tool("demo__slow", {"seconds": 600, "background": True})))
                await alice.call_tool("demo__echo", {"text": "alice's"})
            async with client(url, BOB) as bob:
                await bob.call_tool("demo__big", {"kb": 1024})
            async with client(url, api_token) as unnamed:
                await unnamed.call_tool("demo__echo", {"text": "the environment's token"})
            [instance] = instances(state)
            assert instance["token"] == api_token
            async with httpx2.AsyncClient(timeout=30) as http:
                reply = await http.get(f"{instance['url']}v1/tasks", headers={"Authorization": f"Bearer {api_token}"})
            await print_ps(state)
    owners = {(task["name"], task["owner"]) for task in reply.json()["tasks"]}
    unnamed_owner = next(owner for name, owner in owners if owner not in ("alice", "bob"))
    assert re.fullmatch(r"token-[0-9a-f]{8}", unnamed_owner), owners  # told apart, nothing of the token shown
    assert owners == {
        ("demo__slow", "alice"),
        ("demo__echo", "alice"),
        ("demo__big", "bob"),
        ("demo__echo", unnamed_owner),
    }
    [_, line] = capsys.readouterr().out.splitlines()
    assert line.startswith(f"  demo__slow  {running}  running ") and line.endswith("  owner alice")


async def test_a_token_not_in_the_file_or_none_gets_401(tmp_path: Path) -> None:
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    accept = {"Accept": "application/json, text/event-stream"}
    with anyio.fail_after(60):
        async with (
            announced_url(serve_with_tokens(tmp_path, f"alice {ALICE}\n"), SERVING) as url,
            httpx2.AsyncClient(timeout=30) as http,
        ):
            unknown = await http.post(url, json=body, headers={**accept, "Authorization": f"Bearer {BOB}"})
            prefix = await http.post(url, json=body, headers={**accept, "Authorization": f"Bearer {ALICE[:-1]}"})
            missing = await http.post(url, json=body, headers=accept)
            known = await http.post(url, json=body, headers={**accept, "Authorization": f"Bearer {ALICE}"})
            lower = await http.post(url, json=body, headers={**accept, "Authorization": f"bearer  {ALICE}"})
    assert unknown.status_code == prefix.status_code == missing.status_code == 401
    assert unknown.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    assert missing.headers["www-authenticate"] == "Bearer"
    fix = "send `Authorization: Bearer <token>`, the token of --auth-token-env or of --auth-tokens-file"
    assert unknown.json() == {"error": f"this bearer token is not one claimcheck accepts: {fix}"}
    assert missing.json() == {"error": f"no bearer token: {fix}"}
    assert known.status_code == 200
    assert lower.status_code == 200  # the scheme in any case (RFC 9110), spaces around the token


@pytest.mark.parametrize(
    ("tokens", "refusal"),
    [
        (f"alice {ALICE}\n# bob\nbob {ALICE}\n", "line 3: the token of bob is the token of line 1 too"),
        (f"alice {ALICE}\nalice {BOB}\n", "line 2: the name alice is on line 1 too"),
        (f"alice {ALICE}\n\nbob {BOB[:31]}\n", "line 3: the token of bob is under 32 bytes"),
        (f"alice {ALICE}\nbob\n", "line 2: expected `NAME TOKEN`, found 1 field"),
        (f"alice:x {ALICE}\n", "line 1: a name is 1-63 of"),
        ("# nobody yet\n", "names no tokens"),
    ],
    ids=["token-twice", "name-twice", "short-token", "one-field", "bad-name", "no-tokens"],  # the same in each worker
)
async def test_a_bad_tokens_file_stops_serve_at_start_naming_its_line(
    tmp_path: Path, tokens: str, refusal: str
) -> None:
    with anyio.fail_after(60):
        done = await anyio.run_process(serve_with_tokens(tmp_path, tokens), check=False)
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert refusal in stderr and str(tmp_path / "tokens") in stderr
    assert ALICE not in stderr and BOB[:31] not in stderr  # a refusal never shows a token
