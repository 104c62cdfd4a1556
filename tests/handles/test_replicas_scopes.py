"""Identities and scoped servers across replicas: two replicas sharing a real Redis and root, behind a real
haproxy, with a tokens file's principals and server-memory from npm scoped by owner. An owner's process runs on
the replica that serves the call; on another replica the owner's first call starts that owner's process there,
under the same `${CLAIMCHECK_INSTANCE}` name (the owner key is the same on every replica), so a server that keeps
its state in a file on the shared root gives the owner the same state everywhere, and another owner never sees
it. redis-server and haproxy are Debian's (.ci/install-replicas)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.handles import handle_in
from tests.support.peers import MEMORY_PACKAGE, npm_server_command
from tests.support.proxies import text_of
from tests.support.replicas import RedisServer, haproxy, replicas

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.usefixtures("redis_and_haproxy")]


@asynccontextmanager
async def as_principal(url: str, token: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with Client(streamable_http_client(url, http_client=http), mode="legacy") as connected:
        yield connected


async def test_an_owner_scoped_server_gives_each_principal_its_own_state_on_every_replica(tmp_path: Path) -> None:
    node, entry = npm_server_command(MEMORY_PACKAGE)
    alice, bob = secrets.token_hex(32), secrets.token_hex(32)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {alice}\nbob {bob}\n", encoding="utf-8")
    memory = tmp_path / "shared" / "memory-${CLAIMCHECK_INSTANCE}.jsonl"
    servers = {"memory": {"command": node, "args": [entry], "env": {"MEMORY_FILE_PATH": str(memory)}, "scope": "owner"}}
    entity = {"name": "alice-plan", "entityType": "note", "observations": ["replicas share it"]}
    redis = RedisServer(tmp_path)
    await redis.start()
    try:
        with anyio.fail_after(180):
            async with (
                replicas(tmp_path, redis.url, 2, servers=servers, extra=("--auth-tokens-file", str(tokens))) as pair,
                haproxy(tmp_path, pair) as balancer,
            ):
                first, second = pair
                async with as_principal(first.url, alice) as on_first:
                    made = await on_first.call_tool("memory__create_entities", {"entities": [entity]})
                async with as_principal(second.url, alice) as on_second:
                    alices = text_of(await on_second.call_tool("memory__read_graph", {}))
                async with as_principal(balancer, bob) as bob_anywhere:
                    bobs = text_of(await bob_anywhere.call_tool("memory__read_graph", {}))
                async with as_principal(balancer, alice) as alice_anywhere:
                    again = text_of(await alice_anywhere.call_tool("memory__read_graph", {}))
    finally:
        await redis.stop()
    assert not made.is_error, text_of(made)
    assert "replicas share it" in alices and "replicas share it" in again
    assert "alice-plan" not in bobs, bobs


@pytest.mark.oidc
async def test_oauth_identities_hold_on_every_replica(tmp_path: Path) -> None:
    """Tokens of a real OpenID provider for one resource (the balancer's): the owner key is issuer and subject,
    the same on every replica, so a user's handle made on one replica is hers on the other and never Bob's."""
    from tests.support.oidc_peer import oidc_provider

    resource = "https://claimcheck.test/mcp"  # what every replica answers for, whichever serves the request
    redis = RedisServer(tmp_path)
    await redis.start()
    try:
        with anyio.fail_after(180):
            async with oidc_provider(tmp_path) as provider:
                auth = {"issuer": provider.issuer, "resource": resource, "requiredScopes": ["mcp:tools"]}
                alice, alice_again = await provider.token("alice", resource), await provider.token("alice", resource)
                bob = await provider.token("bob", resource)
                async with (
                    replicas(tmp_path, redis.url, 2, settings={"auth": auth}) as pair,
                    haproxy(tmp_path, pair) as balancer,
                ):
                    first, second = pair
                    async with as_principal(first.url, alice) as on_first:
                        handle = handle_in(text_of(await on_first.call_tool("demo__big", {"kb": 1024})))
                    async with as_principal(second.url, alice_again) as on_second:
                        read = await on_second.call_tool("tool_output", {"handle": handle, "mode": "truncate"})
                    async with as_principal(balancer, bob) as bob_anywhere:
                        refused = await bob_anywhere.call_tool("tool_output", {"handle": handle})
    finally:
        await redis.stop()
    assert not read.is_error, text_of(read)
    assert refused.is_error and "Unknown handle" in text_of(refused)
