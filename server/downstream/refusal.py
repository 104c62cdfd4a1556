"""A server reached over HTTP that refuses claimcheck (401, 403): the failure says so, with the header to check.

The SDK's streamable HTTP client answers a 401 with JSON-RPC error -32603 "Server returned an error response", and
the legacy SSE client with a multi-line `HTTPStatusError`; neither tells a user which setting is wrong. A response
hook on the connection's HTTP client notes the refusal, and an exit callback on the connection attempt's stack
replaces the failure it causes with a `RemoteRefused` that names the status and the header.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType

import httpx2

from server.config import ServerConfig
from server.errors import RemoteRefused

__all__ = ["REFUSED", "Refusals", "refused_message", "with_refusals"]

REFUSED = frozenset({401, 403})

HttpClientFactory = Callable[..., httpx2.AsyncClient]
ExitCallback = Callable[
    [type[BaseException] | None, BaseException | None, TracebackType | None], Awaitable[bool | None]
]

_CREDENTIAL_WORDS = ("auth", "token", "key", "cookie", "secret")


class Refusals:
    """Whether the last answer of one server's URL, over one connection, was a refusal (401, 403), and which."""

    def __init__(self) -> None:
        self.last: tuple[int, str, bool] | None = None
        """The refusal: its status, its reason, and whether it asks for an OAuth sign-in."""
        self.status: int | None = None
        """The last answer's HTTP status (None before the first)."""

    async def hook(self, response: httpx2.Response) -> None:
        """An httpx response hook: note a refusal, forget it at the next answer that is none."""
        self.status = response.status_code
        refused = response.status_code in REFUSED
        oauth = "resource_metadata" in response.headers.get("www-authenticate", "").lower()
        self.last = (response.status_code, response.reason_phrase, oauth) if refused else None

    def failure(self, name: str, config: ServerConfig, refused: str = "the request") -> str | None:
        """Why a request failed just now, when the server refused it (a credential that expired during the
        session); None otherwise."""
        return None if self.last is None else refused_message(name, config, *self.last, refused)

    def explaining(self, name: str, config: ServerConfig) -> ExitCallback:
        """An exit callback for the attempt's `AsyncExitStack`: a failure after a refusal becomes `RemoteRefused`
        (cancellation and the like pass unchanged)."""

        async def explain(
            kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
        ) -> bool:
            refused = self.failure(name, config, "the connection")
            if refused is not None and isinstance(exc, Exception) and not isinstance(exc, RemoteRefused):
                raise RemoteRefused(refused) from exc
            return False

        return explain


def refused_message(
    name: str, config: ServerConfig, status: int, reason: str, oauth: bool = False, refused: str = "the connection"
) -> str:
    """`<url> refused the connection: HTTP 401 Unauthorized; check mcpServers.<name>.headers.Authorization`. `oauth`:
    its 401 pointed at OAuth metadata (the MCP way to ask a client to sign in)."""
    where = f"mcpServers.{name}.headers"
    sent = [header for header in config.headers if any(word in header.lower() for word in _CREDENTIAL_WORDS)]
    if oauth and not sent:
        check = (
            f"; it signs clients in with OAuth, which claimcheck does not do for the servers it calls: give a token "
            f'it takes in {where} ("Authorization": "Bearer ${{TOKEN}}"), or reach it as a stdio server through '
            f'mcp-remote ("command": "npx", "args": ["-y", "mcp-remote", "{config.url}"]), which signs in'
        )
    elif not sent:
        check = f'; {where} sends no credentials: add one, e.g. "Authorization": "Bearer ${{TOKEN}}"'
    else:
        check = "; check " + " and ".join(f"{where}.{header}" for header in sent)
        check += " (the server read them and does not allow this)" if status == 403 else ""
    return f"{config.url} refused {refused}: HTTP {status} {reason}{check}"


def with_refusals(factory: HttpClientFactory | None, refusals: Refusals) -> HttpClientFactory:
    """An `httpx_client_factory` (the legacy SSE client's) whose clients report to `refusals`; `factory` None makes
    plain clients with MCP's default timeouts, as the SDK's own factory does."""

    def make(
        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
    ) -> httpx2.AsyncClient:
        if factory is None:
            client = httpx2.AsyncClient(
                headers=headers, timeout=timeout if timeout is not None else httpx2.Timeout(30.0, read=300.0), auth=auth
            )
        else:
            client = factory(headers=headers, timeout=timeout, auth=auth)
        client.event_hooks = {**client.event_hooks, "response": [*client.event_hooks["response"], refusals.hook]}
        return client

    return make
