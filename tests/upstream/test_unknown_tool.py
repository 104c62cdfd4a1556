"""An unknown tool is answered with the listed names it was most likely meant to be."""

from __future__ import annotations

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from server.upstream.surface import did_you_mean
from tests.support.proxies import proxied, text_of

pytestmark = pytest.mark.anyio


def git_server() -> MCPServer:
    down = MCPServer("git")

    @down.tool(structured_output=False)
    def git_log() -> str:
        return "log"

    @down.tool(structured_output=False)
    def git_status() -> str:
        return "clean"

    return down


async def test_a_tool_called_without_its_server_s_prefix_is_suggested_with_it() -> None:
    async with proxied({"git": git_server()}) as client:
        with anyio.fail_after(10):
            result = await client.call_tool("git_log", {})
    assert result.is_error
    assert text_of(result) == (
        'Unknown tool "git_log". Did you mean "git__git_log"? Call tools/list to see the tools claimcheck offers.'
    )


async def test_a_misspelt_tool_gets_the_closest_listed_names_and_a_far_one_none() -> None:
    async with proxied({"git": git_server()}) as client:
        with anyio.fail_after(10):
            typo = await client.call_tool("git__git_stauts", {})
            far = await client.call_tool("web__fetch", {})
    assert 'Unknown tool "git__git_stauts". Did you mean "git__git_status"' in text_of(typo)
    assert text_of(far) == 'Unknown tool "web__fetch". Call tools/list to see the tools claimcheck offers.'


def test_suggestions_cover_claimcheck_s_own_tools_another_case_and_several_names() -> None:
    known = ["git__git_log", "git__git_status", "tool_output", "Read"]
    assert did_you_mean("read", known, "__") == ' Did you mean "Read"?'
    assert did_you_mean("tool_outptu", known, "__") == ' Did you mean "tool_output"?'
    assert did_you_mean("git__git_lo", known, "__") == ' Did you mean "git__git_log" or "git__git_status"?'
    assert did_you_mean("x" * 10_000, known, "__") == ""  # no tool's name is that long: not compared
