"""Counts are said with the noun in the right number: "1 line", "2 lines", never "1 lines" nor "line(s)"."""

from __future__ import annotations

import re

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from extraction.wording import plural
from tests.support.proxies import proxied, text_of

pytestmark = pytest.mark.anyio

HANDLE = re.compile(r'handle = "(session-[0-9a-f]+/[0-9a-f]+)"')


def test_plural_says_one_and_many() -> None:
    assert [plural(n, "line") for n in (0, 1, 2)] == ["0 lines", "1 line", "2 lines"]
    assert plural(1, "match", "matches") == "1 match" and plural(3, "match", "matches") == "3 matches"


async def test_a_large_output_on_one_line_is_one_line_and_its_grep_one_matching_line() -> None:
    down = MCPServer("down")

    @down.tool(structured_output=False)
    def one_long_line() -> str:
        return "word " * 4000  # about 4000 tokens, on a single line

    async with proxied({"down": down}, settings={"asyncTokenThreshold": 500}) as client:
        with anyio.fail_after(10):
            stored = text_of(await client.call_tool("down__one_long_line", {}))
            found = HANDLE.search(stored)
            assert found, stored
            listed = text_of(await client.call_tool("list_tool_outputs", {}))
            grep = text_of(await client.call_tool("Grep", {"file": found.group(1), "regex": "word"}))
    head = stored.splitlines()[0]
    assert re.fullmatch(r"Tool output is too large \(20000 bytes, 1 line, \d+ tokens\)\.", head), head
    assert listed.startswith("1 output in this session:\n") and ", 1 line, " in listed
    assert grep.startswith("1 matching line for 'word' in ")
    assert not re.search(r"\b1 (lines|tokens|outputs|matching lines)\b|\(s\)", stored + listed + grep)
