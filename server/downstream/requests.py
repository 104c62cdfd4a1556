"""Requests to a downstream that are not tool calls (resources, prompts, completions, subscriptions): forwarded
through its live client, with its failures as JSON-RPC errors naming the server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from extraction.wording import plural
from server.downstream.relay import Relay
from server.downstream.server import Downstream
from server.downstream.tool_call import DOWNSTREAM_MESSAGE_LIMIT, client_of, connection_failed
from server.errors import DownstreamError, clip

__all__ = ["forward_request"]

_T = TypeVar("_T")


async def forward_request(
    downstream: Downstream, method: str, send: Callable[[Client], Awaitable[_T]], relay: Relay | None = None
) -> _T:
    """Forward one request that is not a tool call; failures become JSON-RPC errors naming the server.

    With a `relay`, the server's sampling and elicitation requests meanwhile go through it.
    """

    def failed(reason: str, code: int = types.INTERNAL_ERROR, data: Any = None) -> MCPError:
        return MCPError(code=code, message=f'Server "{downstream.name}" failed on {method}: {reason}', data=data)

    try:
        client = await client_of(downstream, method)
    except DownstreamError as exc:
        raise failed(exc.reason) from None
    timeout = downstream.config.timeout
    try:
        with downstream.in_flight.track(relay), anyio.move_on_after(timeout):
            return await send(client)
    except MCPError as exc:
        if exc.error.code != types.CONNECTION_CLOSED:
            message = clip(exc.error.message, DOWNSTREAM_MESSAGE_LIMIT)
            raise failed(message, exc.error.code, exc.error.data) from None
        downstream.mark_broken("the connection closed during a request")
        raise failed("the server closed the connection (it may have crashed)") from None
    except (httpx2.HTTPError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        raise failed(connection_failed(downstream, method, exc).reason) from None
    except ValidationError as exc:
        raise failed(f"the server's answer is not a valid result ({plural(exc.error_count(), 'problem')})") from None
    raise failed(f"no answer within the server's timeout of {timeout:g} s (mcpServers.{downstream.name}.timeout)")
