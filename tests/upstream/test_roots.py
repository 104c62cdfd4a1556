"""A downstream's `roots/list`: forwarded to the client in a call, after the hand-off and outside any request,
the spec's error when the client has no roots, a clear error when nobody answers; the client's
`notifications/roots/list_changed` reaches the downstreams. Real subprocess downstream
(tests/support/servers/roots_server.py), real claimcheck process where the transport matters, the real SDK client."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from server.upstream.surface import build_server
from tests.support.handles import handle_in
from tests.support.processes import PYTHON, program_entry, write_config
from tests.support.proxies import running_proxy, text_of
from tests.support.tasks import TaskClient

pytestmark = pytest.mark.anyio
warnings.simplefilter("ignore", MCPDeprecationWarning)  # roots are deprecated at 2026-07-28 only

REPO_ROOT = Path(__file__).resolve().parents[2]
ROOTS_SERVER = program_entry("roots_server")


class Roots:
    """A client's roots, as its `list_roots_callback` gives them; counts the times it was asked."""

    def __init__(self, *uris: str) -> None:
        self.uris = list(uris)
        self.asked = 0

    async def __call__(self, context: Any) -> types.ListRootsResult:
        self.asked += 1
        return types.ListRootsResult(roots=[types.Root(uri=uri, name=f"root{i}") for i, uri in enumerate(self.uris)])  # type: ignore[arg-type]  # a str is a FileUrl


def claimcheck(tmp_path: Path, timeout: float = 60) -> StdioServerParameters:
    config = write_config(
        tmp_path, {"mcpServers": {"fs": {**ROOTS_SERVER, "timeout": timeout}}, "settings": {"asyncTimeoutSecs": 0.5}}
    )
    return StdioServerParameters(
        command=PYTHON, args=["-m", "server", "serve", "--config", str(config), "--no-api"], cwd=REPO_ROOT
    )


@pytest.mark.subprocess
async def test_over_stdio_roots_are_asked_in_a_call_after_its_hand_off_and_after_a_change(tmp_path: Path) -> None:
    roots = Roots("file:///work/a")
    with anyio.fail_after(90):
        async with Client(claimcheck(tmp_path), mode="legacy", list_roots_callback=roots) as client:
            inline = await client.call_tool("fs__roots", {})
            started = await client.call_tool("fs__roots", {"after": 1.5, "background": True})
            handle = handle_in(text_of(started))
            done = await client.call_tool("wait_for_tool_output", {"handles": [handle]})
            roots.uris = ["file:///work/b"]
            await client.send_roots_list_changed()
            heard = ""
            while "file:///work/b" not in heard:  # the server asks outside any request once it hears
                heard = text_of(await client.call_tool("fs__heard", {}))
    assert text_of(inline) == "file:///work/a=root0"
    assert "1 finished:" in text_of(done) and "file:///work/a=root0" in text_of(done), text_of(done)
    assert "roots=file:///work/b=root0" in heard


