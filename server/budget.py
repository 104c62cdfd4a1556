"""The budget a request line must fit before any parser reads it: its size and how deep it nests.

JSON parsers recurse: the stdlib's `json` raises RecursionError past about 1 000 levels (out of a read loop,
that ended the process), and the SDK's (pydantic-core) refuses a message nested deeper than about 200, so a
deeper call the fast path read with the stdlib would reach a Python downstream that drops it unanswered.
`MAX_DEPTH` is 128: it stays under both, with room for the envelope a message adds around its arguments,
and far above what tool arguments need. `check_budget` counts the nesting without parsing (strings are
skipped, brackets counted at C speed; a line with few brackets costs two `count`s) and answers what is past
the budget with a JSON-RPC error, under the request's id when the head of the line shows it.

The same check refuses the shapes the SDK would take in silence or answer with a validation dump: a batch
(the protocol dropped batches in 2025-06-18), a request whose id is not a string or an integer (`1.5`,
`1e400`, `true`, `null`, an object: the SDK takes it for a notification and answers nothing), and a method
name longer than any method (answered "Method not found" with the name cut to 200 characters, where the SDK
quotes it whole). A line is parsed for this only when its head or tail looks suspect (one regex each).
"""

from __future__ import annotations

import functools
import itertools
import json
import operator
import re
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from server.errors import QUOTE_LIMIT, clip

__all__ = [
    "HEAD_BYTES",
    "MAX_BYTES",
    "MAX_DEPTH",
    "Refused",
    "check_budget",
    "misshapen",
    "nests_deeper",
    "not_json_rpc",
    "request_id",
    "request_key",
    "response_id",
    "too_large",
    "unreadable",
    "unreadable_body",
]

MAX_DEPTH = 128
MAX_BYTES = 64 << 20
"""The default of `settings.maxRequestBytes`."""
HEAD_BYTES = 4096
"""How much of a refused line is read for its id."""

RequestId = int | str

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKETS = b"[]{}"
_MARKS = bytes.maketrans(_BRACKETS, b"\x02\x00\x02\x00")
"""An opening bracket as 2 and a closing one as 0: after i + 1 brackets, their sum minus i + 1 is the depth."""
_NOT_BRACKETS = bytes(set(range(256)) - set(_BRACKETS))
_TOKEN = re.compile(rb'\s*("[^"\\]*(?:\\.[^"\\]*)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null|[][{}:,])', re.S)
_INTEGER_ID = re.compile(rb"-?\d{1,18}")
_BATCH = re.compile(rb"\s*\[")
_SUSPECT = re.compile(rb'"id"\s*:\s*(?:[^\s"\d-]|-?\d+[.eE])|"method"\s*:\s*"[^"]{%d}' % QUOTE_LIMIT)
"""What a request with an id of the wrong type, or a method name past any method's, shows in its head or tail."""
_ID_LAST = re.compile(rb'[,{]\s*"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")\s*}\s*$')


@dataclass(frozen=True, slots=True)
class Refused:
    """A request refused unread, and the JSON-RPC error that answers it."""

    code: int
    message: str
    id: RequestId | None
    data: str | None = None

    def body(self) -> bytes:
        error: dict[str, object] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return json.dumps({"jsonrpc": "2.0", "id": self.id, "error": error}).encode()

    def line(self) -> bytes:
        return self.body() + b"\n"


