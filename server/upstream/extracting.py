"""Connecting `tool_output`'s LLM modes to a backend: an OpenAI-compatible endpoint or the client's sampling."""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from extraction import (
    LLM,
    Completion,
    Document,
    Extraction,
    Extractor,
    FileTool,
    LLMBadResponse,
    LLMError,
    LLMTimeout,
    LLMUnavailable,
    Message,
    Usage,
)
from extraction import Mode as ExtractMode
from extraction.allowance import Allowance
from extraction.llm import ToolSpec
from extraction.openai import DEFAULT_CONTEXT_WINDOW, OpenAICompatible, default_answer_tokens
from extraction.source import sha256_of
from server.config import ExtractionSettings
from server.downstream.relay import RequestRelay
from server.errors import ClaimcheckError
from server.handles.calls import Call
from server.handles.files import FileToolError, run_file_tool
from server.handles.meters import Meters
from server.handles.own_tools import ExtractFn
from server.handles.retrieval import Opener, RetrievalError
from server.handles.sessions import Session
from server.proxy import Proxy

__all__ = ["BatchSamplingLLM", "InputRequired", "SamplingLLM", "choose_llm", "extract_function", "llm_available"]

_SAMPLING = types.ClientCapabilities(sampling=types.SamplingCapability())
_CONFIGURED = "an endpoint is configured"  # choose_llm's answer, asked without an extractor, where one is
_ROUNDS = "sampling in rounds"  # choose_llm's answer for a 2026-07-28 client that can sample


class SamplingLLM:
    """Completions from the connected client's model, through MCP sampling (handshake-era clients)."""

    supports_tools = False

    def __init__(self, relay: RequestRelay, settings: ExtractionSettings, client: str) -> None:
        self._relay = relay
        self.model = f"sampling:{client}"
        self.context_window, self.max_output_tokens = _sampling_window(settings)

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        params = _sampling_params(messages, max_tokens)
        answer = await self._relay.sample(params)
        if isinstance(answer, types.ErrorData):
            raise LLMUnavailable(f"the client could not sample: {answer.message}")
        content = answer.content
        if not isinstance(content, types.TextContent):
            raise LLMBadResponse("the client's sampling answer is not text")
        self.model = f"sampling:{answer.model}" if answer.model else self.model
        return Completion(text=content.text)


class InputRequired(ClaimcheckError):
    """Not a failure: the 2026-07-28 client must answer sampling requests and call again."""

    def __init__(self, result: types.InputRequiredResult) -> None:
        super().__init__("input required")
        self.result = result


