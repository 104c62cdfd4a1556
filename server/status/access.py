"""Who may read the status API: its own origin only, and only with the run's token.

- The Host header must name 127.0.0.1, localhost or [::1], with or without the port (no DNS rebinding; the MCP
  routes' rule, `http_edge.loopback_host`): another gets
  421 with one line saying so and what to open or send instead (it was Starlette's 400 "Invalid host header").
- A request whose `Origin` is not the API's own gets 403, unless `settings.api.allowOrigins` lists it; only
  those listed get CORS headers. Without an `Origin`, a browser's `Sec-Fetch-Site: same-site|cross-site`
  on anything but a navigation is refused too (another port on 127.0.0.1 is the same site).
- Every route but `/healthz` needs the token: `Authorization: Bearer <token>`, or the cookie the dashboard
  gets when opened as `/?token=<token>` (HttpOnly, SameSite=Strict, then a redirect to `/` so the token
  leaves the address bar). The cookie holds a value derived from the token, never the token itself:
  browsers send 127.0.0.1's cookies to every port, and with `--auth-token-env` the token also opens `/mcp`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from urllib.parse import quote

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.errors import clip
from server.http_edge import loopback_host, reply

__all__ = ["OPEN_PATHS", "Access", "dashboard_url"]

OPEN_PATHS = frozenset({"/healthz"})
_PREFLIGHT = [
    (b"access-control-allow-methods", b"GET, OPTIONS"),
    (b"access-control-allow-headers", b"Authorization"),
    (b"access-control-max-age", b"600"),
]
_ALWAYS = [
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"referrer-policy", b"no-referrer"),
]
_NEEDS_TOKEN = """<!doctype html><meta charset="utf-8"><title>claimcheck — token needed</title>
<p>This dashboard needs the token of the claimcheck that serves it. Open the address that
<code>claimcheck ps</code> prints (<code>http://127.0.0.1:…/?token=…</code>), or the <code>"dashboard"</code> of
its discovery file (the path is on claimcheck's start-up line on stderr).</p>
"""


def dashboard_url(base: str, token: str) -> str:
    """The address that opens the dashboard: `base` with the token as its `token` query parameter."""
    return f"{base}?token={quote(token, safe='')}"


class Access:
    """The Origin and token checks in front of the status API's routes."""

    def __init__(self, app: ASGIApp, *, token: str, port: int, allow_origins: Sequence[str] = ()) -> None:
        self.app = app
        self._token = token.encode()
        self._cookie_value = hashlib.sha256(b"claimcheck status cookie\0" + self._token).hexdigest().encode()
        self.cookie = f"claimcheck-status-{port}"  # one per port: two instances must not overwrite each other's
        self._port = port
        self._own = {f"http://127.0.0.1:{port}", f"http://localhost:{port}"}
        self._allowed = {origin.rstrip("/") for origin in allow_origins}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = HTTPConnection(scope)
        host = request.headers.get("host", "")
        if not loopback_host(host):
            was = f"for {clip(host, 80)}" if host else "without a Host header"
            refused = {
                "error": "misdirected request: this status API answers only requests for 127.0.0.1, localhost or "
                f"[::1] (this one came {was}), so that no web page reaches it through DNS rebinding",
                "hint": f"open http://127.0.0.1:{self._port}/; a proxy in front must send Host: 127.0.0.1:{self._port}",
            }
            await reply(send, 421, refused, _ALWAYS)
            return
        origin = request.headers.get("origin")
        cors = origin is not None and origin not in self._own and origin in self._allowed
        if not self._same_origin_or_allowed(request, origin):
            refused = {"error": f"cross-origin request refused: {origin or 'another site'} is not this API's origin"}
            if origin:
                refused["hint"] = "list the origin in settings.api.allowOrigins to let it read the API"
            await reply(send, 403, refused, _ALWAYS)
            return
        extra = [*_ALWAYS, (b"vary", b"Origin")]
        if cors:
            assert origin is not None
            extra.append((b"access-control-allow-origin", origin.encode()))
        if scope["method"] == "OPTIONS":
            headers = [*extra, *(_PREFLIGHT if cors else []), (b"allow", b"GET, HEAD, OPTIONS")]
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["path"] not in OPEN_PATHS:
            if scope["path"] == "/" and "token" in request.query_params:
                await self._swap_for_cookie(request.query_params["token"], send, extra)
                return
            if not self._authorised(request):
                await self._unauthorised(scope, send, extra)
                return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, with_headers)

    def _same_origin_or_allowed(self, request: HTTPConnection, origin: str | None) -> bool:
        if origin is not None:
            return origin in self._own or origin in self._allowed
        site = request.headers.get("sec-fetch-site", "")
        return site not in ("same-site", "cross-site") or request.headers.get("sec-fetch-mode") == "navigate"

    def _authorised(self, request: HTTPConnection) -> bool:
        given = request.headers.get("authorization")
        if given is not None:
            scheme, _, value = given.partition(" ")
            return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self._token)
        cookie = request.cookies.get(self.cookie)
        return cookie is not None and hmac.compare_digest(cookie.encode(), self._cookie_value)

    async def _swap_for_cookie(self, given: str, send: Send, extra: list[tuple[bytes, bytes]]) -> None:
        if not hmac.compare_digest(given.encode(), self._token):
            await _needs_token(send, extra)
            return
        cookie = f"{self.cookie}={self._cookie_value.decode()}; Path=/; HttpOnly; SameSite=Strict"
        headers = [(b"location", b"/"), (b"set-cookie", cookie.encode()), (b"content-length", b"0"), *extra]
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    async def _unauthorised(self, scope: Scope, send: Send, extra: list[tuple[bytes, bytes]]) -> None:
        if scope["path"] == "/":
            await _needs_token(send, extra)
            return
        error = {"error": "missing or wrong token: send Authorization: Bearer <token> (see claimcheck ps)"}
        await reply(send, 401, error, [(b"www-authenticate", b"Bearer"), *extra])


async def _needs_token(send: Send, extra: list[tuple[bytes, bytes]]) -> None:
    page = _NEEDS_TOKEN.encode()
    headers = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(page)).encode()), *extra]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": page})
