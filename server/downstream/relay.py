"""What a downstream call needs from the upstream request that caused it.

A downstream's progress, log messages, sampling, elicitation and roots requests arrive on the downstream
connection; the `Relay` of the upstream request carries them to the client that asked. A
`ClientChannel` puts such a request to a client outside any request of its own, where its
connection allows that (server.handles.questions).
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, Protocol, TypeVar

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from extraction.wording import plural
from server.errors import NoBackChannel

__all__ = ["LOG_LEVELS", "ClientChannel", "Relay", "RequestRelay", "RootsParams", "declares_roots", "no_roots"]

logger = logging.getLogger(__name__)

LOG_LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_R = TypeVar("_R", bound=types.Result)
_SAMPLING = types.ClientCapabilities(sampling=types.SamplingCapability())
_ELICITATION = types.ClientCapabilities(elicitation=types.ElicitationCapability())
_ROOTS = types.ClientCapabilities(roots=types.RootsCapability())


class RootsParams(types.RequestParams):
    """The params of a downstream's `roots/list` request (a type of their own, to tell the question kinds apart)."""


def declares_roots(session: ServerSession) -> bool:
    """Whether the client of `session` can be asked for its roots: a handshake-era client that declared them
    (2026-07-28 has no server-to-client requests, and deprecates roots)."""
    return session.protocol_version not in MODERN_PROTOCOL_VERSIONS and session.check_client_capability(_ROOTS)


def no_roots() -> types.ErrorData:
    """What a downstream's `roots/list` gets when the client cannot give roots (the spec's error for it).

    claimcheck declares the roots capability to every server whatever its clients: a server is connected
    once, before any client comes and for all of them."""
    return types.ErrorData(
        code=types.METHOD_NOT_FOUND,
        message="Roots not supported: the client behind claimcheck did not declare the roots capability",
    )


class Relay(Protocol):
    """The upstream side of one forwarded call."""

    def reaches_client(self) -> bool:
        """Whether sampling and elicitation requests can be put to the client through this relay now."""
        ...

    async def progress(self, progress: float, total: float | None, message: str | None) -> None: ...

    async def log(self, params: types.LoggingMessageNotificationParams) -> None: ...

    async def sample(self, params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData: ...

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData: ...

    async def list_roots(self, params: RootsParams) -> types.ListRootsResult | types.ErrorData: ...


class RequestRelay:
    """A `Relay` bound to one upstream request context."""

    def __init__(self, ctx: ServerRequestContext[Any], min_log_level: types.LoggingLevel | None = None) -> None:
        self._ctx = ctx
        self._min_log = LOG_LEVELS.index(min_log_level) if min_log_level is not None else 0

    def reaches_client(self) -> bool:
        return self._ctx.session.can_send_request

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self._ctx.session.report_progress(progress, total, message)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        if LOG_LEVELS.index(params.level) < self._min_log:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await self._ctx.session.send_log_message(
                params.level, params.data, logger=params.logger, related_request_id=self._ctx.request_id
            )

    async def sample(self, params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData:
        if not self._ctx.session.check_client_capability(_SAMPLING):
            return types.ErrorData(code=types.INVALID_REQUEST, message="the client behind claimcheck cannot sample")
        return await self._ask(types.CreateMessageRequest(params=params), types.CreateMessageResult)

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        if not self._ctx.session.check_client_capability(_ELICITATION):
            return types.ErrorData(code=types.INVALID_REQUEST, message="the client behind claimcheck cannot elicit")
        return await self._ask(types.ElicitRequest(params=params), types.ElicitResult)

    async def list_roots(self, params: RootsParams) -> types.ListRootsResult | types.ErrorData:
        if not declares_roots(self._ctx.session):
            return no_roots()
        return await self._ask(types.ListRootsRequest(params=_roots_params(params)), types.ListRootsResult)

    async def _ask(self, request: types.ServerRequest, result_type: type[_R]) -> _R | types.ErrorData:
        metadata = ServerMessageMetadata(related_request_id=self._ctx.request_id)
        try:
            return await self._ctx.session.send_request(request, result_type, metadata=metadata)
        except NoBackChannelError:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message="the client behind claimcheck speaks protocol 2026-07-28, which has no back-channel for this",
            )
        except MCPError as exc:
            return exc.error
        except ValidationError as exc:
            return _invalid_answer(exc)


class ClientChannel:
    """Requests to a handshake-era client on its connection's own channel, outside any request of its.

    Over stdio that is the pipe; over streamable HTTP the client's standing GET stream (a request
    sent while it has none waits in the event store for it).
    """

    def __init__(self, session: ServerSession) -> None:
        self._session = session

    def can_ask(self, kind: str) -> bool:
        if self._session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return False
        wanted = {"sampling": _SAMPLING, "elicitation": _ELICITATION, "roots": _ROOTS}[kind]
        return self._session.check_client_capability(wanted)

    async def ask(
        self, params: types.CreateMessageRequestParams | types.ElicitRequestParams | RootsParams
    ) -> types.CreateMessageResult | types.ElicitResult | types.ListRootsResult | types.ErrorData:
        """The client's answer, or its error; `NoBackChannel` when it cannot be asked after all."""
        try:
            if isinstance(params, RootsParams):
                roots = types.ListRootsRequest(params=_roots_params(params))
                return await self._session.send_request(roots, types.ListRootsResult)
            if isinstance(params, types.CreateMessageRequestParams):
                request = types.CreateMessageRequest(params=params)
                return await self._session.send_request(request, types.CreateMessageResult)
            return await self._session.send_request(types.ElicitRequest(params=params), types.ElicitResult)
        except MCPError as exc:
            return exc.error
        except ValidationError as exc:
            return _invalid_answer(exc)
        except (NoBackChannelError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise NoBackChannel(f"the client cannot be asked: {type(exc).__name__}") from None


def _roots_params(params: RootsParams) -> types.RequestParams | None:
    """The wire params of a `roots/list` request: none, unless they carry a `_meta` (a task's relation)."""
    return types.RequestParams(_meta=params.meta) if params.meta else None


def _invalid_answer(exc: ValidationError) -> types.ErrorData:
    return types.ErrorData(
        code=types.INVALID_PARAMS,
        message=f"the client's answer is not a valid result ({plural(exc.error_count(), 'problem')})",
    )
