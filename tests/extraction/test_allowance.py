"""The client's model's allowance for one question (before it, one question about a 5 MB output sent 27 sampling
requests, ~1.7 M tokens, without a word): the strategy is chosen within it, nothing past it is sent, and the
answer says what was sent."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from extraction import NOT_FOUND, Completion, Document, Extractor, Message, TextSource, ToolSpec, Usage, count_tokens
from extraction.allowance import Allowance, AllowanceSpent, Metered
from extraction.extractor import Mode

pytestmark = pytest.mark.anyio

OOM = "2026-11-02T08:08:05Z Warning OOMKilling node-7 Memory cgroup out of memory: Killed process 4242 (worker)"
LOG = "\n".join(
    OOM if i == 2400 else f"2026-11-02T08:{i // 60 % 60:02d}:{i % 60:02d}Z INFO request {i} served in {i % 97} ms"
    for i in range(3000)
)
ALLOWANCE = Allowance(requests=4, tokens=100_000)


class ClientsModel:
    """The client's model through sampling: no tools, a window the settings give; records what it was sent."""

    model, supports_tools = "sampling:client", False
    context_window, max_output_tokens = 8192, 512

    def __init__(self, excerpt_answer: str) -> None:
        self.excerpt_answer = excerpt_answer
        self.asked: list[str] = []

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        self.asked.append(messages[-1].content)
        if messages[-1].content.startswith("EXCERPTS OF THE OUTPUT"):
            return Completion(self.excerpt_answer)
        return Completion(f"{NOT_FOUND}\nonly INFO lines" if "OOMKilling" not in messages[-1].content else "08:08:05")


async def extract(llm: ClientsModel, text: str, mode: Mode, allowance: Allowance | None) -> tuple[str, str]:
    document = Document("k8s__events", "{}", "h/1", len(text.encode()), text.count("\n"), count_tokens(text))
    with anyio.fail_after(30):
        result = await Extractor().extract(
            document,
            TextSource.of(text),
            "ab" * 32,
            "When was a worker OOM killed?",
            mode,
            llm=llm,
            usage=Usage(),
            tools={},
            threshold=5000,
            allowance=allowance,
        )
    return result.strategy, result.body


async def test_a_large_output_is_asked_about_through_excerpts_within_the_allowance_and_the_answer_says_so() -> None:
    llm = ClientsModel(f"The worker was OOM killed at 08:08:05.\nEVIDENCE:\n- {OOM}")
    strategy, body = await extract(llm, LOG, "auto", ALLOWANCE)
    assert strategy == "excerpts" and len(llm.asked) == 1
    assert "sent to the client's model: 1 sampling request, about " in body
    assert "its allowance for one question: 4 requests and 100,000 tokens (settings.extraction samplingRequests" in body


async def test_without_an_allowance_the_same_question_reads_every_chunk() -> None:
    llm = ClientsModel(f"The worker was OOM killed at 08:08:05.\nEVIDENCE:\n- {OOM}")
    strategy, body = await extract(llm, LOG, "auto", None)
    assert strategy == "full-chunked" and len(llm.asked) > ALLOWANCE.requests  # what the allowance prevents
    assert "sent to the client's model" not in body


async def test_excerpts_that_do_not_answer_are_not_followed_past_the_allowance_and_the_answer_says_why() -> None:
    llm = ClientsModel(f"{NOT_FOUND}\nno such line")
    strategy, body = await extract(llm, LOG, "auto", ALLOWANCE)
    assert strategy == "excerpts" and len(llm.asked) == 1
    assert body.startswith("Not in the lines that share the question's words, and the output was not read whole: ")
    assert "past this question's allowance of the client's model" in body and "Grep the output" in body


async def test_full_chunked_asked_for_past_the_allowance_sends_nothing_and_says_why() -> None:
    llm = ClientsModel("never asked")
    strategy, body = await extract(llm, LOG, "full-chunked", ALLOWANCE)
    assert strategy == "truncate" and llm.asked == []
    assert "the output was not read whole: that takes " in body and "ask with mode excerpts" in body
    assert "sent to the client's model: 0 sampling requests, about 0 tokens" in body


async def test_an_output_within_the_allowance_is_read_whole_and_the_answer_says_what_was_sent() -> None:
    small = "\n".join(LOG.splitlines()[2390:2410])
    llm = ClientsModel("never asked")
    strategy, body = await extract(llm, small, "auto", ALLOWANCE)
    assert strategy == "full-chunked" and len(llm.asked) == 1
    assert "08:08:05" in body and "sent to the client's model: 1 sampling request" in body


async def test_a_request_past_the_allowance_is_refused_before_it_is_sent() -> None:
    llm = ClientsModel("yes")
    metered = Metered(llm, Allowance(requests=2, tokens=1000))
    asked = [Message("user", "EXCERPTS OF THE OUTPUT one")]
    await metered.complete(asked, max_tokens=10)
    await metered.complete(asked, max_tokens=10)
    with pytest.raises(AllowanceSpent, match="2 sampling requests"):
        await metered.complete(asked, max_tokens=10)
    big = Metered(llm, Allowance(requests=9, tokens=1000))
    with pytest.raises(AllowanceSpent, match="would pass this question's allowance"):
        await big.complete([Message("user", "word " * 2000)], max_tokens=10)
    assert len(llm.asked) == 2 and big.requests == 0
    assert not hasattr(metered, "complete_batch")  # only a backend that takes batches is offered as one


async def test_a_batch_past_the_allowance_is_answered_with_the_refusal_and_not_sent() -> None:
    sent: list[int] = []

    class Batches(ClientsModel):
        async def complete_batch(
            self, conversations: Sequence[Sequence[Message]], *, max_tokens: int
        ) -> list[Completion | AllowanceSpent]:
            sent.append(len(conversations))
            return [Completion("yes") for _ in conversations]

    metered = Metered(Batches("yes"), Allowance(requests=3, tokens=1000))
    batch = metered.complete_batch
    first = await batch([[Message("user", "one")], [Message("user", "two")]], max_tokens=10)
    refused = await batch([[Message("user", "three")], [Message("user", "four")]], max_tokens=10)
    assert [type(answer) for answer in first] == [Completion, Completion]
    assert [type(answer) for answer in refused] == [AllowanceSpent, AllowanceSpent]
    assert sent == [2] and metered.requests == 2