@dataclass(eq=False)
class Conversation:
    """An extraction answered over several rounds of a 2026-07-28 client's `InputRequiredResult` retries."""

    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    batch: list[types.CreateMessageRequestParams] | None = None
    answers: list[Completion | LLMError] | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)
    result: Extraction | None = None
    failure: RetrievalError | None = None  # the output could not be read when the background run began
    _changed: anyio.Event = field(default_factory=anyio.Event)

    def changed(self) -> anyio.Event:
        return self._changed

    def pulse(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()


class BatchSamplingLLM:
    """Sampling through a 2026-07-28 client: each batch of completions becomes one round of input requests."""

    supports_tools = False

    def __init__(self, conversation: Conversation, settings: ExtractionSettings, client: str) -> None:
        self._conversation = conversation
        self._wait = settings.timeout_secs
        self.model = f"sampling:{client}"
        self.context_window, self.max_output_tokens = _sampling_window(settings)

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        (answer,) = await self.complete_batch([messages], max_tokens=max_tokens)
        if isinstance(answer, LLMError):
            raise answer
        return answer

    async def complete_batch(
        self, conversations: Sequence[Sequence[Message]], *, max_tokens: int
    ) -> list[Completion | LLMError]:
        conversation = self._conversation
        conversation.batch = [_sampling_params(messages, max_tokens) for messages in conversations]
        conversation.answers = None
        conversation.answered = anyio.Event()
        conversation.pulse()
        with anyio.move_on_after(self._wait):
            await conversation.answered.wait()
        answers = conversation.answers
        if answers is None:
            timeout = LLMTimeout(f"the client did not answer the sampling requests within {self._wait:g} s")
            return [timeout] * len(conversations)
        return answers


def _allowance(settings: ExtractionSettings) -> Allowance:
    """What one question may send to the client's model (extraction.allowance)."""
    return Allowance(settings.sampling_requests, settings.sampling_tokens)


def _sampling_window(settings: ExtractionSettings) -> tuple[int, int]:
    """(context window, answer tokens) of the client's model: the settings, else the defaults (a client does
    not say its model's window)."""
    window = settings.context_window or DEFAULT_CONTEXT_WINDOW
    return window, settings.max_output_tokens or default_answer_tokens(window)


def _endpoint(settings: ExtractionSettings, base_url: str, model: str, api_key: str | None) -> OpenAICompatible:
    """The backend of an OpenAI-compatible endpoint; the proxy's `Extractor.backend` keeps one per endpoint."""
    return OpenAICompatible(
        base_url,
        model,
        api_key=api_key,
        context_window=settings.context_window,
        max_output_tokens=settings.max_output_tokens,
        timeout_secs=settings.timeout_secs,
        first_token_secs=settings.first_token_secs,
        concurrency=settings.concurrency,
    )


def _sampling_params(messages: Sequence[Message], max_tokens: int) -> types.CreateMessageRequestParams:
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns = [
        types.SamplingMessage(
            role="assistant" if m.role == "assistant" else "user",
            content=types.TextContent(type="text", text=m.content),
        )
        for m in messages
        if m.role != "system"
    ]
    return types.CreateMessageRequestParams(messages=turns, system_prompt=system or None, max_tokens=max_tokens)


def _answer_of(response: object) -> Completion | LLMError:
    if isinstance(response, types.CreateMessageResult) and isinstance(response.content, types.TextContent):
        return Completion(text=response.content.text)
    return LLMBadResponse("the client's answer to a sampling request is missing or not text")


def choose_llm(
    settings: ExtractionSettings, ctx: ServerRequestContext[Any], extractor: Extractor | None, owner: str | None = None
) -> tuple[LLM | None, str]:
    """The backend `provider` selects, kept by `extractor`, or None and why there is none (without an extractor,
    None and `_CONFIGURED` where an endpoint would be chosen: `llm_available` asks no more). An endpoint's
    requests take `owner`'s turns (a principal: `Extractor.backend`)."""
    provider = settings.provider
    if provider == "none":
        return None, 'LLM extraction is turned off (settings.extraction.provider is "none")'
    if provider in ("openai", "auto") and settings.base_url and settings.model:
        api_key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
        if settings.api_key_env and not api_key:
            return None, f"the API key variable {settings.api_key_env} is not set"
        if extractor is None:
            return None, _CONFIGURED
        key = (settings, settings.base_url, settings.model, api_key)
        return extractor.backend(key, partial(_endpoint, *key), owner), ""
    if provider == "openai":
        return None, "the openai provider needs settings.extraction.baseUrl and model"
    if not ctx.session.check_client_capability(_SAMPLING):
        return None, "no LLM is configured (settings.extraction) and the client offers no sampling"
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None, _ROUNDS
    params = ctx.session.client_params
    client = params.client_info.name if params is not None else "client"
    return SamplingLLM(RequestRelay(ctx), settings, client), ""


def llm_available(settings: ExtractionSettings, ctx: ServerRequestContext[Any]) -> bool:
    """Whether `tool_output`'s `extract` can be answered for this client: an endpoint, or its sampling
    (what `choose_llm` would find, without making a backend). The messages name `extract` only then."""
    llm, reason = choose_llm(settings, ctx, None) if settings.provider != "none" else (None, "")
    return llm is not None or reason in (_ROUNDS, _CONFIGURED)


class _CallUsage(Usage):
    """Counts into the session's usage and writes each LLM call into the call's log."""

    def __init__(self, session_usage: Usage, call: Call, meters: Meters) -> None:
        super().__init__()
        self._session_usage, self._call, self._meters = session_usage, call, meters

    def add(self, model: str, completion: Completion) -> None:
        super().add(model, completion)
        self._session_usage.add(model, completion)
        self._meters.extracted(completion.input_tokens, completion.output_tokens)
        self._call.note("extraction", f"{model}: {completion.input_tokens} tokens in, {completion.output_tokens} out")


def extract_function(
    proxy: Proxy,
    ctx: ServerRequestContext[Any],
    session: Session,
    threshold: int,
    params: types.CallToolRequestParams,
) -> ExtractFn:
    """What `tool_output` calls for auto, full-chunked, read-grep and excerpts in this request."""

    async def extract(call: Call, output: Opener, request: str, mode: ExtractMode) -> Extraction:
        settings = proxy.config.settings.extraction
        owner = session.principal  # turns at a shared endpoint by principal, as Grep's
        llm, reason = choose_llm(settings, ctx, proxy.extractor, owner)
        document = Document(call.public_name, call.arguments_json, call.handle, call.bytes, call.lines, call.tokens)

        def file_tool(name: str) -> FileTool:
            async def run(arguments: dict[str, object]) -> str:
                try:
                    result = await run_file_tool(
                        name,
                        dict(arguments),
                        session=session,
                        sessions=proxy.sessions,
                        sandbox=proxy.sandbox,
                        threshold=threshold,
                    )
                except FileToolError as exc:
                    return str(exc)
                return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))

            return run

        async def run(chosen: LLM | None) -> Extraction:
            async with output() as source:  # opened by whoever runs the extraction, read in pieces
                if not call.sha256:  # a spooled output's digest is taken once, when first asked for
                    call.digested(await anyio.to_thread.run_sync(sha256_of, source))
                return await proxy.extractor.extract(
                    document,
                    source,
                    call.sha256,
                    request,
                    mode,
                    llm=chosen,
                    usage=_CallUsage(session.usage, call, proxy.meters),
                    tools={"Read": file_tool("Read"), "Grep": file_tool("Grep")},
                    threshold=threshold,
                    unavailable_reason=reason,
                    allowance=_allowance(settings) if isinstance(chosen, SamplingLLM | BatchSamplingLLM) else None,
                )

        if llm is None and reason == _ROUNDS:
            return await _in_rounds(proxy, ctx, session, params, run)
        return await run(llm)

    return extract


