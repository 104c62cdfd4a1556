"""Who owns a session's handles: the key they are kept under beyond one connection.

An owner key says whose handles a request may see. Four kinds (replicas key shared handles the same way):

- the **user**, in the shared claimcheck (`serve --shared`): every relay of this config is the same user,
  since only the user can reach its socket;
- the **principal** over HTTP: the name a tokens file gives the request's token (`principal:<NAME>`), else a
  digest of its `Authorization` header; with the optional `Claimcheck-Session` header, for telling apart two
  agents that share a token. A client that reconnects with the same token reads what it made before, and
  another token cannot;
- the **OAuth user** over HTTP (`settings.auth`): a digest of the access token's issuer and subject
  (`oauth:<subject, as shown>:<digest>`), with the `Claimcheck-Session` header as above. Tokens come and go;
  every token of one user, from any of their clients, reaches the same handles, and another user's never does;
- over HTTP without a token, a 2026-07-28 (sessionless) request is keyed by its client's name and that header.

None means the session is the connection itself (stdio, and handshake-era HTTP without a token): its handles
end with it, as before. Owned handles outlive their connections: running calls are kept to completion and
outputs for `settings.keepOutputsSecs` after they were last touched (`server.handles.sessions`).

Fair shares (`settings.limits`) count by principal (`principal_of`), which an owner key may not be: every client
without a token (over HTTP or SSE, of either era, whatever its name, connection or `Claimcheck-Session` header) is
the one principal `ANONYMOUS`, since nothing it sends tells one such client from another that costs more than a
new connection to make; over stdio the one client is that principal too.

`Entrance` is where a request came from as each entrance knows it (connection, owner key, client, link): what
`server.handles.sessions.Sessions.find` seats it by.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import uuid
from dataclasses import dataclass
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from server import sdk_compat

__all__ = [
    "ANONYMOUS",
    "IDENTITY",
    "PRINCIPAL_NAME",
    "SESSION_HEADER",
    "USER",
    "Entrance",
    "client_owner",
    "connection_of",
    "link_of",
    "owner_key",
    "owner_name",
    "principal",
    "principal_of",
]

SESSION_HEADER = "claimcheck-session"
USER = "user"
ANONYMOUS = "anonymous"
"""The principal of every client without a token (`principal_of`): its fair shares are theirs together."""
OWNER = "claimcheck.owner"
"""The ASGI scope key under which `server.upstream.principals.PrincipalAsUser` leaves the owner key of a request
with an Authorization header: made once per request, read by every entrance."""
PRINCIPAL_NAME = "claimcheck.principal"
"""The ASGI scope key under which the bearer check leaves the name of a tokens file's principal ("" for the
token of `--auth-token-env`); only that check sets it."""
IDENTITY = "claimcheck.identity"
"""The ASGI scope key under which the OAuth check (`server.upstream.resource_server`) leaves the (issuer, subject)
of a request's access token; only that check sets it."""
_PRINCIPAL = "principal:"
_OAUTH = "oauth:"
_CLIENT = "client:"
_SHOWN = re.compile(r"[^A-Za-z0-9._@-]")
_SHOWN_LENGTH = 63
_DIGEST_LENGTH = 64
LINK_ATTRIBUTE = "link"
"""The attribute of a request's transport context (`ctx.request`) naming the transport link it came over, where
the transport knows it (a relay's connection to the shared claimcheck, `server.upstream.stdio.LineLink`): it
tells apart the owner's sessions when the protocol has none (2026-07-28)."""


def link_of(ctx: ServerRequestContext[Any]) -> str:
    """The transport link a request came over (`LINK_ATTRIBUTE`), or "" where the transport does not say."""
    return str(getattr(ctx.request, LINK_ATTRIBUTE, ""))


def connection_of(ctx: ServerRequestContext[Any]) -> Any | None:
    """The handshake-era connection a request came on; None for a 2026-07-28 request (it has none)."""
    connection = sdk_compat.connection_of(ctx.session)
    if connection is None or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None
    return connection


def owner_key(ctx: ServerRequestContext[Any], *, shared: bool = False) -> str | None:
    """The owner of the handles this request may use, or None when its connection owns them."""
    if shared:
        return USER
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return None  # stdio: one client, whose session is the connection
    authorization = headers.get("authorization", "")
    if authorization:
        scope = getattr(ctx.request, "scope", {})
        owner: str | None = scope.get(OWNER)
        session = headers.get(SESSION_HEADER, "")
        return owner or principal(authorization, session, scope.get(PRINCIPAL_NAME, ""), scope.get(IDENTITY))
    if connection_of(ctx) is None:
        params = ctx.session.client_params
        return client_owner(params.client_info.name if params is not None else "", headers.get(SESSION_HEADER, ""))
    return None


