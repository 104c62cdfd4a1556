"""MCP Tasks (protocol 2025-11-25) served from the same registry that backs handles.

A task is a proxied call whose handle is its task id: a task-augmented `tools/call` starts the call
in the background at once and answers `CreateTaskResult`; `tasks/get|result|list|cancel` read the
session's calls, so a call that became a handle is a task too, and the status API shows tasks as
calls. mcp 2.3.0 ships only the types, so the `tools/call` is intercepted in a middleware (before the
SDK checks the result is a `CallToolResult`) and `tasks/*` are custom request handlers. 2026-07-28
clients do not have tasks in the core protocol; their calls take the ordinary path.

A task whose downstream asks a question (sampling, elicitation) is `input_required` until it is
answered; `tasks/result` carries the question to the client, marked with the related task, as the
spec describes (and the model can answer it through `wait_for_tool_output` as for any call).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from server import sdk_compat
from server.downstream.relay import ClientChannel, RequestRelay, RootsParams
from server.errors import ClaimcheckError, clip, problems
from server.handles import messages, questions
from server.handles.calls import Call
from server.handles.catalog_tools import CALL_TOOL
from server.handles.guide import guide_for
from server.handles.mirrors import lookup, read_back, until_finished
from server.handles.sessions import Session
from server.proxy import Proxy
from server.status.tasks import iso
from server.upstream.extracting import llm_available
from server.upstream.forwarding import begin, split_arguments
from server.upstream.replies import text_result
from server.upstream.requesters import for_client
from server.upstream.tool_catalog import answers, inner_call

__all__ = ["DEFAULT_TTL_MS", "MAX_TTL_MS", "install", "request_asker", "task_of"]

logger = logging.getLogger(__name__)

RELATED_TASK = "io.modelcontextprotocol/related-task"
DEFAULT_TTL_MS = 3_600_000
"""How long a finished task is kept when the client names no ttl."""
MAX_TTL_MS = 86_400_000
POLL_INTERVAL_MS = 500
_STATUS: dict[str, types.TaskStatus] = {
    "running": "working",
    "ready": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
}


def tasks_capability() -> types.ServerTasksCapability:
    return types.ServerTasksCapability(
        list=types.TasksListCapability(),
        cancel=types.TasksCancelCapability(),
        requests=types.ServerTasksRequestsCapability(
            tools=types.TasksToolsCapability(call=types.TasksCallCapability())
        ),
    )


def install(server: Server[Proxy], proxy: Proxy) -> None:
    """Serve tasks on `server`: the capability, the `tools/call` interception and the `tasks/*` methods."""
    tasks = _Tasks(proxy)
    server.middleware.append(tasks.intercept)
    server.add_request_handler("tasks/get", types.GetTaskRequestParams, tasks.get)
    server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, tasks.result)
    server.add_request_handler("tasks/list", types.PaginatedRequestParams, tasks.list)
    server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, tasks.cancel)

    def with_tasks(initialization: InitializationOptions) -> InitializationOptions:
        initialization.capabilities.tasks = tasks_capability()  # the SDK never sets tasks itself
        return initialization

    sdk_compat.wrap_initialization_options(server, with_tasks)


def task_of(call: Call, inbox: questions.Inbox) -> types.Task:
    """The task view of a call (its handle is the task id); `inbox`: its session's questions."""
    updated = call.log[-1][0] if call.log else call.started
    message = call.error if call.status == "failed" and call.error else None
    status = _STATUS[call.status]
    if call.status == "running" and call.progress is not None:
        message = call.progress.describe()
    if call.status == "running" and (asked := inbox.of_handle(call.handle)):
        status, message = "input_required", f'waiting for an answer to its {asked[0].kind} request ("{asked[0].id}")'
    return types.Task(
        task_id=call.handle,
        status=status,
        status_message=message.strip()[:500] if message else None,
        created_at=iso(call.started) or "",
        last_updated_at=iso(updated) or "",
        ttl=call.ttl_ms if call.ttl_ms is not None else DEFAULT_TTL_MS,  # always a number: see notes P11
        poll_interval=POLL_INTERVAL_MS,
    )


