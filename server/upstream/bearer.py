"""Who may speak MCP over HTTP/SSE: bearer tokens, from `--auth-token-env` and from `--auth-tokens-file`.

The environment's token is one unnamed principal (its owner key is a digest of the header, as it always was). A
tokens file gives small teams several: each line `NAME TOKEN` makes the principal NAME, whose handles and
sessions no other token reaches (`server.handles.owners.principal`). A request is checked against every token,
each in constant time; the name of the one it carries is put in the request's scope for the layers below.
"""

from __future__ import annotations

import hmac
import logging
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from extraction.wording import plural
from server import platform
from server.errors import ConfigError
from server.handles.owners import PRINCIPAL_NAME

__all__ = ["MIN_TOKEN_BYTES", "RESERVED_NAMES", "BearerAuth", "Tokens", "accepted_name", "read_tokens_file"]

MIN_TOKEN_BYTES = 32
_BOM = b"\xef\xbb\xbf"
RESERVED_NAMES = frozenset({"token", "user", "client"})
"""Owner labels claimcheck shows for principals without a name (`--auth-token-env`, the shared user, a sessionless
client): a file's name must not pass for one of them."""

logger = logging.getLogger(__name__)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,62}")
"""At most 63 characters and no colon: a name never reads as the 64-hex digest of the environment's token."""
_TOKEN = re.compile(r"[\x21-\x7e]+")
"""Visible ASCII: what an Authorization header carries unchanged."""


@dataclass(frozen=True, slots=True)
class Tokens:
    """The accepted `Authorization` values, each with its principal's name ("" for the environment's token)."""

    accepted: tuple[tuple[bytes, str], ...]

    @classmethod
    def of(cls, env_token: str | None = None, named: dict[str, str] | None = None) -> Tokens:
        """The environment's token and a tokens file's (token to name); the two may be given together."""
        accepted = [] if env_token is None else [(_header(env_token), "")]
        accepted += [(_header(token), name) for token, name in (named or {}).items()]
        return cls(tuple(accepted))

    def name_of(self, authorization: bytes) -> str | None:
        """The principal's name of a matching header ("" for the environment's token), None for no match.
        Every token is compared, in constant time, whichever matches."""
        found: str | None = None
        for expected, name in self.accepted:
            if hmac.compare_digest(authorization, expected) and found is None:
                found = name
        return found


def read_tokens_file(path: Path, *, env_token: str | None = None) -> dict[str, str]:
    """Token to name from a UTF-8 file of `NAME TOKEN` lines (blank lines and `#` comments allowed); a
    malformed line, a repeated token or name, or a token under 32 bytes is a ConfigError naming its line."""
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):  # a FIFO would block the read, and serve with it, for good
            raise ConfigError(f"the tokens file {path} is not a regular file; give the path of a file")
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the tokens file {path}: {exc.strerror or exc}") from exc
    if data.startswith(_BOM):
        raise ConfigError(f"the tokens file {path} starts with a byte order mark (BOM); save it as UTF-8 without one")
    if platform.POSIX and mode & 0o077:
        logger.warning(
            "the tokens file %s can be read by other users (mode %o); it holds secrets: chmod 600 %s",
            path,
            stat.S_IMODE(mode),
            path,
        )
    tokens: dict[str, str] = {}
    names: dict[str, int] = {}
    lines: dict[str, int] = {}
    for number, raw in enumerate(data.splitlines(), start=1):
        where = f"tokens file {path}, line {number}"
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise ConfigError(f"{where}: not UTF-8") from None
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2:
            raise ConfigError(f"{where}: expected `NAME TOKEN`, found {plural(len(fields), 'field')}")
        name, token = fields
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{where}: a name is 1-63 of A-Z a-z 0-9 . _ @ - (the first a letter or digit)")
        if name in RESERVED_NAMES:
            reserved = ", ".join(sorted(RESERVED_NAMES))
            raise ConfigError(f"{where}: {name} is a name claimcheck gives other owners ({reserved}); pick another")
        if not _TOKEN.fullmatch(token):
            raise ConfigError(f"{where}: the token must be visible ASCII characters")
        if len(token.encode()) < MIN_TOKEN_BYTES:
            short = f"the token of {name} is under {MIN_TOKEN_BYTES} bytes (make one with `openssl rand -hex 32`)"
            raise ConfigError(f"{where}: {short}")
        if token in tokens:
            raise ConfigError(f"{where}: the token of {name} is the token of line {lines[token]} too")
        if name in names:
            raise ConfigError(f"{where}: the name {name} is on line {names[name]} too")
        if env_token is not None and token == env_token:
            raise ConfigError(f"{where}: the token of {name} is also --auth-token-env's")
        tokens[token], names[name], lines[token] = name, number, number
    if not tokens:
        raise ConfigError(f"the tokens file {path} names no tokens (lines of `NAME TOKEN`)")
    return tokens


class BearerAuth:
    """Refuse every HTTP request whose `Authorization` is not `Bearer <token>` of an accepted token (401).

    Behind `SingleHeaders`, so there is never more than one Authorization header to choose from.
    """

    def __init__(self, app: ASGIApp, tokens: Tokens) -> None:
        self.app = app
        self._tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            name = accepted_name(scope, self._tokens)
            if name is None:
                await _refuse(send, dict(scope.get("headers", [])).get(b"authorization", b""))
                return
            scope[PRINCIPAL_NAME] = name
        await self.app(scope, receive, send)


def accepted_name(scope: Scope, tokens: Tokens) -> str | None:
    """The principal's name of the request's token (`Tokens.name_of`), None when it carries none of them. The scheme
    is read in any case, with any spaces around the token; the header is then rewritten as claimcheck writes it,
    since the principal below is keyed by it (`owners.principal`): `bearer X` and `Bearer X` are one principal."""
    headers = scope.get("headers", [])
    given = dict(headers).get(b"authorization", b"")
    written = _as_written(given)
    name = tokens.name_of(written)
    if name is not None and written != given:
        scope["headers"] = [(key, written if key == b"authorization" else value) for key, value in headers]
    return name


def _as_written(authorization: bytes) -> bytes:
    """`Bearer TOKEN` for any case of the scheme and any spaces around the token (RFC 9110: the scheme is
    case-insensitive); any other value as it came."""
    scheme, _, token = authorization.strip().partition(b" ")
    return b"Bearer " + token.strip() if scheme.lower() == b"bearer" and token.strip() else authorization


async def _refuse(send: Send, given: bytes) -> None:
    """401 saying what to send (RFC 6750: `error="invalid_token"` when a token was sent and is not accepted)."""
    if _as_written(given).startswith(b"Bearer "):
        said, challenge = "this bearer token is not one claimcheck accepts", b'Bearer error="invalid_token"'
    else:
        said, challenge = "no bearer token", b"Bearer"
    fix = "send `Authorization: Bearer <token>`, the token of --auth-token-env or of --auth-tokens-file"
    body = f'{{"error": "{said}: {fix}"}}'.encode()
    headers = [(b"content-type", b"application/json"), (b"www-authenticate", challenge)]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _header(token: str) -> bytes:
    return f"Bearer {token}".encode()
