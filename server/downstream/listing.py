"""Reading a downstream's paginated lists (tools, resources, templates, prompts) and naming its failures."""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from server.errors import ProcessNotStarted, RemoteRefused

__all__ = ["MAX_PAGES", "UNANSWERED", "UNKNOWN_HOST", "describe", "every_page", "offered_list", "unreachable"]

logger = logging.getLogger(__name__)

MAX_PAGES = 1000
"""A server whose cursor never ends is read this far and no further."""


async def every_page(list_page: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    """The items of every page, following `nextCursor`."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await list_page(cursor=cursor)
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


async def offered_list(server: str, list_page: Callable[..., Awaitable[Any]], field: str, offered: object) -> list[Any]:
    """Every item of a list `server` offers (`offered` is its capability), following `nextCursor`;
    a list it cannot give is empty (and logged, unless the server simply lacks the method)."""
    if offered is None:
        return []
    try:
        return await every_page(list_page, field)
    except (MCPError, ValidationError) as exc:
        if not isinstance(exc, MCPError) or exc.error.code != types.METHOD_NOT_FOUND:
            logger.warning("server %r could not list its %s: %s", server, field.replace("_", " "), describe(exc))
        return []


def describe(exc: BaseException) -> str:
    """A one-line reason, looking inside exception groups for the first real cause."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, RemoteRefused | ProcessNotStarted):
        return str(exc)
    if isinstance(exc, MCPError):
        return f"{exc.error.message} (JSON-RPC error {exc.error.code})"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, httpx2.HTTPStatusError):  # the legacy SSE client's: two lines, the second a link to MDN
        return f"HTTP {exc.response.status_code} {exc.response.reason_phrase} (from {exc.request.url})"
    if isinstance(exc, httpx2.ConnectError):
        return unreachable(exc)
    if isinstance(exc, httpx2.ConnectTimeout):
        return f"{UNANSWERED} (it timed out)"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


UNKNOWN_HOST = "its host name is not known"
"""How a URL whose host does not resolve is said (`doctor` tells this from the rest by it)."""
UNANSWERED = "nothing answered a connection there"
"""How a URL where nothing accepts a connection is said."""


def unreachable(exc: httpx2.ConnectError) -> str:
    """Why a connection to a server's URL was not made, in words: its host unknown, or nothing listening."""
    cause: BaseException | None = exc
    for _ in range(8):  # the chain is short: httpx's error, anyio's, the socket's
        if cause is None:
            break
        if isinstance(cause, socket.gaierror):
            return f"{UNKNOWN_HOST} ({cause.strerror or cause})"
        cause = cause.__cause__ or cause.__context__
    return f"{UNANSWERED} (refused or unreachable: {exc})" if str(exc) else f"{UNANSWERED} (refused or unreachable)"
