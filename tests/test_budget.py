"""The request budget reads nesting as a parser would, without parsing: brackets in strings do not count, the
deepest level counts exactly, and a refusal names the request's id only where the line's head shows it."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from server.budget import HEAD_BYTES, check_budget, request_id, too_large

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ax,:é'),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\a'), inner, max_size=3),
    max_leaves=40,
)


def depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(item) for item in value.values()), default=0)
    return 0


@given(JSON, st.integers(min_value=0, max_value=8), st.booleans())
def test_a_line_is_refused_exactly_when_it_nests_deeper_than_the_budget(value: Any, limit: int, ascii: bool) -> None:
    line = json.dumps(value, ensure_ascii=ascii).encode()
    refused = check_budget(line, max_depth=limit)
    assert (refused is not None) == (depth_of(value) > limit)


def test_brackets_in_strings_escaped_quotes_included_do_not_count() -> None:
    line = json.dumps({"text": '\\"[[[[' * 1000 + "{{{{", "x": [[1]]}).encode()
    assert check_budget(line, max_depth=3) is None
    assert check_budget(line, max_depth=2) is not None


def test_a_line_over_the_size_limit_is_refused_with_the_id_its_head_shows() -> None:
    line = b'{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"x":"' + b"x" * 100 + b'"}}'
    refused = check_budget(line, max_bytes=64)
    assert refused is not None and refused.id == "a-1" and refused.code == -32600


def test_the_id_is_the_top_level_one_of_a_request_never_one_in_its_arguments_nor_a_responses() -> None:
    assert request_id(b'{"jsonrpc":"2.0","method":"m","params":{"arguments":{"id":7}},"id":12}') == 12
    assert request_id(b'{"jsonrpc":"2.0","method":"m","params":{"arguments":{"id":7,"x":[[[[') is None
    assert request_id(b'{"jsonrpc":"2.0","id":12,"result":{}}') is None  # a client's answer: not its request
    assert request_id(b'[{"jsonrpc":"2.0","id":1,"method":"m"}]') is None  # a batch has no one id
    assert request_id(b'{"jsonrpc":"2.0","id":1.5,"method":"m"}') is None
    assert request_id(b'{"jsonrpc":"2.0","id":"x\\"y","method":"m","params":{"a":"') == 'x"y'


def test_a_refusal_is_one_json_rpc_error_line() -> None:
    line = too_large(b'{"id":3,"method":"tools/call","params":{"a":"' + b"[" * HEAD_BYTES, 10).line()
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {
            "code": -32600,
            "message": "Request too large: over the 10-byte limit (settings.maxRequestBytes); it was not read.",
        },
    }
