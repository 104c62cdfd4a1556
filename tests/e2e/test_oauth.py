"""`settings.auth`: a real claimcheck over streamable HTTP in front of the demo server, as an OAuth resource server of
a real OpenID provider (`oidc-provider`, tests/support/oidc_peer.py), driven by the mcp SDK's client with its tokens."""

from __future__ import annotations

import base64
import json
import secrets
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from server.status.discovery import instances
from tests.support.handles import handle_in
from tests.support.oidc_peer import Provider, oidc_provider
from tests.support.processes import PYTHON, announced_url, demo_server_entry, write_config
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.oidc]

SERVING = r"serving MCP over streamable HTTP at (http://\S+/mcp)"
ACCEPT = {"Accept": "application/json, text/event-stream"}
HELLO = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}


def serve(tmp_path: Path, auth: dict[str, Any], *flags: str, settings: dict[str, Any] | None = None) -> list[str]:
    """The command of a claimcheck whose `settings.auth` is `auth`."""
    config = write_config(
        tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": {"auth": auth, **(settings or {})}}
    )
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--transport", "http", "--port", "0"]
    return [*command, *flags]


def bearer(token: str, **more: str) -> dict[str, str]:
    """The headers of a JSON-RPC POST with `token`."""
    return {**ACCEPT, "Authorization": f"Bearer {token}", **more}


