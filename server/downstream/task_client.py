"""Calling a downstream tool as an MCP task (2025-11-25): create it, follow it, fetch its result.

mcp 2.3.0's client cannot send a task-augmented `tools/call` (it validates every `tools/call` answer as
a `CallToolResult`), so the request goes out through the session's dispatcher; `tasks/get`,
`tasks/result` and `tasks/cancel` are ordinary typed requests.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp import Client

from server import sdk_compat
from server.downstream.relay import Relay

__all__ = ["TERMINAL", "call_as_task", "wants_task"]

TERMINAL = frozenset({"completed", "failed", "cancelled"})
_POLL_BOUNDS_S = (0.1, 5.0)


async def call_as_task(
    client: Client, tool: str, arguments: dict[str, Any] | None, relay: Relay | None, *, ttl_ms: int
) -> types.CallToolResult:
    """The tool's result; its status messages become progress on `relay`; cancelling cancels the task."""
    params = {"name": tool, "arguments": arguments or {}, "task": {"ttl": ttl_ms}}
    raw = await sdk_compat.send_raw_request(client, "tools/call", params)
    if "task" not in raw:  # a server may answer a task-augmented call directly
        return types.CallToolResult.model_validate(raw, by_name=False)
    task = types.CreateTaskResult.model_validate(raw, by_name=False).task
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_follow, client, task, relay)
            result = await client.session.send_request(
                types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task.task_id)),
                types.CallToolResult,
            )
            tg.cancel_scope.cancel()
        return result
    except BaseException:
        with anyio.move_on_after(5, shield=True):  # leave nothing running downstream for a call that is gone
            await _cancel(client, task.task_id)
        raise


async def _follow(client: Client, task: types.Task | types.GetTaskResult, relay: Relay | None) -> None:
    """Poll `tasks/get` at the server's pace and report each new status message as progress."""
    seen: list[str] = []
    while task.status not in TERMINAL:
        if relay is not None and task.status_message and (not seen or seen[-1] != task.status_message):
            seen.append(task.status_message)
            await relay.progress(len(seen), None, task.status_message)
        interval = (task.poll_interval or 1000) / 1000
        await anyio.sleep(min(max(interval, _POLL_BOUNDS_S[0]), _POLL_BOUNDS_S[1]))
        task = await client.session.send_request(
            types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task.task_id)), types.GetTaskResult
        )


async def _cancel(client: Client, task_id: str) -> None:
    try:
        await client.session.send_request(
            types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)), types.CancelTaskResult
        )
    except Exception:  # boundary: the task may be finished or the server gone; nothing is left to do
        pass


def wants_task(definition: types.Tool | None, server: types.ServerCapabilities | None, as_task: bool) -> bool:
    """Whether a call to this tool goes as an MCP task: always when it requires one; when it allows one, if the call
    goes to the background anyway (`as_task`) and the server takes task-augmented calls."""
    support = definition.execution.task_support if definition and definition.execution else None
    if support == "required":
        return True
    if support != "optional" or not as_task or server is None:
        return False
    tasks = server.tasks
    return tasks is not None and tasks.requests is not None and tasks.requests.tools is not None
