"""The MCP requests about resources, prompts and completion; each goes to the server `Offerings` names, except
the session's own stored outputs (`claimcheck://output/…`, `server.handles.resources`), which claimcheck serves.

Lists are served whole, in one page. A downstream's failure comes back as a JSON-RPC error naming
the server (these are not tool calls: there is no isError result to carry it). A server that does
not offer completion answers with no suggestions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from server import sdk_compat
from server.downstream.offerings import offers
from server.downstream.relay import RequestRelay
from server.downstream.requests import forward_request
from server.errors import clip
from server.handles.mirrors import lookup
from server.handles.questions import RequestQuestions
from server.handles.resources import OutputUnknown, handle_of, listed, read_output
from server.handles.sessions import Session
from server.proxy import Proxy

_T = TypeVar("_T")

__all__ = ["install"]

logger = logging.getLogger(__name__)

_CLEANUP_KEY = "claimcheck.resource-subscriptions"


def install(server: Server[Proxy], proxy: Proxy) -> None:
    """Serve resources, prompts and completion on `server`, and follow the URIs listen streams name."""
    offerings = proxy.offerings

    async def list_resources(ctx: ServerRequestContext[Proxy], params: Any) -> types.ListResourcesResult:
        await proxy.pool.listable()
        session = _watched(ctx, proxy)
        return types.ListResourcesResult(resources=[*offerings.resources(), *listed(session)])

    async def list_templates(ctx: ServerRequestContext[Proxy], params: Any) -> types.ListResourceTemplatesResult:
        await proxy.pool.listable()
        return types.ListResourceTemplatesResult(resource_templates=offerings.templates())

    async def list_prompts(ctx: ServerRequestContext[Proxy], params: Any) -> types.ListPromptsResult:
        await proxy.pool.listable()
        return types.ListPromptsResult(prompts=offerings.prompts())

    async def routed(find: Callable[[], _T]) -> _T:
        """What `find` names once the servers are listable; a name not known yet waits (at most the start-up
        wait again) for servers still starting, since the one that has it may be among them."""
        await proxy.pool.listable()
        try:
            return find()
        except MCPError:
            with anyio.move_on_after(proxy.config.settings.startup_wait_secs):
                await proxy.pool.settled()
            return find()

    async def read_resource(
        ctx: ServerRequestContext[Proxy], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = params.uri
        if handle_of(uri) is not None:
            settings = proxy.config.settings
            threshold = settings.async_token_threshold
            try:
                return await read_output(uri, _watched(ctx, proxy), proxy.sessions, threshold=threshold)
            except OutputUnknown as exc:
                raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        server = await routed(lambda: offerings.resource_server(uri))
        relay = _relay(ctx, proxy, f'resources/read "{clip(uri)}"')
        return await forward_request(server, "resources/read", lambda client: client.read_resource(uri), relay)

    async def get_prompt(
        ctx: ServerRequestContext[Proxy], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        route = await routed(lambda: offerings.prompt(params.name))
        arguments = params.arguments
        relay = _relay(ctx, proxy, f'prompts/get "{route.public}"')
        return await forward_request(
            route.downstream, "prompts/get", lambda client: client.get_prompt(route.name, arguments), relay
        )

    async def complete(ctx: ServerRequestContext[Proxy], params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            name = ref.name
            route = await routed(lambda: offerings.prompt(name))
            downstream, ref = route.downstream, ref.model_copy(update={"name": route.name})
        else:
            uri_template = ref.uri
            downstream = await routed(lambda: offerings.template_server(uri_template))
        if not offers(downstream, "completions"):
            return types.CompleteResult(completion=types.Completion(values=[]))
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None
        return await forward_request(
            downstream, "completion/complete", lambda client: client.complete(ref, argument, context)
        )

    async def subscribe(ctx: ServerRequestContext[Proxy], params: types.SubscribeRequestParams) -> types.EmptyResult:
        if handle_of(params.uri) is not None:
            session = _watched(ctx, proxy)
            if not await _owns(proxy, session, params.uri):
                raise MCPError(code=types.INVALID_PARAMS, message=f'Unknown resource "{clip(params.uri)}"')
            proxy.output_watch.subscribe(_client_key(ctx, proxy), session.id, ctx.session, params.uri)
            return types.EmptyResult()
        await proxy.pool.listable()
        downstream = offerings.resource_server(params.uri)
        await offerings.subscriptions.follow(_client_key(ctx, proxy), ctx.session, params.uri, downstream)
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Proxy], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        if handle_of(params.uri) is not None:
            proxy.output_watch.unsubscribe(_client_key(ctx, proxy), params.uri)
            return types.EmptyResult()
        await offerings.subscriptions.unfollow(_client_key(ctx, proxy), params.uri)
        return types.EmptyResult()

    server.add_request_handler("resources/list", types.PaginatedRequestParams, list_resources)
    server.add_request_handler("resources/templates/list", types.PaginatedRequestParams, list_templates)
    server.add_request_handler("resources/read", types.ReadResourceRequestParams, read_resource)
    server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
    server.add_request_handler("prompts/list", types.PaginatedRequestParams, list_prompts)
    server.add_request_handler("prompts/get", types.GetPromptRequestParams, get_prompt)
    server.add_request_handler("completion/complete", types.CompleteRequestParams, complete)

    listen = server.get_request_handler("subscriptions/listen")
    if listen is None:
        return
    serve_stream = listen.handler

    async def listen_following(
        ctx: ServerRequestContext[Proxy], params: types.SubscriptionsListenRequestParams
    ) -> HandlerResult:
        """A 2026-era client follows URIs for as long as its listen stream is open."""
        await proxy.pool.listable()
        held: list[str] = []
        params = await _own_outputs_only(ctx, proxy, params)
        for uri in params.notifications.resource_subscriptions or ():
            if handle_of(uri) is not None:
                continue  # the session's own output: told by `proxy.output_watch`, no server to subscribe
            try:
                await offerings.subscriptions.hold(uri, offerings.resource_server(uri))
            except MCPError as exc:  # honoured all the same: it never fires, as for a URI nobody has
                logger.info("a listen stream follows %s, which no server updates: %s", clip(uri), exc.error.message)
            else:
                held.append(uri)
        try:
            return await serve_stream(ctx, params)
        finally:
            with anyio.CancelScope(shield=True):
                for uri in held:
                    await offerings.subscriptions.release(uri)

    server.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams, listen_following)


def _relay(ctx: ServerRequestContext[Proxy], proxy: Proxy, about: str) -> RequestQuestions:
    """The request's relay; a sampling or elicitation request it cannot carry waits in the session's inbox."""
    session = proxy.sessions.for_request(ctx)
    return RequestQuestions(RequestRelay(ctx, proxy.log_level), session.inbox, about, lists_roots=session.lists_roots)


def _watched(ctx: ServerRequestContext[Proxy], proxy: Proxy) -> Session:
    """The asking client's session; a handshake-era client is noted as one of it, to hear its list changes."""
    session = proxy.sessions.for_request(ctx)
    if sdk_compat.connection_of(ctx.session) is not None:
        proxy.output_watch.attach(_client_key(ctx, proxy), session.id, ctx.session)
    return session


