"""What claimcheck asks an issuer: its metadata where the MCP authorization spec looks for it, naming exactly the
configured issuer, and every answer bounded; anything else is an `IssuerUnavailable` that names the URL."""

from __future__ import annotations

from collections.abc import Callable

import httpx2
import pytest

from server.errors import IssuerUnavailable
from server.upstream.oauth_fetch import MAX_DOCUMENT_BYTES, Issuer, metadata_urls

pytestmark = pytest.mark.anyio


def issuer_at(name: str, handler: Callable[[httpx2.Request], httpx2.Response]) -> Issuer:
    return Issuer(name, httpx2.AsyncClient(transport=httpx2.MockTransport(handler)), timeout_secs=5)


def test_metadata_is_looked_for_where_the_mcp_authorization_spec_says_in_its_order() -> None:
    assert metadata_urls("https://id.test") == [
        "https://id.test/.well-known/oauth-authorization-server",
        "https://id.test/.well-known/openid-configuration",
    ]
    assert metadata_urls("https://id.test/tenant/1/") == [
        "https://id.test/.well-known/oauth-authorization-server/tenant/1",
        "https://id.test/.well-known/openid-configuration/tenant/1",
        "https://id.test/tenant/1/.well-known/openid-configuration",
    ]


async def test_the_jwks_uri_comes_from_the_first_metadata_found_and_is_looked_up_once() -> None:
    asked: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        asked.append(str(request.url))
        if request.url.path == "/.well-known/openid-configuration":
            return httpx2.Response(200, json={"issuer": "https://id.test", "jwks_uri": "https://id.test/keys"})
        return httpx2.Response(404)

    issuer = issuer_at("https://id.test", handler)
    assert await issuer.endpoint("jwks_uri", None) == "https://id.test/keys"
    assert await issuer.endpoint("jwks_uri", None) == "https://id.test/keys"
    assert await issuer.endpoint("jwks_uri", "https://given.test/jwks") == "https://given.test/jwks"
    assert asked == metadata_urls("https://id.test")


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (
            httpx2.Response(200, json={"issuer": "https://id.test/"}),
            '.well-known/oauth-authorization-server names the issuer "https://id.test/", not "https://id.test" (they '
            "must be identical: check settings.auth.issuer, trailing slash included)",
        ),
        (
            httpx2.Response(200, json={"issuer": "https://id.test"}),
            "the metadata of issuer https://id.test has no jwks_uri",
        ),
        (
            httpx2.Response(200, json={"issuer": "https://id.test", "jwks_uri": "http://id.test/keys"}),
            "the issuer's jwks_uri must use https",
        ),
        (httpx2.Response(500), "no metadata for issuer https://id.test: https://id.test/.well-known/oauth-authoriza"),
        (httpx2.Response(302, headers={"location": "https://elsewhere.test"}), "answered HTTP 302"),
        (httpx2.Response(200, content=b"{" * 10), "answered with something that is not JSON"),
        (httpx2.Response(200, content=b"[]"), "answered with JSON that is not an object"),
        (httpx2.Response(200, content=b" " * (MAX_DOCUMENT_BYTES + 1)), "answered with more than 256 KiB"),
    ],
)
async def test_metadata_that_cannot_be_used_says_why_and_names_where(answer: httpx2.Response, why: str) -> None:
    issuer = issuer_at("https://id.test", lambda _: answer)
    with pytest.raises(IssuerUnavailable) as raised:
        await issuer.endpoint("jwks_uri", None)
    assert why in str(raised.value)


async def test_an_issuer_that_cannot_be_reached_is_named_with_the_reason() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    with pytest.raises(IssuerUnavailable) as raised:
        await issuer_at("https://id.test", handler).get_json("https://id.test/keys")
    assert str(raised.value) == "https://id.test/keys cannot be reached (ConnectError: connection refused)"
