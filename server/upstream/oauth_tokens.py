"""Checking one OAuth access token: a JWT against the issuer's keys, or any token by introspection (RFC 7662).

A check ends in the SDK's `AccessToken` (subject, scopes, expiry, `claims["iss"]`), in `Refused` (the token is
bad: 401 `invalid_token` with the reason) or in `Unavailable` (claimcheck cannot tell now: 503). The reasons are
fixed sentences: nothing a token says is echoed back. Signatures are joserfc's; claims are checked by its
`JWTClaimsRegistry` with `leewaySecs` of clock skew. Whose token it is: `sub`, else `client_id` (a client
credentials token of some issuers names no `sub`; RFC 9068 has it name the client then).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

import httpx2
from mcp.server.auth.provider import AccessToken

from server.auth_config import AuthSettings, IntrospectionSettings
from server.errors import IssuerUnavailable
from server.upstream.jwks import KeyCache, Unavailable
from server.upstream.oauth_fetch import Issuer

if TYPE_CHECKING:
    from joserfc.jwt import JWTClaimsRegistry

__all__ = ["MAX_TOKEN_BYTES", "Checker", "IntrospectionChecker", "JwtChecker", "Refused", "TokenChecker", "Verdict"]

logger = logging.getLogger(__name__)

MAX_TOKEN_BYTES = 8 << 10
"""Longer tokens are refused unread (real ones are 1-3 KiB; h11 refuses headers past 16 KiB before this)."""
_LOG_EVERY_SECS = 10.0


@dataclass(frozen=True, slots=True)
class Refused:
    """The token is not acceptable; `reason` says why, without quoting it."""

    reason: str


Verdict = AccessToken | Refused | Unavailable


class Checker(Protocol):
    """What the resource server asks of a token check."""

    async def check(self, token: str) -> Verdict: ...


class JwtChecker:
    """A JWT signed by one of the issuer's keys, for claimcheck's audience, not expired."""

    def __init__(self, settings: AuthSettings, audience: str, keys: KeyCache) -> None:
        self._algorithms = list(settings.algorithms)
        self._keys = keys
        self._claims = _Claims(settings, audience, jwt=True)

    async def check(self, token: str) -> Verdict:
        from joserfc import jws
        from joserfc.errors import InvalidKeyIdError, JoseError

        try:
            compact = jws.extract_compact(token.encode("ascii"))
            header = compact.headers()
        except (JoseError, ValueError, TypeError, UnicodeError):
            return Refused("the token is not a well-formed JWT")
        if not isinstance(header, dict):  # joserfc lets through a header that is a string or list holding "alg"
            return Refused("the token is not a well-formed JWT")
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in self._algorithms:
            return Refused(f"the token must be signed with one of {', '.join(self._algorithms)}")
        if kid is not None and not isinstance(kid, str):
            return Refused("the token's key id (kid) is not a string")
        keys = await self._keys.keys_for(kid)
        if keys is None:
            return Refused("no signing key of the issuer has the token's key id (kid)")
        if isinstance(keys, Unavailable):
            return keys
        try:
            valid = jws.validate_compact(compact, keys, self._algorithms)
        except InvalidKeyIdError:
            if kid is None:
                return Refused("the token names no key id (kid) and the issuer has several keys")
            return Refused("the issuer's key of the token's key id (kid) is not for the token's algorithm")
        except (JoseError, ValueError, TypeError):
            valid = False
        if not valid:
            return Refused("the token's signature does not verify with the issuer's keys")
        try:
            claims = json.loads(compact.payload or b"")
        except (ValueError, RecursionError):
            claims = None
        if not isinstance(claims, dict):
            return Refused("the token's payload is not a JSON object")
        return self._claims.accept(claims)


class IntrospectionChecker:
    """Any token the issuer's introspection endpoint calls active, for claimcheck's audience."""

    def __init__(
        self, settings: AuthSettings, audience: str, issuer: Issuer, introspection: IntrospectionSettings, secret: str
    ) -> None:
        self._issuer = issuer
        self._endpoint = introspection.endpoint
        # client_secret_basic: each part form-encoded before it is joined (RFC 6749 §2.3.1)
        self._auth = httpx2.BasicAuth(quote(introspection.client_id, safe=""), quote(secret, safe=""))
        self._claims = _Claims(settings, audience, jwt=False)
        self._logged = _Throttled()

    async def check(self, token: str) -> Verdict:
        form = {"token": token, "token_type_hint": "access_token"}
        try:
            endpoint = await self._issuer.endpoint("introspection_endpoint", self._endpoint)
            answer = await self._issuer.post_form(endpoint, form, self._auth)
        except IssuerUnavailable as exc:
            if exc.status == 400:  # RFC 7662 §2.3 would say "not active"; some issuers refuse tokens they cannot read
                return Refused("the issuer cannot introspect the token (its introspection endpoint answered 400)")
            reason = f"cannot introspect the token: {exc}"
            self._logged.warning(reason)
            return Unavailable(reason)
        if answer.get("active") is not True:
            return Refused("the issuer says the token is not active (expired, revoked or not its own)")
        return self._claims.accept(answer)


class TokenChecker:
    """JWTs locally when `jwt` is on, other tokens (or all) by introspection; the SDK's `TokenVerifier` too."""

    def __init__(self, jwt: JwtChecker | None, introspection: IntrospectionChecker | None) -> None:
        self._jwt = jwt
        self._introspection = introspection

    async def check(self, token: str) -> Verdict:
        if len(token) > MAX_TOKEN_BYTES:
            return Refused(f"the token is longer than {MAX_TOKEN_BYTES >> 10} KiB")
        if self._jwt is not None and token.count(".") == 2:
            return await self._jwt.check(token)
        if self._introspection is not None:
            return await self._introspection.check(token)
        return Refused("the token is not a JWT (three base64url parts joined by dots)")

    async def verify_token(self, token: str) -> AccessToken | None:
        verdict = await self.check(token)
        return verdict if isinstance(verdict, AccessToken) else None