async def _in_rounds(
    proxy: Proxy,
    ctx: ServerRequestContext[Any],
    session: Session,
    params: types.CallToolRequestParams,
    run: Callable[[LLM | None], Awaitable[Extraction]],
) -> Extraction:
    """Run the extraction in the background; each batch of completions goes to the client as one round."""
    conversation = session.conversations.get(params.request_state or "")
    if conversation is None:
        conversation = Conversation()
        session.conversations[conversation.token] = conversation
        client = ctx.session.client_params.client_info.name if ctx.session.client_params else "client"
        llm = BatchSamplingLLM(conversation, proxy.config.settings.extraction, client)

        async def background() -> None:
            try:
                conversation.result = await run(llm)
            except RetrievalError as exc:
                conversation.failure = exc
            conversation.pulse()

        proxy.sessions.spawn(background)
    elif conversation.batch is not None and params.input_responses is not None:
        responses = params.input_responses
        conversation.answers = [_answer_of(responses.get(f"s{i}")) for i in range(len(conversation.batch))]
        conversation.batch = None
        conversation.answered.set()
    while conversation.result is None and conversation.batch is None and conversation.failure is None:
        await conversation.changed().wait()
    if conversation.failure is not None:
        session.conversations.pop(conversation.token, None)
        raise conversation.failure
    if conversation.result is not None:
        session.conversations.pop(conversation.token, None)
        return conversation.result
    requests: dict[str, types.InputRequest] = {
        f"s{i}": types.CreateMessageRequest(params=p) for i, p in enumerate(conversation.batch or [])
    }
    raise InputRequired(types.InputRequiredResult(input_requests=requests, request_state=conversation.token))
