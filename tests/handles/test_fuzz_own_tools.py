"""Fuzzing claimcheck's own tools: no argument, however odd, crashes the server or leaks a traceback."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.handles import Downstream, client_of, handle_in, handles_proxy
from tests.support.proxies import text_of

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=10,
)
KEYS = [
    *("handle", "extract", "mode", "slice", "handles", "timeout_secs", "file", "regex", "start", "lines"),
    *("headOrTail", "before", "after", "caseSensitive", "maxMatches", "anchor", "window", "match_index", "length"),
    "query",
]
TOOLS = ["tool_output", "wait_for_tool_output", "list_tool_outputs", "cancel_tool_output", "Read", "Grep"]
ARGUMENTS = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), JSON, max_size=5)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(st.sampled_from(TOOLS), ARGUMENTS, st.booleans()), min_size=1, max_size=6))
def test_any_arguments_give_a_tool_result_without_a_traceback(calls: list[tuple[str, dict[str, Any], bool]]) -> None:
    async def run() -> None:
        down = Downstream()
        async with handles_proxy(down) as proxy, client_of(proxy) as client:
            with anyio.fail_after(30):
                handle = handle_in(text_of(await client.call_tool("down__big", {"lines": 400})))
                for tool, arguments, use_real_handle in calls:
                    if use_real_handle:
                        key = "file" if tool in ("Read", "Grep") else "handle"
                        arguments = {**arguments, key: handle}
                    if tool == "wait_for_tool_output":
                        arguments = {**arguments, "timeout_secs": 0}  # nothing would end a longer wait
                    result = await client.call_tool(tool, arguments)
                    assert isinstance(result, types.CallToolResult)
                    assert "Traceback" not in text_of(result) and 'File "' not in text_of(result)
                alive = await client.call_tool("down__echo", {"text": "still serving"})
                assert text_of(alive) == "still serving"

    anyio.run(run)


@pytest.mark.parametrize("tool", TOOLS)
def test_arguments_that_are_not_an_object_are_refused_cleanly(tool: str) -> None:
    async def run() -> types.CallToolResult:
        down = Downstream()
        async with handles_proxy(down) as proxy, client_of(proxy) as client:
            with anyio.fail_after(10):
                return await client.call_tool(tool, {"handle": ["not", "a", "string"], "file": {"x": 1}})

    result = anyio.run(run)
    if tool != "list_tool_outputs":
        assert result.is_error
    assert "Traceback" not in text_of(result)
