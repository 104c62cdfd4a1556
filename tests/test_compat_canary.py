"""Canaries for the private parts of the SDK, starlette, uvicorn, h11, httpcore2 and google-re2 that claimcheck uses
(server/sdk_compat.py, server/http_compat.py, server/anyio_compat.py, fs_sandbox/re2_compat.py), and of the two
modules that are jmespath's and the stdlib's `re` parser's only users (handles/json_eval.py,
fs_sandbox/_prefilter.py): each fails, naming the entry to revisit, when a release moves or reshapes what it uses;
and no other module reaches a private part of those libraries (an attribute, an import, a `getattr` or a keyword
argument with an underscore name)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.source import ROOT

COMPAT = {"server/sdk_compat.py", "server/http_compat.py", "server/anyio_compat.py", "fs_sandbox/re2_compat.py"}
LIBRARIES = ("anyio", "mcp", "mcp_types", "starlette", "uvicorn", "sse_starlette", "h11", "httpx2", "httpcore2", "re2")
WIRE_NAMES = {"_meta"}
"""Underscore names that are MCP's wire format (a model's public field alias), not a library's private part."""


def _sdk_session_connection() -> None:
    from mcp.server.session import ServerSession

    assert "self._connection = connection" in inspect.getsource(ServerSession.__init__)


def _sdk_client_dispatcher() -> None:
    from mcp.client.session import ClientSession
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

    assert "self._dispatcher" in inspect.getsource(ClientSession)
    assert list(inspect.signature(JSONRPCDispatcher.send_raw_request).parameters)[:3] == ["self", "method", "params"]


def _sdk_initialization_options() -> None:
    from mcp.server.lowlevel.server import Server

    parameters = list(inspect.signature(Server.create_initialization_options).parameters)
    assert parameters[:3] == ["self", "notification_options", "experimental_capabilities"]
    server = Server("canary")

    def nothing() -> None:
        return None

    server.create_initialization_options = nothing  # type: ignore[method-assign,assignment]  # must be assignable
    assert server.create_initialization_options() is None


def _sdk_sse_event_cap() -> None:
    import mcp.client.sse

    from server import sdk_compat

    helper = mcp.client.sse.sse_within_origin  # type: ignore[attr-defined]  # not exported: the part watched
    inner = helper.func if hasattr(helper, "func") else helper
    assert "max_event_size" in inspect.signature(inner).parameters
    sdk_compat.lift_legacy_sse_event_cap()
    assert mcp.client.sse.sse_within_origin.keywords["max_event_size"] is None  # type: ignore[attr-defined]  # a partial now


def _sdk_httpx_factory() -> None:
    from mcp.shared._httpx_utils import McpHttpClientFactory

    assert McpHttpClientFactory is not None


def _sdk_session_manager() -> None:
    from mcp.server.lowlevel.server import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    manager = StreamableHTTPSessionManager(app=Server("canary"))
    assert isinstance(manager._server_instances, dict) and isinstance(manager._session_owners, dict)


def _sdk_transport() -> None:
    from mcp.server.streamable_http import StreamableHTTPServerTransport

    transport = StreamableHTTPServerTransport(mcp_session_id="canary", idle_timeout=5)
    assert isinstance(transport._request_streams, dict)
    assert transport._requests_in_flight == 0 and transport._idle_timeout == 5
    assert "is_post" in inspect.signature(transport._security.validate_request).parameters
    assert callable(transport._check_content_type) and hasattr(transport, "idle_scope")
    assert inspect.iscoroutinefunction(transport._mint_priming_event)
    assert list(inspect.signature(transport._mint_priming_event).parameters) == ["stream_id", "protocol_version"]


def _sdk_dispatcher() -> None:
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher, _JSONRPCDispatchContext

    assert inspect.iscoroutinefunction(JSONRPCDispatcher._write)
    assert list(inspect.signature(JSONRPCDispatcher._write).parameters)[:2] == ["self", "message"]
    fields = {field.name for field in dataclasses.fields(_JSONRPCDispatchContext)}
    assert {"transport", "_dispatcher", "_request_id", "_progress_token", "message_metadata"} <= fields


def _sdk_dispatch_context() -> None:
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
    from mcp.shared.message import ServerMessageMetadata

    from server import sdk_compat

    class Channel(sdk_compat.DispatchContext[Any]):
        pass

    dispatcher = JSONRPCDispatcher.__new__(JSONRPCDispatcher)  # never used: only carried
    metadata = ServerMessageMetadata(can_send_request=True)
    channel = sdk_compat.dispatch_context(Channel, dispatcher, 7, metadata, "outer-7")
    assert isinstance(channel, Channel) and channel.transport.kind == "jsonrpc" and channel.can_send_request
    assert channel._dispatcher is dispatcher and channel._request_id == 7 and channel.message_metadata is metadata
    assert channel._progress_token == "outer-7"
    for method in ("notify", "send_raw_request"):
        assert "self._dispatcher" in inspect.getsource(getattr(sdk_compat.DispatchContext, method)), method
    assert "self._progress_token" in inspect.getsource(sdk_compat.DispatchContext.progress)


