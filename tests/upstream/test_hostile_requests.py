"""Requests past the budget (too deep, too big, not JSON-RPC) get a JSON-RPC error and the connection goes on
serving, at every entrance of a real claimcheck: stdio with the fast path on and off, streamable HTTP with the
fast path on and off, and SSE. Before the budget a 1 000-deep call ended the stdio process, the SDK's stdio
path answered nothing, and the HTTP fast path answered 500 or dropped the connection."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from server.budget import MAX_DEPTH
from tests.support.processes import PYTHON, announced_url, announcing, demo_server_entry, write_config
from tests.support.wire import serving

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

CALL_S = 120
TOO_DEEP = -32600


def deep_call(ident: int, depth: int, *, id_last: bool = False, decoy: bool = False) -> bytes:
    """A `tools/call` of `demo__echo` whose argument nests `depth` brackets; `id_last`: its id after the params;
    `decoy`: an `"id"` inside its arguments, ahead of the deep part."""
    nested = b"[" * depth + b"]" * depth
    arguments = (b'{"id":7,"text":' if decoy else b'{"text":') + nested + b"}"
    params = b'"params":{"name":"demo__echo","arguments":' + arguments + b"}"
    head, tail = (b"", b',"id":%d' % ident) if id_last else (b'"id":%d,' % ident, b"")
    return b'{"jsonrpc":"2.0",' + head + b'"method":"tools/call",' + params + tail + b"}"


HOSTILE: list[tuple[str, bytes, int | None, int]] = [
    ("1 000 deep", deep_call(3, 1000), 3, TOO_DEEP),
    ("100 000 deep", deep_call(4, 100_000), 4, TOO_DEEP),
    ("deep, its id after the deep part", deep_call(5, 100_000, id_last=True), None, TOO_DEEP),
    ("deep, an id in its arguments first", deep_call(6, 5_000, id_last=True, decoy=True), None, TOO_DEEP),
    ("one level past the budget", deep_call(8, MAX_DEPTH - 2), 8, TOO_DEEP),
]
"""(what it is, the line, the id its error must carry, the error's code)."""
NOT_JSON_RPC: list[tuple[str, bytes, int | None, int]] = [
    ("not JSON", b'{"jsonrpc":"2.0","id":9,"method":"tools/call",', 9, -32700),
    ("not JSON at all", b"hello", None, -32700),
    (
        "not UTF-8",
        b'{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"demo__echo","arguments":'
        b'{"text":"\xff\xfe"}}}',
        13,
        -32700,
    ),
    (
        "a number of 5 000 digits",
        b'{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"demo__echo",'
        b'"arguments":{"text":' + b"9" * 5000 + b"}}}",
        14,
        -32700,
    ),
    ("JSON, not JSON-RPC", b'{"jsonrpc":"2.0","id":10,"method":["tools/call"]}', 10, -32600),
]
"""Lines the SDK's stdio transport dropped unanswered (over HTTP the SDK answers them itself)."""
MISSHAPEN: list[tuple[str, bytes, int | None, int]] = [
    ("a batch", b'[{"jsonrpc":"2.0","id":11,"method":"tools/list"}]', None, -32600),
    ("an id of 1e400", b'{"jsonrpc":"2.0","id":1e400,"method":"tools/list"}', None, -32600),
    ("an object for an id", b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', None, -32600),
    ("true for an id", b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}', None, -32600),
    ("a 4 MB method name", b'{"jsonrpc":"2.0","id":12,"method":"' + b"m" * (4 << 20) + b'"}', 12, -32601),
]
"""Lines the SDK took in silence (an id of the wrong type reads as a notification), answered with a validation
dump (a batch), or answered quoting the client's input whole (the method name)."""


def within_budget(ident: int) -> bytes:
    """A call at the deepest the budget allows, with brackets in its strings that must not count."""
    text = json.dumps("[{" * 5000 + '\\"[').encode()
    nested = b'{"text":' + text + b',"x":' + b"[" * (MAX_DEPTH - 3) + b"]" * (MAX_DEPTH - 3) + b"}"
    return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"demo__echo","arguments":%s}}' % (
        ident,
        nested,
    )


