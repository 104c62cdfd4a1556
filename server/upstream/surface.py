"""claimcheck's MCP surface: the low-level `Server` clients talk to.

This is the one place where errors become isError results.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from server import sdk_compat
from server.downstream.chain import CAPABILITY, asks_passthrough
from server.downstream.relay import ClientChannel, RequestRelay
from server.errors import QUOTE_LIMIT, ClaimcheckError, ToolNotFound, clip, problems
from server.handles.calls import Call
from server.handles.files import FILE_TOOLS, run_file_tool
from server.handles.own_tools import OWN_TOOLS, run_own_tool
from server.handles.sessions import Session
from server.proxy import Proxy
from server.upstream import mcp_tasks, offerings_surface, tool_catalog
from server.upstream.extracting import InputRequired, extract_function, llm_available
from server.upstream.forwarding import forward
from server.upstream.mcp_tasks import request_asker
from server.upstream.replies import error_result, with_footer
from server.upstream.requesters import connection_key, requester_of
from server.upstream.standing import StandingStreams
from server.upstream.tool_catalog import client_tools
from server.version import VERSION

__all__ = ["VERSION", "build_server", "client_tools", "initialization_options"]

_CHANNEL_KEY = "claimcheck.questions-channel"
_T = TypeVar("_T")

_INSTRUCTIONS = (
    "claimcheck forwards the tools of several MCP servers, each named <server>__<tool>. "
    "A call that takes long, or any call with background=true, returns a handle at once and keeps running; "
    "an output too large for your context is stored whole and returns a handle. "
    "Use wait_for_tool_output to wait for running calls, tool_output to read or extract from an output, "
    "list_tool_outputs and cancel_tool_output to manage them. "
    "Errors of a downstream server come back as error results naming the server and tool."
)


def build_server(proxy: Proxy, standing: StandingStreams | None = None) -> Server[Proxy]:
    """A server whose handlers forward to `proxy`'s downstreams; `standing` watches streamable HTTP's GET streams."""

    @asynccontextmanager
    async def lifespan(_: Server[Proxy]) -> AsyncIterator[Proxy]:
        yield proxy

    async def list_tools(
        ctx: ServerRequestContext[Proxy], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        await proxy.pool.listable()
        if not tool_catalog.searching(proxy):
            return types.ListToolsResult(tools=client_tools(proxy))
        found = tool_catalog.found_by(ctx, proxy.sessions.for_request(ctx))
        return types.ListToolsResult(tools=client_tools(proxy, found))

    async def call_tool(
        ctx: ServerRequestContext[Proxy], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        session, origin = proxy.sessions.seat(ctx)
        _keep_channel(ctx, session, standing)
        try:
            if params.name == "wait_for_tool_output":
                result, about = await _carrying_questions(ctx, session, _answer(ctx, params, session, origin))
            else:
                result, about = await _answer(ctx, params, session, origin)
        except InputRequired as needed:  # a 2026-07-28 client answers sampling requests, then calls again
            return needed.result
        except ClaimcheckError as exc:
            result, about = error_result(str(exc)), None
        if not proxy.config.settings.status_footer or asks_passthrough(params):
            return result
        return with_footer(result, session, about, questions=params.name != "wait_for_tool_output")

    async def _answer(
        ctx: ServerRequestContext[Proxy], params: types.CallToolRequestParams, session: Session, origin: str
    ) -> tuple[types.CallToolResult, Call | None]:
        if tool_catalog.answers(proxy, params.name):
            if params.name == "find_tools":
                return await tool_catalog.find_tools(proxy, ctx, session, params.arguments), None
            return await _answer(ctx, tool_catalog.inner_call(params), session, origin)  # a direct call's very path
        if params.name in OWN_TOOLS:
            settings = proxy.config.settings
            threshold = settings.async_token_threshold
            result = await run_own_tool(
                params.name,
                params.arguments,
                session=session,
                origin=origin,
                sessions=proxy.sessions,
                settings=settings,
                threshold=threshold,
                report=RequestRelay(ctx).progress,
                extract=extract_function(proxy, ctx, session, threshold, params),
                llm=llm_available(settings.extraction, ctx),
            )
            return result, None
        if params.name in FILE_TOOLS:
            settings = proxy.config.settings
            result = await run_file_tool(
                params.name,
                params.arguments,
                session=session,
                sessions=proxy.sessions,
                sandbox=proxy.sandbox,
                threshold=settings.async_token_threshold,
            )
            return result, None
        route = proxy.pool.route(params.name)
        if route is None:
            await proxy.pool.listable()  # a call that comes before the first listing may name a tool of it
            route = proxy.pool.route(params.name)
        starting = proxy.pool.starting(params.name) if route is None else None
        if starting is not None and starting.state == "starting":
            # A tool of a server still coming up (a client may call from a list it kept): give it the
            # start-up wait once more before saying it is not ready.
            with anyio.move_on_after(proxy.config.settings.startup_wait_secs):
                await starting.first_attempt()
            route = proxy.pool.route(params.name)
        if route is None:
            raise _unknown_tool(proxy, params.name)
        passthrough = asks_passthrough(params)
        return await forward(proxy, ctx, route, params.arguments, session, origin=origin, passthrough=passthrough)

    async def set_logging_level(
        ctx: ServerRequestContext[Proxy], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        proxy.log_level = params.level
        return types.EmptyResult()

    async def on_initialized(ctx: ServerRequestContext[Proxy], params: Any) -> None:
        proxy.add_session(ctx.session)
        session = proxy.sessions.for_request(ctx)
        _keep_channel(ctx, session, standing)  # questions may come before the first call
        if session.lists_roots:  # servers that asked before it came may ask again now
            await proxy.roots_changed(connection_key(proxy, ctx, session))
            proxy.pool.start_early(requester_of(proxy, ctx, session))  # its own processes get its roots now

    async def on_roots_changed(ctx: ServerRequestContext[Proxy], params: Any) -> None:
        session = proxy.sessions.for_request(ctx)
        await proxy.roots_changed(connection_key(proxy, ctx, session))
        if session.lists_roots:
            proxy.pool.start_early(requester_of(proxy, ctx, session))

    instructions = _INSTRUCTIONS
    if proxy.config.settings.catalog != "full":
        instructions += " " + tool_catalog.INSTRUCTIONS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)  # logging is deprecated at 2026-07-28, not before
        server: Server[Proxy] = Server(
            "claimcheck",
            version=VERSION,
            instructions=instructions,
            lifespan=lifespan,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_set_logging_level=set_logging_level,
            on_subscriptions_listen=ListenHandler(proxy.bus),
        )
    server.add_notification_handler("notifications/initialized", types.NotificationParams, on_initialized)
    server.add_notification_handler("notifications/roots/list_changed", types.NotificationParams, on_roots_changed)
    sdk_compat.set_initialization_options(
        server,
        NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True),
        {CAPABILITY: {"version": 1}},
    )
    server.middleware.append(_named_problems)
    mcp_tasks.install(server, proxy)
    offerings_surface.install(server, proxy)
    return server


async def _named_problems(ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
    """A request whose params do not validate is answered naming what is wrong (`tools/call`'s missing `name`),
    where the SDK answers "Invalid request parameters" and nothing else."""
    try:
        return await call_next(ctx)
    except ValidationError as exc:
        message = f"Invalid {clip(ctx.method)} params: {problems(exc)}"
        raise MCPError(code=types.INVALID_PARAMS, message=message) from None


def _unknown_tool(proxy: Proxy, name: str) -> ToolNotFound:
    starting = proxy.pool.starting(name)
    if starting is not None and (starting.state == "failed" or starting.backoff.failed_starts):
        again = "; claimcheck is starting it again now" if starting.state != "failed" else ""  # its next try, begun
        return ToolNotFound(
            f'Unknown tool "{clip(name)}": server "{starting.name}" is down: it '
            f"{starting.backoff.not_started(starting.last_error)}{again}. Its tools are announced with a list "
            "change when it starts."
        )
    if starting is not None:
        why = f" ({starting.last_error})" if starting.last_error else ""
        return ToolNotFound(
            f'Unknown tool "{clip(name)}": server "{starting.name}" is not ready yet ({starting.state}{why}). '
            "Its tools are announced with a list change when it starts."
        )
    known = [*proxy.pool.routes, *OWN_TOOLS, *FILE_TOOLS]
    maybe = did_you_mean(name, known, proxy.config.settings.tool_separator)
    return ToolNotFound(f'Unknown tool "{clip(name)}".{maybe} Call tools/list to see the tools claimcheck offers.')


def did_you_mean(name: str, known: Sequence[str], separator: str) -> str:
    """` Did you mean "x"?` with the listed names `name` most likely meant (the same tool under its server's prefix,
    the same name in another case, else difflib's closest), or "" when none is close (or `name` is too long to be a
    tool's: difflib's time grows with it)."""
    if len(name) > QUOTE_LIMIT:
        return ""
    close = [k for k in known if k.endswith(separator + name)] or [k for k in known if k.lower() == name.lower()]
    close = close[:3] or difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    if not close:
        return ""
    quoted = [f'"{clip(k)}"' for k in close]
    return f" Did you mean {' or '.join([', '.join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)}?"


def initialization_options(server: Server[Proxy]) -> InitializationOptions:
    return server.create_initialization_options()


async def _carrying_questions(ctx: ServerRequestContext[Proxy], session: Session, answer: Awaitable[_T]) -> _T:
    """`answer`, while this request carries the session's questions to a handshake-era client that can take them
    (over HTTP its response stream is open for as long as `wait_for_tool_output` waits)."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return await answer
    inbox = session.inbox
    failure: ClaimcheckError | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(inbox.carry_all, request_asker(ctx), ClientChannel(ctx.session).can_ask)
        try:
            result = await answer
        except ClaimcheckError as exc:  # raised as itself below, not inside a task group's exception group
            failure = exc
        finally:
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result


def _keep_channel(ctx: ServerRequestContext[Proxy], session: Session, standing: StandingStreams | None) -> None:
    """Give a handshake-era session its standing channel for questions, once: over stdio (and SSE) the
    connection's own, over streamable HTTP its GET stream while that is open (`server.upstream.standing`)."""
    connection = sdk_compat.connection_of(ctx.session)
    if connection is None or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or _CHANNEL_KEY in connection.state:
        return
    headers = getattr(ctx.request, "headers", None)
    mcp_session_id = headers.get("mcp-session-id") if headers is not None else None
    if mcp_session_id is not None and standing is None:
        return  # streamable HTTP without a watch on its GET streams: questions ride wait_for_tool_output
    inbox = session.inbox
    connection.state[_CHANNEL_KEY] = inbox  # marks the connection's channel as given
    if mcp_session_id is not None and standing is not None:
        standing.bind(mcp_session_id, inbox, ClientChannel(ctx.session))

        async def unbind() -> None:
            standing.forget(mcp_session_id)

        connection.exit_stack.push_async_callback(unbind)
        return
    channel = inbox.channel = ClientChannel(ctx.session)  # its connection-scoped channel outlives this request

    async def release() -> None:  # a session several connections share keeps its inbox after this one
        if inbox.channel is channel:
            inbox.channel = None

    connection.exit_stack.push_async_callback(release)
