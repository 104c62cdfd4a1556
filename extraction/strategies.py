"""The LLM strategies: full-chunked (parallel map, one reduce) and read-grep (a bounded tool loop)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import anyio

from extraction.chunking import Chunk, chunk_source, read_chunk
from extraction.errors import ExtractionError, LLMContextOverflow, LLMError, NoFinalReport, Ungrounded
from extraction.excerpts import excerpt
from extraction.llm import LLM, Completion, Message, ToolSpec, Usage
from extraction.prompts import (
    NOT_FOUND,
    Document,
    answer_of,
    excerpt_prompt,
    map_prompt,
    read_grep_prompt,
    reduce_prompt,
)
from extraction.recheck import caution, recheck
from extraction.source import Source
from extraction.tokens import count_tokens

__all__ = ["FileTool", "Policy", "StrategyResult", "excerpts", "full_chunked", "plan_chunks", "read_grep"]

FileTool = Callable[[dict[str, object]], Awaitable[str]]
Prompt = Callable[[], Awaitable[tuple[str, str]]]  # (system, user), made when its turn comes

READ_SPEC = ToolSpec(
    "Read",
    "Read numbered lines of the file. start is the 0-based first line; headOrTail=tail counts from the end.",
    {
        "type": "object",
        "properties": {
            "file": {"type": "string"},
            "start": {"type": "integer", "minimum": 0},
            "lines": {"type": "integer", "minimum": 1},
            "headOrTail": {"type": "string", "enum": ["head", "tail"]},
        },
        "required": ["file"],
    },
)
GREP_SPEC = ToolSpec(
    "Grep",
    "Search the file with a regular expression; matching lines are marked with an arrow, with context.",
    {
        "type": "object",
        "properties": {
            "file": {"type": "string"},
            "regex": {"type": "string"},
            "before": {"type": "integer", "minimum": 0},
            "after": {"type": "integer", "minimum": 0},
            "caseSensitive": {"type": "boolean"},
            "maxMatches": {"type": "integer", "minimum": 1},
        },
        "required": ["file", "regex"],
    },
)


@dataclass(frozen=True, slots=True)
class Policy:
    """`settings.extraction` as the strategies need it."""

    max_chunks: int = 1
    max_chunks_hard: int = 64
    overlap_percent: float = 10
    avg_line_bytes_threshold: int = 1000
    concurrency: int | None = None  # None: as many as the endpoint serves at once (`llm.concurrency`)
    retries: int = 2
    max_turns: int = 4
    excerpt_tokens: int = 1500  # the most an excerpts page holds (cl100k), if the window leaves that much


@dataclass(frozen=True, slots=True)
class StrategyResult:
    answer: str  # the FINAL content, evidence section included
    chunks_searched: int
    chunks_total: int
    unanswered: tuple[int, ...] = ()  # the parts (1-based) whose answer could not be read, after retries
    withheld: str = ""  # why the rest of the output was not read (the client's model's allowance)
    caution: str = ""  # the answer's line does not mention what was asked (extraction.recheck)

    def note(self) -> str:
        """The lines saying which parts gave no answer, why the output was not read whole, or that the answer's
        line does not mention what was asked (empty when none)."""
        said = [self.withheld or self._unanswered(), self.caution]
        return "\n".join(line for line in said if line)

    def _unanswered(self) -> str:
        if not self.unanswered:
            return ""
        numbers = [str(index) for index in self.unanswered]
        named = numbers[0] if len(numbers) == 1 else ", ".join(numbers[:-1]) + " and " + numbers[-1]
        parts = "Part" if len(numbers) == 1 else "Parts"
        return (
            f"{parts} {named} of {self.chunks_total} gave no answer: this answer is from the others. "
            "Search those parts with Grep, or read them with Read."
        )


MIN_CHUNK_TOKENS = 256


def chunk_budget(llm: LLM, document: Document, extract: str, nonce: str, ratio: float = 1.0) -> int:
    """Tokens (cl100k) left for a chunk: context window minus the answer and the prompt around the chunk.

    `ratio` is the model's tokens per cl100k token (extraction.budget): the window is the model's, the plan
    counts cl100k. Raises `LLMError` saying where the window went when fewer than MIN_CHUNK_TOKENS are left.
    """
    system, user = map_prompt(document, extract, "", 999, 999, 10, nonce)
    prompt = count_tokens(system) + count_tokens(user) + 64
    budget = int((llm.context_window - llm.max_output_tokens) / ratio) - prompt
    if budget < MIN_CHUNK_TOKENS:
        raise LLMError(
            f"the model's context window ({llm.context_window} tokens) leaves no room for a chunk: "
            f"{llm.max_output_tokens} are kept for the answer and the prompt around the chunk takes {prompt}, "
            f"{count_tokens(extract)} of them the extract request"
        )
    return budget


def plan_chunks(
    source: Source, llm: LLM, document: Document, extract: str, policy: Policy, nonce: str, ratio: float = 1.0
) -> list[Chunk]:
    """The chunks of the stored output (blocking: a few small reads near the cuts)."""
    budget = chunk_budget(llm, document, extract, nonce, ratio)
    return chunk_source(source, budget, policy.overlap_percent, tokens=document.tokens)


async def _ask_all(llm: LLM, usage: Usage, prompts: list[Prompt], nonce: str, policy: Policy) -> list[str]:
    """The FINAL content of one answer per prompt, each tried `1 + retries` times; the first prompt that keeps
    failing fails them all (see `_ask_parts` for answers without the parts that fail)."""
    answers = await _ask_parts(llm, usage, prompts, nonce, policy, partial=False)
    return [answer or "" for answer in answers]


async def _ask_parts(
    llm: LLM, usage: Usage, prompts: list[Prompt], nonce: str, policy: Policy, *, partial: bool = True
) -> list[str | None]:
    """The FINAL content of one answer per prompt, each tried `1 + retries` times; None for a prompt whose answer
    could not be read (`partial`: the model gave none for that part, and the others go on), unless none answered,
    which raises the first failure. A failing backend (an error, a context overflow: the caller splits smaller)
    stops them all.

    A prompt is made only when its call is about to start, so at most `policy.concurrency` chunks are held.

    Backends that take batches (`complete_batch`, e.g. sampling through a 2026-07-28 client) get all
    prompts at once and a batch of the failed ones per retry; others get concurrent calls under
    `policy.concurrency`.
    """
    if getattr(llm, "complete_batch", None) is not None:
        return await _ask_in_batches(llm, usage, prompts, nonce, policy, partial=partial)
    answers: list[str | None] = [None] * len(prompts)
    failures: list[ExtractionError] = []
    limiter = anyio.CapacityLimiter(in_flight(llm, policy))

    async def one(index: int, scope: anyio.CancelScope) -> None:
        async with limiter:
            failure: ExtractionError | None = None
            conversation = _conversation(await prompts[index]())
            for _ in range(policy.retries + 1):
                try:
                    completion = await llm.complete(conversation, max_tokens=llm.max_output_tokens)
                except LLMContextOverflow as exc:
                    failure = exc  # the same prompt fails the same way: the caller splits smaller
                    break
                except LLMError as exc:
                    failure = exc
                    continue
                usage.add(llm.model, completion)
                if (answer := answer_of(completion.text, nonce)) is not None and not echoes(answer, conversation):
                    answers[index] = answer
                    return
                failure = NoFinalReport("the model gave an empty answer, or repeated the instructions")
                conversation = _reminded(conversation, nonce)
            assert failure is not None
            failures.append(failure)
            if not (partial and isinstance(failure, NoFinalReport)):  # the backend failed, not this part: stop
                scope.cancel()

    async with anyio.create_task_group() as tg:
        for index in range(len(prompts)):
            tg.start_soon(one, index, tg.cancel_scope)
    broken = [failure for failure in failures if not isinstance(failure, NoFinalReport)]
    if broken or (failures and (not partial or all(answer is None for answer in answers))):
        raise (broken or failures)[0]
    return answers


async def _ask_in_batches(
    llm: LLM, usage: Usage, prompts: list[Prompt], nonce: str, policy: Policy, *, partial: bool
) -> list[str | None]:
    conversations = [_conversation(await prompt()) for prompt in prompts]  # a batch goes out whole
    answers: list[str | None] = [None] * len(prompts)
    failures: dict[int, ExtractionError] = {}
    pending = list(range(len(prompts)))
    batch = llm.complete_batch  # type: ignore[attr-defined]  # checked by the caller
    for _ in range(policy.retries + 1):
        results = await batch([conversations[i] for i in pending], max_tokens=llm.max_output_tokens)
        for index, result in zip(pending, results, strict=True):
            if isinstance(result, LLMError):
                failures[index] = result
                continue
            usage.add(llm.model, result)
            if (answer := answer_of(result.text, nonce)) is None:
                failures[index] = NoFinalReport("the model gave an empty answer")
                conversations[index] = _reminded(conversations[index], nonce)
            else:
                answers[index] = answer
        pending = [index for index in pending if answers[index] is None]
        if not pending:
            return answers
    if partial and len(pending) < len(prompts) and all(isinstance(failures[i], NoFinalReport) for i in pending):
        return answers
    raise failures[pending[0]]


def _reminded(conversation: list[Message], nonce: str) -> list[Message]:
    """The request again, saying the answer was empty: at temperature 0 the same request gets the same answer
    (bench/extraction_eval.py saw three in a row), a changed one need not. Said once."""
    *head, user = conversation
    if REMINDER_MARK in user.content:
        return conversation
    tag = f"claimcheck-{nonce}-FINAL"
    reminder = f'{REMINDER_MARK} write your answer inside <{tag} format="text"> … </{tag}>.'
    return [*head, Message(user.role, f"{user.content}\n\n{reminder}")]


REMINDER_MARK = "Your previous answer was empty:"


def echoes(answer: str, conversation: list[Message]) -> bool:
    """Whether the answer only repeats the instructions (a small model's answer when it finds nothing: it echoed
    "EVIDENCE: with copied lines." in bench/extraction_eval.py): a whole line of the system prompt or of the
    request from its question on, or a long stretch of them (a short answer may share words with them)."""
    said = answer.strip().rstrip(".").strip()
    instructions = [m.content for m in conversation if m.role == "system"]
    instructions += [_after_document(m.content) for m in conversation if m.role == "user"]
    lines = {line.strip().rstrip(".").strip() for text in instructions for line in text.splitlines()}
    return said in lines or (len(said) >= ECHO_CHARS and any(said in text for text in instructions))


ECHO_CHARS = 25


def _after_document(request: str) -> str:
    """What a request says after the document it shows: from its question on (never a line of the output)."""
    at = max(request.rfind("\nQUESTION: "), request.rfind("\nWHAT TO EXTRACT: "))
    return request[at + 1 :] if at >= 0 else ""


def in_flight(llm: LLM, policy: Policy) -> int:
    """Requests sent at once: the configured number, else what the endpoint serves at once (else 4)."""
    if policy.concurrency is not None:
        return policy.concurrency
    served = getattr(llm, "concurrency", None)
    return served if isinstance(served, int) and served > 0 else 4


def _conversation(prompt: tuple[str, str]) -> list[Message]:
    return [Message("system", prompt[0]), Message("user", prompt[1])]


def _ready(prompt: tuple[str, str]) -> Prompt:
    async def made() -> tuple[str, str]:
        return prompt

    return made


async def full_chunked(
    llm: LLM,
    usage: Usage,
    document: Document,
    source: Source,
    extract: str,
    policy: Policy,
    nonce: str,
    ratio: float = 1.0,
) -> StrategyResult:
    """Map every chunk (concurrently, `in_flight` at a time), then reduce the relevant answers.

    Each chunk is read from the stored output when its call starts, never all at once.
    """
    chunks = await anyio.to_thread.run_sync(plan_chunks, source, llm, document, extract, policy, nonce, ratio)
    searched = chunks[: policy.max_chunks_hard]

    def map_step(chunk: Chunk) -> Prompt:
        async def made() -> tuple[str, str]:
            text = await anyio.to_thread.run_sync(read_chunk, source, chunk)
            return map_prompt(document, extract, text, chunk.index, len(chunks), policy.overlap_percent, nonce)

        return made

    parts = await _ask_parts(llm, usage, [map_step(chunk) for chunk in searched], nonce, policy)
    unanswered = tuple(chunk.index for chunk, answer in zip(searched, parts, strict=True) if answer is None)
    answers = [(chunk.index, answer) for chunk, answer in zip(searched, parts, strict=True) if answer is not None]
    if len(parts) == 1:
        return StrategyResult(answers[0][1], 1, len(chunks))
    relevant = [answer for _, answer in answers if not answer.startswith(NOT_FOUND)]
    if not relevant:
        summary = "\n".join(f"- chunk {i}: {a.removeprefix(NOT_FOUND).strip()}" for i, a in answers)
        return StrategyResult(f"{NOT_FOUND}\n{summary}", len(searched), len(chunks), unanswered)
    if len(relevant) == 1:
        return StrategyResult(relevant[0], len(searched), len(chunks), unanswered)
    reduce = _ready(reduce_prompt(document, extract, relevant, nonce))
    (answer,) = await _ask_all(llm, usage, [reduce], nonce, policy)
    return StrategyResult(answer, len(searched), len(chunks), unanswered)


async def excerpts(
    llm: LLM,
    usage: Usage,
    document: Document,
    source: Source,
    extract: str,
    policy: Policy,
    nonce: str,
    ratio: float = 1.0,
) -> StrategyResult:
    """One page of the output's lines that share the request's words (extraction.excerpts), asked about once."""
    budget = min(policy.excerpt_tokens, chunk_budget(llm, document, extract, nonce, ratio))
    page = await anyio.to_thread.run_sync(excerpt, source, extract, budget)
    if not page.chosen:
        return StrategyResult(f"{NOT_FOUND}\nno line shares a word with the request", 0, page.segments)
    prompt = excerpt_prompt(document, extract, page.text)
    (answer,) = await _ask_all(llm, usage, [_ready(prompt)], nonce, policy)
    if not answer.startswith(NOT_FOUND) and (narrowed := recheck(answer, page).narrowed) is not None:
        try:  # once more, on the page's lines that carry the question's rarest words
            (again,) = await _ask_all(llm, usage, [_ready(excerpt_prompt(document, extract, narrowed))], nonce, policy)
        except ExtractionError:  # no second answer (the client's model's allowance, a failure): the first stands
            again = NOT_FOUND
        answer = answer if again.startswith(NOT_FOUND) else again
    return StrategyResult(answer, page.chosen, page.segments, caution=caution(answer, page))


async def read_grep(
    llm: LLM,
    usage: Usage,
    document: Document,
    extract: str,
    tools: Mapping[str, FileTool],
    policy: Policy,
    nonce: str,
) -> StrategyResult:
    """Let the model look through Read and Grep for at most `policy.max_turns` rounds, then answer.

    An answer given before any Read or Grep is refused (`Ungrounded`): small models answer from nothing."""
    system, user = read_grep_prompt(document, extract, nonce)
    messages = [Message("system", system), Message("user", user)]
    specs = (READ_SPEC, GREP_SPEC)
    for turn in range(policy.max_turns + 1):
        last = turn == policy.max_turns
        if last:
            messages.append(Message("user", "No more tool calls are possible. Give your answer in the wrapper now."))
        completion = await _complete_with_retries(llm, messages, () if last else specs, policy.retries)
        usage.add(llm.model, completion)
        if not completion.tool_calls and turn == 0:
            raise Ungrounded("the model answered without looking at the output through Read or Grep")
        if not completion.tool_calls or last:
            answer = answer_of(completion.text, nonce)
            if answer is None:
                raise NoFinalReport("the read-grep loop ended with an empty answer")
            return StrategyResult(answer, 0, 0)
        messages.append(Message("assistant", completion.text, tool_calls=completion.tool_calls))
        for call in completion.tool_calls:
            tool = tools.get(call.name)
            if tool is None:
                reply = f"Unknown tool {call.name!r}; only Read and Grep exist."
            else:
                arguments = {**call.arguments, "file": document.handle}  # the model may only look at this file
                try:
                    reply = await tool(arguments)
                except Exception as exc:  # boundary: a tool error is shown to the model, not raised
                    reply = f"{call.name} failed: {exc}"
            messages.append(Message("tool", reply, tool_call_id=call.id))
    raise NoFinalReport("the read-grep loop ended without an answer")  # pragma: no cover - the loop returns


async def _complete_with_retries(
    llm: LLM, messages: list[Message], specs: tuple[ToolSpec, ...], retries: int
) -> Completion:
    failure: LLMError | None = None
    for _ in range(retries + 1):
        try:
            return await llm.complete(messages, max_tokens=llm.max_output_tokens, tools=specs)
        except LLMContextOverflow:
            raise
        except LLMError as exc:
            failure = exc
    assert failure is not None
    raise failure
