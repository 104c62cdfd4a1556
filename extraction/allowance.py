"""How much of the client's own model one question may spend: sampling requests, and the tokens sent with them.

An endpoint claimcheck is configured with is the operator's; the client's model (MCP sampling) is the user's, paid
and waited for by them. So a question answered through sampling has an allowance (`settings.extraction`
`samplingRequests` and `samplingTokens`): the strategy is chosen within it (`Extractor`: excerpts, one small page,
before reading a large output whole), a request past it is not sent (`AllowanceSpent`), and the answer says what
was sent (`Metered.sent`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from extraction.errors import LLMError
from extraction.llm import LLM, Completion, Message, ToolSpec, Wrapped
from extraction.tokens import estimate_tokens

__all__ = ["Allowance", "AllowanceSpent", "Metered"]

SETTINGS = "settings.extraction samplingRequests, samplingTokens"


@dataclass(frozen=True, slots=True)
class Allowance:
    """The most one question may send to the client's model."""

    requests: int
    tokens: int

    def describe(self) -> str:
        return f"{self.requests} requests and {self.tokens:,} tokens ({SETTINGS})"


class AllowanceSpent(LLMError):
    """A request to the client's model would pass the question's allowance: it was not sent."""


class Metered(Wrapped):
    """`llm` (the client's model) counting what each question sends, refusing a request past `allowance`."""

    def __init__(self, llm: LLM, allowance: Allowance) -> None:
        super().__init__(llm)
        self.allowance = allowance
        self.requests = 0
        self.tokens = 0

    def __getattr__(self, name: str) -> Any:
        """As `Wrapped`, but `complete_batch` metered, and only if `inner` takes batches."""
        if name == "complete_batch":
            if getattr(self.inner, "complete_batch", None) is None:
                raise AttributeError(name)
            return self._complete_batch
        return super().__getattr__(name)

    def fits(self, requests: int, tokens: int) -> bool:
        """Whether `requests` more requests of `tokens` in all stay within the allowance."""
        return self.requests + requests <= self.allowance.requests and self.tokens + tokens <= self.allowance.tokens

    def sent(self) -> str:
        """What this question sent so far, in words."""
        requests = "1 sampling request" if self.requests == 1 else f"{self.requests} sampling requests"
        return f"{requests}, about {self.tokens:,} tokens"

    def _spend(self, conversations: Sequence[Sequence[Message]]) -> None:
        tokens = sum(estimate_tokens(message.content)[0] for messages in conversations for message in messages)
        if not self.fits(len(conversations), tokens):
            raise AllowanceSpent(
                f"the client's model was sent {self.sent()}; {len(conversations)} more of about {tokens:,} tokens "
                f"would pass this question's allowance of {self.allowance.describe()}"
            )
        self.requests += len(conversations)
        self.tokens += tokens

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        self._spend([messages])
        return await self.inner.complete(messages, max_tokens=max_tokens, tools=tools)

    async def _complete_batch(
        self, conversations: Sequence[Sequence[Message]], *, max_tokens: int
    ) -> list[Completion | LLMError]:
        try:
            self._spend(conversations)
        except AllowanceSpent as spent:
            return [spent] * len(conversations)
        answers: list[Completion | LLMError] = await self.inner.complete_batch(  # type: ignore[attr-defined]
            conversations, max_tokens=max_tokens
        )
        return answers
