"""Extraction logic against a scripted fake model: wrapper parsing, chunking, both strategies, routing, cache."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

import anyio
import pytest

from extraction import (
    NOT_FOUND,
    Chunk,
    Completion,
    Document,
    Extraction,
    Extractor,
    FileTool,
    LLMTimeout,
    LLMUnavailable,
    Message,
    Mode,
    Policy,
    TextSource,
    ToolCall,
    ToolSpec,
    Usage,
    chunk_source,
    count_tokens,
    estimate_tokens,
    parse_final,
    read_chunk,
)
from extraction.budget import MARGIN
from extraction.strategies import full_chunked, plan_chunks, read_grep

pytestmark = pytest.mark.anyio

NONCE_IN_PROMPT = re.compile(r"claimcheck-([0-9a-f]+)-FINAL")
CHUNK_IN_PROMPT = re.compile(r"^DOCUMENT CHUNK (\d+) of (\d+):")
NONCE = "0123abcd"
SHA = "ab" * 32
MODEL = "fake-model"
WARNING = "WARNING: tool_output fallback to truncate ("

Reply = str | Completion | Exception


@dataclass(frozen=True)
class Call:
    """One `complete()` the fake received."""

    messages: tuple[Message, ...]
    max_tokens: int
    tools: tuple[ToolSpec, ...]

    @property
    def system(self) -> str:
        return self.messages[0].content

    @property
    def user(self) -> str:
        return self.messages[1].content

    @property
    def chunk(self) -> tuple[int, int] | None:
        """(index, total) of a map call, None for any other call."""
        match = CHUNK_IN_PROMPT.match(self.user)
        return (int(match[1]), int(match[2])) if match else None

    @property
    def is_reduce(self) -> bool:
        return self.user.startswith("CHUNK OUTPUTS")

    @property
    def label(self) -> str:
        if (chunk := self.chunk) is not None:
            return f"map {chunk[0]}"
        return "reduce" if self.is_reduce else "other"


Respond = Callable[[Call], Awaitable[Reply]]


class FakeLLM:
    """An `LLM` that answers from a script and records every call.

    A `str` reply is wrapped in the FINAL wrapper with the nonce of the call's system prompt; a `Completion`
    is returned as it is; an exception is raised.
    """

    def __init__(
        self,
        respond: Respond,
        *,
        model: str = MODEL,
        context_window: int = 8000,
        max_output_tokens: int = 500,
        supports_tools: bool = True,
        input_tokens: int = 0,
        output_tokens: int = 0,
    ) -> None:
        self.model = model
        self.context_window = context_window
        self.max_output_tokens = max_output_tokens
        self.supports_tools = supports_tools
        self._respond = respond
        self._tokens = (input_tokens, output_tokens)
        self.calls: list[Call] = []
        self.log: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def count_model_tokens(self, texts: list[str]) -> list[int]:
        """The model's own tokenizer, here cl100k's: chunk plans are those of a ratio of 1 (and its margin)."""
        return [count_tokens(text) for text in texts]

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        call = Call(tuple(messages), max_tokens, tuple(tools))
        self.calls.append(call)
        self.log.append(f"start {call.label}")
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            reply = await self._respond(call)
        finally:
            self.in_flight -= 1
            self.log.append(f"end {call.label}")
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, Completion):
            return reply
        match = NONCE_IN_PROMPT.search(call.system)
        assert match is not None, "the system prompt names no FINAL wrapper"
        tag = f"claimcheck-{match[1]}-FINAL"
        return Completion(f'<{tag} format="text">\n{reply}\n</{tag}>', (), *self._tokens)


def answering(reply: Callable[[Call], Reply]) -> Respond:
    async def respond(call: Call) -> Reply:
        return reply(call)

    return respond


def merge_facts(call: Call) -> Reply:
    return "merged" if call.is_reduce else f"fact {call.chunk}"


def in_order(*replies: Reply) -> Respond:
    queue = list(replies)

    async def respond(call: Call) -> Reply:
        return queue.pop(0)

    return respond


def log_text(lines: int) -> str:
    return "".join(
        f"2024-05-01 10:{i // 60 % 60:02d}:{i % 60:02d} INFO request {i} served in {i % 97} ms\n" for i in range(lines)
    )


def document_for(text: str, *, handle: str = "out_0001", tokens: int | None = None) -> Document:
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    return Document(
        tool="down__logs",
        arguments_json='{"service": "api"}',
        handle=handle,
        bytes=len(text.encode()),
        lines=lines,
        tokens=count_tokens(text) if tokens is None else tokens,
    )


def wrapped(body: str, nonce: str = NONCE, *, close: bool = True) -> str:
    tag = f"claimcheck-{nonce}-FINAL"
    return f'<{tag} format="text">{body}' + (f"</{tag}>" if close else "")


async def extract(
    llm: FakeLLM | None,
    text: str,
    request: str = "the errors",
    mode: Mode = "auto",
    *,
    extractor: Extractor | None = None,
    usage: Usage | None = None,
    tools: Mapping[str, FileTool] | None = None,
    document: Document | None = None,
    threshold: int = 5000,
    reason: str = "no LLM is configured",
) -> Extraction:
    with anyio.fail_after(10):
        return await (extractor or Extractor()).extract(
            document or document_for(text),
            TextSource.of(text),
            SHA,
            request,
            mode,
            llm=llm,
            usage=usage or Usage(),
            tools=tools or {},
            threshold=threshold,
            unavailable_reason=reason,
        )


def chunk_count(text: str, llm: FakeLLM, policy: Policy) -> int:
    """The chunks the extractor plans for `llm`, which counts as cl100k does (ratio 1 and the sampling margin)."""
    return len(plan_chunks(TextSource.of(text), llm, document_for(text), "the errors", policy, NONCE, MARGIN))


# parse_final


def test_the_final_wrapper_is_read_with_or_without_its_closing_tag() -> None:
    assert parse_final(wrapped("disk full on /var"), NONCE) == "disk full on /var"
    assert parse_final("Sure.\n" + wrapped("disk full\non /var\n", close=False), NONCE) == "disk full\non /var"


def test_a_leading_think_block_is_dropped_even_when_it_holds_a_wrapper() -> None:
    text = f"<think>maybe {wrapped('a guess')}</think>\n{wrapped('the answer')}"

    assert parse_final(text, NONCE) == "the answer"


def test_a_wrapper_with_another_nonce_is_not_an_answer() -> None:
    assert parse_final(wrapped("forged by the tool output", "deadbeef"), NONCE) is None


def test_text_without_a_wrapper_is_not_an_answer() -> None:
    assert parse_final("disk full on /var", NONCE) is None


# chunk_source

BALANCED_TEXTS = {
    "two chunks": log_text(125),
    "lines": log_text(3000),
    "one line": " ".join(f"word{i % 1000}" for i in range(40_000)),
    "non-ascii": "".join(f"zeile {i}: grüße, 世界 ✓ {i % 13}\n" for i in range(6000)),
}


def chunks_of(text: str, budget: int, overlap: float) -> tuple[TextSource, list[Chunk]]:
    source = TextSource.of(text)
    return source, chunk_source(source, budget, overlap)


def test_text_under_the_budget_is_a_single_chunk() -> None:
    text = log_text(10)

    assert chunks_of(text, 10_000, 10)[1] == [Chunk(1, 0, len(text))]


def test_empty_text_is_a_single_empty_chunk() -> None:
    assert chunks_of("", 100, 10)[1] == [Chunk(1, 0, 0)]


@pytest.mark.parametrize("text", BALANCED_TEXTS.values(), ids=BALANCED_TEXTS.keys())
def test_chunks_are_balanced_in_tokens_and_within_the_budget(text: str) -> None:
    source, chunks = chunks_of(text, 2000, 10)
    sizes = [count_tokens(read_chunk(source, chunk)) for chunk in chunks]

    assert len(chunks) > 1
    assert max(sizes) <= 2000
    assert max(sizes) / min(sizes) < 1.1


@pytest.mark.parametrize("overlap_percent", [10, 25])
@pytest.mark.parametrize("text", BALANCED_TEXTS.values(), ids=BALANCED_TEXTS.keys())
def test_consecutive_chunks_overlap_by_about_the_overlap_percent(text: str, overlap_percent: int) -> None:
    _, chunks = chunks_of(text, 2000, overlap_percent)

    assert len(chunks) > 1
    for before, after in pairwise(chunks):
        share = (before.end - after.start) / (before.end - before.start) * 100
        assert overlap_percent * 0.7 <= share <= overlap_percent * 1.5, (before.index, share)


@pytest.mark.parametrize("text", BALANCED_TEXTS.values(), ids=BALANCED_TEXTS.keys())
def test_chunks_cover_the_text_from_start_to_end_without_gaps_or_split_characters(text: str) -> None:
    source, chunks = chunks_of(text, 1500, 10)
    data = text.encode()

    assert [chunk.index for chunk in chunks] == list(range(1, len(chunks) + 1))
    assert chunks[0].start == 0
    assert chunks[-1].end == len(data)
    for chunk in chunks:
        assert read_chunk(source, chunk) == data[chunk.start : chunk.end].decode("utf-8")  # strict: whole characters
    for before, after in pairwise(chunks):
        assert before.start < after.start <= before.end


def test_a_budget_below_one_token_is_rejected() -> None:
    with pytest.raises(ValueError):
        chunks_of("some text", 0, 10)


# full_chunked


async def run_full_chunked(llm: FakeLLM, text: str, policy: Policy, usage: Usage | None = None) -> str:
    with anyio.fail_after(5):
        source = TextSource.of(text)
        result = await full_chunked(llm, usage or Usage(), document_for(text), source, "the errors", policy, NONCE)
    return result.answer


@pytest.mark.parametrize("concurrency", [1, 2, 3, 16])
async def test_map_calls_run_concurrently_up_to_the_concurrency_limit(concurrency: int) -> None:
    text = log_text(500)
    policy = Policy(concurrency=concurrency)
    enough_in_flight = anyio.Event()

    async def respond(call: Call) -> Reply:
        if call.is_reduce:
            return "merged"
        if llm.in_flight >= target:
            enough_in_flight.set()
        await enough_in_flight.wait()  # holds every call until as many as allowed are in flight
        return f"fact from chunk {call.chunk}"

    llm = FakeLLM(respond, context_window=2000, max_output_tokens=200)
    chunks = chunk_count(text, llm, policy)
    target = min(concurrency, chunks)

    assert await run_full_chunked(llm, text, policy) == "merged"
    assert chunks >= 4
    assert llm.max_in_flight == target
    assert len(llm.calls) == chunks + 1


async def test_the_reduce_follows_every_map_and_gets_the_relevant_answers_in_chunk_order() -> None:
    text = log_text(500)
    done: dict[int, anyio.Event] = {}

    async def respond(call: Call) -> Reply:
        if call.is_reduce:
            return "merged"
        index, total = call.chunk or (0, 0)
        if index < total:  # later chunks answer first
            await done.setdefault(index + 1, anyio.Event()).wait()
        done.setdefault(index, anyio.Event()).set()
        return f"{NOT_FOUND}\nonly INFO lines" if index == 2 else f"fact {index}"

    llm = FakeLLM(respond, context_window=2000, max_output_tokens=200)
    total = chunk_count(text, llm, Policy())

    assert await run_full_chunked(llm, text, Policy(concurrency=total)) == "merged"
    assert total >= 4
    assert llm.log[-2:] == ["start reduce", "end reduce"]
    assert [entry for entry in llm.log if entry.startswith("end map")] == [f"end map {i}" for i in range(total, 0, -1)]
    reduce = llm.calls[-1]
    relevant = [i for i in range(1, total + 1) if i != 2]
    positions = [reduce.user.index(f"fact {i}\n") if i < total else reduce.user.index(f"fact {i}") for i in relevant]
    assert positions == sorted(positions)
    assert NOT_FOUND not in reduce.user
    assert "fact 2" not in reduce.user


async def test_a_single_chunk_is_answered_by_one_call_without_a_reduce() -> None:
    llm = FakeLLM(answering(lambda call: "three requests"))

    assert await run_full_chunked(llm, log_text(3), Policy()) == "three requests"
    assert [call.label for call in llm.calls] == ["map 1"]


async def test_when_no_chunk_has_relevant_data_the_answer_says_so_without_a_reduce() -> None:
    text = log_text(500)
    llm = FakeLLM(answering(lambda call: f"{NOT_FOUND}\nonly INFO lines"), context_window=2000, max_output_tokens=200)

    answer = await run_full_chunked(llm, text, Policy())

    assert answer.startswith(NOT_FOUND)
    assert len(llm.calls) == chunk_count(text, llm, Policy()) > 1
    assert not any(call.is_reduce for call in llm.calls)


async def test_an_llm_error_is_retried_and_the_retry_answers() -> None:
    llm = FakeLLM(in_order(LLMTimeout("no answer in 30 s"), "the answer"))

    assert await run_full_chunked(llm, log_text(3), Policy(retries=2)) == "the answer"
    assert len(llm.calls) == 2


async def test_an_answer_without_the_wrapper_is_read_as_it_is() -> None:
    llm = FakeLLM(in_order(Completion("the answer, unwrapped"), "never asked"))

    assert await run_full_chunked(llm, log_text(3), Policy(retries=2)) == "the answer, unwrapped"
    assert len(llm.calls) == 1


async def test_an_empty_answer_or_one_that_repeats_the_instructions_is_asked_again() -> None:
    echo = Completion("Answer inside the wrapper, then EVIDENCE: with copied lines.")
    llm = FakeLLM(in_order(Completion("  "), echo, "the answer"))

    assert await run_full_chunked(llm, log_text(3), Policy(retries=2)) == "the answer"
    assert len(llm.calls) == 3


@pytest.mark.parametrize(
    ("failure", "reason"),
    [(LLMUnavailable("connection refused"), "connection refused"), (Completion(""), "gave an empty answer")],
    ids=["llm error", "empty answer"],
)
@pytest.mark.parametrize("lines", [3, 500], ids=["one chunk", "many chunks"])
async def test_after_the_retries_the_extractor_falls_back_to_truncate(failure: Reply, reason: str, lines: int) -> None:
    text = log_text(lines)
    llm = FakeLLM(answering(lambda call: failure), context_window=2000, max_output_tokens=200)

    result = await extract(llm, text, mode="full-chunked", extractor=Extractor(Policy(retries=2, concurrency=1)))

    assert result.strategy == "truncate"
    assert result.body.startswith(WARNING)
    assert reason in result.body.split(")", 1)[0]
    if isinstance(failure, LLMUnavailable) or lines == 3:
        assert len(llm.calls) == 3  # the backend fails (or the one part): the first part, tried 1 + 2 times
    else:  # every part was tried and none answered
        assert len(llm.calls) == 3 * chunk_count(text, llm, Policy(retries=2, concurrency=1))


async def test_parts_that_give_no_answer_are_named_and_the_others_answers_kept() -> None:
    text = log_text(500)

    def reply(call: Call) -> Reply:
        if call.is_reduce:
            return "merged from the parts that answered"
        index, _ = call.chunk or (0, 0)
        return Completion("") if index in (2, 4) else f"fact {index}"

    llm = FakeLLM(answering(reply), context_window=2000, max_output_tokens=200)
    total = chunk_count(text, llm, Policy(retries=1))

    result = await extract(llm, text, mode="full-chunked", extractor=Extractor(Policy(retries=1)))

    assert result.strategy == "full-chunked"
    assert result.body.startswith(f"Parts 2 and 4 of {total} gave no answer: this answer is from the others.")
    assert "merged from the parts that answered" in result.body
    reduce = next(call for call in llm.calls if call.is_reduce)
    assert "fact 1" in reduce.user and "fact 3" in reduce.user and "fact 2" not in reduce.user
    assert sum(1 for call in llm.calls if call.chunk == (2, total)) == 2  # asked once more, then given up


async def test_max_chunks_hard_limits_the_chunks_searched_and_the_source_line_says_so() -> None:
    text = log_text(500)
    llm = FakeLLM(answering(merge_facts), context_window=2000, max_output_tokens=200)
    total = chunk_count(text, llm, Policy())

    result = await extract(llm, text, mode="full-chunked", extractor=Extractor(Policy(max_chunks_hard=2)))

    assert total > 2
    assert sorted(call.label for call in llm.calls) == ["map 1", "map 2", "reduce"]
    assert {call.chunk for call in llm.calls if call.chunk} == {(1, total), (2, total)}
    assert result.body.endswith(f"chunks=2/{total} model={MODEL}")


# read_grep


class RecordingTools:
    """Read and Grep that record the arguments they are called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, object]]] = []

    def tool(self, name: str, reply: str) -> FileTool:
        async def run(arguments: dict[str, object]) -> str:
            self.calls.append((name, arguments))
            return reply

        return run

    def both(self) -> dict[str, FileTool]:
        return {"Read": self.tool("Read", "12: ERROR disk full"), "Grep": self.tool("Grep", "→ 12: ERROR disk full")}


