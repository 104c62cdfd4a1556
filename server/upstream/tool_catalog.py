"""`find_tools` and `call_tool` on the MCP surface (`settings.catalog`), and what `tools/list` answers.

A found tool joins the asking client's `tools/list`. For a handshake-era client that is its connection's list (its
MCP session: two sub-agents sharing one claimcheck session, as under the shared claimcheck, keep lists of their
own), and it is told with `notifications/tools/list_changed` on that connection, so only it refreshes. A
2026-07-28 client has no connection: its list is the one of the claimcheck session its requests are keyed to (over
stdio the one client's, over HTTP its owner's or its name's and `Claimcheck-Session`'s), and its next `tools/list`
holds what it found; over stdio, where it is the only client, its `subscriptions/listen` stream hears of the change
too. Over HTTP nothing is published on the shared bus, which every client's stream would hear. Whatever the client
does with the list, `call_tool` runs any found tool by name, and so does a direct call by its name.
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from server import sdk_compat
from server.errors import OwnToolError
from server.handles.catalog_tools import CALL_TOOL, CATALOG_TOOLS, FIND_TOOLS, parse_call, parse_find
from server.handles.files import FILE_TOOLS
from server.handles.own_registry import own_tool_definitions
from server.handles.own_tools import OWN_TOOLS
from server.handles.session import Session
from server.handles.tool_catalog import Found, find_answer, listed_routes
from server.proxy import Proxy
from server.upstream.replies import text_result

__all__ = ["INSTRUCTIONS", "answers", "client_tools", "find_tools", "found_by", "inner_call", "searching"]

logger = logging.getLogger(__name__)

_FOUND_KEY = "claimcheck.found-tools"

INSTRUCTIONS = (
    "When your tool list has find_tools, the servers' other tools are behind it: call find_tools with what you need "
    "to do, then call the tool it names (or call_tool with its name and arguments)."
)


def searching(proxy: Proxy) -> bool:
    """Whether `tools/list` shows the catalog behind `find_tools` now."""
    return proxy.pool.tool_search.searching(proxy.pool.routes)


def answers(proxy: Proxy, name: str) -> bool:
    """Whether a call of `name` is `find_tools` or `call_tool` (in "auto" even while the list is full, for a
    client that kept them; never in front of a server tool of that name)."""
    if name not in CATALOG_TOOLS or proxy.config.settings.catalog == "full":
        return False
    return searching(proxy) or proxy.pool.route(name) is None


def found_by(ctx: ServerRequestContext[Proxy], session: Session) -> Found:
    """The tools the asking client found: its connection's (handshake era), else its session's."""
    connection = sdk_compat.connection_of(ctx.session)
    if connection is None or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return session.found_tools
    kept = connection.state.setdefault(_FOUND_KEY, {})
    assert isinstance(kept, dict)
    return kept


def client_tools(proxy: Proxy, found: Found | None = None) -> list[types.Tool]:
    """What `tools/list` answers now: claimcheck's own tools (marked as its own), then the servers' tools; when
    searching, `find_tools`, `call_tool`, the pinned tools and the ones in `found` instead of them all."""
    reserved = OWN_TOOLS | FILE_TOOLS
    own = own_tool_definitions(proxy.config.settings)
    if not searching(proxy):
        return [*own, *(t for t in proxy.pool.tools() if t.name not in reserved)]
    return [*own, *(t for t in listed_routes(proxy.pool, found if found is not None else {}) if t.name not in reserved)]


async def find_tools(
    proxy: Proxy, ctx: ServerRequestContext[Proxy], session: Session, arguments: dict[str, Any] | None
) -> types.CallToolResult:
    """Answer `find_tools`, adding what it found to the session's list and telling the client."""
    await proxy.pool.listable()
    text, added = find_answer(proxy.pool, found_by(ctx, session), parse_find(arguments))
    if added and searching(proxy):
        await _tell(proxy, ctx)
    return text_result(text)


def inner_call(params: types.CallToolRequestParams) -> types.CallToolRequestParams:
    """The call `call_tool` stands for: its tool and arguments, with the request's `_meta` (progress token,
    pass-through mark), so it takes the very path a direct call would."""
    args = parse_call(params.arguments)
    if args.name in CATALOG_TOOLS:
        raise OwnToolError(f"{CALL_TOOL} runs the servers' tools; call {FIND_TOOLS} or {CALL_TOOL} directly.")
    return params.model_copy(update={"name": args.name, "arguments": args.arguments})


async def _tell(proxy: Proxy, ctx: ServerRequestContext[Proxy]) -> None:
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        try:
            await ctx.session.send_tool_list_changed()
        except Exception:  # boundary: a client that cannot be told still has its answer and call_tool
            logger.debug("could not tell a client its tool list changed", exc_info=True)
    elif not proxy.pool.many_clients:
        await proxy.bus.publish(ToolsListChanged())