@pytest.mark.parametrize("fast", ["on", "off"])
async def test_requests_past_the_budget_over_stdio_get_an_error_and_the_process_serves_on(
    tmp_path: Path, fast: str
) -> None:
    with anyio.fail_after(CALL_S):
        async with serving(tmp_path, fast) as wire:
            for what, line, ident, code in HOSTILE + NOT_JSON_RPC + MISSHAPEN:
                await wire.write(line)
                answer = await wire.answer(ident)
                assert answer["error"]["code"] == code, what
                assert len(json.dumps(answer)) < 1000, what  # client input is quoted to 200 characters
            await wire.write(within_budget(20))
            inside = await wire.answer(20)
            alive = await wire.call("demo__echo", {"text": "still here"})
            assert wire.process.returncode is None
    assert "error" not in inside, inside  # the demo's own validation error is a result, not a refusal
    assert alive["result"]["content"][0]["text"] == "still here"


def _http_claimcheck(tmp_path: Path, transport: str, fast: str) -> AbstractAsyncContextManager[str]:
    data: dict[str, Any] = {"mcpServers": {"demo": demo_server_entry()}}
    (tmp_path / fast).mkdir(exist_ok=True)
    config = write_config(tmp_path / fast, data)
    command = ["env", f"CLAIMCHECK_FAST_PATH={fast}", PYTHON, "-m", "server", "serve", "--no-api"]
    command += ["--config", str(config), "--transport", transport, "--port", "0"]
    pattern = r"serving MCP over [A-Za-z ]+ at (http://\S+)"
    return announced_url(command, pattern)


HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
ECHO_PARAMS = {"name": "demo__echo", "arguments": {"text": "ok"}}
ECHO = {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": ECHO_PARAMS}


async def _messages_url(lines: AsyncIterator[str], url: str) -> str:
    """Where an SSE session's messages go: the `endpoint` event its stream opens with."""
    async for event_line in lines:
        if event_line.startswith("data:"):
            return url.removesuffix("/sse") + event_line[5:].strip()
    raise AssertionError("the SSE stream ended before its endpoint event")


async def _open_session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """A handshake-era session opened at `url`: the headers its requests carry."""
    opened = await http.post(url, json=INIT, headers=HEADERS)
    session = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
    session["mcp-protocol-version"] = "2025-11-25"
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    return session


def _data_of(text: str) -> list[dict[str, Any]]:
    if text.lstrip().startswith("{"):
        return [json.loads(text)]
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]


@pytest.mark.parametrize("fast", ["on", "off"])
async def test_requests_past_the_budget_over_http_get_a_json_rpc_error_and_the_session_serves_on(
    tmp_path: Path, fast: str
) -> None:
    with anyio.fail_after(CALL_S):
        async with _http_claimcheck(tmp_path, "http", fast) as url, httpx2.AsyncClient(timeout=CALL_S) as http:
            session = await _open_session(http, url)
            await http.post(url, json=LIST, headers=session)  # waits for the demo server to be up
            for what, line, ident, code in HOSTILE + MISSHAPEN:
                response = await http.post(url, content=line, headers=session)
                assert response.status_code == 400, what
                assert response.json()["id"] == ident and response.json()["error"]["code"] == code, what
                assert len(response.content) < 1000, what
            alive = await http.post(url, json=ECHO, headers=session)
    assert _data_of(alive.text)[-1]["result"]["content"][0]["text"] == "ok"