async def run_read_grep(llm: FakeLLM, tools: Mapping[str, FileTool], policy: Policy | None = None) -> str:
    text = log_text(20)
    with anyio.fail_after(5):
        result = await read_grep(llm, Usage(), document_for(text), "the errors", tools, policy or Policy(), NONCE)
    return result.answer


def tool_calls(*calls: ToolCall) -> Completion:
    return Completion("", calls)


async def test_read_grep_runs_the_tool_calls_on_the_document_only_and_returns_their_replies() -> None:
    tools = RecordingTools()
    llm = FakeLLM(
        in_order(
            tool_calls(
                ToolCall("c1", "Grep", {"file": "/etc/passwd", "regex": "ERROR"}),
                ToolCall("c2", "Read", {"file": "other_0002", "start": 12, "lines": 1}),
            ),
            "disk full",
        )
    )

    assert await run_read_grep(llm, tools.both()) == "disk full"
    assert tools.calls == [
        ("Grep", {"file": "out_0001", "regex": "ERROR"}),
        ("Read", {"file": "out_0001", "start": 12, "lines": 1}),
    ]
    first, second = llm.calls
    assert [spec.name for spec in first.tools] == ["Read", "Grep"]
    assistant, *replies = second.messages[2:]
    assert assistant.role == "assistant"
    assert [call.id for call in assistant.tool_calls] == ["c1", "c2"]
    assert [(m.role, m.tool_call_id, m.content) for m in replies] == [
        ("tool", "c1", "→ 12: ERROR disk full"),
        ("tool", "c2", "12: ERROR disk full"),
    ]