class _Tasks:
    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy

    async def intercept(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        """A task-augmented `tools/call` becomes a background call and a `CreateTaskResult`."""
        raw = ctx.params
        if ctx.method != "tools/call" or not isinstance(raw, dict) or raw.get("task") is None:
            return await call_next(ctx)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return await call_next(ctx)
        try:
            params = types.CallToolRequestParams.model_validate(raw, by_name=False)
        except ValidationError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Invalid tools/call params: {problems(exc)}") from None
        await self.proxy.pool.listable()
        if params.name == CALL_TOOL and answers(self.proxy, CALL_TOOL):  # the tool it stands for runs as the task
            try:
                params = inner_call(params)
            except ClaimcheckError as exc:
                raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        route = self.proxy.pool.route(params.name)
        if route is None:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f'Tool "{clip(params.name)}" cannot run as a task: only the proxied servers\' tools can.',
            )
        session, origin = self.proxy.sessions.seat(ctx)
        try:
            args, _ = split_arguments(route, params.arguments)
            route = await for_client(self.proxy, ctx, route, session)
        except ClaimcheckError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        assert params.task is not None
        requested = params.task.ttl
        ttl_ms = DEFAULT_TTL_MS if requested is None else max(0, min(int(requested), MAX_TTL_MS))
        call, _ = begin(self.proxy, route, args, session, None, origin=origin, background=True, ttl_ms=ttl_ms)
        await self.proxy.sessions.hand_out(call, "started as a task")
        self.proxy.sessions.spawn(lambda: _announce(ctx.session, call, session.inbox))
        created = types.CreateTaskResult(task=task_of(call, session.inbox))
        return created.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def get(self, ctx: ServerRequestContext[Any], params: types.GetTaskRequestParams) -> types.GetTaskResult:
        call, inbox = await self._find(ctx, params.task_id)
        return types.GetTaskResult(**task_of(call, inbox).model_dump())

    async def result(self, ctx: ServerRequestContext[Any], params: types.GetTaskPayloadRequestParams) -> HandlerResult:
        """Blocks until the task is done (per the spec), then the call's result under the size rule."""
        call, inbox = await self._find(ctx, params.task_id)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_carry_questions, ctx, call, inbox)
            await until_finished(self.proxy.sessions, call)  # another replica's task: read again until final
            tg.cancel_scope.cancel()
        await read_back(call)
        call.mark_seen()
        related = {RELATED_TASK: {"taskId": call.handle}}
        if call.status == "cancelled":
            raise MCPError(code=types.INVALID_PARAMS, message=f'Task "{call.handle}" was cancelled.')
        if call.over_threshold and call.fallback is not None:
            result = text_result(call.fallback, is_error=call.status == "failed")
        elif call.over_threshold:
            session = self.proxy.sessions.for_request(ctx)
            guide = await guide_for(call, session, llm=llm_available(self.proxy.config.settings.extraction, ctx))
            result = text_result(messages.too_large_message(call, guide), is_error=call.status == "failed")
        elif call.result is not None:
            call.retrieved()
            result = call.result
        else:
            result = text_result(call.error or f"the call {call.status}", is_error=True)
        data = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        data["_meta"] = {**data.get("_meta", {}), **related}
        return data

    async def list(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListTasksResult:
        if params is not None and params.cursor is not None:  # every task is on the one page: no cursor is one of ours
            message = "Invalid cursor: tasks/list answers every task on one page; ask again without a cursor"
            raise MCPError(code=types.INVALID_PARAMS, message=message)
        session = self._session(ctx)
        return types.ListTasksResult(tasks=[task_of(call, session.inbox) for call in session.handed_out()])

    async def cancel(
        self, ctx: ServerRequestContext[Any], params: types.CancelTaskRequestParams
    ) -> types.CancelTaskResult:
        call, inbox = await self._find(ctx, params.task_id)
        if call.finished.is_set():
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Cannot cancel task: it is already {_STATUS[call.status]}.",
            )
        if call.home is None:
            call.cancel("the client cancelled its task (tasks/cancel)")
        else:  # another replica runs it: its owner cancels it
            await self.proxy.sessions.backend.request_cancel(call.handle)
        with anyio.move_on_after(5):
            await until_finished(self.proxy.sessions, call)
        return types.CancelTaskResult(**task_of(call, inbox).model_dump())

    def _session(self, ctx: ServerRequestContext[Any]) -> Session:
        session = self.proxy.sessions.for_request(ctx)
        _expire(session)
        return session

    async def _find(self, ctx: ServerRequestContext[Any], task_id: str) -> tuple[Call, questions.Inbox]:
        """The task's call: this replica's, or a mirror of another replica's (the task id is the handle); and the
        inbox of its session, the client's."""
        session = self._session(ctx)
        call = (await lookup(self.proxy.sessions, session, [task_id]))[0]
        if call is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f'Failed to retrieve task: no task "{clip(task_id)}".')
        return call, session.inbox


def _expire(session: Session) -> None:
    """Forget finished tasks whose ttl has run out (counted from creation; a running task is kept)."""
    now = time.time()
    for call in list(session.calls.values()):
        if call.ttl_ms is not None and call.finished.is_set() and now > call.started + call.ttl_ms / 1000:
            session.calls.pop(call.handle, None)
            session.store.discard(call.handle)


async def _carry_questions(ctx: ServerRequestContext[Any], call: Call, inbox: questions.Inbox) -> None:
    """Put the task's questions to the client through this `tasks/result` request, for as long as it waits."""
    await inbox.carry_all(
        request_asker(ctx, {RELATED_TASK: {"taskId": call.handle}}),
        ClientChannel(ctx.session).can_ask,
        handle=call.handle,
    )


def request_asker(
    ctx: ServerRequestContext[Any], meta: dict[str, Any] | None = None
) -> Callable[[questions.Params], Awaitable[questions.Answer]]:
    """Ask the client through the request `ctx` (its answer comes while that request is open)."""
    relay = RequestRelay(ctx)

    async def ask(params: questions.Params) -> questions.Answer:
        if meta:
            params = params.model_copy(update={"meta": {**(params.meta or {}), **meta}})
        if isinstance(params, RootsParams):
            return await relay.list_roots(params)
        if isinstance(params, types.CreateMessageRequestParams):
            return await relay.sample(params)
        return await relay.elicit(params)

    return ask


async def _announce(session: ServerSession, call: Call, inbox: questions.Inbox) -> None:
    """`notifications/tasks/status` when the task comes to need input, and once it reaches its end."""
    announced = "working"
    while not call.finished.is_set():
        await questions.either(call.finished, inbox.changed())
        status = task_of(call, inbox).status
        if status != announced and not call.finished.is_set():
            announced = status
            await _send_status(session, call, inbox)
    await _send_status(session, call, inbox)


async def _send_status(session: ServerSession, call: Call, inbox: questions.Inbox) -> None:
    task = task_of(call, inbox)
    notification = types.TaskStatusNotification(params=types.TaskStatusNotificationParams(**task.model_dump()))
    try:
        await session.send_notification(notification)  # type: ignore[arg-type]  # types-only in the SDK's union
    except Exception:  # boundary: the client may have gone; the task's state stays readable
        logger.debug("could not send the status of task %s", call.handle, exc_info=True)