async def _owns(proxy: Proxy, session: Session, uri: str) -> bool:
    handle = handle_of(uri)
    return handle is not None and (await lookup(proxy.sessions, session, [handle]))[0] is not None


async def _own_outputs_only(
    ctx: ServerRequestContext[Proxy], proxy: Proxy, params: types.SubscriptionsListenRequestParams
) -> types.SubscriptionsListenRequestParams:
    """`params` without the output URIs that are not of the asking session's outputs: a stream hears only of its
    own (a URI alone proves nothing of who asks)."""
    uris = params.notifications.resource_subscriptions
    if not uris or not any(handle_of(uri) is not None for uri in uris):
        return params
    session = proxy.sessions.for_request(ctx)
    kept = [uri for uri in uris if handle_of(uri) is None or await _owns(proxy, session, uri)]
    notifications = params.notifications.model_copy(update={"resource_subscriptions": kept or None})
    return params.model_copy(update={"notifications": notifications})


def _client_key(ctx: ServerRequestContext[Proxy], proxy: Proxy) -> object:
    """The client connection a handshake-era subscription belongs to; its URIs are released when it closes."""
    connection = sdk_compat.connection_of(ctx.session)
    if connection is None:
        return ctx.session
    if _CLEANUP_KEY not in connection.state:
        connection.state[_CLEANUP_KEY] = True
        connection.exit_stack.push_async_callback(proxy.offerings.subscriptions.forget, connection)

        async def unwatch() -> None:
            proxy.output_watch.forget(connection)

        connection.exit_stack.push_async_callback(unwatch)
    return connection