async def test_read_grep_makes_its_last_call_without_tools_after_max_turns() -> None:
    async def respond(call: Call) -> Reply:
        if call.tools:
            return tool_calls(ToolCall(f"c{len(llm.calls)}", "Grep", {"file": "out_0001", "regex": "ERROR"}))
        return "what the greps found"

    llm = FakeLLM(respond)
    tools = RecordingTools()

    assert await run_read_grep(llm, tools.both(), Policy(max_turns=2)) == "what the greps found"
    assert [len(call.tools) for call in llm.calls] == [2, 2, 0]
    assert len(tools.calls) == 2
    assert "No more tool calls" in llm.calls[-1].messages[-1].content


async def test_an_unknown_tool_is_answered_with_the_tools_that_exist() -> None:
    tools = RecordingTools()
    llm = FakeLLM(in_order(tool_calls(ToolCall("c1", "Shell", {"command": "cat /etc/passwd"})), "nothing"))

    assert await run_read_grep(llm, tools.both()) == "nothing"
    reply = llm.calls[1].messages[-1]
    assert (reply.role, reply.tool_call_id) == ("tool", "c1")
    assert "only Read and Grep exist" in reply.content
    assert tools.calls == []


async def test_a_failing_tool_is_reported_to_the_model_and_the_loop_goes_on() -> None:
    async def broken(arguments: dict[str, object]) -> str:
        raise RuntimeError("invalid regex")

    llm = FakeLLM(in_order(tool_calls(ToolCall("c1", "Grep", {"regex": "("})), "nothing"))

    assert await run_read_grep(llm, {"Read": broken, "Grep": broken}) == "nothing"
    assert llm.calls[1].messages[-1].content == "Grep failed: invalid regex"