@pytest.mark.subprocess
async def test_a_client_without_roots_gets_the_downstream_the_specs_error(tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with Client(claimcheck(tmp_path), mode="legacy") as client:
            inline = await client.call_tool("fs__roots", {})
            started = await client.call_tool("fs__roots", {"after": 1.5, "background": True})
            done = await client.call_tool("wait_for_tool_output", {"handles": [handle_in(text_of(started))]})
    expected = f"error {types.METHOD_NOT_FOUND}: Roots not supported: the client behind claimcheck"
    assert text_of(inline).startswith(expected), text_of(inline)
    assert expected in text_of(done), text_of(done)


@pytest.mark.subprocess
async def test_a_2026_client_has_no_roots_to_give(tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with Client(claimcheck(tmp_path), mode="auto", list_roots_callback=Roots("file:///x")) as client:
            inline = await client.call_tool("fs__roots", {})
    assert text_of(inline).startswith(f"error {types.METHOD_NOT_FOUND}: Roots not supported"), text_of(inline)


class AsksRoots:
    """An in-process downstream whose `where` tool asks for roots once the test opens the gate."""

    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.server = MCPServer("ask")

        @self.server.tool(structured_output=False)
        async def where(ctx: Context) -> str:
            await self.gate.wait()
            try:
                result = await ctx.session.list_roots()
            except MCPError as exc:
                return f"error {exc.error.code}: {exc.error.message}"
            return " ".join(str(root.uri) for root in result.roots)


async def test_unanswered_roots_fail_with_the_clear_error_at_the_calls_timeout() -> None:
    asking = AsksRoots()

    async def never(context: Any) -> types.ListRootsResult:
        await anyio.sleep_forever()
        raise AssertionError

    async with (
        running_proxy({"ask": asking.server}, fields={"ask": {"timeout": 3}}, settings={"asyncTimeoutSecs": 5}) as p,
        Client(build_server(p), mode="legacy", list_roots_callback=never) as client,
    ):
        with anyio.fail_after(20):
            started = await client.call_tool("ask__where", {"background": True})
            asking.gate.set()
            done = await client.call_tool("wait_for_tool_output", {"handles": [handle_in(text_of(started))]})
    assert "nobody answered the roots request" in text_of(done), text_of(done)
    assert 'until the timeout of the call (3 s, server "ask")' in text_of(done)


async def test_a_roots_question_is_not_shown_to_the_model_and_its_client_answers_it_through_wait() -> None:
    asking = AsksRoots()
    roots = Roots("file:///srv/data")
    async with (
        running_proxy({"ask": asking.server}, settings={"asyncTimeoutSecs": 5}) as proxy,
        Client(build_server(proxy), mode="legacy", list_roots_callback=roots) as client,
    ):
        with anyio.fail_after(20):
            started = await client.call_tool("ask__where", {"background": True})
            (session,) = proxy.sessions.live
            inbox = session.inbox
            inbox.channel = None  # as over HTTP without a standing stream: only wait_for_tool_output carries it
            asking.gate.set()
            while not inbox.pending:
                await inbox.changed().wait()
            done = await client.call_tool("wait_for_tool_output", {"handles": [handle_in(text_of(started))]})
    assert roots.asked == 1
    assert 'question "q-' not in text_of(done)
    assert "file:///srv/data" in text_of(done), text_of(done)


async def test_a_task_whose_downstream_asks_for_roots_is_input_required_and_tasks_result_carries_it() -> None:
    asking = AsksRoots()
    related: list[object] = []

    async def roots(context: Any) -> types.ListRootsResult:
        related.append((context.meta or {}).get("io.modelcontextprotocol/related-task"))
        return types.ListRootsResult(roots=[types.Root(uri="file:///srv/task", name="t")])  # type: ignore[arg-type]

    tasks = TaskClient()
    async with (
        running_proxy({"ask": asking.server}, settings={"asyncTimeoutSecs": 5}) as proxy,
        Client(build_server(proxy), mode="legacy", extensions=[tasks], list_roots_callback=roots) as client,
    ):
        tasks.client = client
        with anyio.fail_after(20):
            task = await tasks.create("ask__where", {})
            asking.gate.set()
            announced = await tasks.status_of(task.task_id)
            result = await tasks.result(task.task_id)
    assert announced.status == "input_required"
    assert "waiting for an answer to its roots request" in (announced.status_message or "")
    assert related == [{"taskId": task.task_id}]
    assert text_of(result) == "file:///srv/task"


async def test_a_server_that_asks_when_told_of_a_new_client_gets_its_roots_before_any_call() -> None:
    from tests.support.servers import roots_server

    asked = anyio.Event()

    async def roots(context: Any) -> types.ListRootsResult:
        asked.set()
        return types.ListRootsResult(roots=[types.Root(uri="file:///srv/first", name="f")])  # type: ignore[arg-type]

    async with running_proxy({"fs": roots_server.server}) as proxy:
        with anyio.fail_after(20):
            await proxy.pool.settled()  # the server is up when the client comes
            async with Client(build_server(proxy), mode="legacy", list_roots_callback=roots) as client:
                await asked.wait()  # claimcheck told the server of the client's roots; it asked; no call was made
                heard = text_of(await client.call_tool("fs__heard", {}))
                while "file:///srv/first" not in heard:  # the server stores the answer once it has it
                    heard = text_of(await client.call_tool("fs__heard", {}))
    assert heard.startswith("changes=") and "roots=file:///srv/first=f" in heard
