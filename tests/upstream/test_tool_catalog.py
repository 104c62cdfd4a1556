"""The catalog behind a ticket (`settings.catalog`): a short `tools/list`, `find_tools` and `call_tool`, in memory."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer

from server.config import parse_config
from server.downstream.pool import specs_from_config
from server.downstream.tool_index import ToolIndex, words_of
from server.proxy import Proxy
from server.upstream.surface import build_server
from tests.support.catalog import catalog_route
from tests.support.processes import program_entry
from tests.support.proxies import OWN_TOOLS, proxied, running_proxy, text_of

pytestmark = pytest.mark.anyio

CATALOG = {"find_tools", "call_tool"}
SEARCH = {"catalog": "search", "api": {"enabled": False}}


def repo_tools() -> MCPServer:
    down = MCPServer("repo")

    @down.tool(structured_output=False)
    def git_log(repo_path: str, max_count: int = 10) -> str:
        """Shows the commit logs of the repository."""
        return f"log of {repo_path} ({max_count})"

    @down.tool(structured_output=False)
    def git_status(repo_path: str) -> str:
        """Shows the working tree status."""
        return "clean"

    @down.tool(structured_output=False)
    def readTextFile(path: str) -> str:
        """Read the complete contents of a file as text."""
        return f"text of {path}"

    @down.tool(structured_output=False)
    async def slow_report(ctx: Context, steps: int = 3) -> str:
        """Builds a long report slowly."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
        await anyio.sleep_forever()
        return "never"

    @down.tool(structured_output=False)
    def big_dump(lines: int = 5000) -> str:
        """Dumps every record."""
        return "\n".join(f"record {i}: " + "x" * 40 for i in range(lines))

    return down


def names(tools: list[types.Tool]) -> set[str]:
    return {tool.name for tool in tools} - OWN_TOOLS


async def test_search_mode_lists_own_tools_find_call_and_pinned_only() -> None:
    fields = {"r": {"pinned": ["git_status"]}}
    async with proxied({"r": repo_tools()}, settings=SEARCH, fields=fields) as client:
        with anyio.fail_after(10):
            tools = (await client.list_tools()).tools
    assert names(tools) == CATALOG | {"r__git_status"}
    assert OWN_TOOLS <= {tool.name for tool in tools}


async def test_full_mode_is_todays_list_and_has_no_catalog_tools() -> None:
    async with proxied({"r": repo_tools()}, settings={"api": {"enabled": False}}) as client:
        with anyio.fail_after(10):
            tools = (await client.list_tools()).tools
            call = await client.call_tool("find_tools", {"query": "commit"})
    assert names(tools) == {"r__git_log", "r__git_status", "r__readTextFile", "r__slow_report", "r__big_dump"}
    assert call.is_error and "Unknown tool" in text_of(call)


async def test_find_tools_ranks_by_need_and_answers_name_server_description_and_schema() -> None:
    async with proxied({"r": repo_tools()}, settings=SEARCH) as client:
        with anyio.fail_after(10):
            commits = await client.call_tool("find_tools", {"query": "show the recent commits", "limit": 2})
            file = await client.call_tool("find_tools", {"query": "read text of a file"})
    text = text_of(commits)
    assert text.startswith("r__git_log (server r): Shows the commit logs of the repository.")
    assert '"repo_path"' in text and '"max_count"' in text
    assert text_of(file).startswith("r__readTextFile (server r)")


async def test_found_tools_join_the_sessions_list_with_a_list_changed_notification() -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with proxied({"r": repo_tools()}, settings=SEARCH, message_handler=on_message) as client:
        with anyio.fail_after(10):
            await client.list_tools()
            await client.call_tool("find_tools", {"query": "commit log", "limit": 1})
            await changed.wait()
            listed = names((await client.list_tools(cache_mode="refresh")).tools)
            direct = await client.call_tool("r__git_log", {"repo_path": "/x"})
    assert listed == CATALOG | {"r__git_log"}
    assert text_of(direct).startswith("log of /x (10)")


async def test_a_2026_client_finds_tools_into_its_next_listing_and_hears_on_its_listen_stream() -> None:
    async with proxied({"r": repo_tools()}, settings=SEARCH, mode="auto") as client:
        with anyio.fail_after(10):
            assert client.protocol_version == "2026-07-28"
            async with client.listen(tools_list_changed=True) as events:
                await client.call_tool("find_tools", {"query": "working tree status", "limit": 1})
                async for _event in events:
                    break
            listed = names((await client.list_tools(cache_mode="refresh")).tools)
            ran = await client.call_tool("call_tool", {"name": "r__git_status", "arguments": {"repo_path": "."}})
    assert listed == CATALOG | {"r__git_status"}
    assert text_of(ran).startswith("clean")


