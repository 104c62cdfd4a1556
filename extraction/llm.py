"""The one seam between extraction and a language model: a chat completion, optionally with tools."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = ["LLM", "Completion", "Message", "ToolCall", "ToolSpec", "Usage", "Wrapped"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call: a name, what it does, and a JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Message:
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class Usage:
    """What extraction cost, counted per session."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    by_model: dict[str, int] = field(default_factory=dict)

    def add(self, model: str, completion: Completion) -> None:
        self.calls += 1
        self.input_tokens += completion.input_tokens
        self.output_tokens += completion.output_tokens
        self.by_model[model] = self.by_model.get(model, 0) + 1


class LLM(Protocol):
    """A chat model; extraction strategies need nothing else."""

    model: str
    supports_tools: bool

    @property
    def context_window(self) -> int: ...

    @property
    def max_output_tokens(self) -> int: ...

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion: ...


class Wrapped:
    """A backend that is another (`inner`) with something added (an allowance, turns): its name, window and
    answer room are the inner one's, and so is whatever else the strategies ask of a backend (`prepare`, `small`,
    `concurrency`, …). A subclass adds `complete`."""

    def __init__(self, llm: LLM) -> None:
        self.inner = llm

    @property
    def model(self) -> str:
        return self.inner.model

    @model.setter
    def model(self, value: str) -> None:
        self.inner.model = value

    @property
    def supports_tools(self) -> bool:
        return self.inner.supports_tools

    @supports_tools.setter
    def supports_tools(self, value: bool) -> None:
        self.inner.supports_tools = value

    @property
    def context_window(self) -> int:
        return self.inner.context_window

    @property
    def max_output_tokens(self) -> int:
        return self.inner.max_output_tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
