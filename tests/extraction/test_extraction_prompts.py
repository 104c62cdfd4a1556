"""Extraction prompts quote the source tool's arguments capped, so a huge argument never crowds out the output."""

from __future__ import annotations

import json

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from extraction import Document, LLMError
from extraction.prompts import ARGUMENTS_MAX_CHARS, NOT_FOUND, cap_arguments, map_prompt, read_grep_prompt
from extraction.strategies import chunk_budget
from tests.support.extraction import extraction_settings, fake_openai
from tests.support.handles import client_of, handle_in
from tests.support.proxies import running_proxy, text_of

pytestmark = pytest.mark.anyio

BIG = "b" * 500_000
SMALL_OUTPUT = "".join(f"line {i} INFO ok\n" for i in range(40)) + "ERROR the upload was rejected\n"


def document(arguments: object) -> Document:
    return Document("web__post", json.dumps(arguments), "session-a/b", 600, 41, 150)


def test_each_long_string_is_cut_to_500_characters_and_marked() -> None:
    capped = json.loads(cap_arguments(json.dumps({"url": "https://x", "body": BIG, "k" * 600: 1})))
    assert capped["url"] == "https://x"
    assert capped["body"] == "b" * 500 + "…[cut: 500000 characters in all]"
    assert ("k" * 500 + "…[cut: 600 characters in all]") in capped


def test_the_whole_is_cut_to_2000_characters_and_marked() -> None:
    arguments = json.dumps({f"field{i}": "v" * 400 for i in range(20)})
    capped = cap_arguments(arguments)
    assert capped.startswith('{"field0": "' + "v" * 400)
    assert capped.endswith(f"…[arguments cut: {len(arguments)} characters in all]")
    assert len(capped) < ARGUMENTS_MAX_CHARS + 60


def test_small_arguments_are_quoted_whole() -> None:
    assert cap_arguments('{"a": 1, "b": "two"}') == '{"a": 1, "b": "two"}'


def test_every_prompt_names_the_tool_and_stays_small_with_a_500_kb_argument() -> None:
    doc = document({"body": BIG, "url": "https://example.com/upload"})
    system = read_grep_prompt(doc, "x", "n0")[0]
    assert "- Name: web__post" in system
    assert "https://example.com/upload" in system and "…[cut: 500000 characters in all]" in system
    assert len(system) < 5000


def test_the_chunk_prompt_is_short_names_the_tool_and_ends_with_the_question() -> None:
    # the short map prompt (version 4) quotes no arguments: a small model echoed the long one's lines
    system, user = map_prompt(document({"body": BIG}), "the error", "chunk text", 2, 5, 10, "n0nce")
    assert "the tool web__post" in system and "part 2 of 5" in system
    assert '<claimcheck-n0nce-FINAL format="text">' in system
    assert len(system) < 800
    assert user.startswith("DOCUMENT CHUNK 2 of 5:\nchunk text\nEND OF CHUNK 2.")
    assert "QUESTION: the error\n" in user
    assert NOT_FOUND in system  # a part may well not hold the answer


def test_an_output_read_in_one_chunk_is_asked_about_whole_and_offered_no_not_found() -> None:
    system, user = map_prompt(document({"body": BIG}), "the error", "chunk text", 1, 1, 10, "n0nce")
    assert "the whole output of the tool web__post" in system and "part 1 of 1" not in system
    assert NOT_FOUND not in system and '<claimcheck-n0nce-FINAL format="text">' in system
    assert user.startswith("DOCUMENT CHUNK 1 of 1:\nchunk text\nEND OF CHUNK 1.")
    assert user.endswith("QUESTION: the error\nAnswer inside the wrapper, then EVIDENCE: with copied lines.")


class Model:
    model = "fake"
    supports_tools = True
    context_window = 3000
    max_output_tokens = 300


def test_a_prompt_that_leaves_no_room_says_where_the_window_went() -> None:
    with pytest.raises(LLMError) as raised:
        chunk_budget(Model(), document({}), "find " * 3000, "n0nce")  # type: ignore[arg-type]
    reason = str(raised.value)
    assert "leaves no room for a chunk" in reason and "300 are kept for the answer" in reason
    assert "the extract request" in reason


async def test_a_call_with_a_500_kb_argument_is_extracted_by_the_llm_not_truncated() -> None:
    down = MCPServer("web")

    @down.tool(structured_output=False)
    def post(url: str, body: str) -> str:
        return SMALL_OUTPUT

    async with fake_openai() as (url, fake), running_proxy({"web": down}, settings=extraction_settings(url)) as proxy:
        async with client_of(proxy) as client:
            with anyio.fail_after(30):
                started = await client.call_tool("web__post", {"url": "https://x", "body": BIG, "background": True})
                handle = handle_in(text_of(started))
                await client.call_tool("wait_for_tool_output", {"handles": [handle]})
                result = await client.call_tool("tool_output", {"handle": handle, "extract": "every ERROR line"})
    answer = text_of(result)
    assert not result.is_error, answer
    assert "STRATEGY:full-chunked" in answer and "fallback to truncate" not in answer
    assert "ERROR the upload was rejected" in answer
    assert fake.requests, "the LLM was never asked"
    system = fake.requests[0]["messages"][0]["content"]
    assert "web__post" in system and len(system) < 5000