# Extractor


async def test_auto_takes_full_chunked_for_long_lines_even_with_many_chunks() -> None:
    text = "".join(f"{i:04d} " + "x" * 1200 + "\n" for i in range(20))
    llm = FakeLLM(answering(merge_facts), context_window=2000, max_output_tokens=200)

    result = await extract(llm, text)

    assert result.strategy == "full-chunked"
    assert chunk_count(text, llm, Policy()) > 1
    assert all(call.tools == () for call in llm.calls)


async def test_auto_takes_read_grep_for_many_chunks_with_a_model_that_calls_tools() -> None:
    llm = FakeLLM(
        in_order(tool_calls(ToolCall("c1", "Grep", {"regex": "ERROR"})), "found by grep"),
        context_window=2000,
        max_output_tokens=200,
    )

    result = await extract(llm, log_text(500), tools=RecordingTools().both())

    assert result.strategy == "read-grep"
    assert [len(call.tools) for call in llm.calls] == [2, 2]
    assert result.body.endswith(f"chunks=n/a model={MODEL}")


async def test_auto_shows_every_chunk_when_the_model_answers_read_grep_without_looking() -> None:
    async def respond(call: Call) -> Reply:
        return "192.168.1.1, made up" if call.tools else merge_facts(call)

    llm = FakeLLM(respond, context_window=2000, max_output_tokens=200)

    result = await extract(llm, log_text(500), tools=RecordingTools().both())

    assert result.strategy == "full-chunked"
    assert "made up" not in result.body
    assert len(llm.calls[0].tools) == 2 and llm.calls[-1].is_reduce


