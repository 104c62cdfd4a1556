"""Turns at an endpoint every client shares: one owner's questions never hold the model while another's wait.

An endpoint claimcheck is configured with (a llama.cpp server, a hosted API) serves a few requests at once
(`concurrency`: its slots). Each request of a question waits for its owner's turn at those slots
(`fs_sandbox.FairQueue`, served round-robin by owner, the least served first), so a principal that asks many
questions at once delays another's next request by about one request per owner ahead of it, never by all of its
own. The client's own model (MCP sampling) is the client's: its requests take no turns.
"""

from __future__ import annotations

from collections.abc import Sequence

from extraction.llm import LLM, Completion, Message, ToolSpec, Wrapped
from extraction.strategies import Policy, in_flight
from fs_sandbox import FairQueue

__all__ = ["Turns", "queue_for"]

_UNBOUNDED = 1 << 30  # questions in flight per owner: bounded by the calls that ask them, not here


def queue_for(llm: LLM, policy: Policy) -> FairQueue:
    """A queue of turns for `llm`'s slots: as many requests as one question sends at once (`in_flight`)."""
    return FairQueue(in_flight(llm, policy), _UNBOUNDED, setting="concurrency")


class Turns(Wrapped):
    """`llm`, each of whose requests waits for `owner`'s turn in `queue`."""

    def __init__(self, llm: LLM, queue: FairQueue, owner: str, policy: Policy) -> None:
        super().__init__(llm)
        self.queue = queue
        self.owner = owner
        self.policy = policy

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        self.queue.resize(in_flight(self.inner, self.policy))  # what the endpoint said once asked (`prepare`)
        async with self.queue.turn(self.owner):
            return await self.inner.complete(messages, max_tokens=max_tokens, tools=tools)
