"""`settings.auth`: claimcheck as an OAuth 2.1 resource server over HTTP and SSE (the MCP authorization spec).

An access token is accepted when it comes from `issuer`, names claimcheck's `audience`, and carries every scope of
`requiredScopes`: a JWT checked against the issuer's signing keys (JWKS), or any token the issuer's introspection
endpoint (RFC 7662) calls active. Discovery finds what is not given from the issuer's metadata. The runtime side
is `server.upstream.resource_server`; the secret of introspection comes from the environment, never the file.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

__all__ = ["ASYMMETRIC_ALGORITHMS", "AuthSettings", "IntrospectionSettings", "check_url"]

ASYMMETRIC_ALGORITHMS = (
    *("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"),
    *("Ed25519", "EdDSA"),  # EdDSA is Ed25519 or Ed448 by the key; RFC 9864 names them apart (joserfc warns on it)
)
"""The JWS algorithms a JWT may be signed with: public-key ones only (never `none`, never a shared HMAC secret)."""
_SCOPE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
"""A scope token (RFC 6749 §3.3): visible ASCII but `"` and `\\`, so it can be quoted in a header as it is."""
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


def check_url(value: str, what: str) -> str:
    """`value` if it is an https URL, or http on a loopback host (a provider on this machine), without a
    fragment; a ValueError naming `what` otherwise."""
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"{what} must be an https:// URL, not {value!r}")
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise ValueError(f"{what} must use https (http is only for a loopback host such as 127.0.0.1): {value!r}")
    if parts.fragment or "#" in value:
        raise ValueError(f"{what} must not have a #fragment: {value!r}")
    return value


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class IntrospectionSettings(_Strict):
    """Token introspection (RFC 7662): claimcheck asks the issuer about each token it cannot check itself."""

    endpoint: str | None = None
    """Else the issuer's metadata `introspection_endpoint`."""
    client_id: str = Field(alias="clientId", min_length=1)
    client_secret_env: str = Field(alias="clientSecretEnv")
    """The environment variable holding the client's secret (sent as HTTP Basic, client_secret_basic)."""

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value, "endpoint")

    @field_validator("client_secret_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not _ENV_NAME.fullmatch(value):
            raise ValueError(f"clientSecretEnv names an environment variable (A-Z, 0-9, _), not {value!r}")
        return value


class AuthSettings(_Strict):
    """Who may speak MCP over HTTP/SSE: holders of access tokens `issuer` made for claimcheck."""

    issuer: str
    resource: str | None = None
    """The URL clients use for claimcheck's MCP endpoint, advertised in its protected resource metadata; by default
    the URL it serves at (`http://<host>:<port>/mcp`). Set it when a proxy or a public name sits in front."""
    audience: str | None = None
    """The `aud` a token must name; by default the resource (RFC 8707 resource indicators make it so)."""
    jwt: bool = True
    """Check JWTs locally with the issuer's keys; false: introspect every token."""
    jwks_uri: str | None = Field(default=None, alias="jwksUri")
    """Else the issuer's metadata `jwks_uri` (OpenID discovery, then RFC 8414)."""
    algorithms: tuple[str, ...] = ("RS256", "PS256", "ES256", "Ed25519")
    introspection: IntrospectionSettings | None = None
    required_scopes: tuple[str, ...] = Field(default=(), alias="requiredScopes")
    leeway_secs: int = Field(default=30, alias="leewaySecs", ge=0, le=300)
    """Clock skew allowed on `exp`, `nbf` and `iat`."""
    jwks_cache_secs: float = Field(default=3600, alias="jwksCacheSecs", gt=0)
    """How long fetched keys are used; after that they are fetched again, and without an answer no JWT passes."""
    timeout_secs: float = Field(default=5, alias="timeoutSecs", gt=0, le=60)
    """The most one fetch of the issuer's metadata or keys may take."""

    @field_validator("issuer")
    @classmethod
    def _issuer(cls, value: str) -> str:
        check_url(value, "issuer")
        if urlsplit(value).query:
            raise ValueError(f"issuer must not have a ?query: {value!r}")
        return value

    @field_validator("resource", "jwks_uri")
    @classmethod
    def _urls(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else check_url(value, "jwksUri" if info.field_name == "jwks_uri" else "resource")

    @field_validator("algorithms")
    @classmethod
    def _algorithms(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        refused = [alg for alg in value if alg not in ASYMMETRIC_ALGORITHMS]
        if refused or not value:
            raise ValueError(f"algorithms are one or more of {', '.join(ASYMMETRIC_ALGORITHMS)}, not {refused}")
        return value

    @field_validator("required_scopes")
    @classmethod
    def _scopes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for scope in value:
            if not _SCOPE.fullmatch(scope):
                raise ValueError(f"a scope is visible ASCII without spaces, quotes or backslashes, not {scope!r}")
        return value

    @model_validator(mode="after")
    def _some_check(self) -> AuthSettings:
        if not self.jwt and self.introspection is None:
            raise ValueError('with "jwt": false, give "introspection" (else no token could be checked)')
        if not self.jwt and self.jwks_uri is not None:
            raise ValueError('"jwksUri" is for checking JWTs, which "jwt": false turns off')
        return self
