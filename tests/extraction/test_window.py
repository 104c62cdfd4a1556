"""No prompt overflows the model: budgets in the model's own tokens, and a context-length error planned again
smaller (with the window it names, or without one) instead of falling back to truncate."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from extraction import Completion, Document, Extractor, Message, Policy, TextSource, ToolSpec, Usage, count_tokens
from extraction.budget import MARGIN, UNKNOWN_RATIO, token_ratio
from extraction.errors import LLMContextOverflow

pytestmark = pytest.mark.anyio

LOG = "".join(f"2026-11-22T08:{i // 60 % 60:02d}:{i % 60:02d} web-{i % 4} INFO GET /api/{i} 200\n" for i in range(1500))


class Strict:
    """A model that counts `per_token` of its tokens for each cl100k token and refuses a prompt past `window`, as
    llama.cpp does (`names`: whether its error names the window). `said` is the window it is thought to have."""

    model, supports_tools, small = "strict", False, False

    def __init__(self, window: int, said: int, per_token: float, *, names: bool, tokenizer: bool = False) -> None:
        self.window, self.said, self.per_token, self.names, self.tokenizer = window, said, per_token, names, tokenizer
        self.prompts: list[int] = []
        self.refused = 0

    @property
    def context_window(self) -> int:
        return self.said

    @property
    def max_output_tokens(self) -> int:
        return 256

    def learn_window(self, window: int) -> None:
        self.said = window

    async def count_model_tokens(self, texts: list[str]) -> list[int] | None:
        return [int(count_tokens(t) * self.per_token) for t in texts] if self.tokenizer else None

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        used = int(sum(count_tokens(m.content) for m in messages) * self.per_token) + max_tokens
        if used > self.window:
            self.refused += 1
            if self.names:
                self.learn_window(self.window)  # as OpenAICompatible learns from the error's text
            raise LLMContextOverflow(
                f"request ({used} tokens) exceeds the context", self.window if self.names else None
            )
        self.prompts.append(used)
        return Completion("NO RELEVANT DATA FOUND\nonly INFO lines")


async def extract(llm: Strict) -> str:
    document = Document("down__logs", "{}", "h/1", len(LOG.encode()), 1500, count_tokens(LOG))
    with anyio.fail_after(60):
        result = await Extractor(Policy(retries=0)).extract(
            document, TextSource.of(LOG), "ab" * 32, "the errors", "full-chunked", llm=llm, usage=Usage(), tools={},
            threshold=5000,
        )  # fmt: skip
    return result.strategy


async def test_a_window_named_by_the_error_is_learned_and_every_later_prompt_fits_it() -> None:
    llm = Strict(4096, said=128_000, per_token=1.0, names=True)
    assert await extract(llm) == "full-chunked"
    assert llm.refused == 1 and llm.said == 4096
    assert llm.prompts and max(llm.prompts) <= 4096


async def test_without_a_named_window_the_chunks_shrink_until_they_fit() -> None:
    # the model counts 1.9 of its tokens per cl100k token: more than the measured margin plans for
    llm = Strict(4096, said=4096, per_token=1.9, names=False)
    assert await extract(llm) == "full-chunked"
    assert llm.refused >= 1 and max(llm.prompts) <= 4096


async def test_with_the_models_tokenizer_the_first_plan_already_fits() -> None:
    llm = Strict(4096, said=4096, per_token=1.9, names=False, tokenizer=True)
    assert await extract(llm) == "full-chunked"
    assert llm.refused == 0 and max(llm.prompts) <= 4096


async def test_a_model_that_never_fits_falls_back_to_truncate_after_the_last_plan() -> None:
    llm = Strict(300, said=4096, per_token=1.0, names=False)
    assert await extract(llm) == "truncate"


async def test_the_ratio_is_the_highest_sample_with_the_margin_or_the_measured_one_without_a_tokenizer() -> None:
    with_tokenizer = Strict(4096, 4096, per_token=1.5, names=False, tokenizer=True)
    ratio = await token_ratio(with_tokenizer, [LOG[:8000], LOG[8000:16000]])
    assert abs(ratio - 1.5 * MARGIN) < 0.02
    assert await token_ratio(Strict(4096, 4096, 1.5, names=False), [LOG[:8000]]) == UNKNOWN_RATIO
