"""A long result of a server whose rules are off comes back as the server gave it: images, `structuredContent` and
`_meta` kept, the items claimcheck adds (an error's note, the status footer) at the end of its content, streamed
from the spool's copy of the message, never held whole. A message a strict reader would refuse comes back as its
text, as before."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, ClientSession
from mcp.client.sse import sse_client

from server import sdk_compat
from server.downstream.json_spans import spans_in_file
from server.downstream.spool import MessageSpool, SpoolPolicy
from server.downstream.spooled import SpooledOutput, SpooledOutputs, materialize
from server.upstream.http_fast import PRIME_ENV
from server.upstream.kept_message import passable
from server.upstream.streamed import spooled_pieces, streamable
from tests.support.processes import PYTHON, announcing, demo_server_entry, program_entry, write_config
from tests.support.servers.raw_downstream import mixed_message, mixed_result
from tests.support.wire import serving

pytestmark = pytest.mark.anyio

PLACEHOLDER = "0123456789abcdef"
NOTE = {"type": "text", "text": "[claimcheck] a note"}
FOOTER = {"type": "text", "text": "[claimcheck] 1 running: x"}


async def spooled(directory: Path, data: bytes, *, whole: bool) -> SpooledOutput:
    """`data` through a spool whose `raw_keep` it passes (4 KiB here), kept whole or not, claimed."""
    outputs = SpooledOutputs()
    spooler = MessageSpool(SpoolPolicy(directory, 1 << 30, outputs, raw_keep=4096, whole=whole), "test")
    for start in range(0, len(data), 65536):
        await spooler.feed(data[start : start + 65536])
    answer = await spooler.finish()
    assert isinstance(answer, bytes)
    found = outputs.claim(types.CallToolResult.model_validate(json.loads(answer)["result"]))
    assert found is not None
    return found


async def answered(ident: Any, added: list[dict[str, Any]], output: SpooledOutput, ending: bytes = b"\n") -> bytes:
    """What `spooled_pieces` sends for a line with the placeholder's item and then `added`."""
    content = [{"type": "text", "text": PLACEHOLDER}, *added]
    line = json.dumps({"jsonrpc": "2.0", "id": ident, "result": {"content": content}}).encode() + ending
    return b"".join([piece async for piece in spooled_pieces(ident, line, PLACEHOLDER, output)])


@pytest.mark.parametrize(
    "result",
    [
        mixed_result(0.01),
        {"content": [], "structuredContent": {"big": "x" * 10_000}},
        {"structuredContent": {"big": "x" * 10_000}, "isError": True},
        {"content": [{"type": "text", "text": "y" * 10_000}], "_meta": {"a": [1, 2]}},
    ],
    ids=["mixed", "empty-content", "no-content", "text-and-meta"],
)
@pytest.mark.parametrize("added", [[], [NOTE, FOOTER]], ids=["nothing-added", "note-and-footer"])
async def test_a_message_kept_whole_is_answered_as_it_came_with_what_claimcheck_adds(
    tmp_path: Path, result: dict[str, Any], added: list[dict[str, Any]]
) -> None:
    data = json.dumps({"result": result, "jsonrpc": "2.0", "id": 991}, indent=1, ensure_ascii=False).encode()
    output = await spooled(tmp_path, data.replace(b"\n", b"") + b"\n", whole=True)
    assert output.raw_streamed and streamable(output)
    answer = await answered("client-7", added, output, ending=b"\n\n")
    assert answer.endswith(b"}\n\n")
    message = json.loads(answer)
    assert message["id"] == "client-7" and message["jsonrpc"] == "2.0"
    assert message["result"] == ({**result, "content": [*result.get("content", []), *added]} if added else result)
    assert os.listdir(tmp_path) == []  # the spool's files went with the answer


