"""claimcheck as an OAuth 2.1 resource server over HTTP and SSE, when `settings.auth` is set (the MCP
authorization spec).

- `/.well-known/oauth-protected-resource`, and the form with the resource's path that clients derive from its URL
  (`…/mcp`), serve the Protected Resource Metadata (RFC 9728) to anyone: the resource and its issuer.
- Every other request needs `Authorization: Bearer <token>`. The static tokens of `--auth-token-env` and
  `--auth-tokens-file` are compared first, in constant time, and mean what they mean without OAuth; any other token
  is an access token (`oauth_tokens`). None: 401 with `WWW-Authenticate: Bearer resource_metadata="…"`; a bad one:
  401 `error="invalid_token"` and why; scopes missing: 403 `error="insufficient_scope"` naming them; the issuer's keys
  or introspection out of reach: 503, whose body says so. claimcheck serves on whatever comes.
- An accepted token leaves its (issuer, subject) in the request's scope (`owners.IDENTITY`): the owner key, so two
  users never share handles or sessions and one user's clients do.

The SDK's own resource-server assembly (`RequireAuthMiddleware` on the `/mcp` route) would sit behind claimcheck's
HTTP fast path and give every failure one reason; this gate sits in front of everything instead, and uses the
SDK's pieces for the rest: `TokenVerifier`/`AccessToken`, the metadata model, handler, CORS and URL rule.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from server.auth_config import AuthSettings, check_url
from server.distribution import install_command
from server.errors import ConfigError
from server.handles.owners import IDENTITY, PRINCIPAL_NAME
from server.http_edge import reply
from server.upstream.bearer import Tokens, accepted_name
from server.upstream.jwks import KeyCache, Unavailable
from server.upstream.oauth_fetch import Issuer
from server.upstream.oauth_tokens import Checker, IntrospectionChecker, JwtChecker, Refused, TokenChecker

__all__ = ["WELL_KNOWN", "OAuth", "ResourceGate"]

logger = logging.getLogger(__name__)

WELL_KNOWN = "/.well-known/oauth-protected-resource"
_RETRY_AFTER_SECS = b"10"
_BEARER = b"bearer "


class OAuth:
    """`settings.auth` ready to serve: the introspection secret read from the environment, joserfc at hand."""

    def __init__(self, settings: AuthSettings, secret: str | None) -> None:
        self.settings = settings
        self._secret = secret

    @classmethod
    def from_settings(cls, settings: AuthSettings, environ: Mapping[str, str] = os.environ) -> OAuth:
        """A ConfigError when the `[oauth]` extra is missing or the introspection secret's variable is unset."""
        try:
            import joserfc  # noqa: F401
        except ImportError:
            raise ConfigError(f"settings.auth needs the oauth extra (joserfc): {install_command('oauth')}") from None
        secret = None
        if settings.introspection is not None:
            name = settings.introspection.client_secret_env
            secret = environ.get(name, "")
            if not secret:
                raise ConfigError(f"settings.auth.introspection.clientSecretEnv names {name}, which is not set")
        return cls(settings, secret)

    def resource_for(self, served_url: str) -> str:
        """The resource claimcheck advertises: `settings.auth.resource`, else the URL it serves at, which must then
        be one clients can use (a loopback one)."""
        if self.settings.resource is not None:
            return self.settings.resource
        try:
            return check_url(served_url, "the served URL")
        except ValueError:
            raise ConfigError(
                f"settings.auth.resource is needed: claimcheck serves at {served_url}, which is not a URL a client "
                "can be told to use (give the https:// URL clients reach it at)"
            ) from None

    @asynccontextmanager
    async def protecting(self, app: ASGIApp, tokens: Tokens | None, served_url: str) -> AsyncIterator[ResourceGate]:
        """`app` behind the gate for as long as this lasts; the issuer's keys are fetched in the background at
        once, so the first request does not wait for them."""
        settings = self.settings
        resource = self.resource_for(served_url)
        audience = settings.audience or resource
        async with httpx2.AsyncClient(timeout=settings.timeout_secs) as http, anyio.create_task_group() as tg:
            issuer = Issuer(settings.issuer, http, timeout_secs=settings.timeout_secs)
            jwt = introspection = None
            if settings.jwt:

                async def fetch_keys() -> dict[str, object]:
                    return await issuer.get_json(await issuer.endpoint("jwks_uri", settings.jwks_uri))

                keys = KeyCache(fetch_keys, max_age=settings.jwks_cache_secs)
                jwt = JwtChecker(settings, audience, keys)
                tg.start_soon(keys.refresh)
            if settings.introspection is not None:
                if self._secret is None:
                    raise ConfigError("settings.auth.introspection has no secret (OAuth.from_settings reads it)")
                introspection = IntrospectionChecker(settings, audience, issuer, settings.introspection, self._secret)
            checker = TokenChecker(jwt, introspection)
            local_path = urlsplit(served_url).path
            yield ResourceGate(app, checker, tokens=tokens, settings=settings, resource=resource, local_path=local_path)
            tg.cancel_scope.cancel()