def _re2_engine() -> None:
    from fs_sandbox import re2_compat

    assert re2_compat.AVAILABLE
    program = re2_compat.compiled(b"(?m)^b+$", case_sensitive=False, max_mem=1 << 20)
    assert program.ok()
    search = re2_compat.searcher(program)
    assert search(b"a\nBB\nc", 0, 6)[0] == (2, 4)
    assert search(b"a\nBB\nc", 0, 3)[0] == (-1, -1)  # the bytes after `stop` are context, not searched
    assert search(memoryview(b"xbb"), 1, 3)[0] == (-1, -1)  # `^` sees the byte before `start`
    literal = re2_compat.compiled(b"a.b", literal=True)
    assert re2_compat.searcher(literal)(b"axb a.b", 0, 7)[0] == (4, 7)
    refused = re2_compat.compiled(b"(a)\\1")
    assert not refused.ok() and refused.error().startswith(b"invalid escape sequence: \\1")


def _sdk_shape_result() -> None:
    import mcp_types as types
    from mcp.server.lowlevel.server import Server
    from mcp.server.runner import ServerRunner

    from server import sdk_compat

    assert list(inspect.signature(ServerRunner._serialize).parameters) == ["self", "method", "version", "result"]
    result = types.CallToolResult(content=[types.TextContent(type="text", text="é")])
    modern = sdk_compat.shape_result(Server("canary", version="9"), "tools/call", "2026-07-28", result)
    assert modern["resultType"] == "complete" and modern["content"] == [{"type": "text", "text": "é"}]
    assert modern["_meta"]["io.modelcontextprotocol/serverInfo"] == {"name": "canary", "version": "9"}
    handshake = sdk_compat.shape_result(Server("canary"), "tools/call", "2025-11-25", result)
    assert "_meta" not in handshake and "resultType" not in handshake


def _sdk_modern_json_window() -> None:
    from server import sdk_compat

    assert 1 <= sdk_compat.modern_json_window() <= 600


def _starlette_send() -> None:
    from starlette.requests import Request

    from server.http_compat import send_of

    async def receive() -> Any:
        return {}

    async def send(message: Any) -> None:
        return None

    assert send_of(Request({"type": "http", "headers": []}, receive, send)) is send


def _uvicorn_h11() -> None:
    from server.http_compat import H11Protocol

    for method in ("connection_made", "data_received", "on_response_complete", "connection_lost"):
        assert callable(getattr(H11Protocol, method)), method
    source = inspect.getsource(H11Protocol.__init__)
    for attribute in ("self.conn", "self.loop", "self.client", "self.transport"):
        assert attribute in inspect.getsource(H11Protocol), attribute
    assert "h11.Connection" in source


def _httpcore_read_size() -> None:
    import asyncio.selector_events

    import httpcore2

    from server import http_compat

    connection = httpcore2.AsyncHTTP11Connection
    assert isinstance(connection.READ_NUM_BYTES, int)
    reads = inspect.getsource(connection._receive_event)  # the canary looks at the part it widens
    assert "self.READ_NUM_BYTES" in reads  # read per call, so the class's value counts
    socket_transport = asyncio.selector_events._SelectorSocketTransport  # type: ignore[attr-defined]  # not in typeshed
    assert isinstance(socket_transport.max_size, int)
    assert "self.max_size" in inspect.getsource(socket_transport._read_ready__data_received)  # the recv's size
    before = connection.READ_NUM_BYTES, socket_transport.max_size
    wider = max(before) + 1
    try:
        http_compat.widen_http_reads(wider)
        assert (connection.READ_NUM_BYTES, socket_transport.max_size) == (wider, wider)
        http_compat.widen_http_reads(1)  # never narrowed
        assert (connection.READ_NUM_BYTES, socket_transport.max_size) == (wider, wider)
    finally:
        connection.READ_NUM_BYTES, socket_transport.max_size = before


