"""An OpenAI-compatible `/chat/completions` backend (OpenAI, vLLM, llama.cpp server, Ollama, LM Studio).

It uses httpx2, the HTTP client the MCP SDK already depends on, so the backend adds no package.

- **Answers stream.** The time limit counts from the last piece received (`timeout_secs`), and from the
  request until the first piece (`first_token_secs`: a CPU reads a long prompt for minutes before it
  writes anything). An endpoint that answers without streaming is read whole.
- **The endpoint says what it serves** (`prepare`, once): its context window, how many requests it serves
  at once, its tokenizer (extraction.endpoint). A context-length error names the window; it is learned
  (`LLMContextOverflow`), so the caller can split smaller.
- **Tool calls left in the text.** Servers without a tool-call parser for their model (llama-cpp-python's,
  vLLM without `--tool-call-parser`) return the model's calls as text; calls written the Hermes/Qwen way
  (`<tool_call>{"name", "arguments"}</tool_call>`) are read back from the text when tools were offered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import anyio
import httpx2

from extraction.endpoint import EndpointFacts, count_tokens, is_local, probe, window_in_error
from extraction.errors import LLMBadResponse, LLMContextOverflow, LLMTimeout, LLMUnavailable
from extraction.llm import Completion, Message, ToolCall, ToolSpec
from extraction.streaming import Answer, events

__all__ = ["DEFAULT_CONTEXT_WINDOW", "OpenAICompatible", "default_answer_tokens"]

_TEXT_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*(?:</tool_call>|$)", re.DOTALL)
DEFAULT_CONTEXT_WINDOW = 128_000  # when neither the settings nor the endpoint say; a smaller one is learned
ERROR_BODY_LIMIT = 64 * 1024
LOCAL_CONCURRENCY = 1  # llama.cpp's and Ollama's usual single slot
REMOTE_CONCURRENCY = 4
SMALL_WINDOW = 16_384


def default_answer_tokens(window: int) -> int:
    """The answer's room when `maxOutputTokens` is not set: an eighth of the window, 512 to 4096 tokens."""
    return max(512, min(4096, window // 8))


class OpenAICompatible:
    """Chat completions over HTTP; `base_url` ends before `/chat/completions` (e.g. `http://host:8000/v1`).

    `context_window`, `max_output_tokens` and `concurrency` left None are what the endpoint says, else the
    defaults above."""

    supports_tools = True

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        timeout_secs: float = 120,
        first_token_secs: float = 600,
        concurrency: int | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.model = model
        self._configured_window = context_window
        self._configured_answer = max_output_tokens
        self._configured_concurrency = concurrency
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout_secs
        self._first_token = first_token_secs
        self.facts: EndpointFacts | None = None
        self._learned_window: int | None = None

    @property
    def context_window(self) -> int:
        """The learned window (from a context-length error) wins over the configured one, which wins over what
        the endpoint said: a server restarted smaller is believed at once."""
        said = self.facts.context_window if self.facts is not None else None
        return self._learned_window or self._configured_window or said or DEFAULT_CONTEXT_WINDOW

    @property
    def max_output_tokens(self) -> int:
        answer = self._configured_answer or default_answer_tokens(self.context_window)
        return min(answer, self.context_window // 2)

    @property
    def concurrency(self) -> int:
        if self._configured_concurrency is not None:
            return self._configured_concurrency
        if self.facts is not None and self.facts.slots:
            return self.facts.slots
        return LOCAL_CONCURRENCY if is_local(self.base_url) else REMOTE_CONCURRENCY

    @property
    def small(self) -> bool:
        """Whether to read for a small model first (the excerpts strategy): one served on this machine or a private
        network, or with a window of at most SMALL_WINDOW tokens. Such a model misses a line in a long chunk."""
        return is_local(self.base_url) or self.context_window <= SMALL_WINDOW

    @property
    def has_tokenizer(self) -> bool:
        return self.facts is not None and self.facts.tokenizer is not None

    def learn_window(self, window: int) -> None:
        self._learned_window = window

    async def prepare(self) -> None:
        """Ask the endpoint once what it serves (later calls return at once; two first calls at the same
        moment may both ask, which costs a few small requests)."""
        if self.facts is None:
            self.facts = await probe(self.base_url, self.model, self._headers)

    async def count_model_tokens(self, texts: list[str]) -> list[int] | None:
        """Each text's length in the model's own tokens, or None without a tokenizer."""
        if self.facts is None or self.facts.tokenizer is None:
            return None
        return await count_tokens(self.base_url, self.model, self._headers, self.facts.tokenizer, texts)

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_message(m) for m in messages],
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        if tools:
            body["tools"] = [{"type": "function", "function": _function(t)} for t in tools]
        answer = await self._streamed(body)
        if answer is None:  # the stream broke before it said anything: ask once plainly, to hear why
            data = await self._plain(body)
        else:
            data = {"choices": [{"message": answer.as_message()}], "usage": answer.usage}
        try:
            completion = _completion(data, tools_offered=bool(tools))
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMBadResponse(f"{self.url} answered something that is not a chat completion ({exc})") from None
        if answer is not None and not answer.usage:  # llama-cpp-python streams no usage: count it here
            completion = await self._counted(completion, messages, answer.chunks)
        return completion

    async def _streamed(self, body: dict[str, Any]) -> Answer | None:
        """The streamed answer; None when the stream ended before any data (llama-cpp-python breaks it that way
        on a prompt past its window). Non-streamed answers are accepted as they come."""
        streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
        answer = Answer()
        timeout = httpx2.Timeout(connect=30, read=None, write=60, pool=30)
        with anyio.CancelScope() as scope:
            scope.deadline = anyio.current_time() + self._first_token
            try:
                async with (
                    httpx2.AsyncClient(timeout=timeout, headers=self._headers) as http,
                    http.stream("POST", self.url, json=streamed) as response,
                ):
                    if response.status_code != 200:
                        self._refused(response.status_code, await _bounded(response))
                    if "text/event-stream" not in response.headers.get("content-type", ""):
                        data = json.loads(await _bounded(response, 16 * ERROR_BODY_LIMIT))
                        answer.add(json.dumps({"choices": data["choices"], "usage": data.get("usage")}))
                        return answer
                    async for payload in events(response.aiter_bytes()):
                        scope.deadline = anyio.current_time() + self._timeout
                        if payload == "[DONE]":
                            return answer
                        answer.add(payload)
            except httpx2.RemoteProtocolError:
                if not answer.chunks:
                    return None
                raise LLMBadResponse(f"{self.url} broke off its answer") from None
            except httpx2.HTTPError as exc:
                raise LLMUnavailable(f"{self.url} cannot be reached: {exc}") from None
            except (ValueError, KeyError, TypeError) as exc:
                raise LLMBadResponse(f"{self.url} answered something that is not a chat completion ({exc})") from None
        if scope.cancelled_caught:
            waited = self._timeout if answer.chunks else self._first_token
            what = "went silent mid-answer for" if answer.chunks else "gave no answer within"
            raise LLMTimeout(f"{self.url} {what} {waited:g} s")
        return answer if answer.chunks else None  # ended without [DONE]: usable if it said something

    async def _plain(self, body: dict[str, Any]) -> dict[str, Any]:
        timeout = httpx2.Timeout(connect=30, read=self._first_token, write=60, pool=30)
        try:
            async with httpx2.AsyncClient(timeout=timeout, headers=self._headers) as http:
                response = await http.post(self.url, json=body)
        except httpx2.TimeoutException:
            raise LLMTimeout(f"{self.url} gave no answer within {self._first_token:g} s") from None
        except httpx2.HTTPError as exc:
            raise LLMUnavailable(f"{self.url} cannot be reached: {exc}") from None
        if response.status_code != 200:
            self._refused(response.status_code, response.text[:ERROR_BODY_LIMIT])
        try:
            data = response.json()
        except ValueError as exc:
            raise LLMBadResponse(f"{self.url} answered something that is not a chat completion ({exc})") from None
        if not isinstance(data, dict):
            raise LLMBadResponse(f"{self.url} answered something that is not a chat completion")
        return data

    def _refused(self, status: int, text: str) -> None:
        overflow, window = window_in_error(text) if status in (400, 413, 422, 500) else (False, None)
        if overflow:
            if window is not None:
                self.learn_window(window)
            raise LLMContextOverflow(f"{self.url} answered HTTP {status}: {text[:300]}", window)
        raise LLMBadResponse(f"{self.url} answered HTTP {status}: {text[:300]}")

    async def _counted(self, completion: Completion, messages: Sequence[Message], chunks: int) -> Completion:
        prompt = await self.count_model_tokens(["\n".join(m.content for m in messages)]) if self.has_tokenizer else None
        return Completion(completion.text, completion.tool_calls, prompt[0] if prompt else 0, chunks)


async def _bounded(response: httpx2.Response, limit: int = ERROR_BODY_LIMIT) -> str:
    raw = bytearray()
    async for piece in response.aiter_bytes():
        raw += piece
        if len(raw) > limit:
            break
    return bytes(raw[:limit]).decode("utf-8", "replace")


def _function(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}


def _message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out


def _completion(data: dict[str, Any], *, tools_offered: bool = False) -> Completion:
    choice = data["choices"][0]["message"]
    calls: list[ToolCall] = []
    for raw in choice.get("tool_calls") or []:
        arguments = raw["function"].get("arguments") or "{}"
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        if not isinstance(parsed, dict):
            raise TypeError("tool call arguments are not an object")
        calls.append(ToolCall(str(raw.get("id") or raw["function"]["name"]), raw["function"]["name"], parsed))
    text = choice.get("content") or ""
    if tools_offered and not calls and "<tool_call>" in text:
        text, calls = _calls_in_text(text)
    usage = data.get("usage") or {}
    return Completion(
        text=text,
        tool_calls=tuple(calls),
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
    )


def _calls_in_text(text: str) -> tuple[str, list[ToolCall]]:
    """Tool calls the model wrote as `<tool_call>{"name": …, "arguments": {…}}</tool_call>` text, and the text
    around them; a block that is not such a call stays in the text."""
    calls: list[ToolCall] = []
    kept: list[str] = []
    last = 0
    for match in _TEXT_CALL.finditer(text):
        try:
            call = json.loads(match.group(1))
        except ValueError:
            continue
        arguments = call.get("arguments") if isinstance(call, dict) else None
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = None
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not isinstance(arguments, dict):
            continue
        calls.append(ToolCall(f"call-{len(calls) + 1}", call["name"], arguments))
        kept.append(text[last : match.start()])
        last = match.end()
    kept.append(text[last:])
    return "".join(kept).strip(), calls
