"""What a downstream call needs from the upstream request that caused it.

A downstream's progress, log messages, sampling and elicitation requests arrive on the downstream
connection; the `Relay` of the upstream request carries them to the client that asked.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, Protocol, TypeVar

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata

__all__ = ["LOG_LEVELS", "Relay", "RequestRelay"]

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


class Relay(Protocol):
    """The upstream side of one forwarded call."""

    async def progress(self, progress: float, total: float | None, message: str | None) -> None: ...

    async def log(self, params: types.LoggingMessageNotificationParams) -> None: ...

    async def sample(self, params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData: ...

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData: ...


class RequestRelay:
    """A `Relay` bound to one upstream request context."""

    def __init__(self, ctx: ServerRequestContext[Any], min_log_level: types.LoggingLevel | None = None) -> None:
        self._ctx = ctx
        self._min_log = LOG_LEVELS.index(min_log_level) if min_log_level is not None else 0

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
