"""The located-line check: an excerpts answer whose value sits on a line without the question's rarest
words, while another line of the page has them, is asked once more on the narrowed page; an answer whose line
still does not mention what was asked says so."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from extraction import Completion, Document, Extractor, Message, TextSource, ToolSpec, Usage, count_tokens
from extraction.excerpts import excerpt
from extraction.recheck import caution, recheck

pytestmark = pytest.mark.anyio

OOM = "08:08:05 Warning OOMKilling pod/worker-7f9c Memory cgroup out of memory: Killed process 4242"
ROUTINE = "08:07:{:02d} Normal Killing pod/worker-a{:02d} Stopping container worker"
EVENTS = "\n".join(
    [f"08:0{i // 60}:{i % 60:02d} Normal Pulled pod/web-{i:03d} image already present" for i in range(200)]
    + [ROUTINE.format(i, i) for i in range(8)]
    + [OOM]
    + [f"08:09:{i:02d} Normal Started pod/web-{i:03d} container started" for i in range(50)]
)
QUESTION = "Which pod was OOM killed?"


class Reader:
    """A small model that reads the first marked line of the page it is shown, or always the routine one."""

    model, supports_tools, small = "small", False, True
    context_window, max_output_tokens = 8192, 512

    def __init__(self, *, always_routine: bool = False, routine_first: bool = True) -> None:
        self.always_routine, self.routine_first = always_routine, routine_first
        self.pages: list[str] = []

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        page = messages[-1].content
        self.pages.append(page)
        routine = ROUTINE.format(3, 3)
        if self.always_routine or (self.routine_first and len(self.pages) == 1 and routine in page):
            return Completion(f'worker-a03\nEVIDENCE:\n> "{routine}"')
        return Completion(f'worker-7f9c\nEVIDENCE:\n> "{OOM}"')


async def ask(llm: Reader) -> str:
    document = Document("k8s__events", "{}", "h/1", len(EVENTS.encode()), EVENTS.count("\n"), count_tokens(EVENTS))
    with anyio.fail_after(30):
        result = await Extractor().extract(
            document,
            TextSource.of(EVENTS),
            "cd" * 32,
            QUESTION,
            "excerpts",
            llm=llm,
            usage=Usage(),
            tools={},
            threshold=5000,
        )
    return result.body


def test_the_rarest_term_is_the_one_fewest_lines_hold() -> None:
    page = excerpt(TextSource.of(EVENTS), QUESTION, 1500)
    assert page.rare == ("oom",) and OOM in page.text and ROUTINE.format(3, 3) in page.text


def test_a_value_on_a_line_without_the_rarest_term_is_asked_again_on_the_lines_that_have_it() -> None:
    page = excerpt(TextSource.of(EVENTS), QUESTION, 1500)
    wrong = recheck("worker-a03", page)
    assert wrong.line is not None and "worker-a03" in wrong.line
    assert wrong.narrowed is not None and OOM in wrong.narrowed and "worker-a03" not in wrong.narrowed
    assert recheck("worker-7f9c", page).narrowed is None  # its line says OOM: nothing to ask again
    assert recheck("no value here", page).narrowed is None  # no value on the page: nothing to check
    assert caution("worker-7f9c", page) == ""
    assert caution("worker-a03", page).startswith(
        'Check this answer: the line that holds its value does not mention "oom"'
    )


async def test_a_small_model_that_read_the_routine_line_is_asked_once_more_and_the_oom_line_answers() -> None:
    llm = Reader()
    body = await ask(llm)
    assert len(llm.pages) == 2 and OOM in llm.pages[1] and ROUTINE.format(3, 3) not in llm.pages[1]
    assert body.startswith("worker-7f9c") and "Check this answer" not in body


async def test_an_answer_whose_line_still_does_not_mention_what_was_asked_says_so() -> None:
    llm = Reader(always_routine=True)
    body = await ask(llm)
    assert len(llm.pages) == 2  # asked once more, never again
    assert body.startswith('Check this answer: the line that holds its value does not mention "oom"'), body
    assert "worker-a03" in body


async def test_an_answer_read_from_the_right_line_is_asked_once() -> None:
    llm = Reader(routine_first=False)
    body = await ask(llm)
    assert len(llm.pages) == 1 and body.startswith("worker-7f9c") and "Check this answer" not in body
