"""What the fast paths read and write without the SDK: a plain `tools/call` line, the cancellation of one, the
response lines they answer with, and the relay of a call they take.

`read_envelope` reads a call as the SDK would, conservatively: anything unusual is left to the SDK. A plain call
of the handshake era has no `_meta`; a plain call of the sessionless era (2026-07-28) has exactly the envelope
the SDK's client stamps on every request (protocol version, client info, client capabilities: `Sessionless`),
nothing more (no log level, no progress token). The one other `_meta` taken is a claimcheck in front asking for
a pass-through (`server.downstream.chain.PASSTHROUGH`, with the progress token that claimcheck sends), which only
the stdio fast path answers (`server.upstream.fast_passthrough`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard, cast

import mcp_types as types
from mcp.server.session import ServerSession
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types.methods import serialize_server_result, validate_client_request
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from server.downstream.chain import PASSTHROUGH
from server.downstream.relay import RequestRelay

__all__ = [
    "AnswerWire",
    "CallContext",
    "Envelope",
    "Envelopes",
    "FastRelay",
    "RequestId",
    "Sessionless",
    "cancelled_id",
    "line",
    "read_envelope",
    "result_line",
    "roots_changed",
]

_MAX_ID = (1 << 63) - 1
_ENVELOPES_KEPT = 256

RequestId = int | str


@dataclass(frozen=True, slots=True, eq=False)
class Sessionless:
    """The `_meta` envelope of a 2026-07-28 request, as sent: what a handshake gave before. A client sends the same
    one with every request, so one is kept per distinct envelope (compared by identity)."""

    protocol_version: str
    client_info: dict[str, Any]
    client_capabilities: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Envelope:
    """What the fast path reads of a plain `tools/call`."""

    id: RequestId
    name: str
    arguments: dict[str, Any] | None
    passthrough: bool = False
    """A claimcheck in front asks for a plain pass-through (`_meta` holds `PASSTHROUGH: true`)."""
    progress_token: RequestId | None = None
    """The progress token in a pass-through's `_meta` (a plain call has none)."""
    sessionless: Sessionless | None = None
    """The request's own envelope, for a call of the sessionless era (None: a handshake-era call)."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


def _request_id(value: Any) -> TypeGuard[RequestId]:
    return (type(value) is int and -_MAX_ID <= value <= _MAX_ID) or type(value) is str


class Envelopes:
    """The sessionless envelopes one fast path has read (None: refused), by their text: each is validated once,
    and each distinct one is one `Sessionless`; at most `_ENVELOPES_KEPT` are kept (then they are forgotten)."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[str, Sessionless | None] = {}

    def envelope_of(self, line: bytes) -> Envelope | None:
        """`read_envelope`, with the envelopes read before."""
        return read_envelope(line, self._known)


def read_envelope(line: bytes, known: dict[str, Sessionless | None] | None = None) -> Envelope | None:
    """The envelope of a plain `tools/call` request line, or None for anything else (the SDK's to read); `known`:
    the sessionless envelopes read before (`Envelopes`), validated once.

    Conservative by design: whatever the SDK might read differently from the stdlib (NaN, surrogate escapes,
    ids that are floats or booleans or too big, fields beyond the plain ones, a `_meta` other than a
    pass-through's or the sessionless era's envelope, one the SDK's surface for that version refuses) is left
    to the SDK."""
    if b'"tools/call"' not in line or b"\\ud" in line or b"\\uD" in line:
        return None
    try:
        message = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, NaN/Infinity, or past the budget after all
        return None
    if type(message) is not dict or len(message) != 4 or message.get("jsonrpc") != "2.0":
        return None
    if message.get("method") != "tools/call":
        return None
    ident, params = message.get("id"), message.get("params")
    if not _request_id(ident) or type(params) is not dict or not 1 <= len(params) <= 3:
        return None
    name, arguments = params.get("name"), params.get("arguments")
    fields = 1 + ("arguments" in params) + ("_meta" in params)
    if type(name) is not str or len(params) != fields or type(arguments) not in (dict, type(None)):
        return None
    if "arguments" in params and arguments is None:
        return None
    if "_meta" not in params:
        return Envelope(ident, name, arguments)
    meta = params["_meta"]
    if type(meta) is dict and PROTOCOL_VERSION_META_KEY in meta:
        sessionless = _sessionless(meta, known if known is not None else {})
        return Envelope(ident, name, arguments, sessionless=sessionless) if sessionless is not None else None
    if type(meta) is not dict or meta.get(PASSTHROUGH) is not True or len(meta) != 1 + ("progressToken" in meta):
        return None
    token = meta.get("progressToken")
    if "progressToken" in meta and not _request_id(token):
        return None
    return Envelope(ident, name, arguments, passthrough=True, progress_token=token)