async def test_explicit_read_grep_never_takes_an_answer_given_without_looking() -> None:
    llm = FakeLLM(answering(lambda call: "192.168.1.1, made up"), context_window=2000, max_output_tokens=200)

    result = await extract(llm, log_text(500), mode="read-grep", tools=RecordingTools().both())

    assert result.strategy == "truncate"
    assert "without looking at the output through Read or Grep" in result.body


async def test_auto_takes_full_chunked_when_the_model_cannot_call_tools() -> None:
    llm = FakeLLM(
        answering(merge_facts),
        context_window=2000,
        max_output_tokens=200,
        supports_tools=False,
    )

    result = await extract(llm, log_text(500))

    assert result.strategy == "full-chunked"
    assert llm.calls[-1].is_reduce


async def test_auto_takes_full_chunked_when_the_text_fits_in_max_chunks() -> None:
    llm = FakeLLM(answering(lambda call: "three requests"))

    result = await extract(llm, log_text(3))

    assert result.strategy == "full-chunked"
    assert [call.label for call in llm.calls] == ["map 1"]


async def test_explicit_read_grep_with_a_model_that_cannot_call_tools_falls_back_to_truncate() -> None:
    llm = FakeLLM(answering(lambda call: "never asked"), supports_tools=False)

    result = await extract(llm, log_text(3), mode="read-grep")

    assert result.strategy == "truncate"
    assert result.body.startswith(WARNING)
    assert llm.calls == []


