"""What claimcheck asks an OAuth issuer over HTTP: its metadata, its signing keys, and introspection.

Every answer is bounded (256 KiB, `timeout_secs`, no redirects) and must be a JSON object; anything else is an
`IssuerUnavailable` naming the URL and why, which the resource server answers with 503 while it serves on.
The issuer's metadata is found as the MCP authorization spec says (RFC 8414, then OpenID discovery, path-inserted
before path-appended) and must name exactly the configured issuer (RFC 8414 §3.3); it is kept once found.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2

from server.auth_config import check_url
from server.errors import IssuerUnavailable

__all__ = ["MAX_DOCUMENT_BYTES", "Issuer", "metadata_urls"]

MAX_DOCUMENT_BYTES = 256 << 10
"""The most an issuer's answer may hold: a JWKS or a metadata document is a few KiB."""


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be, in the order the MCP authorization spec tries them."""
    parts = urlsplit(issuer)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    if not path:
        return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


class Issuer:
    """One issuer's HTTP side, over a client the caller owns (and closes)."""

    def __init__(self, issuer: str, http: httpx2.AsyncClient, *, timeout_secs: float) -> None:
        self.issuer = issuer
        self._http = http
        self._timeout = timeout_secs
        self._metadata: dict[str, Any] | None = None
        self._lock = anyio.Lock()

    async def get_json(self, url: str) -> dict[str, Any]:
        """The JSON object at `url`."""
        return await self._json("GET", url)

    async def post_form(self, url: str, form: dict[str, str], auth: httpx2.Auth) -> dict[str, Any]:
        """The JSON object `url` answers to a form POST."""
        return await self._json("POST", url, data=form, auth=auth)

    async def endpoint(self, name: str, given: str | None) -> str:
        """`given`, else the metadata's `name` (`jwks_uri`, `introspection_endpoint`)."""
        if given is not None:
            return given
        metadata = await self.metadata()
        found = metadata.get(name)
        if not isinstance(found, str):
            raise IssuerUnavailable(f"the metadata of issuer {self.issuer} has no {name}")
        try:
            return check_url(found, f"the issuer's {name}")
        except ValueError as exc:
            raise IssuerUnavailable(str(exc)) from None

    async def metadata(self) -> dict[str, Any]:
        """The issuer's metadata, found once; each failed search is tried again by the next caller."""
        async with self._lock:
            if self._metadata is None:
                self._metadata = await self._discover()
            return self._metadata

    async def _discover(self) -> dict[str, Any]:
        failures = []
        for url in metadata_urls(self.issuer):
            try:
                found = await self.get_json(url)
            except IssuerUnavailable as exc:
                failures.append(str(exc))
                continue
            if found.get("issuer") != self.issuer:
                named = json.dumps(found.get("issuer"))[:200]
                raise IssuerUnavailable(
                    f"{url} names the issuer {named}, not {json.dumps(self.issuer)} (they must be identical: "
                    "check settings.auth.issuer, trailing slash included)"
                )
            return found
        raise IssuerUnavailable(f"no metadata for issuer {self.issuer}: {'; '.join(failures)}")

    async def _json(self, method: str, url: str, **options: Any) -> dict[str, Any]:
        try:
            with anyio.fail_after(self._timeout):
                body = await self._read(method, url, **options)
        except TimeoutError:
            raise IssuerUnavailable(f"{url} gave no answer within {self._timeout:g} s") from None
        except httpx2.HTTPError as exc:
            raise IssuerUnavailable(f"{url} cannot be reached ({type(exc).__name__}: {exc})") from None
        try:
            document = json.loads(body)
        except (ValueError, RecursionError):
            raise IssuerUnavailable(f"{url} answered with something that is not JSON") from None
        if not isinstance(document, dict):
            raise IssuerUnavailable(f"{url} answered with JSON that is not an object")
        return document

    async def _read(self, method: str, url: str, **options: Any) -> bytes:
        headers = {"Accept": "application/json"}
        async with self._http.stream(method, url, headers=headers, follow_redirects=False, **options) as response:
            if response.status_code != 200:
                raise IssuerUnavailable(f"{url} answered HTTP {response.status_code}", response.status_code)
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise IssuerUnavailable(f"{url} answered with more than {MAX_DOCUMENT_BYTES >> 10} KiB")
            return bytes(body)
