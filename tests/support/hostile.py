"""Hostile input, as a small library: request frames a client might send, outputs a server might return, bearer
tokens no issuer made, and the calls of a principal that tries to take every other principal's share
(`SHARE_ATTACKS`, tests/e2e/test_fair_shares.py).

Each generator makes bytes from a seeded `random.Random`, so a failing run is repeated by its seed. `REGRESSIONS`
holds the exact inputs that once broke claimcheck; every bug fixed adds one there, and the fuzz tests
(tests/e2e/test_fuzz_hostile.py) send all of them before the random ones.

A `Frame` says what its sender may expect: `"one"` (a request with an id of ours: exactly one answer),
`"at_most_one"` (an id of ours may be hidden by the damage: never two answers) or `"none"` (notifications,
ids not ours: nothing is promised but that the process lives).
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "CATASTROPHIC",
    "EVIL_TEXT",
    "HOSTILE_READS",
    "OUTPUT_CASES",
    "REGRESSIONS",
    "SHARE_ATTACKS",
    "Frame",
    "Ids",
    "ShareAttack",
    "deep",
    "hostile_output",
    "hostile_tokens",
    "random_frames",
]

Expect = Literal["one", "at_most_one", "none"]

CATASTROPHIC = "(a+)+\\Z"  # \Z needs the backtracking engine; on "aaa…ab" it backtracks past any timeout
EVIL_TEXT = "a" * 50_000 + "b"


@dataclass(frozen=True, slots=True)
class Frame:
    """One line to send (without its newline) and what may come back for `ident`."""

    data: bytes
    ident: int | None
    expect: Expect
    what: str


class Ids:
    """Fresh integer ids, far from any a client library would use."""

    def __init__(self, start: int = 70_000) -> None:
        self._next = start

    def __call__(self) -> int:
        self._next += 1
        return self._next


def deep(depth: int, *, kind: str = "[", inner: str = "0", closed: bool = True) -> str:
    """JSON nested `depth` levels: arrays (`[`) or objects (`{`), closed or left open."""
    opening, closing = ("[", "]") if kind == "[" else ('{"a":', "}")
    return opening * depth + inner + (closing * depth if closed else "")


def _request(ident: Any, method: str, params: str | None) -> bytes:
    head = '{"jsonrpc":"2.0","id":' + (ident if isinstance(ident, str) else json.dumps(ident))
    body = head + ',"method":' + json.dumps(method)
    return (body + (',"params":' + params if params is not None else "") + "}").encode()


def _call(ident: int, name: str, arguments: str) -> bytes:
    return _request(ident, "tools/call", '{"name":' + json.dumps(name) + ',"arguments":' + arguments + "}")


def _deep_frames(rng: random.Random, ids: Ids, tools: list[str]) -> Iterator[Frame]:
    depth = rng.choice([64, 200, 1_000, 5_000, 100_000])
    kind = rng.choice(["[", "{"])
    ident = ids()
    where = rng.choice(["arguments", "params", "id", "top", "meta", "cancel"])
    nest = deep(depth, kind=kind)
    if where == "arguments":
        yield Frame(_call(ident, rng.choice(tools), '{"x":' + nest + "}"), ident, "one", f"{depth} deep in arguments")
    elif where == "params":
        method = rng.choice(["tools/call", "ping", "tools/list"])
        # params must be an object for the frame to be a request at all: an array's error may carry a null id
        yield Frame(_request(ident, method, '{"x":' + nest + "}"), ident, "one", f"{depth} deep params")
    elif where == "id":
        yield Frame(_request(nest, "ping", None), None, "none", f"{depth} deep id")
    elif where == "meta":
        params = '{"name":"' + rng.choice(tools) + '","arguments":{},"_meta":' + nest + "}"
        yield Frame(_request(ident, "tools/call", params), ident, "one", f"{depth} deep _meta")
    elif where == "cancel":
        line = '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":' + nest + "}}"
        yield Frame(line.encode(), None, "none", "deep cancelled requestId")
    else:
        yield Frame(nest.encode(), None, "none", f"{depth} deep top level")


def _huge_frames(rng: random.Random, ids: Ids, tools: list[str]) -> Iterator[Frame]:
    size = rng.choice([1 << 10, 1 << 16, 1 << 20, 3 << 20])
    ident = ids()
    text = json.dumps("é" * (size // 2))
    expect: Expect = "one"
    yield Frame(_call(ident, rng.choice(tools), '{"text":' + text + "}"), ident, expect, f"{size}-byte argument")


_ODD_IDS: list[str] = [
    "1.5", "true", "null", "[]", "{}", "1e400", "-0", "10000000000000000000000000000",
    "1" * 5_000, '"' + "i" * 10_000 + '"', '"\\ud800"', '"\\u0000"',
]  # fmt: skip
_ODD_PARAMS: list[str] = [
    "[]", '"x"', "5", "null", '{"name":5}', '{"name":"x","arguments":[]}', '{"name":"x","arguments":"s"}',
    '{"name":"","arguments":{}}', '{"name":"' + "n" * 100_000 + '"}', '{"uri":5}', '{"name":null}',
]  # fmt: skip


def _type_frames(rng: random.Random, ids: Ids, tools: list[str]) -> Iterator[Frame]:
    choice = rng.randrange(5)
    if choice == 4:  # a batch (the protocol dropped them): refused whole, with a null id
        inner = _request(ids(), "ping", None).decode()
        yield Frame(rng.choice(["[]", f"[{inner}]", f" [{inner},{inner}]"]).encode(), None, "none", "a batch")
    elif choice == 0:
        yield Frame(_request(rng.choice(_ODD_IDS), "ping", None), None, "none", "odd id")
    elif choice == 1:
        ident = ids()
        method = rng.choice(["tools/call", "resources/read", "prompts/get", "completion/complete", "logging/setLevel"])
        params = rng.choice(_ODD_PARAMS)
        # params that are not an object make the frame no valid request; its error may carry a null id
        expect: Expect = "one" if params.startswith("{") else "at_most_one"
        yield Frame(_request(ident, method, params), ident, expect, f"odd params for {method}")
    elif choice == 2:
        ident = ids()
        method = rng.choice(["", "nope", "tools/call\u0000", "x" * 70_000, "rpc.discover", "notifications/x"])
        yield Frame(_request(ident, method, "{}"), ident, "one", "odd method")
    else:
        ident = ids()
        shapes = [
            '{"jsonrpc":"1.0","id":ID,"method":"ping"}',
            '{"id":ID,"method":"ping"}',
            '{"jsonrpc":"2.0","id":ID,"method":5}',
            '{"jsonrpc":"2.0","id":ID,"method":"ping","params":{},"extra":[1,2]}',
            '{"jsonrpc":"2.0","id":ID,"id":ID,"method":"ping"}',
        ]
        line = rng.choice(shapes).replace("ID", str(ident))
        yield Frame(line.encode(), ident, "at_most_one", "odd envelope")


def _unicode_frames(rng: random.Random, ids: Ids, tools: list[str]) -> Iterator[Frame]:
    ident = ids()
    pieces = [
        b"\xff\xfe",
        b"\xc0\xaf",
        b"\xed\xa0\x80",
        b"\\ud800",
        b"\\udfff\\ud800",
        b"\x00",
        b"\\u0000",
        b"\xe2\x80\xa8",
    ]
    bad = rng.choice(pieces)
    tool = rng.choice(tools).encode()
    line = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":{"text":"a%sb"}}}'
    expect: Expect = "at_most_one"  # invalid UTF-8 may be refused as a parse error with id null
    yield Frame(line % (ident, tool, bad), ident, expect, f"bytes {bad!r} in a string")
    if rng.random() < 0.3:
        yield Frame(b"\xef\xbb\xbf" + _request(ids(), "ping", None), None, "none", "a BOM before the frame")


def _truncated_frames(rng: random.Random, ids: Ids, tools: list[str]) -> Iterator[Frame]:
    ident = ids()
    whole = _call(ident, rng.choice(tools), '{"text":"' + "t" * rng.randrange(1, 200) + '"}')
    cut = rng.randrange(1, len(whole))
    yield Frame(whole[:cut], ident, "at_most_one", f"cut at {cut} of {len(whole)}")


def _odd_json_frames(rng: random.Random, ids: Ids, tools: list[str]) -> Iterator[Frame]:
    ident = ids()
    lines = [
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"x","arguments":{"n":NaN}}}' % ident,
        b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"n":1e999999}}' % ident,
        b'[{"jsonrpc":"2.0","id":%d,"method":"ping"}]' % ident,
        b"[]",
        b"{}",
        b"   ",
        b'{"jsonrpc":"2.0","id":%d,"method":"ping",}' % ident,
        b"null",
        b'"just a string"',
        b'{"jsonrpc":"2.0","id":%d,"result":{}}' % ident,  # a response to nothing
        b'{"jsonrpc":"2.0","id":%d,"error":{"code":1,"message":"x"}}' % ident,
    ]
    yield Frame(rng.choice(lines), ident, "at_most_one", "odd JSON")


def _notification_frames(rng: random.Random, ids: Ids, tools: list[str]) -> Iterator[Frame]:
    lines = [
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":'
        + str(rng.randrange(1 << 40))
        + "}}",
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":5}',
        '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":[],"progress":"x"}}',
        '{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":[]}',
        '{"jsonrpc":"2.0","method":"notifications/initialized"}',
        '{"jsonrpc":"2.0","method":"' + "n" * 50_000 + '"}',
    ]
    yield Frame(rng.choice(lines).encode(), None, "none", "odd notification")


def _own_tool_frames(rng: random.Random, ids: Ids, tools: list[str]) -> Iterator[Frame]:
    ident = ids()
    handle = "session-" + "0" * 8 + "/" + "1" * 8
    arguments = rng.choice(
        [
            '{{"handle":"{}","mode":"json","query":"{}"}}'.format(handle, "(" * 5_000),
            '{{"handle":"{}","mode":"json","query":"{}"}}'.format(handle, "a" * 1_000_000),
            '{"handle":"../../etc/passwd","mode":"raw"}',
            '{{"handle":"{}","mode":"slice","slice":{{"anchor":"{}"}}}}'.format(handle, "x" * (1 << 20)),
            '{"file":"/etc/passwd"}',
            f'{{"file":"{handle}","regex":"(a*)*b"}}',
            '{"handles":' + deep(2_000) + "}",
            '{"handle":"all"}',
        ]
    )
    tool = rng.choice(["tool_output", "Read", "Grep", "wait_for_tool_output", "cancel_tool_output"])
    yield Frame(_call(ident, tool, arguments), ident, "one", f"hostile {tool}")


def _flood_frames(rng: random.Random, ids: Ids, tools: list[str]) -> Iterator[Frame]:
    for _ in range(rng.randrange(20, 200)):
        ident = ids()
        if rng.random() < 0.5:
            yield Frame(_request(ident, "ping", None), ident, "one", "flood ping")
        else:
            yield Frame(_call(ident, rng.choice(tools), '{"text":"f"}'), ident, "one", "flood call")


GENERATORS: list[Callable[[random.Random, Ids, list[str]], Iterator[Frame]]] = [
    _deep_frames,
    _huge_frames,
    _type_frames,
    _unicode_frames,
    _truncated_frames,
    _odd_json_frames,
    _notification_frames,
    _own_tool_frames,
    _flood_frames,
]


def random_frames(rng: random.Random, ids: Ids, tools: list[str]) -> Iterator[Frame]:
    """An endless mix of hostile frames aimed at `tools` (proxied tool names that take a `text` argument)."""
    while True:
        yield from rng.choice(GENERATORS)(rng, ids, tools)


def _regressions(ids: Ids, tool: str) -> list[Frame]:
    one, two, three, four, five, six = (ids() for _ in range(6))
    cut = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",' % six
    return [
        # Deeper than the SDK's parser reads (about 200) but within the stdlib's: the HTTP fast path forwarded
        # it, the downstream dropped it, and the call waited for the server's timeout.
        Frame(_call(four, tool, '{"x":' + deep(300) + "}"), four, "one", "300 deep arguments"),
        # An "id" inside the arguments before the deep part: the refusal must carry the request's own id.
        Frame(_call(five, tool, '{"id":7,"x":' + deep(2_000) + "}"), five, "one", "an id in the arguments"),
        # A line that is no JSON: once dropped without a word by the SDK's stdio reader.
        Frame(cut, six, "at_most_one", "a request cut after its method"),
        # A 2 KB line: arguments 1 000 brackets deep ended the process through the stdio fast path.
        Frame(_call(one, tool, '{"x":' + deep(1_000) + "}"), one, "one", "1 000 deep arguments"),
        # The HTTP fast path answered 2 000 deep with a 500 and dropped the connection at 100 000.
        Frame(_call(two, tool, '{"x":' + deep(2_000) + "}"), two, "one", "2 000 deep arguments"),
        Frame(_call(three, tool, '{"x":' + deep(100_000, kind="{") + "}"), three, "one", "100 000 deep arguments"),
    ]


REGRESSIONS: Callable[[Ids, str], list[Frame]] = _regressions
"""Inputs that once broke claimcheck, sent first by every fuzz run (an id maker and a proxied tool's name)."""


HOSTILE_READS: list[tuple[str, dict[str, Any]]] = [
    # JMESPath that doubles a string sixteen times: 2.3 GB and an unhandled MemoryError before its budget.
    ("tool_output", {"mode": "json", "query": "to_string(@)" + " | join('', [@, @])" * 16}),
    # One value reachable 2^40 times.
    ("tool_output", {"mode": "json", "query": " | ".join(["[@, @]"] * 40) + " | to_string(@)"}),
    # A separator repeated once per element.
    ("tool_output", {"mode": "json", "query": "join(to_string(@), [" + ", ".join(["''"] * 1_000) + "])"}),
    # Queries that made the parser recurse, or were too long to parse.
    ("tool_output", {"mode": "json", "query": "(" * 5_000 + "@" + ")" * 5_000}),
    ("tool_output", {"mode": "json", "query": "!" * 3_000 + "a"}),
    ("tool_output", {"mode": "json", "query": "`" + "[" * 2_000 + "]" * 2_000 + "`"}),
    ("tool_output", {"mode": "json", "query": "a" * 1_000_000}),
    # Paths of three steps crashed the view ("too many values to unpack").
    ("tool_output", {"mode": "json", "query": "[0][0][0]"}),
    ("tool_output", {"mode": "json", "query": "a.a.a"}),
    # An anchor of a mebibyte ("list index out of range").
    ("tool_output", {"mode": "slice", "slice": {"anchor": "x" * (1 << 20)}}),
    ("Grep", {"regex": "(a*)*b"}),
]
"""Reads of a stored output that once broke claimcheck (`handle` or `file` is added by the caller)."""


OUTPUT_CASES: dict[str, str] = {
    "deep_text_big": "text content: 5 000-deep JSON arrays, over the size threshold",
    "deep_object_big": "text content: 5 000-deep JSON objects, over the size threshold",
    "deep_text_small": "text content: 1 000-deep JSON under the threshold (returned inline)",
    "deep_structured": "structuredContent nested 5 000 deep",
    "deep_error_data": "a JSON-RPC error whose data nests 5 000 deep",
    "huge_int": "structuredContent with a 5 000-digit integer (past Python's int-string limit)",
    "huge_int_text_big": "text content: a 5 000-digit integer in a JSON document over the threshold",
    "invalid_utf8": "raw invalid UTF-8 bytes inside a text string",
    "lone_surrogate": "a lone surrogate escape inside a text string",
    "nul": "NUL characters inside a text string, over the threshold",
    "result_not_object": "a result that is a number",
    "content_not_list": "content that is a string",
    "unknown_content": "a content item of an unknown type",
    "bad_image": "an image item whose data is not base64",
    "nan": "NaN and Infinity in structuredContent",
    "twice": "the same answer sent twice",
    "stranger_first": "an answer to an unknown id before the real one",
    "long_lines_big": "one 3 MiB line without a newline, over the threshold",
}


def hostile_output(case: str, ident: Any) -> bytes:
    """The answer line(s) a hostile server sends to `tools/call` with `{"case": case}`."""
    head = '{"jsonrpc":"2.0","id":' + json.dumps(ident)

    def result(body: str) -> bytes:
        return (head + ',"result":' + body + "}\n").encode()

    def text(value: str) -> bytes:
        return result('{"content":[{"type":"text","text":' + json.dumps(value) + "}]}")

    if case == "deep_text_big":
        return text(deep(5_000) + " " + "pad " * 20_000)
    if case == "deep_object_big":
        return text(deep(5_000, kind="{") + "\n" + "pad " * 20_000)
    if case == "deep_text_small":
        return text(deep(1_000))
    if case == "deep_structured":
        return result('{"content":[{"type":"text","text":"s"}],"structuredContent":{"a":' + deep(5_000) + "}}")
    if case == "deep_error_data":
        return (head + ',"error":{"code":-32000,"message":"deep","data":' + deep(5_000) + "}}\n").encode()
    if case == "huge_int":
        return result('{"content":[{"type":"text","text":"n"}],"structuredContent":{"n":' + "7" * 5_000 + "}}")
    if case == "huge_int_text_big":
        return text('{"n":' + "7" * 5_000 + ',"pad":"' + "p" * 80_000 + '"}')
    if case == "invalid_utf8":
        return (head + ',"result":{"content":[{"type":"text","text":"a\xff\xfeb"}]}}\n').encode("latin-1")
    if case == "lone_surrogate":
        return (head + ',"result":{"content":[{"type":"text","text":"a\\ud800b\\udfff"}]}}\n').encode()
    if case == "nul":
        return text("a\u0000b " * 30_000)
    if case == "result_not_object":
        return result("5")
    if case == "content_not_list":
        return result('{"content":"x"}')
    if case == "unknown_content":
        return result('{"content":[{"type":"weird","x":1}]}')
    if case == "bad_image":
        return result('{"content":[{"type":"image","data":"!!!","mimeType":"image/png"}]}')
    if case == "nan":
        return result('{"content":[{"type":"text","text":"x"}],"structuredContent":{"a":NaN,"b":Infinity}}')
    if case == "twice":
        return text("twice") + text("twice")
    if case == "stranger_first":
        return b'{"jsonrpc":"2.0","id":"stranger-987","result":{"content":[]}}\n' + text("after a stranger")
    if case == "long_lines_big":
        return text("L" * (3 << 20))
    return text(f"unknown case {case}")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt_shaped(header: Any, payload: Any, signature: bytes = b"sig") -> str:
    def part(value: Any) -> str:
        return _b64(value if isinstance(value, bytes) else json.dumps(value).encode())

    return f"{part(header)}.{part(payload)}.{_b64(signature)}"


def hostile_tokens(rng: random.Random, count: int) -> list[tuple[str, str]]:
    """`count` bearer tokens no issuer made, as (what, token): garbage, JWT-shaped nonsense, headers that try to
    bring their own key or algorithm, huge ones. Each is visible ASCII, as a header carries it; a resource server
    must answer each 401 with its challenge and serve on."""
    claims = {"iss": "https://evil.test", "sub": "mallory", "aud": "x", "exp": 4_000_000_000, "scope": "mcp:tools"}
    headers: list[Any] = [
        {"alg": "none"},
        {"alg": "HS256", "kid": "k"},
        {"alg": "RS256", "kid": 7},
        {"alg": "RS256", "kid": "k" * 400},
        {"alg": "RS256", "jku": "http://127.0.0.1:9/keys", "kid": "evil"},  # a key URL of the sender's choosing
        {"alg": "RS256", "jwk": {"kty": "RSA", "n": _b64(rng.randbytes(256)), "e": "AQAB"}},  # its own key
        {"alg": "RS256", "crit": ["exp"], "exp": 1},
        {"alg": ["RS256"]},
        [],
        "RS256",
        "xalgx",  # a header that is a string or list holding "alg": once a 500
        ["alg"],
    ]
    made: list[tuple[str, str]] = []
    while len(made) < count:
        kind = rng.randrange(6)
        if kind == 0:
            size = rng.choice([1, 7, 64, 900])
            made.append(("garbage", "".join(chr(rng.randrange(0x21, 0x7F)) for _ in range(size))))
        elif kind == 1:
            made.append(("random parts", ".".join(_b64(rng.randbytes(rng.randrange(1, 300))) for _ in range(3))))
        elif kind == 2:
            header = rng.choice(headers)
            made.append((f"header {json.dumps(header)[:60]}", _jwt_shaped(header, claims, rng.randbytes(256))))
        elif kind == 3:
            payload = rng.choice([b"not json", b"[1]", deep(300).encode(), b'{"exp": "soon"}', b"\xff\xfe"])
            made.append(("odd payload", _jwt_shaped({"alg": "RS256", "kid": "k"}, payload)))
        elif kind == 4:
            made.append(("huge", "a" * rng.randrange(9_000, 15_000)))
        else:
            made.append(("dots", rng.choice([".", "..", "...", "a..", "..b", "a.b.c.d.e", "a" * 50 + "."])))
    return made


@dataclass(frozen=True, slots=True)
class ShareAttack:
    """One way a principal may try to take more than its share: `tool` called with `arguments(handles)`, given
    handles of its own (the first holds `EVIL_TEXT`, the others run for long), from every `Claimcheck-Session`
    header value and MCP session it opens. `server` names the config entry the tool needs ("" for claimcheck's
    own): "scoped" is one with `scope: owner`, "demo" the bundled demo server."""

    what: str
    tool: str
    arguments: Callable[[list[str]], dict[str, Any]]
    server: str = ""


SHARE_ATTACKS = [
    ShareAttack("a scoped process per session", "scoped__echo", lambda handles: {"text": "mine"}, "scoped"),
    ShareAttack(
        "background calls that never end",
        "demo__slow",
        lambda handles: {"seconds": 3600, "background": True},
        "demo",
    ),
    ShareAttack("catastrophic greps", "Grep", lambda handles: {"file": handles[0], "regex": CATASTROPHIC}),
    ShareAttack(
        "waits on every handle it has, each many times",
        "wait_for_tool_output",
        lambda handles: {"handles": (handles * 64)[:64], "timeout_secs": 30},
    ),
    ShareAttack("lists", "list_tool_outputs", lambda handles: {}),
]
"""Every axis at once: what tests/e2e/test_fair_shares.py sends, from many sessions, while another principal
must be served."""
