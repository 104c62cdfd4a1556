"""MCP Tasks (2025-11-25) served by claimcheck, driven by a hand-wired task client (the SDK has no task calls)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from server.proxy import Proxy
from server.upstream.surface import build_server
from tests.support.handles import Downstream, client_of, handle_in, handles_proxy, start_in_background
from tests.support.proxies import running_proxy, text_of
from tests.support.tasks import TaskClient

pytestmark = pytest.mark.anyio

RELATED = "io.modelcontextprotocol/related-task"


@asynccontextmanager
async def task_client(proxy: Proxy) -> AsyncIterator[tuple[Client, TaskClient]]:
    tasks = TaskClient()
    async with Client(build_server(proxy), mode="legacy", extensions=[tasks]) as client:
        tasks.client = client
        yield client, tasks


async def test_tasks_are_advertised_and_every_proxied_tool_may_run_as_one() -> None:
    async with handles_proxy(Downstream()) as proxy, task_client(proxy) as (client, _):
        with anyio.fail_after(10):
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        capability = client.server_capabilities.tasks
    assert capability is not None and capability.list is not None and capability.cancel is not None
    assert capability.requests is not None and capability.requests.tools is not None
    execution = tools["down__echo"].execution
    assert execution is not None and execution.task_support == "optional"
    assert tools["tool_output"].execution is None  # claimcheck's own tools answer at once


async def test_a_task_is_created_at_once_reports_its_end_and_its_result_is_also_a_handle() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, task_client(proxy) as (client, tasks):
        with anyio.fail_after(20):
            created = await tasks.create("down__gated", {"text": "done at last"})
            working = await tasks.get(created.task_id)
            down.release.set()
            status = await tasks.status_of(created.task_id)
            result = await tasks.result(created.task_id)
            again = await tasks.result(created.task_id)
            as_handle = await client.call_tool("tool_output", {"handle": created.task_id, "mode": "raw"})
    assert created.status == "working" and created.ttl == 60_000 and created.poll_interval
    assert created.task_id.startswith("session-")  # the task id is the handle
    assert working.status == "working"
    assert status.status == "completed"
    assert text_of(result) == "done at last" and not result.is_error
    assert result.meta is not None and result.meta[RELATED] == {"taskId": created.task_id}
    assert text_of(again) == "done at last"
    assert text_of(as_handle).endswith("\n\ndone at last")


async def test_a_cancelled_task_stops_the_downstream_call_and_cannot_be_cancelled_twice() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, task_client(proxy) as (_, tasks):
        with anyio.fail_after(20):
            created = await tasks.create("down__gated", {})
            cancelled = await tasks.cancel(created.task_id)
            await down.cancelled.wait()
            status = await tasks.status_of(created.task_id)
            with pytest.raises(MCPError) as twice:
                await tasks.cancel(created.task_id)
            with pytest.raises(MCPError) as no_result:
                await tasks.result(created.task_id)
    assert cancelled.status == "cancelled" and status.status == "cancelled"
    assert twice.value.error.code == types.INVALID_PARAMS and "already cancelled" in twice.value.error.message
    assert "was cancelled" in no_result.value.error.message


async def test_tasks_list_shows_tasks_and_calls_that_went_to_the_background() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, task_client(proxy) as (client, tasks):
        with anyio.fail_after(20):
            created = await tasks.create("down__gated", {"text": "a task"})
            handle = await start_in_background(client, text="a handle")
            listed = await tasks.list()
            from_handle = await tasks.get(handle)
            down.release.set()
            result = await tasks.result(handle)
            await tasks.result(created.task_id)
    assert {task.task_id for task in listed.tasks} == {created.task_id, handle}
    assert from_handle.status == "working"
    assert text_of(result) == "a handle"


async def test_a_finished_task_is_forgotten_when_its_ttl_runs_out() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, task_client(proxy) as (client, tasks):
        with anyio.fail_after(20):
            created = await tasks.create("down__echo", {"text": "short-lived"}, task={"ttl": 0})
            await tasks.status_of(created.task_id)
            with pytest.raises(MCPError) as gone:
                await tasks.get(created.task_id)
            listed = await tasks.list()
            as_handle = await client.call_tool("tool_output", {"handle": created.task_id, "mode": "raw"})
    assert created.ttl == 0
    assert gone.value.error.code == types.INVALID_PARAMS and created.task_id in gone.value.error.message
    assert listed.tasks == []
    assert as_handle.is_error and "Unknown handle" in text_of(as_handle)


async def test_unknown_tasks_and_tools_that_cannot_be_tasks_are_errors() -> None:
    async with handles_proxy(Downstream()) as proxy, task_client(proxy) as (_, tasks):
        with anyio.fail_after(10):
            with pytest.raises(MCPError) as unknown:
                await tasks.get("session-0/0")
            with pytest.raises(MCPError) as unknown_result:
                await tasks.result("no-such-task")
            with pytest.raises(MCPError) as own_tool:
                await tasks.create("list_tool_outputs", {})
            with pytest.raises(MCPError) as no_tool:
                await tasks.create("down__missing", {})
            with pytest.raises(MCPError) as bad_flag:
                await tasks.create("down__echo", {"text": "x", "background": "yes"})
            with pytest.raises(MCPError) as bad_cursor:
                await tasks.list(cursor="garbage")
    for error in (unknown, unknown_result, own_tool, no_tool, bad_flag, bad_cursor):
        assert error.value.error.code == types.INVALID_PARAMS
    assert "no task" in unknown.value.error.message
    assert "cannot run as a task" in own_tool.value.error.message
    assert '"background" must be true or false' in bad_flag.value.error.message
    assert bad_cursor.value.error.message.startswith("Invalid cursor: tasks/list answers every task on one page")


async def test_the_result_of_a_failed_task_is_the_error_and_a_big_one_follows_the_size_rule() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, task_client(proxy) as (client, tasks):
        with anyio.fail_after(20):
            failing = await tasks.create("down__gated_failure", {})
            big = await tasks.create("down__big", {"lines": 2000})
            down.release.set()
            failed = await tasks.result(failing.task_id)
            failed_status = await tasks.status_of(failing.task_id)
            large = await tasks.result(big.task_id)
            sliced = await client.call_tool(
                "tool_output", {"handle": big.task_id, "mode": "slice", "slice": {"start": 0, "length": 40}}
            )
    assert failed.is_error and "the disk is on fire" in text_of(failed)
    assert failed_status.status == "failed" and "the disk is on fire" in (failed_status.status_message or "")
    assert text_of(large).startswith("Tool output is too large (") and big.task_id in text_of(large)
    assert "line 00000 of the big output" in text_of(sliced)


async def test_a_background_call_to_a_downstream_that_serves_tasks_runs_there_as_a_task_and_is_cancelled_there() -> (
    None
):
    down = Downstream()
    async with (
        handles_proxy(down) as inner,
        running_proxy(
            {"inner": build_server(inner)}, fields={"inner": {"prefix": ""}}, settings={"backgroundParam": "later"}
        ) as outer,
        client_of(outer) as client,
    ):
        with anyio.fail_after(20):
            quick = await client.call_tool("down__echo", {"text": "no task needed"})
            started = await client.call_tool("down__gated", {"text": "never", "later": True})
            handle = handle_in(text_of(started))
            (inner_session,) = inner.sessions.live
            while not inner_session.calls:  # the task starts in the inner proxy's task group
                await anyio.wait_all_tasks_blocked()
            (inner_call,) = inner_session.calls.values()
            cancelled = await client.call_tool("cancel_tool_output", {"handle": handle})
            await down.cancelled.wait()
            await inner_call.finished.wait()
    assert text_of(quick) == "no task needed"
    assert inner_call.ttl_ms is not None  # created by a task-augmented tools/call
    assert not cancelled.is_error
    assert inner_call.status == "cancelled"


async def test_call_tool_as_a_task_runs_the_tool_it_names_as_the_task() -> None:
    down = Downstream()
    async with handles_proxy(down, {"catalog": "search"}) as proxy, task_client(proxy) as (_, tasks):
        with anyio.fail_after(20):
            created = await tasks.create("call_tool", {"name": "down__gated", "arguments": {"text": "via call_tool"}})
            down.release.set()
            result = await tasks.result(created.task_id)
    assert created.task_id.startswith("session-")
    assert text_of(result) == "via call_tool"
