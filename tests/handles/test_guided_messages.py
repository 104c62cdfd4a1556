"""The messages name what works for this client, cut outputs are said everywhere, the JSON view."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import jmespath
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from extraction import TextSource
from server.handles import messages
from server.handles.calls import Call
from server.handles.json_view import JsonViewError, query, shape
from server.proxy import Proxy
from server.status.tasks import task_json
from server.upstream.surface import build_server
from tests.support.proxies import running_proxy, text_of

pytestmark = pytest.mark.anyio

THRESHOLD = 1000
HANDLE = re.compile(r"session-[0-9a-f]{32}/[0-9a-f]{32}")
NEEDLES = ("NEEDLE-ONE", "NEEDLE-TWO", "NEEDLE-THREE")


def log_text(lines: int = 400) -> str:
    return "".join(f"2026-11-23 INFO worker {i} finished a batch of records\n" for i in range(lines))


def single_line_json(target_bytes: int = 5 << 20) -> str:
    """About `target_bytes` of minified JSON on one line, three records of which hold a needle."""
    record = {"id": 0, "level": "info", "message": "x" * 200, "tags": ["alpha", "beta"]}
    count = target_bytes // (len(json.dumps(record)) + 1)
    at = {count // 5: NEEDLES[0], count // 2: NEEDLES[1], count - 3: NEEDLES[2]}
    items = [
        {"id": i, "level": "info", "message": at.get(i, "routine message " * 12), "tags": ["alpha", "beta"]}
        for i in range(count)
    ]
    return json.dumps({"count": count, "source": "bench", "items": items}, separators=(",", ":"))


def downstream() -> MCPServer:
    server = MCPServer("down")

    @server.tool(structured_output=False)
    def log(lines: int = 400) -> str:
        return log_text(lines)

    @server.tool(structured_output=False)
    def data() -> str:
        return single_line_json()

    return server


@asynccontextmanager
async def proxied(settings: dict[str, Any] | None = None, **client: Any) -> AsyncIterator[tuple[Proxy, Client]]:
    base = {"asyncTokenThreshold": THRESHOLD, "asyncTimeoutSecs": 30}
    async with running_proxy({"down": downstream()}, settings={**base, **(settings or {})}) as proxy:
        async with Client(build_server(proxy), mode="legacy", **client) as session:
            yield proxy, session


def handle_in(text: str) -> str:
    match = HANDLE.search(text)
    assert match, text
    return match.group(0)


def stored_call(proxy: Proxy, handle: str) -> Call:
    (call,) = [c for s in proxy.sessions.live if (c := s.call(handle)) is not None]
    return call


def ways(handle: str, word: str) -> str:
    return (
        f'- Grep(file = "{handle}", regex = "{word}") finds the lines that match a regular expression.\n'
        f'- Read(file = "{handle}", start = 0, lines = 100) reads numbered lines.\n'
        f'- tool_output(handle = "{handle}", mode = "slice", slice = {{"anchor": "{word}", "window": 2000}}) '
        "reads the characters around a match, however long its line."
    )


async def test_without_an_llm_the_too_large_message_names_grep_read_and_slice_and_never_extract() -> None:
    async with proxied() as (proxy, client):
        with anyio.fail_after(30):
            text = text_of(await client.call_tool("down__log", {}))
        handle = handle_in(text)
        call = stored_call(proxy, handle)
    assert "extract" not in text
    assert text == messages.too_large_message(call, messages.Guide(llm=False, word="INFO"))
    assert text.endswith("No LLM is available here, so read it with these:\n" + ways(handle, "INFO"))


async def test_with_an_endpoint_the_too_large_message_names_extract_first() -> None:
    settings = {"extraction": {"baseUrl": "http://127.0.0.1:9/v1", "model": "m"}}  # never called here
    async with proxied(settings) as (proxy, client):
        with anyio.fail_after(30):
            text = text_of(await client.call_tool("down__log", {}))
        call = stored_call(proxy, handle_in(text))
    lines = text.splitlines()
    assert lines[1] == f'Call tool_output(handle = "{call.handle}", extract = "what to extract").'
    assert text.index("extract =") < text.index("Grep(")
    assert text == messages.too_large_message(call, messages.Guide(llm=True, word="INFO"))


async def test_with_sampling_the_too_large_message_names_extract_first() -> None:
    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        raise AssertionError("not asked in this test")

    async with proxied(sampling_callback=sample) as (_, client):
        with anyio.fail_after(30):
            text = text_of(await client.call_tool("down__log", {}))
    assert text.splitlines()[1].startswith("Call tool_output(") and 'extract = "what to extract"' in text


async def test_with_extraction_off_no_message_names_extract_even_for_a_sampling_client() -> None:
    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        raise AssertionError("not asked in this test")

    async with proxied({"extraction": {"provider": "none"}}, sampling_callback=sample) as (_, client):
        with anyio.fail_after(30):
            text = text_of(await client.call_tool("down__log", {}))
    assert "extract =" not in text and "Grep(" in text


async def test_a_json_output_is_announced_with_its_keys_and_a_streamable_query_that_finds_a_needle() -> None:
    async with proxied() as (_, client):
        with anyio.fail_after(60):
            text = text_of(await client.call_tool("down__data", {}))
            handle = handle_in(text)
            example = re.search(r'mode = "json", query = ("(?:[^"\\]|\\.)*")\)', text)
            assert example, text
            found = text_of(
                await client.call_tool(
                    "tool_output",
                    {"handle": handle, "mode": "json", "query": "items[?contains(message, 'NEEDLE')].id"},
                )
            )
            suggested = await client.call_tool(
                "tool_output", {"handle": handle, "mode": "json", "query": json.loads(example.group(1))}
            )
    assert '- It is JSON (an object with keys "count", "source", "items")' in text
    assert json.loads(example.group(1)).startswith("items[?contains(to_string(@), ")
    assert not suggested.is_error, text_of(suggested)
    count = json.loads(single_line_json())["count"]
    assert json.loads(found.rsplit("\n", 1)[1]) == [count // 5, count // 2, count - 3]


async def test_a_query_or_slice_without_a_mode_takes_its_mode_and_one_another_mode_would_ignore_is_refused() -> None:
    """Models leave `mode` out: `query` alone is a JSON query, `slice` alone a slice. Given with another mode, or
    beside `extract`, they were ignored in silence; now the call fails saying which mode they belong to."""
    async with proxied() as (_, client):
        with anyio.fail_after(60):
            handle = handle_in(text_of(await client.call_tool("down__data", {})))
            needle = "items[?contains(message, 'NEEDLE')].id"
            queried = await client.call_tool("tool_output", {"handle": handle, "query": needle})
            sliced = await client.call_tool("tool_output", {"handle": handle, "slice": {"start": 0, "length": 12}})
            raw = await client.call_tool("tool_output", {"handle": handle, "mode": "raw", "query": needle})
            both = await client.call_tool("tool_output", {"handle": handle, "query": needle, "extract": "the ids"})
            blank = await client.call_tool("tool_output", {"handle": handle, "mode": "truncate", "query": " "})
    count = json.loads(single_line_json())["count"]
    assert not queried.is_error and "STRATEGY:json:" in text_of(queried), text_of(queried)
    assert json.loads(text_of(queried).rsplit("\n", 1)[1]) == [count // 5, count // 2, count - 3]
    assert not sliced.is_error and "STRATEGY:slice:" in text_of(sliced), text_of(sliced)
    assert single_line_json()[:12] in text_of(sliced)
    assert raw.is_error and text_of(raw).endswith(
        '`query` belongs to mode "json", and this call asks for mode "raw": give mode "json", or leave `query` out.'
    )
    assert both.is_error and 'asks for mode "auto" with `extract`: give mode "json"' in text_of(both)
    assert not blank.is_error and "STRATEGY:truncate:" in text_of(blank)


async def test_the_json_view_shows_the_shape_of_a_5_mb_single_line_json() -> None:
    async with proxied() as (_, client):
        with anyio.fail_after(60):
            handle = handle_in(text_of(await client.call_tool("down__data", {})))
            answer = text_of(await client.call_tool("tool_output", {"handle": handle, "mode": "json"}))
    count = json.loads(single_line_json())["count"]
    assert answer.endswith(
        "The shape of the JSON (query it with `query`, in JMESPath):\n"
        "object with 3 keys:\n"
        '  "count": number\n'
        '  "source": string (5 characters)\n'
        f'  "items": array ({count} items)'
    )


async def test_a_cut_output_is_said_in_the_message_the_listing_grep_read_slice_and_the_api() -> None:
    async with proxied({"maxOutputBytes": 5000}) as (proxy, client):
        with anyio.fail_after(30):
            text = text_of(await client.call_tool("down__log", {}))
            handle = handle_in(text)
            call = stored_call(proxy, handle)
            listing = text_of(await client.call_tool("list_tool_outputs", {}))
            last = "worker 399 finished"  # a line of the part that was cut off
            grep = text_of(await client.call_tool("Grep", {"file": handle, "regex": last}))
            read = text_of(await client.call_tool("Read", {"file": handle, "lines": 5}))
            piece = await client.call_tool(
                "tool_output", {"handle": handle, "mode": "slice", "slice": {"start": 0, "length": 100}}
            )
    produced = len(log_text().encode())
    note = (
        f"[claimcheck] this output was cut when stored: {call.bytes} of the {produced} bytes the tool produced "
        "were kept (maxOutputBytes), and only those were"
    )
    assert call.cut and call.bytes < produced
    assert f"Only the first part was kept: the tool produced {produced} bytes, and {call.bytes} bytes are" in text
    assert f"{call.bytes} bytes (cut: {produced} bytes produced, only these kept)" in listing
    assert grep.startswith(f"No matches for {last!r}") and grep.endswith(note + " searched.")
    assert read.endswith(note + " read.")
    assert note + " read." in text_of(piece)
    data = task_json(call)
    assert data["cut"] is True and data["producedBytes"] == produced and data["bytes"] == call.bytes


# -- the JSON view itself ----------------------------------------------------------------------------------

DOC = {
    "meta": {"n": 3, "who": "x"},
    "items": [{"id": i, "msg": "NEEDLE here" if i == 7 else "hello", "tags": [1, 2]} for i in range(20)],
    "title": "abc",
}
QUERIES = [
    "meta",
    "meta.who",
    "items[?contains(msg, 'NEEDLE')]",
    "items[*].id | [3]",
    "items[0].tags",
    "items[5].tags[1]",
    "nothere",
    "items[?id > `17`].msg",
    "items[].tags",
    "meta[*]",
    "items[-1].id",  # not streamed: the whole (small) document
    "keys(@)",
    "length(items)",
]


@pytest.mark.parametrize("expression", QUERIES)
def test_queries_give_what_jmespath_gives_on_the_whole_document(expression: str) -> None:
    text, note = query(TextSource.of(json.dumps(DOC)), expression, max_chars=100_000, grep_hint="Grep")
    assert json.loads(text) == jmespath.search(expression, DOC)
    assert note == ""


def test_a_query_that_needs_the_whole_of_a_big_document_points_to_grep(monkeypatch: pytest.MonkeyPatch) -> None:
    from server.handles import json_view

    monkeypatch.setattr(json_view, "WHOLE_MAX_BYTES", 100)
    with pytest.raises(JsonViewError, match=r"needs the whole document in memory.*Or use Grep"):
        query(TextSource.of(json.dumps(DOC)), "keys(@)", max_chars=100_000, grep_hint="use Grep")


def test_an_output_that_is_not_json_says_so() -> None:
    with pytest.raises(JsonViewError, match="The output is not JSON"):
        shape(TextSource.of("plain text\n"))


@pytest.mark.parametrize(
    "text", ["2026-11-23 INFO worker 0 finished\n", "12 started\n13 done\n", '"a" and more', "true x"]
)
def test_a_log_whose_first_token_reads_as_json_is_not_json_and_points_to_grep_and_read(text: str) -> None:
    for view in (
        lambda: shape(TextSource.of(text)),
        lambda: query(TextSource.of(text), "a", max_chars=1000, grep_hint=""),
    ):
        with pytest.raises(JsonViewError) as refused:
            view()
        assert str(refused.value).startswith("The output is not JSON (it starts like a ")
        assert "then goes on as text at character" in str(refused.value)
        assert str(refused.value).endswith("Search it with Grep or read it with Read instead.")


def test_a_single_json_scalar_and_json_lines_keep_their_shape() -> None:
    assert shape(TextSource.of(" 42 \n")) == ("a single number", "")
    assert shape(TextSource.of('{"a": 1}\n{"a": 2}\n'))[1] == "there is more text after the JSON value, at character 9"


def test_a_cut_json_gives_the_results_before_the_cut_and_says_so() -> None:
    text = json.dumps(DOC)
    cut = text[: text.index('"id": 9')] + "\n[claimcheck] output cut at 10 bytes of 20 (maxOutputBytes)\n"
    result, note = query(TextSource.of(cut), "items[*].id", max_chars=100_000, grep_hint="Grep")
    assert json.loads(result) == list(range(9))
    assert note.startswith("the JSON ends early")


def test_results_over_the_budget_are_cut_with_a_note() -> None:
    result, note = query(TextSource.of(json.dumps(DOC)), "items[*].id", max_chars=12, grep_hint="Grep")
    assert json.loads(result) == list(range(len(json.loads(result))))
    assert note.startswith("only the first") and len(result) <= 12


def test_elements_cut_anywhere_by_the_read_pieces_are_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from server.handles import json_reader

    monkeypatch.setattr(json_reader, "PIECE", 7)  # every element and key is split across pieces somewhere
    text = json.dumps(DOC)
    for expression in ("items[?contains(msg, 'NEEDLE')].id", "items[*].tags[1]", "title", "meta"):
        result, note = query(TextSource.of(text), expression, max_chars=100_000, grep_hint="Grep")
        assert (json.loads(result), note) == (jmespath.search(expression, DOC), ""), expression
    assert shape(TextSource.of(text)) == shape(TextSource.of(text + " "))


_MEMORY_PROBE = """
import json, re, sys
from pathlib import Path
from fs_sandbox import open_file
from server.handles.json_view import query, shape