def check_budget(line: bytes, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> Refused | None:
    """None when `line` fits the budget, else why it does not: its parsing would cost more than a request may."""
    if len(line) > max_bytes:
        return too_large(line[:HEAD_BYTES], max_bytes)
    if nests_deeper(line, max_depth):
        message = f"Request nested too deep: over {max_depth} levels of brackets; it was not read."
        return Refused(types.INVALID_REQUEST, message, request_id(line[:HEAD_BYTES]))
    if _BATCH.match(line):
        message = "Batches are not supported: send each JSON-RPC message on its own (the protocol dropped batches)."
        return Refused(types.INVALID_REQUEST, message, None)
    if _SUSPECT.search(line, 0, HEAD_BYTES) or (
        len(line) > HEAD_BYTES and _SUSPECT.search(line, len(line) - HEAD_BYTES)
    ):
        return misshapen(line)
    return None


_JSON_TYPES = {bool: "a boolean", float: "a number with a fraction or an exponent", dict: "an object", list: "an array"}


def misshapen(line: bytes) -> Refused | None:
    """The refusal of a request whose id is not a string or an integer, or whose method name is longer than any
    method's; None for anything else (the suspect pattern was in its arguments, or it is not JSON at all)."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    if "id" in message and (type(message["id"]) is not int and type(message["id"]) is not str):
        what = _JSON_TYPES.get(type(message["id"]), "null")
        text = f"Invalid request: its id must be a string or an integer, not {what}; it was not read."
        return Refused(types.INVALID_REQUEST, text, None)
    method = message["method"]
    if isinstance(method, str) and len(method) > QUOTE_LIMIT:
        ident = message.get("id")
        return Refused(types.METHOD_NOT_FOUND, "Method not found", ident, clip(method))
    return None


def too_large(head: bytes, limit: int) -> Refused:
    """The answer to a request over `limit` bytes, of which `head` was seen."""
    message = f"Request too large: over the {limit}-byte limit (settings.maxRequestBytes); it was not read."
    return Refused(types.INVALID_REQUEST, message, request_id(head))


def unreadable(line: bytes, error: Exception) -> Refused:
    """The answer to a line that is not JSON (-32700) or not a JSON-RPC message (-32600). Either answers the request
    whose id the line's head shows (`request_id`): a line cut short, one with bytes that are not UTF-8 or a number
    of more digits than can be read is a request its client waits for; null where no id can be read."""
    invalid = [detail for detail in getattr(error, "errors", list)() if detail.get("type") == "json_invalid"]
    if invalid:
        reason = str(invalid[0].get("msg", "")).removeprefix("Invalid JSON: ") or "not JSON"
        text = f"Parse error: the line is not JSON in UTF-8 that can be read ({clip(reason)}); it was not read."
        return Refused(types.PARSE_ERROR, text, request_id(line[:HEAD_BYTES]))
    return not_json_rpc(line)


def not_json_rpc(line: bytes) -> Refused:
    """The answer to JSON that is no JSON-RPC message of MCP's, saying what to change where that is simple."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return _not_json_rpc(line, "")
    return _not_json_rpc(line, _why_not_json_rpc(message))


def unreadable_body(body: bytes) -> Refused:
    """The answer to an HTTP body that a transport could not read as a JSON-RPC message, found with one parse:
    not JSON (-32700), or JSON that is no such message (-32600, saying what to change as `not_json_rpc` does)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        text = f"Parse error: the body is not JSON in UTF-8 that can be read ({clip(reason)}); it was not read."
        return Refused(types.PARSE_ERROR, text, request_id(body[:HEAD_BYTES]))
    return _not_json_rpc(body, _why_not_json_rpc(message))


def _not_json_rpc(line: bytes, why: str) -> Refused:
    return Refused(
        types.INVALID_REQUEST, f"Invalid request: not a JSON-RPC message{why}.", request_id(line[:HEAD_BYTES])
    )


def _why_not_json_rpc(message: Any) -> str:
    """What makes the JSON `message` no JSON-RPC message of MCP's, said after a colon; "" when nothing simple."""
    if not isinstance(message, dict):
        return ": it is not an object"
    if message.get("jsonrpc") != "2.0":
        return ': its "jsonrpc" must be "2.0"'
    if "method" in message and not isinstance(message["method"], str):
        return ': its "method" must be a string'
    if "params" in message and not isinstance(message["params"], dict):
        return ': its "params" must be an object (MCP names every parameter)'
    if not {"method", "result", "error"} & message.keys():
        return ': it needs a "method" (a request or notification), or a "result" or an "error" (a response)'
    return ""


def nests_deeper(line: bytes, max_depth: int) -> bool:
    """Whether JSON text nests arrays and objects more than `max_depth` deep, found without parsing it: brackets
    in strings do not count; in text that is not JSON the answer may be too high, never too low."""
    if line.count(b"[") + line.count(b"{") <= max_depth:
        return False
    structure = _STRING.sub(b"", line) if b'"' in line else line
    marks = structure.translate(_MARKS, _NOT_BRACKETS)
    if marks.count(2) <= max_depth:
        return False
    depths = map(operator.sub, itertools.accumulate(marks), itertools.count(1))
    return next(filter(functools.partial(operator.lt, max_depth), depths), None) is not None


def request_key(ident: RequestId) -> tuple[bool, RequestId]:
    """A request id as a key of the requests in flight: 1 and "1" are different requests."""
    return type(ident) is str, ident


def request_id(head: bytes) -> RequestId | None:
    """The id of the request whose line starts with `head`, if the head shows its top-level `"id"` and
    `"method"` (an id only in the arguments, or that of a client's response, is not the request's)."""
    return _top_level_id(head, (b'"method"',))


def response_id(line: bytes) -> RequestId | None:
    """The id of the response `line` is, if its head shows a top-level `"id"` and `"result"` or `"error"`, or
    its end is `"id": <id>}` (a writer that puts the id last)."""
    ident = _top_level_id(line[:HEAD_BYTES], (b'"result"', b'"error"'))
    if ident is None and (match := _ID_LAST.search(line[-HEAD_BYTES:])) is not None:
        ident = _id_of(match.group(1))
    return ident


def _top_level_id(head: bytes, markers: tuple[bytes, ...]) -> RequestId | None:
    depth, previous, key = 0, b"", b""
    ident: RequestId | None = None
    marked = False
    position = 0
    while (match := _TOKEN.match(head, position)) is not None:
        position = match.end()
        token = match.group(1)
        if token in (b"{", b"["):
            if depth == 0 and token != b"{":
                return None  # a batch: no one id
            depth += 1
        elif token in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and previous in (b"{", b",") and token.startswith(b'"'):
            key = token
            marked = marked or key in markers
        elif depth == 1 and previous == b":" and key == b'"id"':
            ident = _id_of(token)
        previous = token
    return ident if marked else None


def _id_of(token: bytes) -> RequestId | None:
    if _INTEGER_ID.fullmatch(token):
        return int(token)
    if token.startswith(b'"'):
        try:
            value = json.loads(token)
        except ValueError:
            return None
        return value if isinstance(value, str) else None
    return None