def client(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return Client(streamable_http_client(url, http_client=http))


def base_of(url: str) -> str:
    return url.removesuffix("/mcp")


async def test_two_users_never_see_each_others_handles_and_one_users_clients_share_theirs(tmp_path: Path) -> None:
    state = tmp_path / "state"
    api_token = secrets.token_hex(32)
    environment = ["env", "CLAIMCHECK_API_ENABLED=true", "CLAIMCHECK_API_PORT=0", f"API_TOKEN={api_token}"]
    with anyio.fail_after(120):
        async with oidc_provider(tmp_path) as provider:
            auth = {"issuer": provider.issuer, "requiredScopes": ["mcp:tools"]}
            command = serve(tmp_path, auth, "--auth-token-env", "API_TOKEN", settings={"stateDir": str(state)})
            async with announced_url([*environment, *command], SERVING) as url:
                first, second = await provider.token("alice", url), await provider.token("alice", url)
                bob = await provider.token("bob", url)
                assert first != second
                async with client(url, first) as alice:
                    big = handle_in(text_of(await alice.call_tool("demo__big", {"kb": 1024})))
                async with client(url, second) as alice_elsewhere:
                    listed = text_of(await alice_elsewhere.call_tool("list_tool_outputs", {}))
                    read = await alice_elsewhere.call_tool("tool_output", {"handle": big, "mode": "truncate"})
                async with client(url, bob) as other:
                    refused = await other.call_tool("tool_output", {"handle": big, "mode": "truncate"})
                    nothing = text_of(await other.call_tool("list_tool_outputs", {}))
                async with httpx2.AsyncClient(timeout=30) as http:
                    opened = await http.post(url, json=INITIALIZE, headers=bearer(first))
                    session = opened.headers["mcp-session-id"]
                    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
                    by_bob = await http.post(url, json=ping, headers=bearer(bob, **{"mcp-session-id": session}))
                    by_alice = await http.post(url, json=ping, headers=bearer(second, **{"mcp-session-id": session}))
                    [instance] = instances(state)
                    tasks = await http.get(f"{instance['url']}v1/tasks", headers=bearer(api_token))
    assert big in listed and not read.is_error
    assert refused.is_error and f'Unknown handle "{big}"' in text_of(refused)
    assert nothing == "This session has no tool outputs yet."
    assert by_bob.status_code == 404  # another user's session is not there for him
    assert by_alice.status_code == 200  # a new token of hers reaches her session
    assert {(task["name"], task["owner"]) for task in tasks.json()["tasks"]} == {("demo__big", "alice")}


async def test_the_protected_resource_metadata_names_claimcheck_and_its_issuer(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with oidc_provider(tmp_path) as provider:
            auth = {"issuer": provider.issuer, "requiredScopes": ["mcp:tools"]}
            async with announced_url(serve(tmp_path, auth, "--no-api"), SERVING) as url, httpx2.AsyncClient() as http:
                root = await http.get(f"{base_of(url)}/.well-known/oauth-protected-resource")
                suffixed = await http.get(f"{base_of(url)}/.well-known/oauth-protected-resource/mcp")
                post = await http.post(f"{base_of(url)}/.well-known/oauth-protected-resource/mcp")
                none = await http.post(url, json=INITIALIZE, headers=ACCEPT)
    assert root.status_code == suffixed.status_code == 200 and root.json() == suffixed.json()
    assert suffixed.json() == {
        "resource": url,
        "authorization_servers": [provider.issuer],
        "scopes_supported": ["mcp:tools"],
        "bearer_methods_supported": ["header"],
        "resource_name": "claimcheck",
    }
    assert post.status_code == 405
    assert none.status_code == 401
    metadata = f"{base_of(url)}/.well-known/oauth-protected-resource/mcp"
    assert none.headers["www-authenticate"] == f'Bearer scope="mcp:tools", resource_metadata="{metadata}"'


async def test_bad_tokens_get_401_with_the_specs_header_a_missing_scope_403_and_claimcheck_serves_on(
    tmp_path: Path,
) -> None:
    static = secrets.token_hex(32)
    (tmp_path / "tokens").write_text(f"ci {static}\n", encoding="utf-8")
    with anyio.fail_after(120):
        async with oidc_provider(tmp_path) as provider:
            auth = {"issuer": provider.issuer, "requiredScopes": ["mcp:tools"]}
            command = serve(tmp_path, auth, "--no-api", "--auth-tokens-file", str(tmp_path / "tokens"))
            async with announced_url(command, SERVING) as url, httpx2.AsyncClient(timeout=30) as http:
                cases = bad_tokens(provider, url)
                cases["the token lacks the scope mcp:tools"] = await provider.token("carol", url, scope="mcp:read")
                answers = {}
                for reason, token in cases.items():
                    answers[reason] = await http.post(url, json=INITIALIZE, headers=bearer(token))
                edge = await http.post(url, json=INITIALIZE, headers=bearer("x" * 65536))
                late = provider.sign(claims(provider, url, exp=int(time.time()) - 5))  # within the 30 s leeway
                async with client(url, late) as alice, client(url, static) as ci:
                    echoed = text_of(await alice.call_tool("demo__echo", {"text": "still serving"}))
                    static_echo = text_of(await ci.call_tool("demo__echo", {"text": "static"}))
    metadata = f'resource_metadata="{base_of(url)}/.well-known/oauth-protected-resource/mcp"'
    for reason, answer in answers.items():
        status, error = (403, "insufficient_scope") if "scope" in reason else (401, "invalid_token")
        body = answer.json()
        assert (answer.status_code, body["error"]) == (status, error) and reason in body["error_description"], body
        assert answer.headers["www-authenticate"] == (
            f'Bearer error="{error}", error_description="{body["error_description"]}", scope="mcp:tools", {metadata}'
        )
    assert 400 <= edge.status_code < 500  # past h11's header limit: refused at the edge, before any check
    assert echoed == "still serving" and static_echo == "static"


def claims(provider: Provider, url: str, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {"iss": provider.issuer, "sub": "alice", "aud": url, "iat": now, "exp": now + 600, "scope": "mcp:tools"}
    return {key: value for key, value in {**base, **changes}.items() if value is not None}


def bad_tokens(provider: Provider, url: str) -> dict[str, str]:
    """A bad token for each reason claimcheck gives (the reason, a part of it, is the key)."""
    now = int(time.time())
    assert provider.key.kid is not None
    forger = RSAKey.generate_key(2048, parameters={"kid": provider.key.kid})
    public = OctKey.import_key(json.dumps(provider.key.as_dict(private=False)))
    unsigned = _segment({"alg": "none", "typ": "at+jwt"}) + "." + _segment(claims(provider, url)) + "."
    confused = jwt.encode(
        {"alg": "HS256", "kid": provider.key.kid}, claims(provider, url), public, algorithms=["HS256"]
    )
    return {
        "the token has expired": provider.sign(claims(provider, url, exp=now - 120, iat=now - 720)),
        "does not verify with the issuer's keys": provider.sign(claims(provider, url), key=forger),
        f"the token is not for {url}": provider.sign(claims(provider, url, aud="http://127.0.0.1:9/mcp")),
        f"the token was not issued by {provider.issuer}": provider.sign(claims(provider, url, iss="https://evil.test")),
        "the token is not valid yet": provider.sign(claims(provider, url, nbf=now + 600)),
        "must be signed with one of RS256": unsigned,
        "must be signed with one of RS256, PS256": confused,
        "names neither a subject (sub) nor a client": provider.sign(claims(provider, url, sub=None)),
        "no signing key of the issuer has the token's key id": provider.sign(
            claims(provider, url), key=RSAKey.generate_key(2048, auto_kid=True)
        ),
        "the token is not a JWT": "not-a-token",
        "the token is not a well-formed JWT": "a.b.c",
        "the token is longer than 8 KiB": "x" * 12_000,
    }


def _segment(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


async def test_with_introspection_opaque_tokens_are_asked_about_and_jwts_still_checked_locally(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with oidc_provider(tmp_path, opaque=["dana"]) as provider:
            introspection = {"clientId": "claimcheck", "clientSecretEnv": "CC_SECRET"}
            auth = {"issuer": provider.issuer, "requiredScopes": ["mcp:tools"], "introspection": introspection}
            environment = ["env", f"CC_SECRET={provider.secrets['claimcheck']}"]
            async with announced_url([*environment, *serve(tmp_path, auth, "--no-api")], SERVING) as url:
                opaque, signed = await provider.token("dana", url), await provider.token("alice", url)
                read_only = await provider.token("dana", url, scope="")
                assert opaque.count(".") == 0
                async with client(url, opaque) as dana, client(url, signed) as alice:
                    by_dana = text_of(await dana.call_tool("demo__echo", {"text": "introspected"}))
                    by_alice = text_of(await alice.call_tool("demo__echo", {"text": "checked locally"}))
                async with httpx2.AsyncClient(timeout=30) as http:
                    unknown = await http.post(url, json=INITIALIZE, headers=bearer(secrets.token_urlsafe(32)))
                    scopeless = await http.post(url, json=INITIALIZE, headers=bearer(read_only))
    assert by_dana == "introspected" and by_alice == "checked locally"
    assert unknown.status_code == 401 and "not active" in unknown.json()["error_description"]
    assert scopeless.status_code == 403 and 'error="insufficient_scope"' in scopeless.headers["www-authenticate"]


async def test_when_the_issuer_goes_away_tokens_of_the_keys_already_fetched_still_pass(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with oidc_provider(tmp_path) as provider:
            auth = {"issuer": provider.issuer}
            async with announced_url(serve(tmp_path, auth, "--no-api"), SERVING) as url:
                token = await provider.token("alice", url)
                async with client(url, token) as before:
                    first = text_of(await before.call_tool("demo__echo", {"text": "before"}))
                await provider.stop()
                async with client(url, token) as after:
                    second = text_of(await after.call_tool("demo__echo", {"text": "after"}))
    assert (first, second) == ("before", "after")


async def test_over_sse_the_stream_and_its_messages_need_a_token_too(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with oidc_provider(tmp_path) as provider:
            config = write_config(
                tmp_path,
                {"mcpServers": {"demo": demo_server_entry()}, "settings": {"auth": {"issuer": provider.issuer}}},
            )
            command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--no-api", "--transport", "sse"]
            async with announced_url([*command, "--port", "0"], r"serving MCP over SSE at (http://\S+/sse)") as url:
                token = await provider.token("alice", url)
                async with httpx2.AsyncClient(timeout=30) as http:
                    stream = await http.get(url)
                    message = await http.post(url.removesuffix("/sse") + "/messages/?session_id=0", json=INITIALIZE)
                    metadata = await http.get(url.removesuffix("/sse") + "/.well-known/oauth-protected-resource/sse")
                headers = {"Authorization": f"Bearer {token}"}
                async with Client(sse_client(url, headers=headers), mode="legacy") as alice:
                    echoed = text_of(await alice.call_tool("demo__echo", {"text": "over SSE"}))
    assert stream.status_code == message.status_code == 401
    assert (
        'resource_metadata="' + url.removesuffix("/sse") + '/.well-known/oauth-protected-resource/sse"'
        in (stream.headers["www-authenticate"])
    )
    assert metadata.json()["resource"] == url
    assert echoed == "over SSE"
