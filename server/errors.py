"""Errors raised by the server package.

```
ClaimcheckError
├── ConfigError          the config file is missing, unreadable, malformed or names an unset ${VAR}
├── StartupError         something outside the config stops the start: a port taken, an extra not installed, Redis not
│                        answering, a directory claimcheck cannot use; the message names the fix
├── RemoteRefused        a server reached over HTTP refused claimcheck (401/403): the status and the header to check
├── ToolNotFound         no tool of that name (own or proxied)
├── DownstreamError      a downstream server could not answer a call
│   ├── DownstreamUnavailable   it is not running and could not be (re)started
│   └── DownstreamTimeout       the call exceeded the server's `timeout`
├── OwnToolError         bad input to one of claimcheck's own tools (server.handles.own_tools, .waiting)
├── OverShare            a principal is at one of its fair shares (`settings.limits`; server.handles.shares)
├── NoBackChannel        the client cannot be sent a request of claimcheck's (server.downstream.relay)
├── StoreError           an output could not be written or read (server.handles.store)
├── StateUnavailable     the shared state of replicas (Redis) cannot be reached (server.handles.state)
└── IssuerUnavailable    an OAuth issuer's metadata, keys or introspection did not answer (server.upstream.oauth_fetch)
```

Each becomes an isError result in exactly one place (`server.upstream.surface`). A `ConfigError` or a
`StartupError` that reaches the top of the `claimcheck` command (`server.launch`), alone or inside exception
groups, is printed as one line and the command exits with status 2 (`EXIT_USAGE`); anything else is a bug and
keeps its traceback. Whatever a message quotes of a client's input goes through
`clip` first, so a huge input never comes back huge.
"""

from __future__ import annotations

from pydantic import ValidationError
from pydantic_core import ErrorDetails

__all__ = [
    "EXIT_USAGE",
    "QUOTE_LIMIT",
    "ClaimcheckError",
    "ConfigError",
    "DownstreamError",
    "DownstreamTimeout",
    "DownstreamUnavailable",
    "IssuerUnavailable",
    "NoBackChannel",
    "OverShare",
    "OwnToolError",
    "RemoteRefused",
    "StartupError",
    "ToolNotFound",
    "clip",
    "problems",
]

EXIT_USAGE = 2
"""The exit status of a `claimcheck` command stopped by something its user can fix (a `ConfigError`, a
`StartupError`, a wrong flag): argparse's own status for a usage error."""

QUOTE_LIMIT = 200
"""The most characters of one client input that any message quotes."""


def clip(value: object, limit: int = QUOTE_LIMIT) -> str:
    """`value` (a string, else its repr) for quoting in a message: at most `limit` characters of it,
    followed by `…(N bytes)` with its whole size when it was longer."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return text
    size = len(text.encode("utf-8", "surrogatepass"))
    return f"{text[:limit]}…({size} bytes)"


PROBLEMS_SHOWN = 5


def problems(exc: ValidationError) -> str:
    """What is wrong with a client's arguments: the first few problems, each naming where (clipped)."""
    errors = exc.errors(include_url=False, include_input=False)
    shown = [
        f"{'.'.join(clip(part, 60) for part in error['loc']) or 'arguments'}: {clip(_said(error))}"
        for error in errors[:PROBLEMS_SHOWN]
    ]
    more = f"; and {len(errors) - PROBLEMS_SHOWN} more" if len(errors) > PROBLEMS_SHOWN else ""
    return "; ".join(shown) + more


def _said(error: ErrorDetails) -> str:
    """pydantic's message, without the names of claimcheck's own classes (`instance of SliceArgs`) or its steps."""
    if error["type"] in ("model_type", "model_attributes_type", "dataclass_type"):
        return "Input should be an object"
    return str(error["msg"]).replace(" after validation", "").removeprefix("Value error, ")


class ClaimcheckError(Exception):
    """Base of every error claimcheck raises on purpose."""


class ConfigError(ClaimcheckError):
    """The configuration cannot be used; the message names the file and the key path."""


class StartupError(ClaimcheckError):
    """claimcheck cannot start as asked, for a reason outside the config file's validity; the message is one line
    that names what is wrong and the fix (`port 8765 is taken; use --port 0 or another port`)."""


class RemoteRefused(ClaimcheckError):
    """A server reached over HTTP answered 401 or 403; the message names the URL, the HTTP status and the header
    of `mcpServers.<name>.headers` to check."""


class ProcessNotStarted(ClaimcheckError, OSError):
    """A stdio server's program could not be started: not found, not runnable, or its `cwd` is no directory; the
    message says which, and what to do."""


class ToolNotFound(ClaimcheckError):
    """The client named a tool claimcheck does not offer."""


class DownstreamError(ClaimcheckError):
    """A downstream server failed to answer a tool call."""

    def __init__(self, server: str, tool: str, reason: str) -> None:
        super().__init__(f'Server "{server}" failed on tool "{tool}": {reason}')
        self.server = server
        self.tool = tool
        self.reason = reason


class DownstreamUnavailable(DownstreamError):
    """The downstream is not running and could not be started."""


class DownstreamTimeout(DownstreamError):
    """The call ran past the server's hard `timeout`."""


class IssuerUnavailable(ClaimcheckError):
    """An OAuth issuer's metadata, signing keys or introspection endpoint gave no usable answer; the message
    says which URL and why, `status` the HTTP status if one came. A request that needed it is answered 503, and
    claimcheck serves on."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class OwnToolError(ClaimcheckError):
    """A call of one of claimcheck's own tools that cannot be answered; the message is the whole answer."""


class OverShare(ClaimcheckError):
    """The asking principal holds all of one of its fair shares; the message names the setting and when one
    frees. Every other principal is served as before."""


class NoBackChannel(ClaimcheckError):
    """The client's connection cannot carry a request from claimcheck (2026-07-28, or it is gone)."""
