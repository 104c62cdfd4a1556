"""`claimcheck serve` reads its config file again while it runs: real claimcheck, real stdio servers
(tests/support/servers/whoami_server.py, which say their process id), driven over stdio by the SDK's client."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from server.platform import pid_alive
from tests.support.processes import PYTHON, program_entry, write_config
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

REPO_ROOT = Path(__file__).resolve().parents[2]
HANDLE = re.compile(r"session-[0-9a-f]{32}/[0-9a-f]{32}")
WAIT_S = 120  # a loaded machine starts Python MCP servers slowly; every wait ends as soon as its condition holds


def whoami(label: str) -> dict[str, Any]:
    return program_entry("whoami_server", label)


def rewrite(config: Path, servers: Mapping[str, Any]) -> None:
    """The config file written again in place, as an editor saving it would."""
    write_config(config.parent, {"mcpServers": dict(servers)})


class ListChanges:
    """The `tools/list_changed` notifications a client heard."""

    def __init__(self) -> None:
        self.count = 0
        self._next = anyio.Event()

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1
            self._next.set()
            self._next = anyio.Event()

    async def tools_once(self, client: Client, holds: Callable[[set[str]], bool]) -> set[str]:
        """The tool names once `holds` is true of them, listed again after each notification."""
        while True:
            heard = self._next
            names = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
            if holds(names):
                return names
            await heard.wait()

    async def answer_once(self, client: Client, tool: str, holds: Callable[[str], bool]) -> str:
        """`tool`'s answer once `holds` is true of it, called again after each notification."""
        while True:
            heard = self._next
            result = await client.call_tool(tool, {})
            if not result.is_error and holds(first_text(result)):
                return first_text(result)
            await heard.wait()


@asynccontextmanager
async def serving(
    config: Path, given: str | None = None, env: Mapping[str, str] | None = None
) -> AsyncIterator[tuple[Client, ListChanges, Path]]:
    """claimcheck serving `config` (its `--config` written as `given`, in the environment `env`) over stdio; its
    stderr goes to the file yielded last."""
    params = StdioServerParameters(
        command=PYTHON,
        args=["-m", "server", "serve", "--config", given or str(config)],
        env={**os.environ, **(env or {})},
        cwd=REPO_ROOT,
    )
    heard = ListChanges()
    stderr = config.parent / "claimcheck.stderr"
    with stderr.open("a", encoding="utf-8") as errlog:
        transport = stdio_client(params, errlog=errlog)
        async with Client(transport, mode="legacy", message_handler=heard.on_message) as client:
            yield client, heard, stderr


async def until(holds: Callable[[], bool]) -> None:
    """Wait (under the caller's fail_after) until `holds()` is true: what a process did outside MCP."""

    def poll() -> None:
        while not holds():
            time.sleep(0.05)

    await anyio.to_thread.run_sync(poll, abandon_on_cancel=True)


def first_text(result: types.CallToolResult) -> str:
    """The tool's own answer, without the status footer claimcheck may add while a call runs in the background."""
    item = result.content[0]
    assert isinstance(item, types.TextContent), result
    return item.text


async def who(client: Client, tool: str) -> tuple[str, int, int]:
    """(label, pid, parent pid) of the server behind `tool`."""
    result = await client.call_tool(tool, {})
    assert not result.is_error, text_of(result)
    label, pid, parent = first_text(result).split()
    return label, int(pid), int(parent)


async def settled(client: Client, handle: str, tool: str = "b__hold") -> str:
    """What `wait_for_tool_output` says of `handle` once its call of `tool` has finished."""
    while True:
        waited = text_of(await client.call_tool("wait_for_tool_output", {"handles": [handle]}))
        if f'"{handle}" {tool}: running' not in waited:
            return waited


async def test_a_rewritten_config_starts_the_added_server_and_restarts_the_changed_one_leaving_the_other_alone(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, {"mcpServers": {"a": whoami("one"), "b": whoami("b")}})
    release = tmp_path / "release"
    async with serving(config) as (client, heard, _):
        with anyio.fail_after(WAIT_S):
            await heard.tools_once(client, lambda names: {"a__whoami", "b__whoami"} <= names)
            a_before, b_before = await who(client, "a__whoami"), await who(client, "b__whoami")
            held = await client.call_tool("b__hold", {"path": str(release), "background": True})
            handle = HANDLE.search(text_of(held))
            assert handle is not None, text_of(held)
            held_by_a = await client.call_tool("a__hold", {"path": str(tmp_path / "never"), "background": True})
            handle_a = HANDLE.search(text_of(held_by_a))
            assert handle_a is not None, text_of(held_by_a)
            notified = heard.count

            rewrite(config, {"a": whoami("two"), "b": whoami("b"), "c": whoami("c")})
            names = await heard.tools_once(client, lambda names: {"a__whoami", "c__whoami"} <= names)
            a_after = await heard.answer_once(client, "a__whoami", lambda answer: answer.startswith("two "))
            b_after, c = await who(client, "b__whoami"), await who(client, "c__whoami")
            release.write_text("go", encoding="utf-8")
            waited = await settled(client, handle.group(0))
            raw = await client.call_tool("tool_output", {"handle": handle.group(0), "mode": "raw"})
            waited_a = await settled(client, handle_a.group(0), "a__hold")
    assert heard.count > notified
    assert {"a__whoami", "b__whoami", "c__whoami"} <= names
    label, pid, parent = a_after.split()
    assert (label, parent) == ("two", str(a_before[2])) and int(pid) != a_before[1]  # a new process of a
    assert b_after == b_before  # the same process of b, never restarted
    assert c[0] == "c" and c[2] == a_before[2]
    assert f'"{handle.group(0)}" b__hold: ready' in waited  # b's call made before the reload finished there
    assert "released by release" in text_of(raw)
    assert f'"{handle_a.group(0)}" a__hold: failed' in waited_a  # a's call in flight ended with its process
    assert 'its entry in the config changed, so claimcheck restarted "a"' in waited_a