async def test_requests_past_the_budget_over_sse_get_a_json_rpc_error_and_the_session_serves_on(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(CALL_S):
        async with (
            _http_claimcheck(tmp_path, "sse", "on") as url,
            httpx2.AsyncClient(timeout=CALL_S) as http,
            http.stream("GET", url) as stream,
        ):
            lines = stream.aiter_lines()
            post = await _messages_url(lines, url)
            await http.post(post, json=INIT)
            await http.post(post, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            await http.post(post, json=LIST)
            for what, line, ident, code in HOSTILE:
                response = await http.post(post, content=line, headers={"content-type": "application/json"})
                assert response.status_code == 400, what
                assert response.json()["id"] == ident and response.json()["error"]["code"] == code, what
            assert (await http.post(post, json=ECHO)).status_code == 202
            async for event_line in lines:
                if event_line.startswith("data:") and '"id":99' in event_line:
                    assert json.loads(event_line[5:])["result"]["content"][0]["text"] == "ok"
                    break


@pytest.mark.parametrize("fast", ["on", "off"])
async def test_a_request_whose_params_do_not_validate_is_told_which_and_why(tmp_path: Path, fast: str) -> None:
    """The SDK answers "Invalid request parameters" and nothing else; the answer names the field."""
    cases: list[tuple[dict[str, Any] | None, str]] = [
        ({}, "Invalid tools/call params: params.name: Field required"),
        ({"name": 42}, "Invalid tools/call params: params.name: Input should be a valid string"),
        ({"name": "demo__echo", "arguments": "text=x"}, "params.arguments: Input should be a valid dictionary"),
    ]
    with anyio.fail_after(CALL_S):
        async with serving(tmp_path, fast) as wire:
            for ident, (params, said) in enumerate(cases, start=50):
                message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}
                await wire.write(json.dumps(message).encode())
                error = (await wire.answer(ident))["error"]
                assert error["code"] == -32602 and said in error["message"], error
            raw = [
                (b'{"jsonrpc":"1.0","id":60,"method":"tools/list"}', 60, 'its "jsonrpc" must be "2.0"'),
                (b'{"jsonrpc":"2.0","id":61,"method":"tools/list","params":[1]}', 61, 'its "params" must be an object'),
            ]
            for line, ident, said in raw:
                await wire.write(line)
                error = (await wire.answer(ident))["error"]
                assert error["code"] == -32600 and error["message"].startswith("Invalid request: not a JSON-RPC")
                assert said in error["message"], error
            alive = await wire.call("demo__echo", {"text": "still here"})
    assert alive["result"]["content"][0]["text"] == "still here"


NOT_A_MESSAGE: list[tuple[bytes, int | None, str]] = [
    (b'{"hello": 1}', None, 'its "jsonrpc" must be "2.0"'),
    (b'{"jsonrpc":"1.0","id":70,"method":"tools/list"}', 70, 'its "jsonrpc" must be "2.0"'),
    (b'{"jsonrpc":"2.0","id":71,"method":"tools/list","params":[1]}', 71, 'its "params" must be an object'),
    (b'"tools/list"', None, "it is not an object"),
    (b'{"jsonrpc":"2.0","id":72}', None, 'it needs a "method" (a request or notification), or a "result"'),
]
"""JSON that is no JSON-RPC message: the SDK's HTTP transport answered each with pydantic's whole report (-32602,
two kilobytes for the first) under a session id it had already dropped."""


@pytest.mark.parametrize("fast", ["on", "off"])
async def test_over_http_json_that_is_no_json_rpc_message_is_told_in_one_line_what_to_change(
    tmp_path: Path, fast: str
) -> None:
    """As over stdio: -32600, one line naming what to change; before a session as within one, which serves on."""
    with anyio.fail_after(CALL_S):
        async with _http_claimcheck(tmp_path, "http", fast) as url, httpx2.AsyncClient(timeout=CALL_S) as http:
            before = [await http.post(url, content=line, headers=HEADERS) for line, _, _ in NOT_A_MESSAGE]
            session = await _open_session(http, url)
            within = [await http.post(url, content=line, headers=session) for line, _, _ in NOT_A_MESSAGE]
            alive = await http.post(url, json=ECHO, headers=session)
    for answers in (before, within):
        for response, (line, ident, said) in zip(answers, NOT_A_MESSAGE, strict=True):
            answer = response.json()
            assert response.status_code == 400 and "mcp-session-id" not in response.headers, line
            assert answer["id"] == ident and answer["error"]["code"] == -32600, (line, answer)
            assert answer["error"]["message"].startswith(f"Invalid request: not a JSON-RPC message: {said}"), answer
            assert "\\n" not in response.text and len(response.content) < 300, answer  # one line, no report
    assert _data_of(alive.text)[-1]["result"]["content"][0]["text"] == "ok"


async def test_over_sse_a_refused_origin_and_an_unreadable_body_are_answered_without_a_traceback(
    tmp_path: Path,
) -> None:
    """The SDK answers both (403; 400) and then logged each with a traceback (a web page could fill the log)."""
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    command = [
        PYTHON,
        "-m",
        "server",
        "serve",
        "--no-api",
        "--config",
        str(config),
        "--transport",
        "sse",
        "--port",
        "0",
    ]
    with anyio.fail_after(CALL_S):
        async with (
            announcing(command, r"serving MCP over [A-Za-z ]+ at (http://\S+)") as started,
            httpx2.AsyncClient(timeout=CALL_S) as http,
        ):
            url = started.url
            refused = await http.get(url, headers={"Origin": "http://evil.example"})
            async with http.stream("GET", url) as stream:
                lines = stream.aiter_lines()
                post = await _messages_url(lines, url)
                unreadable = await http.post(post, content=b'{"a": 1}', headers={"content-type": "application/json"})
                broken = await http.post(post, content=b'{"a": ', headers={"content-type": "application/json"})
                await http.post(post, json=INIT)
                await http.post(post, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
                assert (await http.post(post, json=ECHO)).status_code == 202
                async for event_line in lines:
                    if event_line.startswith("data:") and '"id":99' in event_line:
                        break
            await started.until("an SSE client posted a body that is no JSON-RPC message")
    said = b"".join(started.said).decode()
    assert refused.status_code == 403 and unreadable.status_code == broken.status_code == 400
    assert "Traceback" not in said and "Exception in ASGI application" not in said, said
    # in one line naming what is wrong, as over stdio and streamable HTTP (the SDK said "Could not parse message")
    assert unreadable.json()["error"] == {
        "code": -32600,
        "message": 'Invalid request: not a JSON-RPC message: its "jsonrpc" must be "2.0".',
    }
    assert broken.json()["error"]["code"] == -32700
    assert broken.json()["error"]["message"].startswith("Parse error: the body is not JSON in UTF-8 that can be read")


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_body_not_labelled_json_gets_415_and_a_path_not_served_says_where_mcp_is(
    tmp_path: Path, transport: str
) -> None:
    path = "/mcp" if transport == "http" else "/sse"
    with anyio.fail_after(CALL_S):
        async with _http_claimcheck(tmp_path, transport, "on") as url, httpx2.AsyncClient(timeout=CALL_S) as http:
            base = url.removesuffix(path)
            post = url if transport == "http" else base + "/messages/?session_id=" + "0" * 32
            line = json.dumps({**INIT, "id": 7})
            plain = await http.post(post, content=line, headers={**HEADERS, "content-type": "text/plain"})
            unlabelled = await http.post(post, content=line, headers={"accept": HEADERS["accept"]})
            browser = await http.get(base + "/", headers={"accept": "text/html"})
    assert plain.status_code == unlabelled.status_code == 415
    assert plain.json()["id"] == 7 and plain.json()["error"]["message"] == (
        "Unsupported Media Type: send the body with `Content-Type: application/json` (it came as text/plain)"
    )
    assert "(it came as no Content-Type)" in unlabelled.json()["error"]["message"]
    assert browser.status_code == 404 and f" at {path} on this port; give an MCP client that URL" in browser.text


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_request_for_another_host_or_from_another_sites_page_is_told_what_to_do_in_one_line(
    tmp_path: Path, transport: str
) -> None:
    """On loopback (DNS rebinding protection): 421 for another Host, 403 for another site's Origin, each saying what
    would be let in; a page of localhost and a program are served, and so is the next request."""
    path = "/mcp" if transport == "http" else "/sse"
    with anyio.fail_after(CALL_S):
        async with _http_claimcheck(tmp_path, transport, "on") as url, httpx2.AsyncClient(timeout=CALL_S) as http:
            port = url.removesuffix(path).rsplit(":", 1)[1]
            for_another = await _send(http, transport, url, {"Host": "mcp.example"})
            from_a_site = await _send(http, transport, url, {"Origin": "https://evil.example"})
            from_local_page = await _send(http, transport, url, {"Origin": "http://localhost:6274"})
            plain = await _send(http, transport, url, {})
    assert for_another.status_code == 421, for_another.text
    assert for_another.text.startswith("Misdirected Request: this claimcheck listens on loopback and answers only")
    assert "(this one came for mcp.example)" in for_another.text
    assert f'a reverse proxy in front must send "Host: 127.0.0.1:{port}", or serve other addresses with --host' in (
        for_another.text
    )
    assert from_a_site.status_code == 403 and from_a_site.text.startswith(
        "Forbidden: a web page of another origin (https://evil.example) may not call this claimcheck"
    )
    assert "\n" not in for_another.text + from_a_site.text
    assert from_local_page.status_code == plain.status_code == 200, (from_local_page.text, plain.text)


async def _send(http: httpx2.AsyncClient, transport: str, url: str, headers: dict[str, str]) -> httpx2.Response:
    """An `initialize` over streamable HTTP, or the opening of an SSE stream (its status, then closed)."""
    if transport == "http":
        return await http.post(url, json=INIT, headers={**HEADERS, **headers})
    async with http.stream("GET", url, headers=headers) as stream:
        if stream.status_code != 200:
            await stream.aread()
        return stream