@pytest.mark.parametrize("server_says", [None, "incomplete"])
async def test_what_a_protocol_version_requires_of_every_result_is_added_unless_the_server_said_it(
    tmp_path: Path, server_says: str | None
) -> None:
    result = {**mixed_result(0.01), **({"resultType": server_says} if server_says else {})}
    output = await spooled(tmp_path, json.dumps({"jsonrpc": "2.0", "id": 2, "result": result}).encode(), whole=True)
    said = {"resultType": "complete", "isError": True, "_meta": {"claimcheck": 1}}  # the last two: the server's say
    line = {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": PLACEHOLDER}], **said}}
    pieces = spooled_pieces(2, json.dumps(line).encode() + b"\n", PLACEHOLDER, output)
    answer = json.loads(b"".join([piece async for piece in pieces]))["result"]
    assert answer == {**mixed_result(0.01), "resultType": server_says or "complete"}


@pytest.mark.parametrize("text", ['plain "quoted" \\ é 😀 \u2028 ', "x"], ids=["escapes", "ascii"])
async def test_the_walk_passes_over_what_the_spool_read_strictly_and_finds_the_same(tmp_path: Path, text: str) -> None:
    result = {**mixed_result(0.5), "structuredContent": {"text": text * 50_000}}
    data = json.dumps({"jsonrpc": "2.0", "id": 3, "result": result}, ensure_ascii=False).encode()
    output = await spooled(tmp_path, data, whole=True)
    assert output.raw is not None and sum(end - start for start, end in output.proven) > len(data) // 2
    assert spans_in_file(output.raw, output.proven) == spans_in_file(output.raw) is not None
    assert json.loads(await answered(3, [], output))["result"] == result


async def test_a_message_past_what_is_kept_to_pass_on_is_answered_with_its_head_and_why(tmp_path: Path) -> None:
    outputs = SpooledOutputs()
    spooler = MessageSpool(SpoolPolicy(tmp_path, 8000, outputs, raw_keep=4096, whole=True), "test")
    data = mixed_message(9, 0.05)  # 50 KiB: past 12 000 bytes, half as much again as its maxOutputBytes
    await spooler.feed(data)
    answer = await spooler.finish()
    assert isinstance(answer, bytes)
    output = outputs.claim(types.CallToolResult.model_validate(json.loads(answer)["result"]))
    assert output is not None and not streamable(output) and output.path is None
    text = materialize(output).content[0]
    assert isinstance(text, types.TextContent) and text.text.startswith('before the "image" é 😀\n{"type":"image"')
    assert text.text.endswith(
        f"its message was {len(data)} bytes, over the 12000 bytes claimcheck keeps to pass on as it came"
    )
    assert os.listdir(tmp_path) == []


async def test_without_whole_the_message_past_what_is_kept_is_answered_as_its_text(tmp_path: Path) -> None:
    output = await spooled(tmp_path, mixed_message(3, 0.01), whole=False)
    assert output.raw is None and not output.raw_streamed
    result = json.loads(await answered(3, [], output))["result"]
    assert [item["type"] for item in result["content"]] == ["text"] and "structuredContent" not in result


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (mixed_message(5, 0.01, nan=True), "NaN"),
        (json.dumps({"jsonrpc": "2.0", "id": 5, "result": {"content": [{"type": "weird", "x": "y" * 5000}]}}), "item"),
    ],
    ids=["nan", "unknown-item"],
)
async def test_a_message_a_strict_reader_refuses_is_answered_as_its_text(
    tmp_path: Path, line: bytes | str, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    data = line if isinstance(line, bytes) else line.encode() + b"\n"
    output = await spooled(tmp_path, data, whole=True)
    assert output.raw is not None and why in str(passable(output.raw))
    result = json.loads(await answered(5, [FOOTER], output))["result"]
    assert [item["type"] for item in result["content"]] == ["text", "text"] and result["content"][1] == FOOTER
    assert "passed on as its text" in caplog.text


MIB = 17  # past the 16 MiB a spool reads whole
SERVERS = {"plain": {**program_entry("raw_downstream"), "async": False}, "demo": demo_server_entry()}


def check_mixed(result: dict[str, Any]) -> None:
    """The `mixed` result as the server gave it, the footer naming the running call after its content."""
    expected = mixed_result(MIB)
    *kept, footer = result["content"]
    result.pop("resultType", None)  # the SDK's model has it (and the sessionless era's wire needs it)
    assert {**result, "content": kept} == expected
    assert footer["text"].startswith("[claimcheck] 1 running: demo__slow")


@pytest.mark.subprocess
@pytest.mark.parametrize("fast", ["on", "off"])
async def test_over_stdio_a_long_result_comes_back_as_the_server_gave_it(tmp_path: Path, fast: str) -> None:
    with anyio.fail_after(120):
        async with serving(tmp_path, fast, {"asyncTimeoutSecs": 1}, SERVERS) as wire:
            await wire.answer(await wire.send("tools/list"))
            await wire.call("demo__slow", {"seconds": 60})  # a handle: the footer names it
            check_mixed((await wire.call("plain__mixed", {"mib": MIB}))["result"])
            text = (await wire.call("plain__mixed", {"mib": MIB, "nan": True}))["result"]
    assert [item["type"] for item in text["content"]] == ["text", "text"] and "structuredContent" not in text


@pytest.mark.subprocess
@pytest.mark.parametrize(("fast", "mode"), [("on", "legacy"), ("off", "auto")])
async def test_over_http_a_long_result_comes_back_as_the_server_gave_it(tmp_path: Path, fast: str, mode: str) -> None:
    config = write_config(tmp_path, {"mcpServers": SERVERS, "settings": {"asyncTimeoutSecs": 1}})
    command = [PYTHON, "-m", "server", "serve", "--no-api", "--config", str(config), "--transport", "http"]
    # The answer in one JSON body: past the prime (0.5 s) the fast path answers in an SSE event, and the SDK's client
    # refuses an event over 1 MiB (a machine under load takes that long).
    env = {**os.environ, "CLAIMCHECK_FAST_PATH": fast, PRIME_ENV: "60"}
    with anyio.fail_after(120):
        async with announcing([*command, "--port", "0"], r"(http://127\.0\.0\.1:\d+/mcp)", env=env, within=60) as up:
            url = up.matches[0].group(1).decode()
            async with Client(url, mode=mode) as client:
                await client.list_tools()
                await client.call_tool("demo__slow", {"seconds": 60})
                result = await client.call_tool("plain__mixed", {"mib": MIB})
    check_mixed(result.model_dump(by_alias=True, mode="json", exclude_none=True))


@pytest.mark.subprocess
async def test_over_legacy_sse_a_long_result_comes_back_as_the_server_gave_it(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": SERVERS, "settings": {"asyncTimeoutSecs": 1}})
    command = [PYTHON, "-m", "server", "serve", "--no-api", "--config", str(config), "--transport", "sse"]
    sdk_compat.lift_legacy_sse_event_cap()  # the SDK's SSE client reads an event of up to 1 MiB otherwise
    with anyio.fail_after(120):
        async with announcing([*command, "--port", "0"], r"(http://127\.0\.0\.1:\d+/sse)", within=60) as up:
            url = up.matches[0].group(1).decode()
            async with (
                sse_client(url, timeout=30, sse_read_timeout=120) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                await session.call_tool("demo__slow", {"seconds": 60})
                result = await session.call_tool("plain__mixed", {"mib": MIB})
    check_mixed(result.model_dump(by_alias=True, mode="json", exclude_none=True))