class _Claims:
    """What a JWT's claims or an introspection answer must say; both become an `AccessToken`."""

    def __init__(self, settings: AuthSettings, audience: str, *, jwt: bool) -> None:
        from joserfc.jwt import JWTClaimsRegistry

        self._issuer = settings.issuer
        self._audience = audience
        # a JWT must name its issuer and expiry; an introspection answer may leave them out (the issuer vouches)
        self._registry: JWTClaimsRegistry = JWTClaimsRegistry(
            leeway=settings.leeway_secs,
            iss={"essential": jwt, "value": settings.issuer},
            aud={"essential": True, "value": audience},
            exp={"essential": jwt},
        )

    def accept(self, claims: dict[str, Any]) -> AccessToken | Refused:
        from joserfc.errors import ClaimError, ExpiredTokenError, MissingClaimError

        try:
            self._registry.validate(claims)
        except ExpiredTokenError:
            return Refused("the token has expired")
        except MissingClaimError as exc:
            return Refused(f"the token has no {_CLAIM_NAMES.get(exc.claim, 'required claim')}")
        except ClaimError as exc:
            return Refused(self._wrong(exc.claim))
        subject, client = claims.get("sub"), claims.get("client_id", claims.get("azp"))
        if not (isinstance(subject, str) and subject):
            subject = client
        if not (isinstance(subject, str) and subject):
            return Refused("the token names neither a subject (sub) nor a client (client_id)")
        scopes = _scopes(claims)
        if scopes is None:
            return Refused("the token's scope claim is neither a string nor a list of strings")
        expires = claims.get("exp")
        return AccessToken(
            token="",  # not kept: the owner key and session binding need only who it is
            client_id=client if isinstance(client, str) else "",
            scopes=scopes,
            expires_at=int(expires) if isinstance(expires, int | float) else None,
            resource=self._audience,
            subject=subject,
            claims={"iss": self._issuer},
        )

    def _wrong(self, claim: str) -> str:
        if claim == "iss":
            return f"the token was not issued by {self._issuer}"
        if claim == "aud":
            return f"the token is not for {self._audience} (its audience, aud)"
        if claim == "nbf":
            return "the token is not valid yet (nbf)"
        if claim == "iat":
            return "the token was issued in the future (iat)"
        return f"the token's {_CLAIM_NAMES.get(claim, 'claims')} is malformed"


_CLAIM_NAMES = {"iss": "issuer (iss)", "aud": "audience (aud)", "exp": "expiry (exp)", "sub": "subject (sub)"}


def _scopes(claims: dict[str, Any]) -> list[str] | None:
    """`scope` (space-separated, RFC 9068 and 7662) or `scp` (a list, as some issuers write it)."""
    value = claims.get("scope", claims.get("scp", ""))
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(scope, str) for scope in value):
        return list(value)
    return None


class _Throttled:
    """A warning logged at most every `_LOG_EVERY_SECS` (or when it changes): an outage is said, not flooded."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last: tuple[str, float] | None = None

    def warning(self, message: str) -> None:
        now = self._clock()
        if self._last is None or self._last[0] != message or now - self._last[1] >= _LOG_EVERY_SECS:
            logger.warning("%s", message)
            self._last = (message, now)
