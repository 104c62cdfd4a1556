"""A claimcheck that listens on loopback answers only requests addressed to loopback (DNS rebinding protection).

The rule is the MCP SDK's for a loopback server, in one place (`security`): the `Host` header names 127.0.0.1,
localhost or [::1] (with a port, or without one, which the SDK's own rule refuses: a client or proxy that leaves out
the port is no rebinding page, whose Host is always its own site's name), and an `Origin`, where a browser sends
one, is such an address over http. The
SDK's transports check it with its words ("Invalid Host header"); `LocalOnly` checks it first, for every MCP
route, and answers in one line what was refused and what to do (a reverse proxy in front must pass a local `Host`;
`--host` serves other addresses). The SDK's check stays behind it, given the same settings.
"""

from __future__ import annotations

import logging

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from server.errors import clip
from server.http_edge import LOOPBACK_HOSTS, loopback_host

__all__ = ["LOOPBACK", "LocalOnly", "security"]

logger = logging.getLogger(__name__)

LOOPBACK = ("127.0.0.1", "localhost", "::1")
"""Bind addresses that make a server local only."""


def security(host: str) -> TransportSecuritySettings | None:
    """The SDK's settings for a server bound to `host`: the rule above on loopback, none elsewhere."""
    if host not in LOOPBACK:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*LOOPBACK_HOSTS, *(f"{name}:*" for name in LOOPBACK_HOSTS)],
        allowed_origins=[
            *(f"http://{name}" for name in LOOPBACK_HOSTS),
            *(f"http://{name}:*" for name in LOOPBACK_HOSTS),
        ],
    )


class LocalOnly:
    """Refuse, in one line naming the fix, a request not addressed to this loopback server (421) or sent by a page of
    another origin (403); pass every other one as it came."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = _refusal(scope)
            if refusal is not None:
                status, text = refusal
                logger.warning("answered %d: %s", status, text.split(";", 1)[0])
                data = text.encode()
                length = str(len(data)).encode()
                headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", length)]
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": data})
                return
        await self.app(scope, receive, send)


def _refusal(scope: Scope) -> tuple[int, str] | None:
    host = _header(scope, b"host")
    if host is None or not loopback_host(host):
        port = scope.get("server", (None, None))[1]
        local = f"127.0.0.1:{port}" if port else "127.0.0.1:<port>"
        was = f"for {clip(host, 80)}" if host else "without a Host header"
        return 421, (
            f"Misdirected Request: this claimcheck listens on loopback and answers only requests for 127.0.0.1, "
            f"localhost or [::1] (this one came {was}), so that no web page reaches it through DNS "
            f'rebinding; a reverse proxy in front must send "Host: {local}", or serve other addresses with --host '
            f"(and a token)"
        )
    origin = _header(scope, b"origin")
    if origin is not None and not (origin.startswith("http://") and loopback_host(origin.removeprefix("http://"))):
        return 403, (
            f"Forbidden: a web page of another origin ({clip(origin, 80)}) may not call this claimcheck; a page "
            f"served from http://127.0.0.1, http://localhost or http://[::1] may, and a program sends no Origin"
        )
    return None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            text: str = value.decode("latin-1")
            return text
    return None