def _h11_receive_buffer() -> None:
    import h11._connection
    import h11._readers
    from h11._receivebuffer import ReceiveBuffer

    from server import http_compat

    buffer = ReceiveBuffer()
    assert isinstance(buffer._data, bytearray)
    assert isinstance(buffer._next_line_search, int) and isinstance(buffer._multiple_lines_search, int)
    extract = inspect.getsource(ReceiveBuffer._extract)  # what the replacement does in its place
    for line in ("del self._data[:count]", "self._next_line_search = 0", "self._multiple_lines_search = 0"):
        assert line in extract, line
    assert "buf.maybe_extract_at_most(" in inspect.getsource(h11._readers)  # how a body's bytes are taken
    # Each connection's buffer is made by that name in h11._connection, which `HandingBuffer` stands in for; it
    # answers every method the buffer has (a new one would read `_data` while a read is held apart from it).
    assert getattr(h11._connection, "ReceiveBuffer", None) in (ReceiveBuffer, http_compat.HandingBuffer)
    assert "self._receive_buffer = ReceiveBuffer()" in inspect.getsource(h11._connection.Connection.__init__)
    methods = {name for name, value in vars(ReceiveBuffer).items() if callable(value)}
    assert methods == {
        "__init__",
        "__iadd__",
        "__bool__",
        "__len__",
        "__bytes__",
        "_extract",
        "maybe_extract_at_most",
        "maybe_extract_next_line",
        "maybe_extract_lines",
        "is_next_line_obviously_invalid_request_line",
    }, methods


def _anyio_stream_writer() -> None:
    import anyio

    from server.anyio_compat import stream_writer_of

    async def check() -> None:
        async with await anyio.open_process(["cat"]) as process:
            writer = stream_writer_of(process.stdin)
            assert writer is not None and writer.transport.get_write_buffer_size() == 0
            assert process.stdin is not None
            await process.stdin.aclose()

    anyio.run(check)


def _jmespath_visitor() -> None:
    import jmespath
    from jmespath.visitor import TreeInterpreter

    assert callable(TreeInterpreter.visit)
    parsed = jmespath.compile("a.b[0]").parsed
    assert isinstance(parsed, dict) and {"type", "children"} <= set(parsed)


def _stdlib_re_parser() -> None:
    import importlib
    import re

    parser = importlib.import_module("re._parser")
    parsed = parser.parse("ab[cd]", re.MULTILINE)
    assert hasattr(parsed, "state") and hasattr(parsed.state, "flags")
    assert [str(op) for op, _ in parsed][:2] == ["LITERAL", "LITERAL"]


def _sdk_inherited_env() -> None:
    from mcp.client import stdio

    from server.downstream.processes import default_environment
    from server.platform import INHERITED_ENV_VARS

    assert tuple(stdio.DEFAULT_INHERITED_ENV_VARS) == INHERITED_ENV_VARS
    assert default_environment() == stdio.get_default_environment()


CANARIES: dict[str, Callable[[], None]] = {
    "platform.INHERITED_ENV_VARS (mcp.client.stdio's, spawning without the SDK)": _sdk_inherited_env,
    "handles/json_eval.py (jmespath's TreeInterpreter.visit and AST dicts)": _jmespath_visitor,
    "fs_sandbox/_prefilter.py (the stdlib's re._parser)": _stdlib_re_parser,
    "anyio_compat.stream_writer_of (the StreamWriter under a process's stdin)": _anyio_stream_writer,
    "sdk_compat.connection_of (ServerSession._connection)": _sdk_session_connection,
    "sdk_compat.send_raw_request (ClientSession._dispatcher)": _sdk_client_dispatcher,
    "sdk_compat.set/wrap_initialization_options (Server.create_initialization_options)": _sdk_initialization_options,
    "sdk_compat.lift_legacy_sse_event_cap (mcp.client.sse.sse_within_origin)": _sdk_sse_event_cap,
    "sdk_compat.HttpClientFactory (mcp.shared._httpx_utils)": _sdk_httpx_factory,
    "sdk_compat.transport_of/session_owner (StreamableHTTPSessionManager internals)": _sdk_session_manager,
    "sdk_compat transport entries (StreamableHTTPServerTransport internals)": _sdk_transport,
    "sdk_compat.DispatchContext/write_message (JSONRPCDispatcher internals)": _sdk_dispatcher,
    "sdk_compat.shape_result (ServerRunner._serialize)": _sdk_shape_result,
    "sdk_compat.dispatch_context (_JSONRPCDispatchContext's _dispatcher, _request_id and _progress_token)": (
        _sdk_dispatch_context
    ),
    "re2_compat (re2._re2.RE2: compile, ok, error, Match; re2._Anchor)": _re2_engine,
    "sdk_compat.modern_json_window (_streamable_http_modern._SSE_PING_INTERVAL)": _sdk_modern_json_window,
    "http_compat.send_of (starlette Request._send)": _starlette_send,
    "http_compat.H11Protocol (uvicorn.protocols.http.h11_impl)": _uvicorn_h11,
    "http_compat.widen_http_reads (httpcore2's READ_NUM_BYTES, asyncio's _SelectorSocketTransport.max_size)": (
        _httpcore_read_size
    ),
    "http_compat.hand_over_h11_bodies (h11._receivebuffer.ReceiveBuffer: _data, _extract, its line searches, its"
    " methods; h11._connection.ReceiveBuffer)": (_h11_receive_buffer),
}


