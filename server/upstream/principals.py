"""A session serves only the principal that opened it: an MCP session id alone is never enough.

The SDK's transports already bind each session (streamable HTTP and SSE) to the credential of the request that
opened it, and answer a request of another credential as for an unknown session (404): but only where a request
carries an authenticated user, which claimcheck's own bearer check does not make. `PrincipalAsUser` makes one of
every request's principal (`server.handles.owners.principal`: the Authorization header, or the name a tokens
file gives its token, or the issuer and subject of an OAuth access token, and the `Claimcheck-Session` header),
so a session opened by Alice answers neither Bob's token, nor no token, nor Alice's token sent for another agent;
its streams are replayed, and its handles read, only by her.

404 rather than 403: the MCP spec binds a session to its user (the security best practices' `<user_id>:<session_id>`
key), and for a session that does not exist under the asking user the transport spec's answer is 404; a 403 would
also tell whoever guessed or stole an id that it names a live session.
"""

from __future__ import annotations

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send

from server.handles.owners import IDENTITY, OWNER, PRINCIPAL_NAME, SESSION_HEADER, principal

__all__ = ["PrincipalAsUser"]

_AUTHORIZATION = b"authorization"
_CLAIMCHECK_SESSION = SESSION_HEADER.encode()


class PrincipalAsUser:
    """Sets `scope["user"]` of every HTTP request with an Authorization header to its principal (none without)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            authorization = claimcheck_session = b""
            for name, value in scope.get("headers", []):
                key = bytes(name).lower()
                if key == _AUTHORIZATION:
                    authorization = bytes(value)
                elif key == _CLAIMCHECK_SESSION:
                    claimcheck_session = bytes(value)
            scope.pop("user", None)  # only this layer says who is asking
            scope.pop(OWNER, None)
            if authorization:
                name, identity = scope.get(PRINCIPAL_NAME, ""), scope.get(IDENTITY)
                session = claimcheck_session.decode("latin-1")
                owner = principal(authorization.decode("latin-1"), session, name, identity)
                scope[OWNER] = owner
                scope["user"] = AuthenticatedUser(AccessToken(token="", client_id=owner, scopes=[]))
        await self.app(scope, receive, send)
