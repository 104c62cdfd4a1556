"""An extraction endpoint's replies are input too: whatever a stream, a chunk or an error body holds, reading it
ends in an answer or a clear `LLMBadResponse`, never another exception (and never unbounded memory)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extraction import LLMBadResponse
from extraction.endpoint import window_in_error
from extraction.streaming import LINE_LIMIT_BYTES, Answer, events

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
SHAPED = st.fixed_dictionaries(
    {},
    optional={
        "choices": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "delta": st.fixed_dictionaries(
                        {},
                        optional={
                            "content": JSONISH,
                            "tool_calls": JSONISH
                            | st.lists(
                                st.fixed_dictionaries(
                                    {},
                                    optional={
                                        "index": JSONISH,
                                        "id": JSONISH,
                                        "function": st.fixed_dictionaries(
                                            {}, optional={"name": JSONISH, "arguments": JSONISH}
                                        ),
                                    },
                                )
                                | JSONISH,
                                max_size=3,
                            ),
                        },
                    )
                    | JSONISH
                },
            )
            | JSONISH,
            max_size=2,
        ),
        "usage": JSONISH,
        "error": JSONISH,
    },
)
REGRESSIONS = [
    "[" * 100_000,  # nested past the parser's recursion: once a RecursionError
    json.dumps({"choices": [{"delta": {"tool_calls": [{"index": "0", "function": {"arguments": {"a": 1}}}]}}]}),
    json.dumps({"choices": [{"delta": {"tool_calls": [{"function": []}]}}]}),
    json.dumps({"choices": [None]}),
    json.dumps({"choices": [{"delta": {"tool_calls": 5}}]}),  # not a list: once a TypeError
    json.dumps({"choices": [{"delta": {"tool_calls": "ab", "content": ["x"]}}]}),
    json.dumps({"error": "overloaded"}),
]


def read(payloads: list[str]) -> None:
    answer = Answer()
    try:
        for payload in payloads:
            answer.add(payload)
        answer.as_message()
    except LLMBadResponse:
        pass


@pytest.mark.parametrize("payload", REGRESSIONS, ids=range(len(REGRESSIONS)))
def test_a_payload_that_once_broke_a_reader_is_an_answer_or_a_clear_error(payload: str) -> None:
    read([payload])
    assert window_in_error(payload)[0] in (True, False)


@settings(max_examples=300)
@given(st.lists(SHAPED.map(json.dumps) | st.text(max_size=60), max_size=6))
def test_any_streamed_chunks_are_an_answer_or_a_clear_error(payloads: list[str]) -> None:
    read(payloads)


@settings(max_examples=200)
@given(st.text(max_size=400) | JSONISH.map(json.dumps))
def test_any_error_body_is_read_without_raising(body: str) -> None:
    overflow, window = window_in_error(body)
    assert isinstance(overflow, bool) and (window is None or isinstance(window, int))


@settings(max_examples=200)
@given(st.lists(st.binary(max_size=300), max_size=8))
def test_any_bytes_as_a_stream_give_payloads_or_a_clear_error(pieces: list[bytes]) -> None:
    async def source() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    async def drain() -> list[str]:
        return [payload async for payload in events(source())]

    payloads = anyio.run(drain)
    assert all(isinstance(payload, str) for payload in payloads)


def test_a_stream_line_is_cut_off_at_its_bound_not_held_whole() -> None:
    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"x" * 65_536

    async def drain() -> None:
        async for _ in events(endless()):
            pass  # pragma: no cover - no line ever ends

    with pytest.raises(LLMBadResponse, match=str(LINE_LIMIT_BYTES)):
        anyio.run(drain)