def _sessionless(meta: dict[str, Any], known: dict[str, Sessionless | None]) -> Sessionless | None:
    """The envelope the SDK's client stamps on a 2026-07-28 request, and nothing more, as that version's surface
    validates it (the kernel types the reserved keys strictly); None for anything else."""
    version = meta.get(PROTOCOL_VERSION_META_KEY)
    info, capabilities = meta.get(CLIENT_INFO_META_KEY), meta.get(CLIENT_CAPABILITIES_META_KEY)
    if len(meta) != 3 or type(version) is not str or version not in MODERN_PROTOCOL_VERSIONS:
        return None
    if type(info) is not dict or type(capabilities) is not dict:
        return None
    key = repr((version, info, capabilities))  # exact for what `json` parses: types and order show
    if key in known:
        return known[key]
    try:
        validate_client_request("tools/call", version, {"name": "", "_meta": meta})
        found: Sessionless | None = Sessionless(version, info, capabilities)
    except (ValueError, KeyError):  # a pydantic ValidationError is a ValueError
        found = None
    if len(known) >= _ENVELOPES_KEPT:
        known.clear()
    known[key] = found
    return found


def cancelled_id(line: bytes) -> RequestId | None:
    """The request id of a `notifications/cancelled` line."""
    if b'"notifications/cancelled"' not in line:
        return None
    try:
        message = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    if type(message) is not dict or message.get("method") != "notifications/cancelled" or "id" in message:
        return None
    params = message.get("params")
    ident = params.get("requestId") if type(params) is dict else None
    return ident if type(ident) in (int, str) else None


_ROOTS_CHANGED = b'"notifications/roots/list_changed"'


def roots_changed(line: bytes) -> bool:
    """Whether `line` is a `notifications/roots/list_changed` (a short line: it has no params worth reading)."""
    if len(line) > 1024 or _ROOTS_CHANGED not in line:
        return False
    try:
        message = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return False
    return type(message) is dict and message.get("method") == "notifications/roots/list_changed" and "id" not in message


class AnswerWire(Protocol):
    """How the answer to a sessionless request is written, as the transport's SDK path writes it
    (`server.upstream.sessionless.SessionlessWire`)."""

    def result(self, ident: RequestId, result: types.CallToolResult, protocol_version: str) -> bytes: ...

    def text_result(
        self, ident: RequestId, texts: list[str], is_error_sent: bool, protocol_version: str
    ) -> bytes | None: ...

    def error(self, ident: RequestId, exc: Exception) -> bytes: ...


@dataclass(frozen=True, slots=True)
class CallContext:
    """What a `RequestRelay` and `llm_available` read of a request context, for a fast-path call that has none
    (over stdio no request id: the client's requests go on the connection's own channel); `wire`, for a
    sessionless request, how its answer is written."""

    session: ServerSession
    protocol_version: str
    request_id: int | str | None = None
    wire: AnswerWire | None = None


class FastRelay(RequestRelay):
    """The `RequestRelay` of a fast-path call: the client's connection, which over stdio always takes requests
    (`request_id` None: they go on the connection's own channel), and no progress token to report on."""

    def __init__(self, context: CallContext, min_log_level: types.LoggingLevel | None) -> None:
        super().__init__(cast(Any, context), min_log_level)

    def reaches_client(self) -> bool:
        return True

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        return None  # the client asked for none (a plain call with a token takes the SDK's path)


def result_line(ident: RequestId, result: types.CallToolResult, protocol_version: str) -> bytes:
    """The response line of `result`, shaped by the SDK's own serializer as its path would."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    wire = serialize_server_result("tools/call", protocol_version, dumped)
    return line({"jsonrpc": "2.0", "id": ident, "result": wire})


def line(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as a line."""
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    except UnicodeEncodeError:  # a lone surrogate the downstream escaped: passed on escaped
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"
