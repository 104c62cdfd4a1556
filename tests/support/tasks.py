"""A hand-wired MCP Tasks client (the SDK has no task calls)."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client import ClientExtension, NotificationBinding


class TaskClient(ClientExtension):
    """Creates tasks through the raw dispatcher and records `notifications/tasks/status`."""

    identifier = "dev.claimcheck.tests/task-status"

    def __init__(self) -> None:
        self.statuses: list[types.TaskStatusNotificationParams] = []
        self._arrived = anyio.Event()
        self.client: Client | None = None

    def notifications(self) -> list[NotificationBinding[Any]]:
        async def record(params: types.TaskStatusNotificationParams) -> None:
            self.statuses.append(params)
            self._arrived.set()
            self._arrived = anyio.Event()

        return [
            NotificationBinding(
                method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams, handler=record
            )
        ]

    async def status_of(self, task_id: str) -> types.TaskStatusNotificationParams:
        while not (found := [s for s in self.statuses if s.task_id == task_id]):
            await self._arrived.wait()
        return found[-1]

    async def create(self, name: str, arguments: dict[str, Any], task: dict[str, Any] | None = None) -> types.Task:
        assert self.client is not None
        params = {"name": name, "arguments": arguments, "task": task if task is not None else {"ttl": 60_000}}
        raw = await self.client.session._dispatcher.send_raw_request("tools/call", params)
        return types.CreateTaskResult.model_validate(raw, by_name=False).task

    async def get(self, task_id: str) -> types.GetTaskResult:
        assert self.client is not None
        request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
        return await self.client.session.send_request(request, types.GetTaskResult)

    async def result(self, task_id: str) -> types.CallToolResult:
        assert self.client is not None
        request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
        return await self.client.session.send_request(request, types.CallToolResult)

    async def list(self, cursor: str | None = None) -> types.ListTasksResult:
        assert self.client is not None
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        return await self.client.session.send_request(types.ListTasksRequest(params=params), types.ListTasksResult)

    async def cancel(self, task_id: str) -> types.CancelTaskResult:
        assert self.client is not None
        request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
        return await self.client.session.send_request(request, types.CancelTaskResult)
