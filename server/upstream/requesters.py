"""Who a proxied call is for, as the servers' scopes see it (`server.downstream.scopes`): the client's connection,
its owner, whether it declared roots, and how to ask it for them outside a request."""

from __future__ import annotations

import uuid
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession

from server.downstream.pool import Route
from server.downstream.relay import ClientChannel, Relay, RootsParams, declares_roots, no_roots
from server.downstream.scopes import Requester
from server.errors import NoBackChannel
from server.handles.owners import connection_of
from server.handles.session import Session
from server.proxy import Proxy

__all__ = ["connection_key", "for_client", "requester_of"]

_KEY = "claimcheck.connection"


def connection_key(proxy: Proxy, ctx: ServerRequestContext[Any], session: Session) -> str:
    """A name for the connection `ctx` came on, made on its first use; when the connection closes, the processes
    that were its own stop. A sessionless (2026-07-28) request's is its claimcheck session's id."""
    connection = connection_of(ctx)
    if connection is None:
        return session.id
    key = connection.state.get(_KEY)
    if not isinstance(key, str):
        key = connection.state[_KEY] = uuid.uuid4().hex

        async def closed() -> None:
            proxy.pool.connection_closed(key)

        connection.exit_stack.push_async_callback(closed)
    return key


def requester_of(proxy: Proxy, ctx: ServerRequestContext[Any], session: Session) -> Requester:
    connection = connection_key(proxy, ctx, session)
    client = ctx.session
    lists_roots = connection_of(ctx) is not None and declares_roots(client)

    async def ask_roots() -> types.ListRootsResult | types.ErrorData:
        return await _ask_roots(client)

    owner = session.owner or connection
    asker = ask_roots if lists_roots else None
    return Requester(connection, owner, session.principal, lists_roots, asker)


async def for_client(
    proxy: Proxy, ctx: ServerRequestContext[Any], route: Route, session: Session, relay: Relay | None = None
) -> Route:
    """`route` with the server's process for this request's client (`Pool.for_client`); `relay`: the request's."""
    if not proxy.pool.many_clients:  # the one client's roots, in place before its call
        await route.downstream.roots_in_place.wait(route.downstream)
        return route
    return await proxy.pool.for_client(route, requester_of(proxy, ctx, session), relay)


async def _ask_roots(client: ServerSession) -> types.ListRootsResult | types.ErrorData:
    """The client's roots, asked on its connection's own channel (its standing stream over HTTP)."""
    try:
        answer = await ClientChannel(client).ask(RootsParams())
    except NoBackChannel:
        return no_roots()
    if isinstance(answer, types.ListRootsResult | types.ErrorData):
        return answer
    return types.ErrorData(code=types.INTERNAL_ERROR, message="a roots request got another kind of answer")
