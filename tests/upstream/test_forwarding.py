"""Forwarding through claimcheck, in memory: names, schemas, results, errors, progress, logs, cancellation."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from server.config import TOOL_NAME_MAX
from server.downstream.naming import public_name
from tests.support.proxies import OWN_TOOLS, proxied, proxied_names, running_proxy, text_of

pytestmark = pytest.mark.anyio

RICH_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"item": {"$ref": "#/$defs/item"}, "count": {"type": "integer", "minimum": 1}},
    "required": ["item"],
    "additionalProperties": False,
    "$defs": {"item": {"type": "string", "enum": ["a", "b"]}},
}


def lowlevel(tools: dict[str, dict[str, Any]], handler: Any, **extra: Any) -> Server[Any]:
    """A low-level server with the given tool schemas and one call handler."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=name,
                    description=f"the {name} tool",
                    input_schema=schema,
                    output_schema={"type": "object"} if name == "structured" else None,
                    annotations=types.ToolAnnotations(read_only_hint=True),
                )
                for name, schema in tools.items()
            ]
        )

    return Server("inline", on_list_tools=list_tools, on_call_tool=handler, **extra)


def text(value: str, **fields: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)], **fields)


def simple_tools() -> MCPServer:
    down = MCPServer("simple")

    @down.tool(structured_output=False)
    def echo(text: str) -> str:
        return text

    @down.tool(structured_output=False)
    def add(a: int, b: int) -> str:
        return str(a + b)

    @down.tool(structured_output=False)
    def admin_reset() -> str:
        return "reset"

    return down


async def test_tools_are_listed_with_server_prefix_and_schemas_preserved_except_output_schema() -> None:
    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return text("ok")

    down = lowlevel({"rich": RICH_SCHEMA, "structured": {"type": "object"}}, call)
    async with proxied({"down": down}) as client:
        with anyio.fail_after(5):
            tools = {t.name: t for t in (await client.list_tools()).tools}
    assert proxied_names(list(tools.values())) == ["down__rich", "down__structured"]
    schema = tools["down__rich"].input_schema
    assert schema["properties"].pop("background") == {
        "type": "boolean",
        "description": "claimcheck: true runs the call in the background and returns a handle at once.",
    }
    assert schema == RICH_SCHEMA
    assert tools["down__rich"].description == "the rich tool"
    assert tools["down__rich"].annotations == types.ToolAnnotations(read_only_hint=True)
    assert tools["down__structured"].output_schema is None


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_results_pass_through_unchanged_including_structured_content(mode: str) -> None:
    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text=f"got {params.arguments}"),
                types.ImageContent(type="image", data="aGVsbG8=", mime_type="image/png"),
            ],
            structured_content={"echo": params.arguments},
        )

    async with proxied({"down": lowlevel({"structured": {"type": "object"}}, call)}, mode=mode) as client:
        with anyio.fail_after(5):
            result = await client.call_tool("down__structured", {"x": [1, 2], "y": {"z": None}})
    assert not result.is_error
    assert result.structured_content == {"echo": {"x": [1, 2], "y": {"z": None}}}
    assert text_of(result) == "got {'x': [1, 2], 'y': {'z': None}}"
    assert isinstance(result.content[1], types.ImageContent)
    assert result.content[1].data == "aGVsbG8="


async def test_include_and_exclude_globs_filter_tools_and_disabled_servers_are_absent() -> None:
    fields: dict[str, dict[str, Any]] = {
        "a": {"tools": {"include": ["a*", "echo"], "exclude": ["admin_*"]}},
        "b": {"disabled": True},
    }
    async with proxied({"a": simple_tools(), "b": simple_tools()}, fields=fields) as client:
        with anyio.fail_after(5):
            names = proxied_names((await client.list_tools()).tools)
            blocked = await client.call_tool("a__admin_reset", {})
    assert names == ["a__add", "a__echo"]
    assert blocked.is_error
    assert 'Unknown tool "a__admin_reset"' in text_of(blocked)


async def test_prefix_setting_renames_and_empty_prefix_is_transparent() -> None:
    fields = {"first": {"prefix": ""}, "second": {"prefix": "s2"}}
    settings = {"toolSeparator": "."}
    async with proxied({"first": simple_tools(), "second": simple_tools()}, fields=fields, settings=settings) as client:
        with anyio.fail_after(5):
            names = proxied_names((await client.list_tools()).tools)
            summed = await client.call_tool("add", {"a": 2, "b": 40})
    assert names == ["add", "admin_reset", "echo", "s2.add", "s2.admin_reset", "s2.echo"]
    assert text_of(summed) == "42"


