"""The fast path's envelope reader against the SDK's own parsing.

Whatever line the reader takes as a plain `tools/call`, the SDK reads as the same request: a JSON-RPC
request of `tools/call` whose parameters validate, with the same id (value and type), tool name and
arguments, and nothing else that would change how it is served (a task, a `_meta` other than a claimcheck's
pass-through mark with its progress token or a 2026-07-28 request's own envelope, read as the SDK reads them;
the envelope also validates against that version's surface, as the SDK's kernel checks it). And every plain
call of either era (ids of every allowed type, any unicode, escapes, key order) is taken, so the fast path is
not dead code.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types.methods import validate_client_request

from server.downstream.chain import PASSTHROUGH, asks_passthrough
from server.upstream.plain_call import read_envelope, roots_changed

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
INFO_KEY = "io.modelcontextprotocol/clientInfo"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
ids = (
    st.integers(min_value=-(1 << 70), max_value=1 << 70)
    | st.text()
    | st.booleans()
    | st.none()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.lists(st.integers(), max_size=2)
)
arguments = st.dictionaries(st.text(max_size=10), json_values, max_size=5)
finite = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
finite_arguments = st.dictionaries(
    st.text(max_size=10),
    st.recursive(finite, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner)),
    max_size=5,
)


client_infos = st.sampled_from(
    [{"name": "mcp", "version": "0.1.0"}, {"name": "é 中", "version": "", "title": "t"}, {"name": 1}, {}, "mcp", None]
)
capabilities: st.SearchStrategy[object] = st.sampled_from(
    [{}, {"sampling": {}}, {"elicitation": {"form": {}}, "roots": {"listChanged": True}}, {"sampling": 1}, [], None]
)
envelopes = st.fixed_dictionaries(
    {
        VERSION_KEY: st.sampled_from(["2026-07-28", "2026-07-28", "2025-11-25", "2099-01-01", 20260728]),
        INFO_KEY: client_infos,
        CAPABILITIES_KEY: capabilities,
    },
    optional={"io.modelcontextprotocol/logLevel": st.sampled_from(["info", "nope"]), "progressToken": ids},
)


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    """JSON-RPC-shaped messages, many of them tool calls, some with something odd about them."""
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2]))
    if draw(st.integers(0, 9)):
        message["id"] = draw(ids)
    if draw(st.integers(0, 9)):
        message["method"] = draw(st.sampled_from(["tools/call", "tools/call", "tools/list", "Tools/call", "ping"]))
    if draw(st.integers(0, 9)):
        params: Any = {}
        if draw(st.integers(0, 9)):
            params["name"] = draw(st.text() | st.integers() | st.none())
        if draw(st.booleans()):
            params["arguments"] = draw(arguments | json_values)
        if not draw(st.integers(0, 5)):
            passthrough = st.fixed_dictionaries({PASSTHROUGH: json_scalars}, optional={"progressToken": ids})
            metas = (
                st.just({"progressToken": 1})
                | passthrough
                | envelopes
                | st.dictionaries(st.text(max_size=5), json_scalars)
            )
            params["_meta"] = draw(metas)
        if not draw(st.integers(0, 7)):
            params["task"] = {"ttl": 1000}
        if not draw(st.integers(0, 7)):
            params[draw(st.text(max_size=6))] = draw(json_scalars)
        message["params"] = draw(st.just(params) | json_values) if not draw(st.integers(0, 9)) else params
    if not draw(st.integers(0, 7)):
        message[draw(st.text(max_size=6))] = draw(json_scalars)
    if not draw(st.integers(0, 9)):
        message["result"] = {}
    return message


def _encode(message: Any, ascii_only: bool, spaced: bool) -> bytes:
    separators = (", ", ": ") if spaced else (",", ":")
    return json.dumps(message, ensure_ascii=ascii_only, separators=separators).encode("utf-8", "surrogatepass")


def _sdk_reading(line: bytes) -> tuple[types.RequestId, types.CallToolRequestParams] | None:
    """How the SDK reads `line` as a `tools/call`: its id and typed parameters; None when it is not one."""
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        return None
    if not isinstance(message, types.JSONRPCRequest) or message.method != "tools/call":
        return None
    try:  # as the server's runner validates them (absent params validate as {})
        params = types.CallToolRequestParams.model_validate(message.params or {}, by_name=False)
    except ValueError:
        return None
    return message.id, params


def _check(line: bytes) -> None:
    envelope = read_envelope(line)
    if envelope is None:
        return
    reading = _sdk_reading(line)
    assert reading is not None, f"taken by the fast path but not a tools/call to the SDK: {line!r}"
    ident, params = reading
    assert type(ident) is type(envelope.id) and ident == envelope.id
    assert params.name == envelope.name
    assert params.arguments == envelope.arguments
    assert params.task is None
    if envelope.sessionless is not None:
        message = json.loads(line)
        meta = message["params"]["_meta"]
        assert set(meta) == {VERSION_KEY, INFO_KEY, CAPABILITIES_KEY}
        sessionless = envelope.sessionless
        assert (sessionless.protocol_version, sessionless.client_info, sessionless.client_capabilities) == (
            meta[VERSION_KEY],
            meta[INFO_KEY],
            meta[CAPABILITIES_KEY],
        )
        validate_client_request("tools/call", sessionless.protocol_version, message["params"])  # the kernel's check
        assert not envelope.passthrough and envelope.progress_token is None
        return
    if not envelope.passthrough:
        assert params.meta is None
        return
    assert params.meta is not None and asks_passthrough(params)
    token = params.meta.get("progress_token")  # the name the SDK reads it by
    assert type(token) is type(envelope.progress_token) and token == envelope.progress_token
    assert set(params.meta) <= {PASSTHROUGH, "progress_token"}


@settings(max_examples=400, deadline=None)
@given(message=messages(), ascii_only=st.booleans(), spaced=st.booleans())
def test_whatever_the_reader_takes_the_sdk_reads_as_the_same_call(
    message: dict[str, Any], ascii_only: bool, spaced: bool
) -> None:
    _check(_encode(message, ascii_only, spaced))


@settings(max_examples=200, deadline=None)
@given(
    ident=st.integers(min_value=-(1 << 63) + 1, max_value=(1 << 63) - 1) | st.text(),
    name=st.text(),
    args=st.none() | finite_arguments,
    order=st.permutations(["jsonrpc", "id", "method", "params"]),
    spaced=st.booleans(),
)
def test_every_plain_call_is_taken_with_its_id_back(
    ident: int | str, name: str, args: dict[str, Any] | None, order: list[str], spaced: bool
) -> None:
    params: dict[str, Any] = {"name": name} if args is None else {"name": name, "arguments": args}
    fields = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}
    line = _encode({key: fields[key] for key in order}, ascii_only=False, spaced=spaced)
    if b"\\ud" in line.lower():  # a lone surrogate: left to the SDK on purpose
        return
    envelope = read_envelope(line)
    assert envelope is not None, line
    assert type(envelope.id) is type(ident) and envelope.id == ident
    assert (envelope.name, envelope.arguments) == (name, args)
    _check(line)


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":NaN}}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\\ud800"}}',
        b'{"jsonrpc":"2.0","id":"\\uDC00","method":"tools/call","params":{"name":"a"}}',
        b'{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"a"}}',
        b'{"jsonrpc":"2.0","id":true,"method":"tools/call","params":{"name":"a"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":null}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":1}}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.claimcheck/passthrough":1}}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.claimcheck/passthrough":true,'
        b'"progressToken":1.5}}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.claimcheck/passthrough":true,'
        b'"x":1}}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"x":1}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\xff"}}',
        b'[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}]',
    ],
)
def test_lines_the_sdk_might_read_otherwise_are_left_to_it(line: bytes) -> None:
    assert read_envelope(line) is None
    _check(line)


def test_escapes_and_unicode_come_through_as_the_sdk_reads_them() -> None:
    line = (
        b'{"params":{"arguments":{"t":"a\\"b\\\\c\\n\\u00e9\\u4e2d"},"name":"\\u00e9\xc3\xa9"},'
        b'"method":"tools/call","id":"\\u0041","jsonrpc":"2.0"}'
    )
    envelope = read_envelope(line)
    assert envelope is not None
    assert envelope.id == "A" and envelope.name == "éé" and envelope.arguments == {"t": 'a"b\\c\né中'}
    _check(line)


@pytest.mark.parametrize("token", [None, 0, -3, (1 << 63) - 1, "", "outer-7"])
def test_a_pass_through_call_is_taken_with_its_progress_token(token: int | str | None) -> None:
    meta: dict[str, Any] = {"progressToken": token, PASSTHROUGH: True} if token is not None else {PASSTHROUGH: True}
    params = {"name": "a", "arguments": {"x": 1}, "_meta": meta}
    line = _encode({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}, False, False)
    envelope = read_envelope(line)
    assert envelope is not None and envelope.passthrough and envelope.progress_token == token
    assert (envelope.id, envelope.name, envelope.arguments) == (9, "a", {"x": 1})
    _check(line)


def _sessionless_line(ident: int | str, meta: dict[str, Any], arguments: Any = None) -> bytes:
    params: dict[str, Any] = {"name": "demo__echo", "_meta": meta}
    if arguments is not None:
        params["arguments"] = arguments
    return _encode({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}, False, False)


SDK_ENVELOPE = {
    VERSION_KEY: "2026-07-28",
    INFO_KEY: {"name": "mcp", "version": "0.1.0"},
    CAPABILITIES_KEY: {"sampling": {}, "elicitation": {"form": {}, "url": {}}},
}


@settings(max_examples=100, deadline=None)
@given(
    ident=st.integers(min_value=-(1 << 63) + 1, max_value=(1 << 63) - 1) | st.text(),
    args=st.none() | finite_arguments,
    info=st.sampled_from([{"name": "mcp", "version": "0.1.0"}, {"name": "é 中", "version": "2", "title": "x"}]),
    caps=st.sampled_from([{}, {"sampling": {}}, {"roots": {"listChanged": True}, "experimental": {"x": {}}}]),
)
def test_every_sessionless_plain_call_is_taken_with_its_envelope(
    ident: int | str, args: dict[str, Any] | None, info: dict[str, Any], caps: dict[str, Any]
) -> None:
    line = _sessionless_line(ident, {VERSION_KEY: "2026-07-28", INFO_KEY: info, CAPABILITIES_KEY: caps}, args)
    if b"\\ud" in line.lower():
        return
    envelope = read_envelope(line)
    assert envelope is not None and envelope.sessionless is not None, line
    assert (envelope.id, envelope.name, envelope.arguments) == (ident, "demo__echo", args)
    assert (envelope.sessionless.client_info, envelope.sessionless.client_capabilities) == (info, caps)
    _check(line)


@pytest.mark.parametrize(
    "meta",
    [
        {**SDK_ENVELOPE, "io.modelcontextprotocol/logLevel": "info"},  # logs asked for: the SDK's path relays them
        {**SDK_ENVELOPE, "progressToken": 1},
        {**SDK_ENVELOPE, "x": 1},
        {key: value for key, value in SDK_ENVELOPE.items() if key != INFO_KEY},  # the SDK reads it: a SHOULD
        {key: value for key, value in SDK_ENVELOPE.items() if key != CAPABILITIES_KEY},
        {**SDK_ENVELOPE, VERSION_KEY: "2025-11-25"},
        {**SDK_ENVELOPE, VERSION_KEY: "2099-01-01"},
        {**SDK_ENVELOPE, INFO_KEY: {"name": 1}},
        {**SDK_ENVELOPE, INFO_KEY: None},
        {**SDK_ENVELOPE, CAPABILITIES_KEY: {"sampling": 1}},
        {**SDK_ENVELOPE, CAPABILITIES_KEY: []},
    ],
)
def test_an_envelope_other_than_the_sdk_clients_is_left_to_the_sdk(meta: dict[str, Any]) -> None:
    assert read_envelope(_sessionless_line(1, meta, {"text": "x"})) is None


def test_the_sdk_clients_own_envelope_is_taken() -> None:
    envelope = read_envelope(_sessionless_line(1, SDK_ENVELOPE, {"text": "x"}))
    assert envelope is not None and envelope.sessionless is not None
    assert envelope.sessionless.protocol_version == "2026-07-28"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b'{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}', True),
        (b'{"method": "notifications/roots/list_changed", "jsonrpc": "2.0", "params": {}}', True),
        (b'{"jsonrpc":"2.0","id":1,"method":"notifications/roots/list_changed"}', False),  # a request, not it
        (b'{"jsonrpc":"2.0","id":1,"result":{"text":"notifications/roots/list_changed"}}', False),
        (b'{"jsonrpc":"2.0","method":"notifications/roots/list_changed"', False),  # broken JSON
        (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', False),
    ],
)
def test_a_roots_change_is_told_from_its_line(line: bytes, expected: bool) -> None:
    assert roots_changed(line) is expected
