"""Hostile outputs and arguments through the real tool surface: deep JSON is stored and read like any other, a
JMESPath query is bounded in size, nesting, memory and time before and while it runs, and a slice's anchor of
any length is a clear answer."""

from __future__ import annotations

import json
import re
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import jmespath
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from extraction import TextSource
from extraction.source import find_all
from server.downstream.spooled import SpooledOutput, kept_result
from server.handles import json_eval, retrieval
from server.handles.json_view import JsonViewError, query
from server.upstream.surface import build_server
from tests.support.proxies import running_proxy, text_of

pytestmark = pytest.mark.anyio

THRESHOLD = 1000
HANDLE = re.compile(r"session-[0-9a-f]{32}/[0-9a-f]{32}")
DEEP = 5000


def deep_array(depth: int) -> str:
    return "[" * depth + "]" * depth


def deep_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def records(count: int = 800) -> str:
    return json.dumps({"items": [{"id": i, "msg": "x" * 40} for i in range(count)]})


def text_lines(count: int) -> str:
    return "".join(f"line {i:06d} of the big output, with words to count\n" for i in range(count))


def downstream() -> MCPServer:
    server = MCPServer("down")

    @server.tool(structured_output=False)
    def deep(kind: str = "array", depth: int = DEEP) -> str:
        return deep_array(depth) if kind == "array" else deep_object(depth)

    @server.tool(structured_output=False)
    def data() -> str:
        return records()

    @server.tool(structured_output=False)
    def lines(count: int) -> str:
        return text_lines(count)

    @server.tool(structured_output=False)
    def echo(text: str) -> str:
        return text

    return server


@asynccontextmanager
async def client(threshold: int = THRESHOLD) -> AsyncIterator[Client]:
    settings = {"asyncTokenThreshold": threshold, "asyncTimeoutSecs": 30}
    async with running_proxy({"down": downstream()}, settings=settings) as proxy:
        async with Client(build_server(proxy), mode="legacy") as session:
            yield session


async def stored(session: Client, tool: str, **args: Any) -> str:
    result = await session.call_tool(tool, args)
    assert not result.is_error, text_of(result)
    assert text_of(result).startswith("Tool output is too large"), text_of(result)
    match = HANDLE.search(text_of(result))
    assert match, text_of(result)
    return match.group(0)


async def json_view(session: Client, handle: str, expression: str | None = None) -> tuple[bool, str]:
    args = {"handle": handle, "mode": "json", **({"query": expression} if expression is not None else {})}
    result = await session.call_tool("tool_output", args)
    return bool(result.is_error), text_of(result)


@pytest.mark.parametrize("kind", ["array", "object"])
async def test_a_5000_deep_output_gets_a_handle_and_reads_like_any_other(kind: str) -> None:
    async with client() as session:
        with anyio.fail_after(60):
            handle = await stored(session, "down__deep", kind=kind)
            shape = await json_view(session, handle)
            read = await session.call_tool("Read", {"file": handle})
            grep = await session.call_tool("Grep", {"file": handle, "regex": "a|\\["})
            alive = await session.call_tool("down__echo", {"text": "still serving"})
    expected = "array with 1 item" if kind == "array" else 'object with 1 key:\n  "a": object (1 key)'
    assert shape[0] is False and shape[1].endswith(expected), shape
    assert not read.is_error and not grep.is_error
    assert text_of(alive) == "still serving"


@pytest.mark.parametrize(
    ("kind", "expression", "answer"),
    [
        ("object", "[0][0][0]", "null"),  # not an array: nothing to build
        ("array", "a.a.a", "null"),
        ("object", "a.a.a", "nested deeper than 200 levels"),
        ("array", "[0][0][0]", "nested deeper than 200 levels"),
        ("array", "length(@)", "nested deeper than 200 levels"),  # needs the whole document
    ],
)
async def test_queries_on_a_5000_deep_output_answer_or_say_it_is_too_deep(
    kind: str, expression: str, answer: str
) -> None:
    async with client() as session:
        with anyio.fail_after(60):
            handle = await stored(session, "down__deep", kind=kind)
            failed, text = await json_view(session, handle, expression)
    assert failed == (answer != "null"), text
    assert text.endswith(answer) if answer == "null" else answer in text


BOMB = "to_string(@)" + " | join('', [@, @])" * 16


async def test_a_query_that_doubles_a_string_sixteen_times_is_stopped_in_bounded_memory() -> None:
    async with client() as session:
        with anyio.fail_after(120):
            handle = await stored(session, "down__data")
            tracemalloc.start()
            try:
                failed, text = await json_view(session, handle, BOMB)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            alive = await session.call_tool("down__echo", {"text": "still serving"})
    assert failed and "The query was stopped: " in text and "MiB" in text, text
    assert peak < 256 << 20, peak  # unbounded, it took 2.3 GB before it failed
    assert text_of(alive) == "still serving"


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("(" * 5000 + "@" + ")" * 5000, "characters, over the 4096 allowed"),
        ("a" * (1 << 20), "characters, over the 4096 allowed"),
        ("(" * 1000 + "@" + ")" * 1000, "nests more than 32 levels deep"),
        ("!" * 3000 + "a", "nests more than 32 levels deep"),
        ("& " * 1500 + "a", "nests more than 32 levels deep"),
        ("`" + "[" * 2000 + "]" * 2000 + "`", "nests more than 32 levels deep"),
        ("|".join(["a"] * 1000), "levels of expressions"),
        ("||".join(["a"] * 1000), "levels of expressions"),
        ("[" + "0" * 4090 + "]", "refused"),  # a number of 4 090 digits: int() refuses 4 300, this passes
    ],
)
async def test_a_query_past_its_budget_is_refused_before_it_runs(expression: str, why: str) -> None:
    async with client() as session:
        with anyio.fail_after(60):
            handle = await stored(session, "down__data")
            failed, text = await json_view(session, handle, expression)
            alive = await session.call_tool("down__echo", {"text": "still serving"})
    if why == "refused":
        assert not failed or "Invalid JMESPath query" in text, text
    else:
        assert failed and "The query is refused: " in text and why in text, text
    assert text_of(alive) == "still serving"