def hwm():
    return int(re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1)) * 1024

path = Path(sys.argv[1])
with open_file(path.parent, path.name) as source:
    shape(source)
    query(source, "items[0]", max_chars=1000, grep_hint="Grep")  # warm: imports, the scanner
    before = hwm()
    text, _ = shape(source)
    found, _ = query(source, "items[?contains(message, 'NEEDLE')].id", max_chars=1000, grep_hint="Grep")
    print(json.dumps({"growth": hwm() - before, "shape": text, "found": json.loads(found)}))
"""


@pytest.mark.subprocess
def test_the_json_view_reads_a_32_mib_output_in_bounded_memory(tmp_path: Any) -> None:
    import subprocess
    import sys

    record = '{"id": %d, "level": "info", "message": "routine message number %d of many"}'
    path = tmp_path / "big.json"
    count = 0
    with path.open("w") as out:
        out.write('{"items": [')
        while out.tell() < 32 << 20:
            chunk = ",".join(record % (n, n) for n in range(count, count + 10_000))
            out.write(("," if count else "") + chunk)
            count += 10_000
        out.write(',{"id": -1, "message": "the NEEDLE"}]}')
    probe = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, str(path)], capture_output=True, text=True, timeout=600, check=True
    )
    answer = json.loads(probe.stdout)
    assert answer["found"] == [-1]
    assert answer["shape"] == f'object with 1 key:\n  "items": array ({count + 1} items)'
    assert answer["growth"] < 16 << 20, answer["growth"]  # building it whole would take ~10x the 32 MiB


def test_runs_of_elements_read_in_one_call_give_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    from server.handles import json_reader, json_shape

    runs: list[bool] = []
    batch = json_reader.read_batch

    def counted(reader: Any) -> Any:
        found = batch(reader)
        runs.append(found is not None)
        return found

    monkeypatch.setattr(json_reader, "read_batch", counted)
    monkeypatch.setattr(json_shape, "read_batch", counted)
    items = [
        {"id": i, "note": 'a "}," inside', "sub": {"x": [i, {"y": i}]}, "tag": "NEEDLE" if i % 97 == 5 else "-"}
        for i in range(3000)
    ]
    text = json.dumps({"items": items})
    for expression in (
        "items[?contains(tag, 'NEEDLE')].id",
        "items[*].sub.x[1].y | [-1]",
        "items[?tag == 'NEEDLE'].id",
    ):
        result, _ = query(TextSource.of(text), expression, max_chars=1_000_000, grep_hint="Grep")
        assert json.loads(result) == jmespath.search(expression, {"items": items}), expression
    assert any(runs)  # some runs were read whole


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ([], "array with 0 items"),
        ({}, "object with 0 keys:"),
        ([1, [2], {"a": "},"}], "array with 3 items"),
        ([{"a": 1, "b": 2}] * 5000, 'array with 5000 items\n  the first item is an object with keys: "a", "b"'),
        (
            {"x": [{"q": "},"}] * 4000, "y": {}},
            'object with 2 keys:\n  "x": array (4000 items)\n  "y": object (0 keys)',
        ),
        ("text", "a single string (4 characters)"),
    ],
)
def test_shapes(document: Any, expected: str) -> None:
    assert shape(TextSource.of(json.dumps(document))) == (expected, "")


def test_an_invalid_query_with_a_huge_token_is_quoted_briefly() -> None:
    with pytest.raises(JsonViewError) as caught:
        query(TextSource.of('{"a": ["x"]}'), "a " + "b" * 4000, max_chars=1000, grep_hint="Grep")
    message = str(caught.value)
    assert message.startswith("Invalid JMESPath query: Unexpected token: bbb")
    assert len(message) < 1000 and message.endswith(" bytes)")


def test_an_invalid_query_says_where_in_the_query_it_broke() -> None:
    with pytest.raises(JsonViewError) as caught:
        query(TextSource.of('{"records": []}'), "records[[[", max_chars=1000, grep_hint="Grep")
    assert str(caught.value) == (
        'Invalid JMESPath query: Expecting: star, got: lbracket: Parse error at column 8, token "[" (LBRACKET), '
        'in "records[[["'
    )
