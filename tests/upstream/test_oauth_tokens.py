"""Checking one access token: JWTs with the issuer's keys and `leewaySecs` of clock skew, other tokens by
introspection; every refusal says why without quoting the token, and an issuer out of reach is `Unavailable`."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from joserfc import jws, jwt
from joserfc.jwk import RSAKey
from mcp.server.auth.provider import AccessToken

from server.auth_config import AuthSettings
from server.errors import IssuerUnavailable
from server.upstream.jwks import KeyCache, Unavailable
from server.upstream.oauth_fetch import Issuer
from server.upstream.oauth_tokens import IntrospectionChecker, JwtChecker, Refused, TokenChecker

pytestmark = pytest.mark.anyio

ISSUER = "https://id.example.com"
AUDIENCE = "https://mcp.example.com/mcp"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
SETTINGS = AuthSettings.model_validate({"issuer": ISSUER, "resource": AUDIENCE})


async def jwks() -> dict[str, Any]:
    return {"keys": [KEY.as_dict(private=False)]}


def jwt_checker(settings: AuthSettings = SETTINGS) -> TokenChecker:
    return TokenChecker(JwtChecker(settings, AUDIENCE, KeyCache(jwks, max_age=600)), None)


def raw(header: dict[str, Any], payload: str) -> str:
    return jws.serialize_compact(header, payload, KEY)


def reheaded(token: str, header: Any) -> str:
    """`token` with another header but its payload and signature."""
    segment = base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b"=").decode()
    return segment + token[token.index(".") :]


def signed(**changes: Any) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": "alice", "aud": [AUDIENCE, "other"], "exp": now + 300, "iat": now, **changes}
    return jwt.encode({"alg": "RS256", "kid": "k1"}, {k: v for k, v in claims.items() if v is not None}, KEY)


async def test_a_good_jwt_gives_its_subject_scopes_expiry_and_issuer() -> None:
    token = signed(scope="mcp:tools mcp:read", client_id="cli", exp=2_000_000_000)
    verdict = await jwt_checker().check(token)
    assert verdict == AccessToken(
        token="",
        client_id="cli",
        scopes=["mcp:tools", "mcp:read"],
        expires_at=2_000_000_000,
        resource=AUDIENCE,
        subject="alice",
        claims={"iss": ISSUER},
    )
    assert await jwt_checker().verify_token(token) == verdict  # the SDK's TokenVerifier
    assert await jwt_checker().verify_token(signed(exp=1)) is None


@pytest.mark.parametrize(
    ("changes", "leeway", "passes"),
    [({"exp": -10}, 30, True), ({"exp": -40}, 30, False), ({"exp": -10}, 0, False), ({"nbf": 20}, 30, True)],
)
async def test_clock_skew_is_allowed_up_to_leeway_secs(changes: dict[str, int], leeway: int, passes: bool) -> None:
    settings = SETTINGS.model_copy(update={"leeway_secs": leeway})
    now = int(time.time())
    verdict = await jwt_checker(settings).check(signed(**{claim: now + delta for claim, delta in changes.items()}))
    assert isinstance(verdict, AccessToken) == passes, verdict


async def test_a_token_without_sub_is_its_clients_and_scp_lists_count_as_scopes() -> None:
    verdict = await jwt_checker().check(signed(sub=None, client_id="robot", scp=["mcp:tools"]))
    assert isinstance(verdict, AccessToken)
    assert (verdict.subject, verdict.scopes) == ("robot", ["mcp:tools"])


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: signed(exp=1), "the token has expired"),
        (lambda: signed(exp=None), "the token has no expiry (exp)"),
        (lambda: signed(iss=None), "the token has no issuer (iss)"),
        (lambda: signed(aud=None), "the token has no audience (aud)"),
        (lambda: signed(iss="https://id.example.com/"), "the token was not issued by https://id.example.com"),
        (
            lambda: signed(aud="https://mcp.example.com"),
            "the token is not for https://mcp.example.com/mcp (its audience, aud)",
        ),
        (lambda: signed(iat=4_000_000_000), "the token was issued in the future (iat)"),
        (lambda: signed(sub=7), "the token's subject (sub) is malformed"),
        (lambda: signed(sub=""), "the token names neither a subject (sub) nor a client (client_id)"),
        (lambda: signed(sub=None), "the token names neither a subject (sub) nor a client (client_id)"),
        (lambda: signed(scope=["a", 1]), "the token's scope claim is neither a string nor a list of strings"),
        (lambda: raw({"alg": "RS256", "kid": "k1"}, "[1]"), "the token's payload is not a JSON object"),
        (lambda: reheaded(signed(), {"alg": "RS256", "kid": 3}), "the token's key id (kid) is not a string"),
        (lambda: raw({"alg": "RS256", "kid": "k2"}, "{}"), "no signing key of the issuer has the token's key id"),
        (lambda: reheaded(signed(), {"alg": "PS256", "kid": "k1"}), "the token's signature does not verify"),
        (lambda: reheaded(signed(), {"alg": "RS256", "kid": "k1", "x": 1}), "the token's signature does not verify"),
        (
            lambda: reheaded(signed(), {"alg": "RS512", "kid": "k1"}),
            "the token must be signed with one of RS256, PS256",
        ),
        (lambda: "eyJhbGciOiJub25lIn0.e30.", "the token must be signed with one of RS256, PS256, ES256, Ed25519"),
        (lambda: signed()[:-4] + "AAAA", "the token's signature does not verify with the issuer's keys"),
        (lambda: "a.b.c", "the token is not a well-formed JWT"),
        # a header that is a JSON string or list holding "alg" passed joserfc's check and ended the request in a 500
        (lambda: reheaded(signed(), "xalgx"), "the token is not a well-formed JWT"),
        (lambda: reheaded(signed(), ["alg"]), "the token is not a well-formed JWT"),
        (lambda: "é.é.é", "the token is not a well-formed JWT"),
        (lambda: "opaque", "the token is not a JWT (three base64url parts joined by dots)"),
        (lambda: "x." * 5000, "the token is longer than 8 KiB"),
    ],
)
async def test_a_bad_jwt_is_refused_with_a_reason_that_quotes_nothing_of_it(
    make: Callable[[], str], reason: str
) -> None:
    verdict = await jwt_checker().check(make())  # made now: a token made at collection may have expired by then
    assert isinstance(verdict, Refused) and verdict.reason.startswith(reason), verdict


async def test_a_key_id_the_issuer_does_not_publish_is_an_unavailable_issuer_while_its_jwks_is_down() -> None:
    async def down() -> dict[str, Any]:
        raise IssuerUnavailable("https://id.example.com/jwks gave no answer within 5 s")

    checker = TokenChecker(JwtChecker(SETTINGS, AUDIENCE, KeyCache(down, max_age=600)), None)
    verdict = await checker.check(signed())
    assert verdict == Unavailable(
        "cannot fetch the issuer's signing keys: https://id.example.com/jwks gave no answer within 5 s"
    )


def introspecting(answer: httpx2.Response, asked: list[httpx2.Request] | None = None) -> TokenChecker:
    def handler(request: httpx2.Request) -> httpx2.Response:
        (asked if asked is not None else []).append(request)
        return answer

    settings = AuthSettings.model_validate(
        {
            "issuer": ISSUER,
            "resource": AUDIENCE,
            "jwt": False,
            "introspection": {"endpoint": f"{ISSUER}/introspect", "clientId": "cc:1", "clientSecretEnv": "S"},
        }
    )
    assert settings.introspection is not None
    issuer = Issuer(ISSUER, httpx2.AsyncClient(transport=httpx2.MockTransport(handler)), timeout_secs=5)
    return TokenChecker(None, IntrospectionChecker(settings, AUDIENCE, issuer, settings.introspection, "s/cret"))


async def test_an_active_token_the_issuer_vouches_for_is_accepted_as_its_clients_when_it_names_no_subject() -> None:
    asked: list[httpx2.Request] = []
    answer = {"active": True, "client_id": "dana", "aud": AUDIENCE, "scope": "mcp:tools", "exp": 2_000_000_000}
    verdict = await introspecting(httpx2.Response(200, json=answer), asked).check("opaque-token")
    assert isinstance(verdict, AccessToken) and (verdict.subject, verdict.scopes) == ("dana", ["mcp:tools"])
    [request] = asked
    assert request.headers["authorization"] == "Basic " + base64.b64encode(b"cc%3A1:s%2Fcret").decode()
    assert request.content == b"token=opaque-token&token_type_hint=access_token"


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        (httpx2.Response(200, json={"active": False}), Refused("the issuer says the token is not active")),
        (httpx2.Response(200, json={"active": "yes", "aud": AUDIENCE}), Refused("the issuer says")),
        (httpx2.Response(200, json={"active": True, "sub": "a"}), Refused("the token has no audience (aud)")),
        (httpx2.Response(200, json={"active": True, "sub": "a", "aud": "x"}), Refused("the token is not for")),
        (
            httpx2.Response(200, json={"active": True, "sub": "a", "aud": AUDIENCE, "iss": "https://evil"}),
            Refused("the token was not issued by"),
        ),
        (
            httpx2.Response(200, json={"active": True, "sub": "a", "aud": AUDIENCE, "exp": 1}),
            Refused("the token has expired"),
        ),
        (httpx2.Response(400, json={"error": "unsupported_token_type"}), Refused("the issuer cannot introspect")),
        (httpx2.Response(401, json={"error": "invalid_client"}), Unavailable("cannot introspect the token: https")),
        (httpx2.Response(200, content=b"<html>"), Unavailable("cannot introspect the token: https")),
        (httpx2.Response(200, json=[True]), Unavailable("cannot introspect the token: https")),
    ],
)
async def test_an_introspection_answer_that_is_not_a_good_active_token_refuses_or_says_it_cannot_tell(
    answer: httpx2.Response, verdict: Refused | Unavailable
) -> None:
    found = await introspecting(answer).check("opaque-token")
    assert type(found) is type(verdict) and found.reason.startswith(verdict.reason), found
