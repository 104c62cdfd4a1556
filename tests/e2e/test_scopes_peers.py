"""Each client its own world, with the official servers from npm behind a real `claimcheck serve --transport http`
and the mcp SDK's client: server-filesystem's allowed directories follow only the roots of the client they serve
(issue: one client's roots narrowed every other client's, and outlived it), and server-memory with `"scope":
"owner"` keeps one graph per owner (a tokens file's principals)."""

from __future__ import annotations

import secrets
import warnings
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

from tests.support.peers import FILESYSTEM_PACKAGE, MEMORY_PACKAGE, npm_server_command
from tests.support.processes import PYTHON, announced_url, write_config
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]
warnings.simplefilter("ignore", MCPDeprecationWarning)  # roots are deprecated at 2026-07-28 only

SERVING = r"serving MCP over streamable HTTP at (http://\S+/mcp)"


def serve(tmp_path: Path, servers: dict[str, Any], *extra: str) -> list[str]:
    config = write_config(tmp_path, {"mcpServers": servers, "settings": {"asyncTimeoutSecs": 30}})
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--no-api", "--transport", "http"]
    return [*command, "--port", "0", *extra]


def memory_files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.glob("memory-*.jsonl"))


def roots_of(*directories: Path) -> Any:
    async def answer(context: Any) -> types.ListRootsResult:
        listed = [types.Root(uri=d.as_uri(), name=d.name) for d in directories]  # type: ignore[arg-type]
        return types.ListRootsResult(roots=listed)

    return answer


async def test_one_clients_roots_never_narrow_what_server_filesystem_allows_another(tmp_path: Path) -> None:
    node, entry = npm_server_command(FILESYSTEM_PACKAGE)
    data = (tmp_path / "data").resolve()
    (data / "repo").mkdir(parents=True)
    (data / "big.json").write_text('{"big": true}', encoding="utf-8")
    (data / "repo" / "README").write_text("the repo", encoding="utf-8")
    servers = {"fs": {"command": node, "args": [entry, str(data)]}}
    big = str(data / "big.json")
    with anyio.fail_after(120):
        async with announced_url(serve(tmp_path, servers), SERVING) as url, Client(url, mode="legacy") as b:
            b_before = text_of(await b.call_tool("fs__list_allowed_directories", {}))
            async with Client(url, mode="legacy", list_roots_callback=roots_of(data / "repo")) as a:
                a_allowed = ""
                while str(data / "repo") not in a_allowed:  # the server applies roots as it gets them, in its time
                    a_allowed = text_of(await a.call_tool("fs__list_allowed_directories", {}))
                a_refused = text_of(await a.call_tool("fs__get_file_info", {"path": big}))
                b_during = text_of(await b.call_tool("fs__list_allowed_directories", {}))
                b_info = await b.call_tool("fs__get_file_info", {"path": big})
            b_after = text_of(await b.call_tool("fs__list_allowed_directories", {}))
    assert str(data) in b_before and str(data / "repo") not in b_before, b_before
    assert a_allowed.splitlines()[1:] == [str(data / "repo")], a_allowed  # A's process follows A's roots
    assert "Access denied" in a_refused, a_refused
    assert b_during == b_before == b_after  # and B's never did
    assert not b_info.is_error and "size" in text_of(b_info), text_of(b_info)


async def test_server_memory_scoped_by_owner_keeps_one_graph_per_principal(tmp_path: Path) -> None:
    node, entry = npm_server_command(MEMORY_PACKAGE)
    alice_token, bob_token = secrets.token_hex(32), secrets.token_hex(32)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {alice_token}\nbob {bob_token}\n", encoding="utf-8")
    memory = tmp_path / "memory-${CLAIMCHECK_INSTANCE}.jsonl"  # each owner's process its own file
    servers = {"memory": {"command": node, "args": [entry], "env": {"MEMORY_FILE_PATH": str(memory)}, "scope": "owner"}}

    def client(url: str, token: str) -> Client:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        return Client(streamable_http_client(url, http_client=http), mode="legacy")

    entity = {"name": "alice-plan", "entityType": "note", "observations": ["ship scopes"]}
    with anyio.fail_after(120):
        async with announced_url(serve(tmp_path, servers, "--auth-tokens-file", str(tokens)), SERVING) as url:
            async with client(url, alice_token) as alice:
                made = await alice.call_tool("memory__create_entities", {"entities": [entity]})
            async with client(url, alice_token) as alice_again:
                alices = text_of(await alice_again.call_tool("memory__read_graph", {}))
            async with client(url, bob_token) as bob:
                bobs = text_of(await bob.call_tool("memory__read_graph", {}))
    assert not made.is_error, text_of(made)
    assert "alice-plan" in alices and "ship scopes" in alices
    assert "alice-plan" not in bobs, bobs
    files = memory_files(tmp_path)
    assert len(files) == 1 and files[0].startswith("memory-owner-"), files  # bob's process never wrote
