"""The OpenAI-compatible backend against a real llama.cpp server (llama-cpp-python's, with the GGUF weights
bench/setup_model.sh installs): what it says about itself, a streamed answer counted by its own tokenizer, and a
prompt past its window learned from its refusal. Skipped where bench/.venv-model is absent (CI does not build it:
the build takes both cores for minutes)."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import local_model
import pytest

from extraction import Message
from extraction.errors import LLMContextOverflow
from extraction.openai import OpenAICompatible

pytestmark = [
    pytest.mark.model,
    pytest.mark.subprocess,  # llama.cpp serves the model
    pytest.mark.skipif(
        not local_model.VENV_PYTHON.exists(), reason="no llama.cpp runtime: run bash bench/setup_model.sh"
    ),
]
WINDOW = 512


@pytest.fixture(scope="module")
def served() -> Iterator[local_model.Served]:
    with local_model.serve(context=WINDOW, threads=2) as model:
        yield model


def test_it_says_its_tokenizer_and_its_window_only_when_refusing_a_prompt_past_it(
    served: local_model.Served,
) -> None:
    async def run() -> None:
        llm = OpenAICompatible(served.base_url, served.model)
        with anyio.fail_after(120):
            await llm.prepare()
            assert llm.facts is not None and llm.facts.tokenizer == "extras" and llm.facts.context_window is None
            assert llm.small  # served on this machine
            counted = await llm.count_model_tokens(["2026-11-22T08:08:05 web-1 ERROR OOM killed worker 7"])
            assert counted is not None and 20 < counted[0] < 40  # digits one by one: more than cl100k's 17
            long = "2026-11-22T08:08:05 web-1 INFO GET /api/items/7 200 in 3 ms\n" * 40
            with pytest.raises(LLMContextOverflow) as refused:
                await llm.complete([Message("user", long)], max_tokens=16)
        assert refused.value.window == WINDOW and llm.context_window == WINDOW

    anyio.run(run)


def test_a_short_answer_streams_and_is_counted_by_the_models_tokenizer(served: local_model.Served) -> None:
    async def run() -> None:
        llm = OpenAICompatible(served.base_url, served.model)
        with anyio.fail_after(120):
            await llm.prepare()
            completion = await llm.complete([Message("user", "Say OK.")], max_tokens=8)
        assert completion.text.strip()
        assert 0 < completion.output_tokens <= 8 and completion.input_tokens > 0

    anyio.run(run)