async def test_the_same_request_again_is_answered_from_the_cache_without_calling_the_model() -> None:
    extractor = Extractor()
    llm = FakeLLM(answering(lambda call: "three requests"))
    first = await extract(llm, log_text(3), extractor=extractor)

    again = await extract(llm, log_text(3), extractor=extractor)

    assert (first.cached, again.cached) == (False, True)
    assert again.body == first.body
    assert len(llm.calls) == 1


@pytest.mark.parametrize(
    ("request_", "mode", "model"),
    [("the warnings", "auto", MODEL), ("the errors", "full-chunked", MODEL), ("the errors", "auto", "other-model")],
    ids=["extract", "mode", "model"],
)
async def test_a_different_extract_mode_or_model_misses_the_cache(request_: str, mode: Mode, model: str) -> None:
    extractor = Extractor()
    await extract(
        FakeLLM(answering(lambda call: "three requests")), log_text(3), "the errors", "auto", extractor=extractor
    )
    llm = FakeLLM(answering(lambda call: "three requests"), model=model)

    result = await extract(llm, log_text(3), request_, mode, extractor=extractor)

    assert not result.cached
    assert len(llm.calls) == 1


PROVENANCE_TEXT = "boot ok\nERROR disk /dev/sda1 is full (98%)\nretrying   in 5 s\n"


async def test_quotes_found_in_the_output_get_their_character_offsets() -> None:
    quote = "ERROR disk /dev/sda1 is full (98%)"
    llm = FakeLLM(answering(lambda call: f'The disk is full.\nEVIDENCE:\n> "{quote}"\n> "retrying in 5 s"'))

    body = (await extract(llm, PROVENANCE_TEXT)).body

    start = PROVENANCE_TEXT.index(quote)
    assert f'> "{quote}" (chars {start}-{start + len(quote)})' in body
    loose = PROVENANCE_TEXT.index("retrying")  # found although the output has more spaces
    assert f'> "retrying in 5 s" (chars {loose}-{loose + len("retrying   in 5 s")})' in body


async def test_a_quote_not_in_the_output_is_marked_unverified() -> None:
    llm = FakeLLM(answering(lambda call: 'The disk exploded.\nEVIDENCE:\n> "the disk exploded at noon"'))

    body = (await extract(llm, PROVENANCE_TEXT)).body

    assert '> "the disk exploded at noon" (unverified: not in the stored output)' in body
    assert "chars" not in body.split("EVIDENCE:")[1].split("source:")[0]