async def test_a_name_clash_keeps_the_first_servers_tool() -> None:
    first, second = simple_tools(), MCPServer("other")

    @second.tool(structured_output=False)
    def echo(text: str) -> str:
        return "from second"

    fields = {"one": {"prefix": ""}, "two": {"prefix": ""}}
    async with proxied({"one": first, "two": second}, fields=fields) as client:
        with anyio.fail_after(5):
            result = await client.call_tool("echo", {"text": "from first"})
    assert text_of(result) == "from first"


@pytest.mark.parametrize("most", [None, 64], ids=["default", "toolNameMax-64"])
async def test_names_longer_than_tool_name_max_are_cut_with_a_stable_hash_and_still_callable(most: int | None) -> None:
    """47 by default: Claude Code calls the tool `mcp__claimcheck__<name>` and the model API refuses names over 64,
    so a server's 45-character tool that works without claimcheck (`mcp__github__…`, 58) would break behind it."""
    long_tool, short_tool = "t" * 70, "s" * 39  # `down__` + 39 = 45: kept as it is
    down = MCPServer("long")
    down.add_tool(lambda: "long ok", name=long_tool, structured_output=False)
    down.add_tool(lambda: "short ok", name=short_tool, structured_output=False)
    settings = {"toolNameMax": most} if most else None
    async with proxied({"down": down}, settings=settings) as client:
        with anyio.fail_after(5):
            tools = {t.name for t in (await client.list_tools()).tools if t.name not in OWN_TOOLS}
            (cut,) = tools - {f"down__{short_tool}"}
            result = await client.call_tool(cut, {})
    assert len(cut) == (most or TOOL_NAME_MAX) == (64 if most else 47)
    assert f"down__{short_tool}" in tools
    assert cut == public_name("down", "__", long_tool, most or TOOL_NAME_MAX)
    assert cut != public_name("down", "__", "t" * 71, most or TOOL_NAME_MAX)
    assert cut.startswith("down__ttt")
    assert len(f"mcp__claimcheck__{cut}") <= 64 or most == 64
    assert text_of(result) == "long ok"


async def test_downstream_error_result_names_server_and_tool() -> None:
    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return text("disk full", is_error=True)

    async with proxied({"store": lowlevel({"save": {"type": "object"}}, call)}) as client:
        with anyio.fail_after(5):
            result = await client.call_tool("store__save", {})
    assert result.is_error
    assert text_of(result).startswith("disk full")
    assert 'tool "save" of server "store"' in text_of(result)


async def test_downstream_protocol_error_becomes_an_error_result_naming_server_and_tool() -> None:
    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        raise MCPError(code=types.INVALID_PARAMS, message="count must be positive")

    async with proxied({"calc": lowlevel({"run": {"type": "object"}}, call)}) as client:
        with anyio.fail_after(5):
            result = await client.call_tool("calc__run", {"count": -1})
            again = await client.call_tool("calc__run", {"count": -2})
    assert result.is_error
    assert text_of(result) == 'Server "calc" failed on tool "run": count must be positive (JSON-RPC error -32602)'
    assert again.is_error


async def test_wrong_argument_types_and_unknown_tools_are_error_results_and_the_proxy_keeps_serving() -> None:
    async with proxied({"m": simple_tools()}) as client:
        with anyio.fail_after(5):
            wrong = await client.call_tool("m__add", {"a": "two", "b": []})
            unknown = await client.call_tool("m__nothing", {})
            fine = await client.call_tool("m__add", {"a": 1, "b": 2})
    assert wrong.is_error
    assert "validation error" in text_of(wrong)
    assert 'tool "add" of server "m"' in text_of(wrong)
    assert unknown.is_error
    assert text_of(fine) == "3"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_downstream_progress_reaches_the_client(mode: str) -> None:
    down = MCPServer("prog")

    @down.tool(structured_output=False)
    async def work(ctx: Context) -> str:
        for step in range(1, 4):
            await ctx.report_progress(step, 3, f"step {step}")
        return "done"

    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with proxied({"p": down}, mode=mode) as client:
        with anyio.fail_after(5):
            result = await client.call_tool("p__work", {}, progress_callback=on_progress)
    assert text_of(result) == "done"
    assert sorted(seen) == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


