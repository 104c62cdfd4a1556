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
    assert (refused is not None) == (depth_of(value) > limit or isinstance(value, list))  # a list: a batch


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


def test_a_batch_is_refused_as_a_batch_whatever_it_holds() -> None:
    for line in (b"[]", b' \n[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', b"[1,2]"):
        refused = check_budget(line)
        assert refused is not None and refused.code == -32600 and refused.id is None
        assert refused.message.startswith("Batches are not supported")


def test_a_request_whose_id_is_not_a_string_or_an_integer_is_refused_naming_the_type() -> None:
    for ident, named in (("1e400", "exponent"), ("1.5", "fraction"), ("true", "boolean"), ("null", "null")):
        line = b'{"jsonrpc":"2.0","id":%s,"method":"tools/list"}' % ident.encode()
        refused = check_budget(line)
        assert refused is not None and refused.id is None and named in refused.message, ident
    refused = check_budget(b'{"jsonrpc":"2.0","method":"tools/call","params":{"a":"' + b"x" * 9000 + b'"},"id":[1]}')
    assert refused is not None and "an array" in refused.message  # an id after a long argument: seen at the tail
    assert check_budget(b'{"jsonrpc":"2.0","id":-7,"method":"tools/list"}') is None
    assert check_budget(b'{"jsonrpc":"2.0","id":"7.5","method":"tools/list"}') is None


def test_a_suspect_shape_inside_the_arguments_is_not_the_requests() -> None:
    arguments = {"id": True, "method": "x" * 500, "list": [1.5]}
    line = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"arguments": arguments}})
    assert check_budget(line.encode()) is None
    assert check_budget(b'{"jsonrpc":"2.0","id":1.5,"result":{}}') is None  # a response: not ours to judge


def test_a_method_name_past_any_method_is_not_found_quoting_200_characters_of_it() -> None:
    refused = check_budget(b'{"jsonrpc":"2.0","id":4,"method":"' + b"m" * (4 << 20) + b'"}')
    assert refused is not None and refused.code == -32601 and refused.id == 4
    assert refused.data is not None and refused.data.startswith("m" * 200 + "…(") and len(refused.data) < 230
