"""The resource server's gate, in front of a tiny app: the metadata to anyone, static tokens first, then access
tokens; each failure answered as the MCP authorization spec says, and only the gate says whose token it is."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp.server.auth.provider import AccessToken
from starlette.types import Receive, Scope, Send

from server.auth_config import AuthSettings
from server.errors import ConfigError
from server.handles.owners import IDENTITY, PRINCIPAL_NAME
from server.http_edge import reply
from server.upstream.bearer import Tokens
from server.upstream.jwks import Unavailable
from server.upstream.oauth_tokens import Refused, Verdict
from server.upstream.resource_server import OAuth, ResourceGate

pytestmark = pytest.mark.anyio

RESOURCE = "https://mcp.example.com/team/mcp"
METADATA = "https://mcp.example.com/.well-known/oauth-protected-resource/team/mcp"
STATIC = "s" * 40
SETTINGS = AuthSettings.model_validate(
    {"issuer": "https://id.example.com", "resource": RESOURCE, "requiredScopes": ["mcp:tools", "mcp:admin"]}
)


class Checker:
    """Tokens named after what they get: "good", "narrow" (one scope short), "bad", "down"."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def check(self, token: str) -> Verdict:
        self.asked.append(token)
        scopes = ["mcp:tools", "mcp:admin"] if token == "good" else ["mcp:tools"]
        if token in ("good", "narrow"):
            return AccessToken(token="", client_id="c", scopes=scopes, subject="alice", claims={"iss": "https://id"})
        if token == "down":
            return Unavailable("cannot fetch the issuer's signing keys: https://id.example.com/jwks answered HTTP 502")
        return Refused('the token was not issued by https://id.example.com "really"')


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """Says who the gate let in."""
    await reply(send, 200, {"identity": scope.get(IDENTITY), "principal": scope.get(PRINCIPAL_NAME)})


@asynccontextmanager
async def gated(checker: Checker) -> AsyncIterator[httpx2.AsyncClient]:
    gate = ResourceGate(app, checker, tokens=Tokens.of(STATIC), settings=SETTINGS, resource=RESOURCE)
    transport = httpx2.ASGITransport(app=gate)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http:
        yield http


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_good_token_passes_with_its_issuer_and_subject_and_a_static_one_without_asking_the_issuer() -> None:
    checker = Checker()
    async with gated(checker) as http:
        oauth = await http.post("/mcp", headers=bearer("good"))
        static = await http.post("/mcp", headers=bearer(STATIC))
        lowercase = await http.post("/mcp", headers={"Authorization": "bearer  good "})
    assert oauth.json() == {"identity": ["https://id", "alice"], "principal": None}
    assert static.json() == {"identity": None, "principal": ""}
    assert lowercase.status_code == 200
    assert checker.asked == ["good", "good"]


async def test_each_failure_is_answered_with_its_status_and_the_challenge_the_spec_asks_for() -> None:
    async with gated(Checker()) as http:
        missing = await http.post("/mcp")
        basic = await http.post("/mcp", headers={"Authorization": "Basic YTpi"})
        bad = await http.post("/mcp", headers=bearer("bad"))
        narrow = await http.post("/mcp", headers=bearer("narrow"))
        down = await http.post("/mcp", headers=bearer("down"))
    wanted = f'scope="mcp:tools mcp:admin", resource_metadata="{METADATA}"'
    assert missing.status_code == basic.status_code == 401
    assert missing.headers["www-authenticate"] == basic.headers["www-authenticate"] == f"Bearer {wanted}"
    assert (bad.status_code, narrow.status_code, down.status_code) == (401, 403, 503)
    assert bad.headers["www-authenticate"] == (
        'Bearer error="invalid_token", error_description="the token was not issued by https://id.example.com '
        f'?really?", {wanted}'
    )
    assert narrow.headers["www-authenticate"] == (
        f'Bearer error="insufficient_scope", error_description="the token lacks the scope mcp:admin", {wanted}'
    )
    assert narrow.json() == {"error": "insufficient_scope", "error_description": "the token lacks the scope mcp:admin"}
    assert down.json() == {
        "error": "temporarily_unavailable",
        "error_description": "cannot fetch the issuer's signing keys: https://id.example.com/jwks answered HTTP 502",
    }
    assert down.headers["retry-after"] == "10" and "www-authenticate" not in down.headers


async def test_the_metadata_is_served_to_anyone_at_the_root_the_resources_path_and_the_local_path() -> None:
    async with gated(Checker()) as http:
        answers = [
            await http.get(path)
            for path in (
                "/.well-known/oauth-protected-resource",
                "/.well-known/oauth-protected-resource/team/mcp",
                "/.well-known/oauth-protected-resource/mcp",
            )
        ]
        preflight = await http.options(
            "/.well-known/oauth-protected-resource",
            headers={"Origin": "https://app.test", "Access-Control-Request-Method": "GET"},
        )
        other = await http.get("/.well-known/oauth-protected-resource/elsewhere")
    assert {answer.status_code for answer in answers} == {200}
    assert answers[0].json() == {
        "resource": RESOURCE,
        "authorization_servers": ["https://id.example.com"],
        "scopes_supported": ["mcp:tools", "mcp:admin"],
        "bearer_methods_supported": ["header"],
        "resource_name": "claimcheck",
    }
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == "*"
    assert other.status_code == 404


async def test_a_client_cannot_say_whose_token_it_is() -> None:
    async def forging(scope: Scope, receive: Receive, send: Send) -> None:
        scope[IDENTITY] = ("https://id", "mallory")  # as if something before the gate had set it
        await gate(scope, receive, send)

    gate = ResourceGate(app, Checker(), tokens=Tokens.of(STATIC), settings=SETTINGS, resource=RESOURCE)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=forging), base_url="http://x") as http:
        answer = await http.post("/mcp", headers=bearer(STATIC))
    assert answer.json() == {"identity": None, "principal": ""}


def test_the_default_resource_is_the_served_url_which_must_then_be_one_a_client_can_use() -> None:
    oauth = OAuth(AuthSettings.model_validate({"issuer": "https://id.example.com"}), None)
    assert oauth.resource_for("http://127.0.0.1:8765/mcp") == "http://127.0.0.1:8765/mcp"
    with pytest.raises(
        ConfigError, match=r"settings\.auth\.resource is needed: claimcheck serves at http://0\.0\.0\.0"
    ):
        oauth.resource_for("http://0.0.0.0:8765/mcp")
    assert OAuth(SETTINGS, None).resource_for("http://0.0.0.0:8765/mcp") == RESOURCE


def test_an_introspection_secret_comes_from_the_environment_or_claimcheck_does_not_start() -> None:
    settings = AuthSettings.model_validate(
        {"issuer": "https://id.example.com", "introspection": {"clientId": "cc", "clientSecretEnv": "CC_SECRET"}}
    )
    with pytest.raises(
        ConfigError, match=r"settings\.auth\.introspection\.clientSecretEnv names CC_SECRET, which is not"
    ):
        OAuth.from_settings(settings, {})
    assert OAuth.from_settings(settings, {"CC_SECRET": "x"}).settings is settings