async def test_downstream_log_messages_reach_the_client_at_or_above_its_level() -> None:
    down = MCPServer("logs")

    @down.tool(structured_output=False)
    async def chatty(ctx: Context) -> str:
        await ctx.debug("too fine")
        await ctx.warning("look out")
        return "said it"

    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with proxied({"l": down}, logging_callback=on_log) as client:
        with anyio.fail_after(5):
            await client.set_logging_level("info")
            await client.call_tool("l__chatty", {})
            while not logs:
                await anyio.lowlevel.checkpoint()
    assert [(entry.level, entry.data) for entry in logs] == [("warning", "look out")]


async def test_cancelling_a_call_upstream_cancels_it_downstream() -> None:
    started, cancelled = anyio.Event(), anyio.Event()
    down = MCPServer("hang")

    @down.tool(structured_output=False)
    async def hang() -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return "never"

    async with proxied({"h": down}) as client:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "h__hang", {})
                await started.wait()
                tg.cancel_scope.cancel()
            await cancelled.wait()
            assert text_of(await client.call_tool("h__hang_missing", {})).startswith("Unknown tool")


async def test_a_call_past_the_server_timeout_is_an_error_and_is_cancelled_downstream() -> None:
    cancelled = anyio.Event()
    down = MCPServer("slowpoke")

    @down.tool(structured_output=False)
    async def stuck() -> str:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return "never"

    async with proxied({"s": down}, fields={"s": {"timeout": 0.2}}) as client:
        with anyio.fail_after(5):
            result = await client.call_tool("s__stuck", {})
            await cancelled.wait()
    assert result.is_error
    assert text_of(result) == (
        'Server "s" failed on tool "stuck": no answer within the server\'s timeout of 0.2 s (mcpServers.s.timeout)'
    )


async def test_a_server_that_cannot_start_leaves_the_others_serving() -> None:
    async with proxied({"broken": None, "ok": simple_tools()}) as client:
        with anyio.fail_after(5):
            names = proxied_names((await client.list_tools()).tools)
            result = await client.call_tool("ok__echo", {"text": "still here"})
    assert names == ["ok__add", "ok__admin_reset", "ok__echo"]
    assert text_of(result) == "still here"


async def test_a_failed_server_reports_why() -> None:
    async with running_proxy({"broken": None}) as proxy:
        with anyio.fail_after(5):
            await proxy.pool.settled()
    (downstream,) = proxy.pool.downstreams
    assert downstream.state == "failed"
    assert downstream.last_error == "ConnectionRefusedError: broken is down on purpose"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_downstream_tool_list_change_is_announced_to_the_client(mode: str) -> None:
    tools: dict[str, dict[str, Any]] = {"first": {"type": "object"}}

    async def call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "first":
            tools["second"] = {"type": "object"}
            await ctx.session.send_tool_list_changed()
        return text(f"called {params.name}")

    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with proxied({"d": lowlevel(tools, call)}, mode=mode, message_handler=on_message) as client:
        with anyio.fail_after(5):
            await client.list_tools()
            if mode == "legacy":
                await client.call_tool("d__first", {})
                await changed.wait()
            else:
                async with client.listen(tools_list_changed=True) as events:
                    await client.call_tool("d__first", {})
                    async for _event in events:
                        break
            names = proxied_names((await client.list_tools(cache_mode="refresh")).tools)
            result = await client.call_tool("d__second", {})
    assert names == ["d__first", "d__second"]
    assert text_of(result) == "called second"


async def test_sampling_requests_of_a_downstream_are_answered_by_the_client() -> None:
    async def call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        answer = await ctx.session.create_message(
            [types.SamplingMessage(role="user", content=types.TextContent(type="text", text="name a colour"))],
            max_tokens=10,
            related_request_id=ctx.request_id,
        )
        assert isinstance(answer.content, types.TextContent)
        return text(f"the model said {answer.content.text}")

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", model="fake", content=types.TextContent(type="text", text="teal")
        )

    async with proxied({"ask": lowlevel({"colour": {"type": "object"}}, call)}, sampling_callback=sample) as client:
        with anyio.fail_after(5):
            result = await client.call_tool("ask__colour", {})
    assert text_of(result) == "the model said teal"


async def test_sampling_without_client_support_is_an_error_the_downstream_sees() -> None:
    async def call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            await ctx.session.create_message(
                [types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))],
                max_tokens=10,
                related_request_id=ctx.request_id,
            )
        except MCPError as exc:
            return text(f"sampling refused: {exc.error.message}", is_error=True)
        return text("sampled")

    async with proxied({"ask": lowlevel({"colour": {"type": "object"}}, call)}) as client:
        with anyio.fail_after(5):
            result = await client.call_tool("ask__colour", {})
    assert result.is_error
    assert "sampling refused: the client behind claimcheck cannot sample" in text_of(result)