async def test_call_tool_runs_a_catalog_tool_with_its_arguments() -> None:
    async with proxied({"r": repo_tools()}, settings=SEARCH) as client:
        with anyio.fail_after(10):
            result = await client.call_tool("call_tool", {"name": "r__git_log", "arguments": {"repo_path": "/r"}})
            nested = await client.call_tool("call_tool", {"name": "call_tool", "arguments": {}})
            unknown = await client.call_tool("call_tool", {"name": "r__nothing", "arguments": {}})
    assert text_of(result).startswith("log of /r (10)")
    assert nested.is_error and unknown.is_error
    assert "Unknown tool" in text_of(unknown)


async def test_call_tool_of_a_slow_tool_returns_a_handle_with_progress_and_the_wait_finds_it() -> None:
    settings = {**SEARCH, "asyncTimeoutSecs": 0.2}
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with proxied({"r": repo_tools()}, settings=settings) as client:
        with anyio.fail_after(10):
            result = await client.call_tool(
                "call_tool", {"name": "r__slow_report", "arguments": {"steps": 2}}, progress_callback=on_progress
            )
            listing = await client.call_tool("list_tool_outputs", {})
    text = text_of(result)
    assert "Tool r__slow_report is running in the background" in text
    assert "r__slow_report" in text_of(listing) and "running" in text_of(listing)
    assert seen == [1, 2]


async def test_call_tool_of_a_large_output_stores_it_behind_a_handle() -> None:
    settings = {**SEARCH, "asyncTokenThreshold": 2000}
    async with proxied({"r": repo_tools()}, settings=settings) as client:
        with anyio.fail_after(10):
            result = await client.call_tool("call_tool", {"name": "r__big_dump", "arguments": {}})
            read = await client.call_tool("Read", {"file": _handle(text_of(result)), "start": 4999, "lines": 1})
    assert "Tool output is too large" in text_of(result)
    assert "record 4999" in text_of(read)


def _handle(text: str) -> str:
    start = text.index('"session-') + 1
    return text[start : text.index('"', start)]


async def test_bad_find_arguments_are_errors_and_the_server_keeps_serving() -> None:
    async with proxied({"r": repo_tools()}, settings=SEARCH) as client:
        with anyio.fail_after(10):
            long = await client.call_tool("find_tools", {"query": "x" * 1001})
            many = await client.call_tool("find_tools", {"query": "log", "limit": 500})
            none = await client.call_tool("find_tools", {"query": "zebra quantum"})
            fine = await client.call_tool("find_tools", {"query": "log", "limit": 1})
    assert long.is_error and "query" in text_of(long)
    assert many.is_error and "limit" in text_of(many)
    assert not none.is_error and text_of(none).startswith('No tool matches "zebra quantum"')
    assert "r (5 tools)" in text_of(none)
    assert text_of(fine).startswith("r__git_log")


async def test_auto_mode_searches_only_once_the_definitions_pass_catalog_tokens() -> None:
    small = {"catalog": "auto", "catalogTokens": 100_000, "api": {"enabled": False}}
    large = {"catalog": "auto", "catalogTokens": 50, "api": {"enabled": False}}
    async with proxied({"r": repo_tools()}, settings=small) as client:
        with anyio.fail_after(10):
            full = names((await client.list_tools()).tools)
    async with proxied({"r": repo_tools()}, settings=large) as client:
        with anyio.fail_after(10):
            searched = names((await client.list_tools()).tools)
    assert "r__git_log" in full and not CATALOG & full
    assert searched == CATALOG


