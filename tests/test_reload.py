"""The config file, read again while claimcheck runs: what changed, when a change is read, what is refused, and a
removed server's call in flight (in process; tests/e2e/test_config_reload.py runs it with real servers)."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from server.config import Config, load_config, parse_config
from server.reload import Changes, ConfigWatch, changes
from server.upstream.surface import build_server
from tests.support.proxies import proxied_names, running_proxy, text_of

pytestmark = [pytest.mark.anyio]


def write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")


class Applied:
    """What a watch handed on to be applied."""

    def __init__(self, running: Config) -> None:
        self.configs: list[Config] = []
        self.running = running
        self.arrived = anyio.Event()

    async def __call__(self, config: Config) -> Changes:
        self.configs.append(config)
        self.arrived.set()
        found, self.running = changes(self.running, config), config
        return found


def test_changes_compare_whole_entries_and_name_the_settings_that_changed() -> None:
    old = parse_config(
        {
            "mcpServers": {
                "same": {"command": "a"},
                "args": {"command": "b", "args": ["1"]},
                "gone": {"command": "c"},
                "off": {"command": "d"},
                "on": {"command": "e", "disabled": True},
            },
            "settings": {"asyncTimeoutSecs": 5},
        }
    )
    new = parse_config(
        {
            "mcpServers": {
                "same": {"command": "a"},
                "args": {"command": "b", "args": ["2"]},
                "off": {"command": "d", "disabled": True},
                "on": {"command": "e"},
                "new": {"url": "http://127.0.0.1:1/mcp"},
            },
            "settings": {"asyncTimeoutSecs": 9, "root": "/tmp"},
        }
    )
    found = changes(old, new)
    assert found == Changes(
        added=("on", "new"), removed=("gone", "off"), changed=("args",), settings=("asyncTimeoutSecs", "root")
    )
    assert found.summary() == "restarted args; started on, new; stopped gone, off"
    assert changes(old, old) == Changes()


async def test_a_changed_file_is_read_once_it_stayed_the_same_for_one_more_poll(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    write(path, {"mcpServers": {"a": {"command": "a"}}})
    applied = Applied(load_config(path))
    watch = ConfigWatch(path, applied, poll_s=3600)
    await watch.poll()
    assert applied.configs == []  # unchanged
    path.write_text('{"mcpServers": {"a": {"command": "a"}, "b": {"comm', encoding="utf-8")  # half written
    await watch.poll()
    write(path, {"mcpServers": {"a": {"command": "a"}, "b": {"command": "b"}}})
    await watch.poll()
    assert applied.configs == []  # it changed again since the last poll: not stable yet
    await watch.poll()
    await watch.poll()
    assert [list(config.mcp_servers) for config in applied.configs] == [["a", "b"]]


async def test_a_directory_of_config_files_is_read_again_when_one_changes_or_one_more_comes(tmp_path: Path) -> None:
    write(tmp_path / "a.json", {"mcpServers": {"a": {"command": "a"}}})
    applied = Applied(load_config(tmp_path))
    watch = ConfigWatch(tmp_path, applied, poll_s=3600)
    write(tmp_path / "b.json", {"mcpServers": {"b": {"command": "b"}}})
    await watch.poll()
    await watch.poll()
    write(tmp_path / "a.json", {"mcpServers": {"a": {"command": "a", "args": ["--changed"]}}})  # in place
    await watch.poll()
    await watch.poll()
    assert [sorted(config.mcp_servers) for config in applied.configs] == [["a", "b"], ["a", "b"]]
    assert applied.configs[1].mcp_servers["a"].args == ["--changed"]


async def test_a_file_that_is_gone_for_a_moment_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    write(path, {"mcpServers": {"a": {"command": "a"}}})
    applied = Applied(load_config(path))
    watch = ConfigWatch(path, applied, poll_s=3600)
    path.unlink()
    await watch.poll()
    await watch.poll()
    assert applied.configs == []
    write(path, {"mcpServers": {"b": {"command": "b"}}})
    await watch.poll()
    await watch.poll()
    assert [list(config.mcp_servers) for config in applied.configs] == [["b"]]


async def test_a_config_that_does_not_validate_is_refused_in_one_line_naming_its_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "config.json"
    write(path, {"mcpServers": {"a": {"command": "a"}}})
    applied = Applied(load_config(path))
    watch = ConfigWatch(path, applied, poll_s=3600)
    write(path, {"mcpServers": {"a": {"command": "a", "autoStart": True}}})
    with caplog.at_level(logging.INFO, logger="server.reload"):
        assert await watch.reload() is None
    assert applied.configs == []
    assert [record.getMessage() for record in caplog.records] == [
        f"config reload refused: {path}: invalid config: mcpServers.a.autoStart: unknown key; "
        "still serving the previous config"
    ]


async def test_a_reload_says_what_it_changed_and_which_settings_wait_for_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "config.json"
    write(path, {"mcpServers": {"a": {"command": "a"}, "b": {"command": "b"}}})
    applied = Applied(load_config(path))
    watch = ConfigWatch(path, applied, poll_s=3600)
    write(path, {"mcpServers": {"a": {"command": "a2"}, "c": {"command": "c"}}, "settings": {"stateDir": "/tmp/x"}})
    with caplog.at_level(logging.INFO, logger="server.reload"):
        await watch.reload()
    assert [(record.levelno, record.getMessage()) for record in caplog.records] == [
        (
            logging.WARNING,
            "config reload: settings.stateDir changed, which applies when claimcheck restarts; kept as running",
        ),
        (logging.WARNING, "config reloaded: restarted a; started c; stopped b"),
    ]


@pytest.mark.skipif(sys.platform == "win32", reason="Windows has no SIGHUP")
async def test_sighup_reads_the_file_again_at_once(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    write(path, {"mcpServers": {"a": {"command": "a"}}})
    applied = Applied(load_config(path))
    watch = ConfigWatch(path, applied, poll_s=3600)  # no poll comes during the test
    write(path, {"mcpServers": {"b": {"command": "b"}}})
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(watch.run)
            os.kill(os.getpid(), signal.SIGHUP)
            await applied.arrived.wait()
            tg.cancel_scope.cancel()
    assert [list(config.mcp_servers) for config in applied.configs] == [["b"]]


def holding_server(entered: anyio.Event, release: anyio.Event) -> MCPServer:
    server = MCPServer("holding")

    @server.tool(structured_output=False)
    async def hold() -> str:
        entered.set()
        await release.wait()
        return "released"

    return server


def echo_server() -> MCPServer:
    server = MCPServer("echo")

    @server.tool(structured_output=False)
    def echo(text: str) -> str:
        return text

    return server


async def test_a_removed_server_stops_its_call_in_flight_fails_saying_so_and_the_other_server_is_untouched() -> None:
    entered, release = anyio.Event(), anyio.Event()
    settings = {"asyncTimeoutSecs": 60}
    list_changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            list_changed.set()

    servers = {"held": holding_server(entered, release), "other": echo_server()}
    async with (
        running_proxy(servers, settings=settings) as proxy,
        Client(build_server(proxy), mode="legacy", message_handler=on_message) as client,
    ):
        with anyio.fail_after(20):
            before = proxied_names((await client.list_tools()).tools)
            other = next(d for d in proxy.pool.downstreams if d.name == "other")
            outcome: dict[str, types.CallToolResult] = {}

            async def call_held() -> None:
                outcome["held"] = await client.call_tool("held__hold", {})

            async with anyio.create_task_group() as tg:
                tg.start_soon(call_held)
                await entered.wait()
                new = parse_config({"mcpServers": {"other": {"command": "in-process"}}, "settings": settings})
                found = await proxy.reload(new)
            await list_changed.wait()
            after = proxied_names((await client.list_tools(cache_mode="refresh")).tools)
            echoed = await client.call_tool("other__echo", {"text": "still here"})
    assert before == ["held__hold", "other__echo"]
    assert found == Changes(removed=("held",))
    assert outcome["held"].is_error
    assert '"held" was removed from the config, so claimcheck stopped it' in text_of(outcome["held"])
    assert after == ["other__echo"]
    assert [d.name for d in proxy.pool.downstreams] == ["other"]
    assert proxy.pool.downstreams[0] is other and other.state == "ready" and other.restarts == 0
    assert text_of(echoed) == "still here"