async def test_a_config_named_as_a_client_s_entry_writes_it_is_read_and_watched_where_it_is(tmp_path: Path) -> None:
    """`"args": ["serve", "--config", "$HOME/…"]` in Claude Desktop's file reaches claimcheck as written (no shell
    starts it): the file there is served, and read again when it changes."""
    home = tmp_path / "home"
    (home / "cc").mkdir(parents=True)
    config = write_config(home / "cc", {"mcpServers": {"a": whoami("a")}})
    async with serving(config, "$HOME/cc/claimcheck.json", {"HOME": str(home)}) as (client, heard, _):
        with anyio.fail_after(WAIT_S):
            await heard.tools_once(client, lambda names: "a__whoami" in names)
            rewrite(config, {"a": whoami("a"), "c": whoami("c")})
            names = await heard.tools_once(client, lambda names: "c__whoami" in names)
    assert {"a__whoami", "c__whoami"} <= names


async def test_a_server_removed_from_the_config_stops_its_tools_go_and_its_call_fails_naming_the_removal(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, {"mcpServers": {"a": whoami("a"), "b": whoami("b")}})
    async with serving(config) as (client, heard, _):
        with anyio.fail_after(WAIT_S):
            await heard.tools_once(client, lambda names: {"a__whoami", "b__whoami"} <= names)
            a_before, b_before = await who(client, "a__whoami"), await who(client, "b__whoami")
            held = await client.call_tool("b__hold", {"path": str(tmp_path / "never"), "background": True})
            handle = HANDLE.search(text_of(held))
            assert handle is not None, text_of(held)

            rewrite(config, {"a": whoami("a")})
            names = await heard.tools_once(client, lambda names: "b__whoami" not in names)
            waited = await settled(client, handle.group(0))
            await until(lambda: not pid_alive(b_before[1]))
            a_after = await who(client, "a__whoami")
    assert "a__whoami" in names and not any(name.startswith("b__") for name in names)
    assert f'"{handle.group(0)}" b__hold: failed' in waited
    assert '"b" was removed from the config, so claimcheck stopped it' in waited
    assert a_after == a_before


@pytest.mark.skipif(sys.platform == "win32", reason="Windows has no SIGHUP")
async def test_sighup_reads_the_config_again_and_a_config_that_does_not_validate_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": {"a": whoami("one"), "b": whoami("b")}})
    async with serving(config) as (client, heard, stderr):
        with anyio.fail_after(WAIT_S):
            await heard.tools_once(client, lambda names: {"a__whoami", "b__whoami"} <= names)
            a_before, b_before = await who(client, "a__whoami"), await who(client, "b__whoami")

            # The same size, modification time and inode: only SIGHUP makes claimcheck read it again.
            before = config.stat()
            config.write_text(config.read_text(encoding="utf-8").replace('"one"', '"uno"'), encoding="utf-8")
            os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
            after = config.stat()
            assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
                before.st_size,
                before.st_mtime_ns,
                before.st_ino,
            )
            os.kill(a_before[2], signal.SIGHUP)
            a_after = await heard.answer_once(client, "a__whoami", lambda answer: answer.startswith("uno "))

            rewrite(config, {"a": {**whoami("three"), "autoStart": True}, "b": whoami("b")})
            await until(lambda: "config reload refused" in stderr.read_text(encoding="utf-8"))
            names = {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}
            a_kept, b_kept = await who(client, "a__whoami"), await who(client, "b__whoami")
    refused = [line for line in stderr.read_text(encoding="utf-8").splitlines() if "config reload refused" in line]
    assert refused == [
        f"claimcheck ERROR server.reload: config reload refused: {config}: invalid config: "
        "mcpServers.a.autoStart: unknown key; still serving the previous config"
    ]
    assert a_after.startswith("uno ") and int(a_after.split()[1]) != a_before[1]
    assert {"a__whoami", "b__whoami"} <= names
    assert a_kept == ("uno", int(a_after.split()[1]), a_before[2])  # the running config stays
    assert b_kept == b_before
