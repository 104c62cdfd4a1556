"""The OpenAI-compatible backend streams: time counts from the last piece, pieces are put together (text, tool
calls, usage), a broken or endless stream ends in a clear error, and a context-length error is learned."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from extraction import LLMBadResponse, LLMTimeout, Message
from extraction.errors import LLMContextOverflow
from extraction.openai import DEFAULT_CONTEXT_WINDOW, OpenAICompatible, default_answer_tokens
from extraction.streaming import ANSWER_LIMIT_CHARS
from tests.support.app_server import served

pytestmark = pytest.mark.anyio

ASK = [Message("user", "what failed?")]
Stream = Callable[[dict[str, Any]], AsyncIterator[str]]


def chunk(content: str | None = None, **delta: Any) -> str:
    if content is not None:
        delta["content"] = content
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": delta}]}) + "\n\n"


def app_streaming(stream: Stream, requests: list[dict[str, Any]] | None = None) -> Starlette:
    async def completions(request: Request) -> Response:
        body = await request.json()
        if requests is not None:
            requests.append(body)
        if not body.get("stream"):
            message = "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens"
            return JSONResponse({"error": {"message": message, "code": "context_length_exceeded"}}, status_code=400)
        return StreamingResponse(stream(body), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


async def complete(stream: Stream, **options: Any) -> tuple[Any, list[dict[str, Any]]]:
    requests: list[dict[str, Any]] = []
    outcome: Any
    async with served(app_streaming(stream, requests)) as root:
        llm = OpenAICompatible(f"{root}/v1", "m", **options)
        try:
            with anyio.fail_after(60):
                outcome = await llm.complete(ASK, max_tokens=50)
        except Exception as exc:  # raised below, outside the server's task group
            outcome = exc
    if isinstance(outcome, Exception):
        raise outcome
    return outcome, requests


async def test_streamed_pieces_make_the_answer_and_the_usage_is_read_from_the_last_chunk() -> None:
    async def stream(body: dict[str, Any]) -> AsyncIterator[str]:
        yield ": ping\n\n"  # a comment, as sse-starlette sends: not a piece of the answer
        for piece in ("disk ", "full ", "on /var"):
            yield chunk(piece)
        yield "data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3}}) + "\n\n"
        yield "data: [DONE]\n\n"

    completion, requests = await complete(stream)
    assert (completion.text, completion.input_tokens, completion.output_tokens) == ("disk full on /var", 12, 3)
    assert requests[0]["stream"] is True and requests[0]["stream_options"] == {"include_usage": True}


async def test_tool_call_pieces_are_joined_by_their_index() -> None:
    async def stream(body: dict[str, Any]) -> AsyncIterator[str]:
        first = {"index": 0, "id": "c1", "function": {"name": "Grep", "arguments": '{"reg'}}
        yield chunk(tool_calls=[first])
        yield chunk(tool_calls=[{"index": 1, "id": "c2", "function": {"name": "Read", "arguments": "{}"}}])
        yield chunk(tool_calls=[{"index": 0, "function": {"arguments": 'ex": "ERROR"}'}}])
        yield "data: [DONE]\n\n"

    completion, _ = await complete(stream)
    calls = [(c.id, c.name, c.arguments) for c in completion.tool_calls]
    assert calls == [("c1", "Grep", {"regex": "ERROR"}), ("c2", "Read", {})]


async def test_a_slow_steady_answer_longer_than_the_time_limit_is_taken_whole() -> None:
    # 40 pieces 0.1 s apart: 4 s in all against a 3 s limit, which counts from the last piece received
    async def stream(body: dict[str, Any]) -> AsyncIterator[str]:
        for i in range(40):
            await anyio.sleep(0.1)  # the producer's pace, not a wait of the test
            yield chunk(f"{i} ")
        yield "data: [DONE]\n\n"

    started = anyio.current_time()
    completion, _ = await complete(stream, timeout_secs=3, first_token_secs=30)
    assert anyio.current_time() - started > 3
    assert completion.text == "".join(f"{i} " for i in range(40))
    assert completion.output_tokens == 40  # no usage streamed: one piece counted per token


async def test_an_answer_that_goes_silent_midway_ends_in_a_timeout_naming_the_silence() -> None:
    never = anyio.Event()

    async def stream(body: dict[str, Any]) -> AsyncIterator[str]:
        yield chunk("disk ")
        await never.wait()
        yield "data: [DONE]\n\n"  # pragma: no cover - never reached

    with pytest.raises(LLMTimeout, match=r"went silent mid-answer for 0\.3 s"):
        await complete(stream, timeout_secs=0.3, first_token_secs=30)
    never.set()


async def test_no_first_piece_within_first_token_secs_is_a_timeout() -> None:
    never = anyio.Event()

    async def stream(body: dict[str, Any]) -> AsyncIterator[str]:
        await never.wait()
        yield "data: [DONE]\n\n"  # pragma: no cover - never reached

    with pytest.raises(LLMTimeout, match=r"gave no answer within 0\.3 s"):
        await complete(stream, timeout_secs=30, first_token_secs=0.3)
    never.set()


async def test_an_endless_answer_ends_in_a_clear_error_past_the_answer_limit() -> None:
    async def stream(body: dict[str, Any]) -> AsyncIterator[str]:
        piece = chunk("x" * 65_536)
        for _ in range(ANSWER_LIMIT_CHARS // 65_536 + 2):
            yield piece

    with pytest.raises(LLMBadResponse, match="went past"):
        await complete(stream)


async def test_a_stream_line_without_an_end_is_refused_at_its_bound() -> None:
    async def stream(body: dict[str, Any]) -> AsyncIterator[str]:
        yield "data: " + "y" * (2 << 20)

    with pytest.raises(LLMBadResponse, match="stream line longer than"):
        await complete(stream)


async def test_a_stream_broken_before_any_piece_is_asked_again_plainly_and_the_window_learned() -> None:
    # llama-cpp-python starts the stream, then meets the prompt past its window and drops the connection
    async def stream(body: dict[str, Any]) -> AsyncIterator[str]:
        raise RuntimeError("Requested tokens (9000) exceed context window of 4096")
        yield ""  # pragma: no cover - makes this a generator

    requests: list[dict[str, Any]] = []
    async with served(app_streaming(stream, requests)) as root:
        llm = OpenAICompatible(f"{root}/v1", "m")
        assert llm.context_window == DEFAULT_CONTEXT_WINDOW
        with anyio.fail_after(60), pytest.raises(LLMContextOverflow) as raised:
            await llm.complete(ASK, max_tokens=50)
    assert raised.value.window == 4096
    assert llm.context_window == 4096 and llm.max_output_tokens == default_answer_tokens(4096) == 512
    assert [r.get("stream", False) for r in requests] == [True, False]


def test_the_answers_room_defaults_to_an_eighth_of_the_window_between_512_and_4096() -> None:
    assert [default_answer_tokens(w) for w in (2048, 8192, 32_768, 128_000)] == [512, 1024, 4096, 4096]
    assert OpenAICompatible("http://h/v1", "m", context_window=1000).max_output_tokens == 500  # half at most
    assert OpenAICompatible("http://h/v1", "m", max_output_tokens=300).max_output_tokens == 300
