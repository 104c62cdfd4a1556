"""Nothing a client sends is echoed back unbounded: an error quotes at most 200 characters of any input."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from server.errors import clip
from tests.support.proxies import proxied, text_of

pytestmark = pytest.mark.anyio

HUGE = "x" * (1 << 20)
MAX_REPLY = 8 * 1024
MARK = f"…({1 << 20} bytes)"


def catalogue() -> MCPServer:
    server = MCPServer("cat")

    @server.tool(structured_output=False)
    def echo(text: str) -> str:
        return text

    @server.resource("cat://greeting")
    def greeting() -> str:
        return "hello"

    @server.prompt()
    def ask(topic: str) -> str:
        return f"tell me about {topic}"

    return server


def size(result: types.CallToolResult) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


def test_clip_keeps_200_characters_and_says_how_big_the_whole_was() -> None:
    assert clip("short") == "short"
    assert clip("é" * 300) == "é" * 200 + "…(600 bytes)"
    assert clip(HUGE) == "x" * 200 + MARK


@pytest.mark.parametrize(
    ("tool", "arguments", "problem"),
    [
        ("tool_output", {"handle": HUGE, "extract": "all"}, "Unknown handle"),
        ("wait_for_tool_output", {"handles": [HUGE] * 20}, "Unknown handle for this session"),  # named once
        ("cancel_tool_output", {"handle": HUGE}, "Unknown handle"),
        ("Read", {"file": HUGE}, "Unknown file"),
        ("Grep", {"file": HUGE, "regex": HUGE}, "Unknown file"),
        ("tool_output", {"handle": "h", HUGE: 1}, "Invalid arguments for tool_output"),
        ("tool_output", {"handle": "h", **{f"{HUGE[:50_000]}{i}": i for i in range(20)}}, "and 15 more"),
        ("Read", {"file": "h", HUGE: 1}, "Invalid arguments for Read"),
        ("cat__echo", {"text": "hi", "background": HUGE}, '"background" must be true or false'),
        (HUGE, {}, "Unknown tool"),
    ],
)
async def test_a_megabyte_of_input_gets_a_small_error_that_still_names_the_problem(
    tool: str, arguments: dict[str, Any], problem: str
) -> None:
    async with proxied({"cat": catalogue()}) as client:
        with anyio.fail_after(10):
            result = await client.call_tool(tool, arguments)
    assert result.is_error
    assert size(result) < MAX_REPLY
    assert problem in text_of(result)
    if problem.startswith("Unknown"):
        assert MARK in text_of(result)


@pytest.mark.parametrize(
    ("method", "problem"),
    [("prompt", "Unknown prompt"), ("resource", "Unknown resource"), ("completion", "Unknown resource")],
)
async def test_a_megabyte_prompt_name_or_uri_gets_a_small_error(method: str, problem: str) -> None:
    async with proxied({"cat": catalogue(), "other": catalogue()}) as client:
        with anyio.fail_after(10), pytest.raises(MCPError) as raised:
            if method == "prompt":
                await client.get_prompt(HUGE, {"topic": "x"})
            elif method == "resource":
                await client.read_resource(f"cat://{HUGE}")
            else:
                await client.complete(types.ResourceTemplateReference(uri=f"cat://{HUGE}"), {"name": "a", "value": "b"})
    error = raised.value.error
    assert problem in error.message and MARK[:2] in error.message
    assert len(error.model_dump_json().encode()) < MAX_REPLY