@pytest.mark.parametrize(
    "expression",
    [
        " | ".join(["[@, @]"] * 40) + " | to_string(@)",  # a value shared 2^40 times
        " | ".join(["[@, @]"] * 40) + " | " + "[]" * 30 + " | length(@)",  # flattened out
        " | ".join(["[@, @]"] * 40) + " | @ == @",
        "join(to_string(@), [" + ",".join(["''"] * 1000) + "])",  # the separator repeated
        "map(&to_string(@), [" + ",".join(["@"] * 1000) + "]) | to_string(@)",
    ],
)
def test_queries_that_multiply_their_input_are_stopped(expression: str) -> None:
    with pytest.raises(JsonViewError, match=r"The query was stopped: .* MiB"):
        query(TextSource.of(records()), expression, max_chars=1 << 30, grep_hint="Grep")


def test_a_query_past_its_time_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json_eval, "EVAL_MAX_SECONDS", 0.0)
    with pytest.raises(JsonViewError, match=r"The query was stopped: the query took over 0 s to evaluate"):
        query(TextSource.of(records()), "sort_by(items, &msg)", max_chars=1 << 30, grep_hint="Grep")


NESTED = {"a": {"b": {"c": [[1, [2, 3]], {"d": 4}]}}}


@pytest.mark.parametrize("expression", ["a.b.c", "a.b.c[0][1][0]", "a.b.c[1].d", "a.b.c[0][1]", "a.b.x.y"])
def test_paths_of_three_steps_and_more_give_what_jmespath_gives(expression: str) -> None:
    text, note = query(TextSource.of(json.dumps(NESTED)), expression, max_chars=1000, grep_hint="Grep")
    assert (json.loads(text), note) == (jmespath.search(expression, NESTED), "")


LINES = 64_000  # 3.3 MB


async def test_an_anchor_over_a_mebibyte_is_found_and_sliced_when_the_threshold_allows() -> None:
    text = text_lines(LINES)
    anchor = text[text.index("line 020000") : text.index("line 041000")]  # 1.1 MB, more than RE2 compiles
    async with client(threshold=300_000) as session:
        with anyio.fail_after(120):
            handle = await stored(session, "down__lines", count=LINES)
            result = await session.call_tool(
                "tool_output", {"handle": handle, "mode": "slice", "slice": {"anchor": anchor, "window": 20}}
            )
    at = text.index(anchor)
    assert not result.is_error, text_of(result)[:300]
    assert text_of(result).split(":\n\n", 1)[1] == (
        f"[characters {at - 10}-{at + len(anchor) + 10} of {len(text)}]\n{text[at - 10 : at + len(anchor) + 10]}"
    )


@pytest.mark.parametrize("present", [True, False])
async def test_an_anchor_over_the_threshold_is_refused_with_the_reason(present: bool) -> None:
    text = text_lines(LINES)
    anchor = text[: (1 << 20) + 1] if present else "no such text " * 100_000
    async with client() as session:
        with anyio.fail_after(60):
            handle = await stored(session, "down__lines", count=LINES)
            result = await session.call_tool(
                "tool_output", {"handle": handle, "mode": "slice", "slice": {"anchor": anchor}}
            )
    assert result.is_error
    assert "The anchor alone is over the 1000-token threshold; use a shorter one" in text_of(result)


async def test_a_long_search_for_the_nth_anchor_stops_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retrieval, "ANCHOR_SEARCH_SECONDS", 0.0)
    async with client() as session:
        with anyio.fail_after(60):
            handle = await stored(session, "down__lines", count=LINES)
            result = await session.call_tool(
                "tool_output",
                {"handle": handle, "mode": "slice", "slice": {"anchor": "line", "match_index": 10**9}},
            )
    assert result.is_error
    assert "The search for the anchor stopped after 0 s at occurrence 256" in text_of(result)


def test_a_needle_too_long_for_re2_is_found_like_any_other() -> None:
    needle = "x" + "a" * ((1 << 20) + 7)
    text = "b" * (3 << 20) + needle + "a" + needle
    assert list(find_all(TextSource.of(text), needle)) == [3 << 20, (3 << 20) + len(needle) + 1]


def test_a_kept_message_too_deep_to_validate_gives_way_to_the_stored_text(tmp_path: Any) -> None:
    raw = tmp_path / "raw.json"
    deep = "[" * 5000 + "]" * 5000
    raw.write_text(
        '{"jsonrpc": "2.0", "id": 1, "result": {"content": [], "structuredContent": {"a": ' + deep + "}}}",
        encoding="utf-8",
    )
    spooled = SpooledOutput(None, 0, 0, 0, False, "", None, raw, False)
    assert kept_result(spooled) is None  # not RecursionError: `materialize` then uses the stored text
