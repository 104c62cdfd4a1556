"""Questions a downstream asks (sampling, elicitation, roots) when no client request can carry them.

That is a background call's question after its hand-off, or any question when the client cannot be
sent requests (2026-07-28). It waits in its session's `Inbox` until answered; how long is the
caller's to bound (the downstream's timeout, `server.downstream.inflight`). It reaches
- the client at once, as a request of claimcheck's own, where the session's connection has a
  standing channel for them (handshake era: stdio, or streamable HTTP's GET stream) and the client
  declared the capability;
- the client through `tasks/result` of an MCP task (`server.upstream.mcp_tasks`);
- the model: `wait_for_tool_output` returns it with how to answer (its `answer` argument), and every
  result's footer says that a question waits.
The first answer wins; a request still out to the client is then withdrawn. A roots question is never
shown to the model (it cannot know the client's roots): only the client answers it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio
import mcp_types as types

from server.downstream.relay import Relay, RootsParams, no_roots
from server.errors import NoBackChannel, OwnToolError, clip

__all__ = [
    "Answer",
    "Channel",
    "Inbox",
    "Kind",
    "Params",
    "Question",
    "RequestQuestions",
    "ask_or_wait",
    "deliver",
    "either",
    "elicitation_answer",
    "kind_of",
    "model_answer",
    "roots_answer",
    "sampling_answer",
]

Kind = Literal["sampling", "elicitation", "roots"]
Params = types.CreateMessageRequestParams | types.ElicitRequestParams | RootsParams
Answer = types.CreateMessageResult | types.ElicitResult | types.ListRootsResult | types.ErrorData


class Channel(Protocol):
    """A way to put a question to the client as a request of its own (`server.downstream.relay.ClientChannel`)."""

    def can_ask(self, kind: str) -> bool: ...

    async def ask(self, params: Params) -> Answer: ...


@dataclass(eq=False)
class Question:
    """One request of a downstream, waiting for whoever answers it first."""

    kind: Kind
    params: Params
    tool: str
    """The public name of the tool whose call asks (or the request, e.g. `prompts/get "name"`)."""
    handle: str | None
    id: str = field(default_factory=lambda: f"q-{secrets.token_hex(4)}")
    asked: float = field(default_factory=time.monotonic)
    answer: Answer | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)
    carried: bool = False
    """Whether a request to the client is out with it right now."""
    shown: bool = False
    """Whether `wait_for_tool_output` has shown it to the model."""
    task: bool = False
    """Whether its call runs as an MCP task: then `tasks/result` carries it (with the task's `_meta`), never the
    session's standing channel."""

    def settle(self, answer: Answer) -> bool:
        """Take `answer` unless another came first; whether it was taken."""
        if self.answered.is_set():
            return False
        self.answer = answer
        self.answered.set()
        return True


class Inbox:
    """The questions of one session that wait for an answer, and the session's standing channel, if any."""

    def __init__(self) -> None:
        self.pending: dict[str, Question] = {}
        self.channel: Channel | None = None
        self._changed = anyio.Event()

    def changed(self) -> anyio.Event:
        """An event set at the next question asked, carried or answered."""
        return self._changed

    def _pulse(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def unshown(self) -> list[Question]:
        """The questions the model has not seen yet and no request to the client carries now."""
        return [q for q in self.for_model() if not q.shown and not q.carried]

    def for_model(self) -> list[Question]:
        """The questions the model can answer (all but roots)."""
        return [q for q in self.pending.values() if q.kind != "roots"]

    def of_handle(self, handle: str) -> list[Question]:
        return [question for question in self.pending.values() if question.handle == handle]

    async def ask(self, kind: Kind, params: Params, *, tool: str, handle: str | None, task: bool = False) -> Answer:
        """Wait for the answer to a new question (cancel the wait to give up on it)."""
        question = Question(kind, params, tool, handle, task=task)
        self.pending[question.id] = question
        self._pulse()
        try:
            async with anyio.create_task_group() as tg:
                if self.channel is not None and self.channel.can_ask(kind) and not task:
                    tg.start_soon(self.carry, question, self.channel.ask)
                await question.answered.wait()
                tg.cancel_scope.cancel()  # an answer came another way: withdraw the request to the client
        finally:
            self.pending.pop(question.id, None)
            self._pulse()
        assert question.answer is not None
        return question.answer

    async def carry(self, question: Question, ask: Callable[[Params], Awaitable[Answer]]) -> None:
        """Put `question` to the client through `ask`; its answer settles the question unless another came
        first. When the client cannot be asked after all, the question stays for the model."""
        if question.carried or question.answered.is_set():
            return
        question.carried = True
        self._pulse()
        try:
            answer = await ask(question.params)
        except NoBackChannel:
            return
        finally:
            question.carried = False
            self._pulse()
        question.settle(answer)

    async def carry_all(
        self,
        ask: Callable[[Params], Awaitable[Answer]],
        can_ask: Callable[[Kind], bool],
        *,
        handle: str | None = None,
        standing: bool = False,
    ) -> None:
        """Carry every question (of `handle`, if given) that no request carries yet through `ask`, until cancelled;
        `standing`: `ask` is a standing channel, which leaves the questions of tasks to `tasks/result`."""
        async with anyio.create_task_group() as tg:
            while True:
                for question in list(self.pending.values()):
                    if handle not in (None, question.handle) or question.carried or (standing and question.task):
                        continue
                    if can_ask(question.kind):
                        tg.start_soon(self.carry, question, ask)
                await self.changed().wait()

    def answer(self, question_id: str, answer: Answer) -> Question:
        """Settle a pending question with the model's answer; KeyError when there is no such question."""
        question = self.pending[question_id]
        question.settle(answer)
        return question


def kind_of(params: Params) -> Kind:
    if isinstance(params, RootsParams):
        return "roots"
    return "sampling" if isinstance(params, types.CreateMessageRequestParams) else "elicitation"


async def ask_or_wait(
    upstream: Relay | None,
    inbox: Inbox,
    params: Params,
    *,
    tool: str,
    handle: str | None,
    lists_roots: bool = False,
    task: bool = False,
) -> Answer:
    """Through the client request that is waiting, where it can carry the question; else in the inbox.

    `lists_roots`: whether the session's client declared roots; a roots question of one that did not gets
    the spec's error at once."""
    if upstream is not None and upstream.reaches_client():
        if isinstance(params, RootsParams):
            return await upstream.list_roots(params)
        if isinstance(params, types.CreateMessageRequestParams):
            return await upstream.sample(params)
        return await upstream.elicit(params)
    if isinstance(params, RootsParams) and not lists_roots:
        return no_roots()
    return await inbox.ask(kind_of(params), params, tool=tool, handle=handle, task=task)


def sampling_answer(answer: Answer) -> types.CreateMessageResult | types.ErrorData:
    if isinstance(answer, types.ElicitResult | types.ListRootsResult):  # pragma: no cover - made for their kind
        return types.ErrorData(code=types.INTERNAL_ERROR, message="a sampling request got another kind of answer")
    return answer


def elicitation_answer(answer: Answer) -> types.ElicitResult | types.ErrorData:
    if isinstance(answer, types.CreateMessageResult | types.ListRootsResult):  # pragma: no cover - as above
        return types.ErrorData(code=types.INTERNAL_ERROR, message="an elicitation request got another kind of answer")
    return answer


def roots_answer(answer: Answer) -> types.ListRootsResult | types.ErrorData:
    if isinstance(answer, types.CreateMessageResult | types.ElicitResult):  # pragma: no cover - as above
        return types.ErrorData(code=types.INTERNAL_ERROR, message="a roots request got another kind of answer")
    return answer


class RequestQuestions:
    """The relay of a forwarded request that is not a tool call (`prompts/get`, `resources/read`): like the
    request's own, except that a question it cannot carry waits in the session's inbox."""

    def __init__(self, upstream: Relay, inbox: Inbox, about: str, *, lists_roots: bool = False) -> None:
        self._upstream = upstream
        self._inbox = inbox
        self._about = about
        self._lists_roots = lists_roots

    def reaches_client(self) -> bool:
        return True

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self._upstream.progress(progress, total, message)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        await self._upstream.log(params)

    async def sample(self, params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData:
        return sampling_answer(await self._ask(params))

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        return elicitation_answer(await self._ask(params))

    async def list_roots(self, params: RootsParams) -> types.ListRootsResult | types.ErrorData:
        return roots_answer(await self._ask(params))

    async def _ask(self, params: Params) -> Answer:
        return await ask_or_wait(
            self._upstream, self._inbox, params, tool=self._about, handle=None, lists_roots=self._lists_roots
        )


def deliver(inbox: Inbox, answer: Mapping[str, Any]) -> str:
    """Give the model's answer (`wait_for_tool_output`'s `answer`) to its question; the line that says so."""
    question_id = answer.get("question")
    question = inbox.pending.get(question_id) if isinstance(question_id, str) else None
    if question is None or question.kind == "roots":
        raise OwnToolError(
            f'No question "{clip(question_id)}" waits for an answer in this session (it may have been answered '
            "or timed out). Call wait_for_tool_output without `answer` to see the questions that wait."
        )
    try:
        reply = model_answer(question, answer)
    except ValueError as exc:
        raise OwnToolError(f'The answer to question "{question.id}" cannot be used: {exc}') from None
    inbox.answer(question.id, reply)
    return f'Answered question "{question.id}" of {question.tool}.'


async def either(*events: anyio.Event) -> None:
    """Return when any of the events is set."""
    async with anyio.create_task_group() as tg:

        async def wait(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(wait, event)


def model_answer(question: Question, answer: Mapping[str, Any]) -> Answer:
    """The answer the model gave through `wait_for_tool_output`; ValueError says what is wrong with it."""
    action = answer.get("action", "accept")
    if action not in ("accept", "decline", "cancel"):
        raise ValueError('"action" must be "accept", "decline" or "cancel".')
    if question.kind == "sampling":
        if action != "accept":
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"the client's model chose to {action}")
        text = answer.get("text")
        if not isinstance(text, str):
            raise ValueError('a sampling question is answered with "text": the completion, as a string.')
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=text),
            model="client-model-through-claimcheck",
            stop_reason="endTurn",
        )
    if action != "accept":
        return types.ElicitResult(action=action)
    content = answer.get("content", {})
    if not isinstance(content, dict) or not all(
        isinstance(value, str | int | float | bool) or _string_list(value) for value in content.values()
    ):
        raise ValueError('"content" must be an object of strings, numbers, booleans or lists of strings.')
    params = question.params
    schema = params.requested_schema if isinstance(params, types.ElicitRequestFormParams) else None
    missing = [name for name in (schema or {}).get("required", []) if name not in content]
    if missing:
        fields = "field" if len(missing) == 1 else "fields"
        raise ValueError(f'"content" lacks the required {fields}: {", ".join(missing)}.')
    return types.ElicitResult(action="accept", content=content)


def _string_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
