"""The excerpts strategy: the lines that share the request's rarest words, with their neighbours and headings, the
output's start and end, within the budget; routed to for a small model, and read in full when they do not answer."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from extraction import NOT_FOUND, Completion, Document, Extractor, Message, TextSource, ToolSpec, Usage, count_tokens
from extraction.excerpts import MARK, SEGMENT_CHARS, excerpt, terms_of

pytestmark = pytest.mark.anyio

LOG = "".join(
    f"2026-11-22T08:{i // 60 % 60:02d}:{i % 60:02d} web-{i % 4} INFO GET /api/items/{i} 200 in {i % 97} ms\n"
    for i in range(3000)
)
OOM = "2026-11-22T08:08:05 web-1 ERROR OOM killed worker 7"
LOG_WITH_OOM = LOG.replace(LOG.splitlines()[2500], OOM)


def test_the_requests_words_are_kept_without_common_ones_and_cut_to_a_stem() -> None:
    assert terms_of("At what time was a worker killed for running out of memory?") == [
        "time",
        "worker",
        "kill",
        "runn",
        "out",
        "memory",
    ]
    assert terms_of("Which file changes MAX_RETRY_BACKOFF_MS? Which IP?") == [
        "file",
        "chang",
        "max_retry_backoff_ms",
        "ip",
    ]


def test_the_line_with_the_rarest_words_is_marked_with_its_neighbours_the_start_and_the_end() -> None:
    page = excerpt(TextSource.of(LOG_WITH_OOM), "When was a worker killed?", 600)
    lines = page.text.splitlines()
    assert f"{MARK}{OOM}" in lines
    at = lines.index(f"{MARK}{OOM}")
    assert lines[at - 1].endswith(f"/api/items/2499 200 in {2499 % 97} ms")
    assert lines[at + 1].endswith(f"/api/items/2501 200 in {2501 % 97} ms")
    assert lines[0] == "  " + LOG.splitlines()[0]  # the start
    assert lines[-1] == "  " + LOG.splitlines()[-1]  # the end
    assert sum(line.startswith(MARK) for line in lines) == page.chosen == 1
    assert "[… " in page.text and count_tokens(page.text) < 700


def test_a_common_word_does_not_crowd_out_the_rare_one_and_the_page_keeps_its_budget() -> None:
    # every line says INFO and GET; one says killed: the page holds it, and never more than the budget
    page = excerpt(TextSource.of(LOG_WITH_OOM), "which GET request was INFO, and which worker was killed", 800)
    assert f"{MARK}{OOM}" in page.text.splitlines()
    assert count_tokens(page.text) <= 800 + 50  # the "lines not shown" notes are outside the count


def test_an_indented_line_is_shown_with_the_headings_it_belongs_to() -> None:
    sections = []
    for i in range(60):
        body = [f"+VALUE_{i}_{j} = {j}" for j in range(12)]
        if i == 47:
            body[9] = "+MAX_RETRY_BACKOFF_MS = 7250"
        sections.append("\n".join([f"diff --git a/src/m{i}.py b/src/m{i}.py", f"index {i:07x}..{i + 1:07x}", *body]))
    page = excerpt(TextSource.of("\n".join(sections) + "\n"), "new value of MAX_RETRY_BACKOFF_MS", 400)
    lines = page.text.splitlines()
    assert f"{MARK}+MAX_RETRY_BACKOFF_MS = 7250" in lines
    assert "  diff --git a/src/m47.py b/src/m47.py" in lines  # 11 lines above: further than the neighbours


def test_a_minified_line_is_read_in_segments_so_the_match_is_not_the_whole_line() -> None:
    bundle = ";".join(f"var a{i}=function(){{return {i}}}" for i in range(3000))
    bundle = bundle.replace("var a2500=", 'var cfg={apiBase:"https://api.example/v7",release:"3.1-b"};var a2500=')
    page = excerpt(TextSource.of(bundle), "Which apiBase does it use?", 500)
    marked = [line for line in page.text.splitlines() if line.startswith(MARK)]
    assert len(marked) == 1 and 'apiBase:"https://api.example/v7"' in marked[0]
    assert all(len(line) <= SEGMENT_CHARS + len(MARK) for line in page.text.splitlines())


def test_memory_does_not_grow_with_matching_lines_each_group_keeps_a_bounded_number() -> None:
    text = "".join(f"worker {i} ok\n" for i in range(200_000))
    page = excerpt(TextSource.of(text), "which worker", 300)
    assert 0 < page.chosen <= 24 and page.segments == 200_000


def test_a_request_sharing_no_word_with_the_output_chooses_nothing() -> None:
    page = excerpt(TextSource.of(LOG), "zebra migrations", 500)
    assert page.chosen == 0 and page.terms == ("zebra", "migration")


class Small:
    """A small local model: answers from the page it is shown, records what it was asked."""

    model, supports_tools, small = "small", True, True
    context_window, max_output_tokens = 8192, 512

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[str] = []

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        self.asked.append(messages[-1].content)
        if messages[-1].content.startswith("EXCERPTS OF THE OUTPUT"):
            return Completion(self.answer)
        return Completion(f"{NOT_FOUND}\nonly INFO lines" if OOM not in messages[-1].content else "08:08:05")


async def extract(llm: Small, text: str, request: str) -> tuple[str, str]:
    document = Document("down__logs", "{}", "h/1", len(text.encode()), text.count("\n"), count_tokens(text))
    with anyio.fail_after(30):
        result = await Extractor().extract(
            document, TextSource.of(text), "ab" * 32, request, "auto", llm=llm, usage=Usage(), tools={}, threshold=5000
        )
    return result.strategy, result.body


async def test_auto_reads_a_small_models_excerpts_once_and_its_copied_line_verifies() -> None:
    llm = Small(f"The worker was killed at 08:08:05.\nEVIDENCE:\n- {OOM}")
    strategy, body = await extract(llm, LOG_WITH_OOM, "When was a worker killed?")
    at = LOG_WITH_OOM.index(OOM)
    assert strategy == "excerpts" and len(llm.asked) == 1
    assert body.startswith("The worker was killed at 08:08:05.\n\nEVIDENCE:\n")
    assert f'> "{OOM}" (chars {at}-{at + len(OOM)})' in body
    assert "chunks=1-of-3000-lines" in body


async def test_excerpts_that_do_not_answer_are_followed_by_every_chunk() -> None:
    llm = Small(f"{NOT_FOUND}\nno such line")
    strategy, body = await extract(llm, LOG_WITH_OOM, "When was a worker killed?")
    assert strategy == "full-chunked"
    assert llm.asked[0].startswith("EXCERPTS OF THE OUTPUT") and len(llm.asked) > 2
    assert "08:08:05" in body


async def test_excerpts_that_choose_no_line_ask_nothing_and_every_chunk_is_read() -> None:
    llm = Small("never asked")
    strategy, _ = await extract(llm, LOG_WITH_OOM, "zebra migrations")
    assert strategy == "full-chunked"
    assert not any(asked.startswith("EXCERPTS OF THE OUTPUT") for asked in llm.asked)