def changing_server(tools: dict[str, str]) -> Server[Any]:
    """A server whose tools are `tools` (name: description) as they are when listed; `grow` adds one."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        listed = [types.Tool(name=n, description=d, input_schema={"type": "object"}) for n, d in tools.items()]
        return types.ListToolsResult(tools=listed)

    async def call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        tools["translate_text"] = "Translates text into another language."
        await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[types.TextContent(type="text", text="grown")])

    return Server("changing", on_list_tools=list_tools, on_call_tool=call)


async def test_the_index_follows_a_server_that_changes_its_tools() -> None:
    tools = {"grow": "Adds a tool."}
    rebuilt = anyio.Event()

    async def heard() -> None:
        rebuilt.set()

    async with running_proxy({"c": changing_server(tools)}, settings=SEARCH) as proxy:
        proxy.pool.listeners.append(heard)
        async with Client(build_server(proxy), mode="legacy") as client:
            with anyio.fail_after(10):
                before = await client.call_tool("find_tools", {"query": "translate into french"})
                await client.call_tool("call_tool", {"name": "c__grow", "arguments": {}})
                await rebuilt.wait()
                after = await client.call_tool("find_tools", {"query": "translate into french"})
    assert text_of(before).startswith("No tool matches")
    assert text_of(after).startswith("c__translate_text (server c)")


async def test_a_server_that_cannot_start_is_named_with_its_reason() -> None:
    async with proxied({"r": repo_tools(), "broken": None}, settings=SEARCH) as client:
        with anyio.fail_after(10):
            result = await client.call_tool("find_tools", {"query": "commit log"})
    text = text_of(result)
    assert text.startswith("r__git_log")
    assert '(Server "broken" is down: it could not start (ConnectionRefusedError: broken is down on purpose)' in text


@pytest.mark.subprocess
async def test_a_crashed_servers_tools_are_found_with_the_reason_it_is_down(tmp_path: Path) -> None:
    servers = {"flaky": program_entry("crashes_then_fails", str(tmp_path / "crashed.flag"))}
    settings = {**SEARCH, "startupWaitSecs": 120, "asyncTimeoutSecs": 120}
    starting = Proxy.start(parse_config({"mcpServers": servers, "settings": settings}), connect_timeout=120)
    with anyio.fail_after(120):
        async with starting as proxy, Client(build_server(proxy), mode="legacy") as client:
            await client.call_tool("call_tool", {"name": "flaky__crash", "arguments": {}})
            found = await client.call_tool("find_tools", {"query": "say hello"})
    text = text_of(found)
    assert text.startswith("flaky__hello (server flaky) [server down (")
    assert "exited with status 3" in text and "a call restarts it]: says hello" in text


def _fuzzed_index() -> tuple[ToolIndex, set[str]]:
    words = ["read", "file", "git", "log", "fetch", "url", "near", "or", "and", "not", "*", '"', "^", ":"]
    routes = {}
    for number in range(40):
        name = f"{words[number % len(words)]}_{words[(number * 7) % len(words)]}_{number}"
        description = " ".join(words[(number + k) % len(words)] for k in range(8))
        schema = {"type": "object", "properties": {words[number % 5]: {"type": "string", "description": description}}}
        tool = types.Tool(name=name, description=description, input_schema=schema)
        routes[f"s__{name}"] = catalog_route("s", name, tool)
    index = ToolIndex()
    index.follow(routes)
    return index, set(routes)


FUZZED_INDEX, FUZZED_TOOLS = _fuzzed_index()


def test_names_split_into_words_at_underscores_dashes_and_camel_case() -> None:
    assert words_of("git_log") == ["git", "log"]
    assert words_of("trigger-long-running-operation") == ["trigger", "long", "running", "operation"]
    assert words_of("readTextFile") == ["read", "text", "file"]
    assert words_of("HTTPServerError v2") == ["http", "server", "error", "v2"]


def test_a_query_with_search_syntax_is_taken_as_words() -> None:
    index = ToolIndex()
    assert index.search('NEAR(" OR * -col: ^', 5) == []
    assert index.search("", 5) == []


@settings(max_examples=300, deadline=None)
@given(need=st.text(max_size=2_000), limit=st.integers(min_value=1, max_value=20))
def test_no_query_breaks_the_index_and_every_answer_is_a_listed_tool(need: str, limit: int) -> None:
    found = FUZZED_INDEX.search(need, limit)
    assert len(found) <= limit and set(found) <= FUZZED_TOOLS


async def test_cancelling_a_call_tool_request_cancels_the_downstream_call() -> None:
    started, cancelled = anyio.Event(), anyio.Event()
    down = MCPServer("gate")

    @down.tool(structured_output=False)
    async def gated() -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        return "never"

    async with proxied({"g": down}, settings={**SEARCH, "asyncTimeoutSecs": 60}) as client:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "call_tool", {"name": "g__gated", "arguments": {}})
                await started.wait()
                tg.cancel_scope.cancel()
            await cancelled.wait()


async def test_each_session_lists_only_the_tools_it_found() -> None:
    async with running_proxy({"r": repo_tools()}, settings=SEARCH) as proxy:
        async with Client(build_server(proxy), mode="legacy") as one, Client(build_server(proxy), mode="legacy") as two:
            with anyio.fail_after(10):
                await one.call_tool("find_tools", {"query": "commit log", "limit": 1})
                await two.call_tool("find_tools", {"query": "read a text file", "limit": 1})
                first = names((await one.list_tools(cache_mode="refresh")).tools)
                second = names((await two.list_tools(cache_mode="refresh")).tools)
    assert first == CATALOG | {"r__git_log"}
    assert second == CATALOG | {"r__readTextFile"}


async def test_two_connections_of_one_owners_session_keep_their_own_found_tools() -> None:
    config = parse_config({"mcpServers": {"r": {"command": "in-process"}}, "settings": SEARCH})
    (spec,) = specs_from_config(config)
    down = repo_tools()
    starting = Proxy.start(config, specs=[replace(spec, target=lambda: down)], shared=True)
    async with starting as proxy:
        async with Client(build_server(proxy), mode="legacy") as one, Client(build_server(proxy), mode="legacy") as two:
            with anyio.fail_after(10):
                await one.call_tool("find_tools", {"query": "commit log", "limit": 1})
                first = names((await one.list_tools(cache_mode="refresh")).tools)
                second = names((await two.list_tools(cache_mode="refresh")).tools)
                (session,) = proxy.sessions.live
    assert first == CATALOG | {"r__git_log"}
    assert second == CATALOG
    assert session.owner is not None  # one session of the user, shared by both connections