class ResourceGate:
    """The ASGI gate: the metadata to anyone, everything else to a static token's or an access token's holder."""

    def __init__(
        self,
        app: ASGIApp,
        checker: Checker,
        *,
        tokens: Tokens | None,
        settings: AuthSettings,
        resource: str,
        local_path: str = "/mcp",
    ) -> None:
        self.app = app
        self._checker = checker
        self._tokens = tokens
        self._scopes = settings.required_scopes
        self.metadata_url = str(build_resource_metadata_url(AnyHttpUrl(resource)))
        # from strings, so the model keeps an issuer without a path as it is (a URL object would add a "/")
        metadata = ProtectedResourceMetadata.model_validate(
            {
                "resource": resource,
                "authorization_servers": [settings.issuer],
                "scopes_supported": list(self._scopes) or None,
                "resource_name": "claimcheck",
            }
        )
        serve = cors_middleware(ProtectedResourceMetadataHandler(metadata).handle, ["GET", "OPTIONS"])
        paths = {WELL_KNOWN, urlsplit(self.metadata_url).path, WELL_KNOWN + local_path.rstrip("/")}
        self._metadata = Router([Route(path, endpoint=serve, methods=["GET", "OPTIONS"]) for path in sorted(paths)])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.pop(IDENTITY, None)  # only this gate says whose token it is
        if scope["path"] == WELL_KNOWN or scope["path"].startswith(WELL_KNOWN + "/"):
            await self._metadata(scope, receive, send)
            return
        name = None if self._tokens is None else accepted_name(scope, self._tokens)
        authorization = dict(scope.get("headers", [])).get(b"authorization", b"")
        if name is not None:
            scope[PRINCIPAL_NAME] = name
            await self.app(scope, receive, send)
            return
        if authorization[: len(_BEARER)].lower() != _BEARER or not authorization[len(_BEARER) :].strip():
            await self._challenge(send, 401, None, "an OAuth access token is needed: Authorization: Bearer <token>")
            return
        verdict = await self._checker.check(authorization[len(_BEARER) :].strip().decode("latin-1"))
        if isinstance(verdict, Refused):
            await self._challenge(send, 401, "invalid_token", verdict.reason)
        elif isinstance(verdict, Unavailable):
            body = {"error": "temporarily_unavailable", "error_description": verdict.reason}
            await reply(send, 503, body, [(b"retry-after", _RETRY_AFTER_SECS)])
        elif missing := [wanted for wanted in self._scopes if wanted not in verdict.scopes]:
            await self._challenge(send, 403, "insufficient_scope", f"the token lacks the scope {' '.join(missing)}")
        else:
            scope[IDENTITY] = _identity(verdict)
            await self.app(scope, receive, send)

    async def _challenge(self, send: Send, status: int, error: str | None, description: str) -> None:
        """401 or 403 with the `WWW-Authenticate` the MCP authorization spec asks for, and the reason in JSON."""
        parts = [f'error="{error}"', f'error_description="{_quotable(description)}"'] if error else []
        if self._scopes:
            parts.append(f'scope="{" ".join(self._scopes)}"')
        parts.append(f'resource_metadata="{_quotable(self.metadata_url)}"')
        challenge = ("Bearer " + ", ".join(parts)).encode("latin-1")
        body = {"error": error or "unauthorized", "error_description": description}
        await reply(send, status, body, [(b"www-authenticate", challenge)])


def _identity(token: AccessToken) -> tuple[str, str]:
    """(issuer, subject): whose handles a request of this token reaches."""
    issuer = (token.claims or {}).get("iss")
    return str(issuer), token.subject or token.client_id


def _quotable(text: str) -> str:
    """`text` fit for a quoted header parameter: visible ASCII and spaces, no quote or backslash."""
    return "".join(c if " " <= c <= "~" and c not in '"\\' else "?" for c in text)
