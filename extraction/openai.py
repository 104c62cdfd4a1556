"""An OpenAI-compatible `/chat/completions` backend (OpenAI, vLLM, llama.cpp server, Ollama, LM Studio).

It uses httpx2, the HTTP client the MCP SDK already depends on, so the backend adds no package.
Servers without a tool-call parser for their model (llama-cpp-python's, vLLM without `--tool-call-parser`)
return the model's calls as text; calls written the Hermes/Qwen way (`<tool_call>{"name", "arguments"}</tool_call>`)
are read back from the text when tools were offered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import httpx2

from extraction.errors import LLMBadResponse, LLMTimeout, LLMUnavailable
from extraction.llm import Completion, Message, ToolCall, ToolSpec

__all__ = ["OpenAICompatible"]

_TEXT_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*(?:</tool_call>|$)", re.DOTALL)


class OpenAICompatible:
    """Chat completions over HTTP; `base_url` ends before `/chat/completions` (e.g. `http://host:8000/v1`)."""

    supports_tools = True

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        context_window: int = 128_000,
        max_output_tokens: int = 4096,
        timeout_secs: float = 120,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.context_window = context_window
        self.max_output_tokens = max_output_tokens
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout_secs

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
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in tools
            ]
        try:
            async with httpx2.AsyncClient(timeout=self._timeout, headers=self._headers) as http:
                response = await http.post(self.url, json=body)
        except httpx2.TimeoutException:
            raise LLMTimeout(f"{self.url} gave no answer within {self._timeout:g} s") from None
        except httpx2.HTTPError as exc:
            raise LLMUnavailable(f"{self.url} cannot be reached: {exc}") from None
        if response.status_code != 200:
            raise LLMBadResponse(f"{self.url} answered HTTP {response.status_code}: {response.text[:300]}")
        try:
            return _completion(response.json(), tools_offered=bool(tools))
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMBadResponse(f"{self.url} answered something that is not a chat completion ({exc})") from None


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
