"""Where an unquoted answer's values stand in the output: the first line holding each, labelled as claimcheck's
finding, and a value found nowhere said to be so; the eval counts these apart from quotes and never as claims."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest
from extraction_scoring import Quotes, count_quotes, judge

from extraction import Completion, Document, Extractor, Message, TextSource, ToolSpec, Usage, count_tokens
from extraction.locate import Location, locate, values_of

LOG = "".join(f"2026-11-22T08:00:{i:02d} web-{i % 4} INFO GET /api/items/{i} 200\n" for i in range(60))
TLS = "2026-11-22T08:04:35 web-3 ERROR TLS handshake failed with 10.1.2.3"
DOC = LOG + TLS + "\n" + LOG


def test_values_are_the_answers_words_with_a_digit_or_a_path_sign_in_order_without_repeats() -> None:
    answer = "The IP is 10.1.2.3. It failed at 08:04:35 on web-3; 10.1.2.3 again, see src/a.py and the log."
    assert values_of(answer) == ["10.1.2.3", "08:04:35", "web-3", "src/a.py"]


def test_each_value_gets_the_first_line_holding_it_or_is_said_to_be_nowhere() -> None:
    at = DOC.index(TLS)
    assert locate("It was 10.1.2.3, not 192.168.1.100.", TextSource.of(DOC)) == [
        Location("10.1.2.3", TLS, at, at + len(TLS)),
        Location("192.168.1.100"),
    ]
    assert Location("192.168.1.100").describe().endswith("(not in the stored output: the model may have made it up)")


def test_a_value_in_a_very_long_line_is_shown_with_a_bounded_stretch_of_it() -> None:
    bundle = "var x=1;" * 20_000 + 'api:"https://api.example/v7";' + "var y=2;" * 20_000
    (found,) = locate("https://api.example/v7", TextSource.of(bundle))
    assert found.line is not None and "https://api.example/v7" in found.line and len(found.line) <= 330
    assert found.start is not None and bundle[found.start : found.end] == found.line


class Terse:
    model, supports_tools, small, context_window, max_output_tokens = "terse", False, True, 8192, 512

    def __init__(self, answer: str) -> None:
        self.answer = answer

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int, tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        return Completion(self.answer)


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["10.1.2.3", '10.1.2.3\nEVIDENCE:\n> "failed with 10.1.2.3"'])
async def test_an_answer_without_quotes_is_located_and_one_with_quotes_is_not(answer: str) -> None:
    document = Document("down__logs", "{}", "h/1", len(DOC.encode()), DOC.count("\n"), count_tokens(DOC))
    with anyio.fail_after(30):
        result = await Extractor().extract(
            document, TextSource.of(DOC), "cd" * 32, "which IP failed the handshake?", "excerpts",
            llm=Terse(answer), usage=Usage(), tools={}, threshold=5000,
        )  # fmt: skip
    at = DOC.index(TLS)
    located = f'> "{TLS}" (chars {at}-{at + len(TLS)}; located by claimcheck: holds "10.1.2.3")'
    assert (located in result.body) is ("EVIDENCE" not in answer)
    body = result.body.rsplit("\n\nsource:", 1)[0]
    assert count_quotes(body) == (Quotes(0, 0, 1, 0) if "EVIDENCE" not in answer else Quotes(1, 0))


def test_located_lines_are_no_claims_of_the_answer() -> None:
    # the located line holds other times; judged as claims they would count as wrong picks
    answer = f'10.1.2.3\n\nEVIDENCE:\n> "{TLS}" (chars 1-2; located by claimcheck: holds "10.1.2.3")'
    judged = judge(
        answer, ["10.1.2.3"], question="which IP?", output=DOC, shape=[r"\d{2}:\d{2}:\d{2}", r"\d+(?:\.\d+){3}"]
    )
    assert (judged.found, judged.wrong, judged.invented) == (["10.1.2.3"], [], [])