def client_owner(client_name: str, claimcheck_session: str) -> str:
    """The owner key of a sessionless request over HTTP without an `Authorization` header: by its client's name
    and its `Claimcheck-Session` header."""
    return _CLIENT + _digest(client_name, claimcheck_session)


def principal(
    authorization: str, claimcheck_session: str, name: str = "", identity: tuple[str, str] | None = None
) -> str:
    """The owner key of an HTTP request with an `Authorization` header (and its `Claimcheck-Session` header):
    by the (issuer, subject) `identity` of an OAuth access token, by the principal's `name` when a tokens file
    named it, else by a digest of the header."""
    session = ":" + _digest(claimcheck_session) if claimcheck_session else ""
    if identity is not None:
        issuer, subject = identity
        shown = _SHOWN.sub("_", subject)[:_SHOWN_LENGTH]
        return f"{_OAUTH}{shown}:{_digest(issuer, subject)}{session}"
    if name:
        return _PRINCIPAL + name + session
    return _PRINCIPAL + _digest(authorization, "") + session  # without the header, the key it always had


def principal_of(key: str | None) -> str:
    """The principal an owner key belongs to, whatever its `Claimcheck-Session` header: what its fair shares
    are counted by (`settings.limits`). The header tells apart one principal's agents, never two principals; a
    client without a token (a sessionless one's key, or None: a connection's session) is `ANONYMOUS`."""
    if key is None:
        return ANONYMOUS
    if key.startswith(_OAUTH):
        return ":".join(key.split(":", 3)[:3])
    if key.startswith(_PRINCIPAL):
        return ":".join(key.split(":", 2)[:2])
    if key.startswith(_CLIENT):
        return ANONYMOUS
    return key


def owner_name(key: str | None) -> str | None:
    """Whom an owner key names, as the status API shows it: a tokens file's principal by its name, an OAuth user
    by the subject of their tokens (characters other than letters, digits and `._@-` shown as `_`, at most 63),
    "user" in the shared claimcheck, `token-` and 8 hex digits for a token no tokens file named (a label keyed by
    this process: two tokens are told apart, neither is revealed), "client" for a sessionless client; None
    when the session is its connection's. Names are for reading: two issuers may have a subject of one name."""
    if key is None or key == USER:
        return key
    if key.startswith(_OAUTH):
        return key.removeprefix(_OAUTH).split(":", 1)[0]
    if key.startswith(_PRINCIPAL):
        name = key.removeprefix(_PRINCIPAL).split(":", 1)[0]
        return _token_label(name) if len(name) == _DIGEST_LENGTH else name
    return key.split(":", 1)[0]


_LABEL_KEY = os.urandom(16)
"""This process's key for the labels of unnamed tokens: a label tells two tokens apart and reveals nothing of
either (another process labels them differently)."""


def _token_label(digest: str) -> str:
    """`token-` and 8 hex digits keyed by this process: how the status API tells apart bearer tokens no tokens
    file named, without showing anything that could confirm a guess at one."""
    return "token-" + hmac.new(_LABEL_KEY, digest.encode(), hashlib.sha256).hexdigest()[:8]


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "replace")).hexdigest()


_ORIGIN_KEY = "claimcheck.origin"


@dataclass(frozen=True, slots=True)
class Entrance:
    """Where a request came from, as each entrance knows it: its handshake-era connection (None for a
    sessionless request), its owner key (`server.handles.owners`; None when the connection owns its session),
    a `ServerSession` of it (what the client declared; None leaves what the session knew, as over stdio,
    where the one client declared it at its handshake), and the transport link it came over where the
    transport knows it (`server.handles.owners.link_of`)."""

    connection: Any  # None for a sessionless request
    owner: str | None
    client: Any
    link: str = ""

    @property
    def origin(self) -> str:
        """The connection (or, sessionless, the link or the owner) the request came from: calls it starts are
        its own."""
        if self.connection is not None:
            return _origin_of(self.connection)
        return self.link or self.owner or "default"


def _origin_of(connection: Any) -> str:
    """The connection's origin key, made the first time it is asked for."""
    origin = connection.state.get(_ORIGIN_KEY)
    if origin is None:
        origin = connection.state[_ORIGIN_KEY] = uuid.uuid4().hex
    return str(origin)
