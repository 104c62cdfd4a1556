"""Every private part of starlette and uvicorn claimcheck uses, in one place: what it is, why, and what would
replace it. tests/test_compat_canary.py fails, naming the entry, when one moves or changes shape."""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import Send

# uvicorn's HTTP/1.1 protocol (an implementation module, not uvicorn's API). The status API and the HTTP
# transport subclass it to close a connection whose request is not complete by a deadline, a slow-client
# guard uvicorn lacks; the subclass uses its `conn` (the h11 connection), `transport`, `loop` and `client`, and
# extends `connection_made`, `data_received`, `on_response_complete` and `connection_lost`. Would be replaced
# by: a request-header/body timeout in uvicorn's config.
from uvicorn.protocols.http.h11_impl import H11Protocol as H11Protocol

__all__ = ["H11Protocol", "send_of"]


def send_of(request: Request) -> Send:
    """The ASGI `send` of a request, which the SDK's SSE transport needs to stream its events itself. Starlette
    keeps it private on the Request of a plain route. Would be replaced by: mounting the SSE endpoint as an
    ASGI app (which gets `send` directly)."""
    send: Send = request._send
    return send