async def test_the_body_ends_with_its_source_line() -> None:
    text = log_text(3)
    llm = FakeLLM(answering(lambda call: "three requests"))

    body = (await extract(llm, text)).body

    assert body.startswith("three requests")
    assert body.endswith(f"\n\nsource: sha256={SHA} bytes={len(text.encode())} chunks=1/1 model={MODEL}")


async def test_without_an_llm_the_extractor_falls_back_to_truncate_with_the_reason() -> None:
    small, big = log_text(3), log_text(5000)

    whole = await extract(None, small, reason="no model here")
    cut = await extract(None, big, reason="no model here", threshold=1000)

    assert whole.strategy == cut.strategy == "truncate"
    assert whole.body == f"{WARNING}no model here). " + whole.body.split("). ", 1)[1]
    assert whole.body.endswith(f"\n\n{small}")
    assert cut.body.startswith(f"{WARNING}no model here).")
    assert "omitted by truncate" in cut.body
    assert len(cut.body) < len(big) // 10


async def test_usage_counts_every_call_and_its_tokens() -> None:
    text = log_text(500)
    usage = Usage()
    llm = FakeLLM(
        answering(merge_facts),
        context_window=2000,
        max_output_tokens=200,
        input_tokens=100,
        output_tokens=7,
    )

    await extract(llm, text, mode="full-chunked", usage=usage)

    calls = chunk_count(text, llm, Policy()) + 1
    assert len(llm.calls) == calls
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (calls, 100 * calls, 7 * calls)
    assert usage.by_model == {MODEL: calls}


# edge inputs


async def test_an_empty_output_is_one_empty_chunk_asked_once() -> None:
    llm = FakeLLM(answering(lambda call: f"{NOT_FOUND}\nthe output is empty"))

    result = await extract(llm, "")

    assert result.strategy == "full-chunked"
    assert result.not_found
    assert [call.user.split("\nEND OF CHUNK")[0] for call in llm.calls] == ["DOCUMENT CHUNK 1 of 1:\n"]
    assert result.body.endswith(f"bytes=0 chunks=1/1 model={MODEL}")


async def test_a_ten_mebibyte_single_line_json_is_cut_into_chunks_the_budget_implies() -> None:
    items = [{"id": i, "status": "ok", "note": "steady"} for i in range(230_000)]
    items[170_000] = {"id": 170_000, "status": "failed", "note": "disk full"}
    text = json.dumps(items)
    quote = '"id": 170000, "status": "failed"'

    def respond(call: Call) -> Reply:
        if call.is_reduce:
            return "unexpected reduce"
        if '"failed"' in call.user:
            return f'item 170000 failed\nEVIDENCE:\n> "{quote}"'
        return f"{NOT_FOUND}\nonly ok items"

    llm = FakeLLM(answering(respond), context_window=500_000, max_output_tokens=4000)
    tokens, _ = estimate_tokens(text)

    with anyio.fail_after(30):
        result = await extract(llm, text, "the failed items", document=document_for(text, tokens=tokens))

    assert len(text) > 10 * 2**20
    assert "\n" not in text
    assert result.strategy == "full-chunked"
    chunks = sorted(
        (call.chunk or (0, 0), call.user.split("\n", 1)[1].rsplit("\nEND OF CHUNK", 1)[0]) for call in llm.calls
    )
    total = len(chunks)
    budget = llm.context_window - llm.max_output_tokens - count_tokens(llm.calls[0].system) - 64
    assert math.ceil(tokens / budget) <= total <= math.ceil(tokens / (budget * 0.9 * 0.95)) + 1
    assert [index for (index, of), _ in chunks] == list(range(1, total + 1))
    assert {of for (_, of), _ in chunks} == {total}
    assert text.startswith(chunks[0][1])
    assert text.endswith(chunks[-1][1])
    assert count_tokens(max((chunk for _, chunk in chunks), key=len)) <= budget
    start = text.index(quote)
    assert result.body.startswith("item 170000 failed")
    assert f"(chars {start}-{start + len(quote)})" in result.body
    assert result.body.endswith(f"chunks={total}/{total} model={MODEL}")