SPAWNING = {_anyio_stream_writer}
"""Canaries that start a process (`cat`) to have a real pipe."""


@pytest.mark.parametrize(
    "entry",
    [pytest.param(e, marks=[pytest.mark.subprocess] if CANARIES[e] in SPAWNING else []) for e in sorted(CANARIES)],
)
def test_each_private_part_used_is_still_there_in_the_shape_used(entry: str) -> None:
    try:
        CANARIES[entry]()
    except (AssertionError, AttributeError, ImportError, TypeError, KeyError) as error:
        pytest.fail(f"{entry} moved or changed shape in this release ({error!r}): revisit it in its compat module")


def _borrowed_private_names() -> set[str]:
    """The private attribute names the compat modules reach on other objects than their own."""
    names = set()
    for relative in COMPAT:
        for node in ast.walk(ast.parse((ROOT / relative).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    names.add(node.attr)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
                if (
                    len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant)
                    and isinstance(node.args[1].value, str)
                ):
                    names.add(node.args[1].value)
    return names


def _private_uses(path: Path, borrowed: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]  # read-only default
    """Imports of private names or modules of the borrowed libraries, `getattr(x, "_name")` lookups, and
    attributes of the names the compat modules borrow, reached on anything but `self`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in borrowed:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"line {node.lineno}: .{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LIBRARIES:
            names = [alias.name for alias in node.names]
            if any(part.startswith("_") for part in node.module.split(".")) or any(n.startswith("_") for n in names):
                found.append(f"line {node.lineno}: from {node.module} import {', '.join(names)}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in LIBRARIES and any(part.startswith("_") for part in parts):
                    found.append(f"line {node.lineno}: import {alias.name}")
        if isinstance(node, ast.Call):  # a private field set by keyword: `Context(_dispatcher=…)`
            for keyword in node.keywords:
                private = keyword.arg and keyword.arg.startswith("_") and not keyword.arg.startswith("__")
                if private and keyword.arg not in WIRE_NAMES:
                    found.append(f"line {node.lineno}: {keyword.arg}=")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr"):
            if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                name = node.args[1].value
                if isinstance(name, str) and name.startswith("_") and not name.startswith("__"):
                    found.append(f"line {node.lineno}: {node.func.id}(…, {name!r})")
    return found


def test_no_module_outside_the_compat_modules_reaches_a_private_part_of_a_borrowed_library() -> None:
    offenders = {}
    borrowed = _borrowed_private_names()
    for package in ("server", "extraction", "fs_sandbox"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = str(path.relative_to(ROOT))
            if relative not in COMPAT and (uses := _private_uses(path, borrowed)):
                offenders[relative] = uses
    assert not offenders, f"private parts used outside the compat modules: {offenders}"


def test_the_private_use_checker_sees_what_it_looks_for() -> None:
    sample = ROOT / "server" / "sdk_compat.py"
    assert any("_httpx_utils" in use for use in _private_uses(sample))
    assert {"_connection", "_dispatcher", "_send", "_stream", "_request_streams"} <= _borrowed_private_names()
    assert "_Anchor" in _borrowed_private_names()
    assert any("from re2 import _re2" in use for use in _private_uses(ROOT / "fs_sandbox" / "re2_compat.py"))
    assert any("_request_id=" in use for use in _private_uses(sample))


def test_the_sse_transport_still_raises_and_logs_as_sdk_compat_expects() -> None:
    """`sdk_compat.SSE_REFUSED` and `quiet_unreadable_sse_posts` lean on the SDK's words, not its names."""
    from mcp.server.sse import SseServerTransport

    from server import sdk_compat

    assert f'raise ValueError("{sdk_compat.SSE_REFUSED}")' in inspect.getsource(SseServerTransport.connect_sse)
    assert 'logger.exception("Failed to parse message")' in inspect.getsource(SseServerTransport)
    assert f'Response("{sdk_compat.SSE_UNPARSED.decode()}", status_code=400)' in inspect.getsource(SseServerTransport)


def test_the_streamable_http_transport_still_answers_json_that_is_no_message_as_sdk_compat_expects() -> None:
    """`sdk_compat.is_validation_dump` leans on the SDK's words for such a body: -32602 and "Validation error: "."""
    from mcp.server.streamable_http import StreamableHTTPServerTransport

    from server import sdk_compat

    source = inspect.getsource(StreamableHTTPServerTransport)
    assert 'f"Validation error: {str(e)}"' in source and "INVALID_PARAMS," in source
    dump = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"Validation error: 11 validation errors"}}'
    assert sdk_compat.is_validation_dump(dump)
    assert not sdk_compat.is_validation_dump(dump.replace(b"Validation error", b"Invalid tools/call params"))
