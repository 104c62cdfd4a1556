"""A client's first call sees its roots: server-filesystem from npm behind a real `claimcheck serve`
over HTTP and behind the shared claimcheck (`--shared`, stdio clients), with `scope: auto`. Each of 20 clients
with roots of its own gets exactly those roots as the allowed directories on its very first call (before: the
first call raced the server applying the roots it had just asked for, and saw the configured directory)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPDeprecationWarning

from tests.support.peers import FILESYSTEM_PACKAGE, npm_server_command
from tests.support.processes import PYTHON, announced_url, write_config
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]
warnings.simplefilter("ignore", MCPDeprecationWarning)  # roots are deprecated at 2026-07-28 only

SERVING = r"serving MCP over streamable HTTP at (http://\S+/mcp)"
CLIENTS = 20


def roots_of(directory: Path) -> Any:
    async def answer(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=directory.as_uri(), name=directory.name)])  # type: ignore[arg-type]

    return answer


def workspace(tmp_path: Path) -> tuple[Path, list[Path], Path]:
    node, entry = npm_server_command(FILESYSTEM_PACKAGE)
    data = (tmp_path / "data").resolve()
    projects = [data / f"project-{n}" for n in range(CLIENTS)]
    for project in projects:
        project.mkdir(parents=True)
    servers = {"fs": {"command": node, "args": [entry, str(data)], "scope": "auto"}}
    config = write_config(tmp_path, {"mcpServers": servers, "settings": {"asyncTimeoutSecs": 30}})
    return data, projects, config


def allowed(listing: str) -> list[str]:
    return listing.splitlines()[1:]  # "Allowed directories:" then one a line


async def test_every_first_call_over_http_sees_only_its_clients_roots(tmp_path: Path) -> None:
    data, projects, config = workspace(tmp_path)
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--no-api", "--transport", "http"]
    seen: list[list[str]] = []
    with anyio.fail_after(300):
        async with announced_url([*command, "--port", "0"], SERVING) as url:
            async with Client(url, mode="legacy") as rootless:  # the shared process comes up and asks for roots
                shared = allowed(text_of(await rootless.call_tool("fs__list_allowed_directories", {})))
            for project in projects:
                async with Client(url, mode="legacy", list_roots_callback=roots_of(project)) as client:
                    seen.append(allowed(text_of(await client.call_tool("fs__list_allowed_directories", {}))))
    assert shared == [str(data)], shared
    wrong = [(str(project), got) for project, got in zip(projects, seen, strict=True) if got != [str(project)]]
    assert not wrong, f"{len(wrong)} of {CLIENTS} first calls saw other directories: {wrong[:3]}"


async def test_every_first_call_through_the_shared_claimcheck_sees_only_its_clients_roots(
    tmp_path: Path, runtime: Path
) -> None:
    data, projects, config = workspace(tmp_path)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    relay = StdioServerParameters(
        command=PYTHON, args=["-m", "server", "serve", "--shared", "--config", str(config)], env=env
    )
    seen: list[list[str]] = []
    with anyio.fail_after(300), (tmp_path / "relay-stderr.txt").open("a") as errlog:
        async with Client(stdio_client(relay, errlog=errlog), mode="legacy") as rootless:
            shared = allowed(text_of(await rootless.call_tool("fs__list_allowed_directories", {})))
            for project in projects:  # while the rootless relay keeps the shared claimcheck up
                connect = stdio_client(relay, errlog=errlog)
                async with Client(connect, mode="legacy", list_roots_callback=roots_of(project)) as client:
                    seen.append(allowed(text_of(await client.call_tool("fs__list_allowed_directories", {}))))
    assert shared == [str(data)], shared
    wrong = [(str(project), got) for project, got in zip(projects, seen, strict=True) if got != [str(project)]]
    assert not wrong, f"{len(wrong)} of {CLIENTS} first calls saw other directories: {wrong[:3]}"


async def test_every_first_call_of_one_stdio_client_sees_its_roots(tmp_path: Path) -> None:
    """With one client (plain stdio) the server's one process asks for roots as it starts, before the client came,
    and again when told the client's roots changed: the client's first call waits for that answer to be applied."""
    _, projects, config = workspace(tmp_path)
    serve = StdioServerParameters(command=PYTHON, args=["-m", "server", "serve", "--config", str(config), "--no-api"])
    seen: list[list[str]] = []
    with anyio.fail_after(300), (tmp_path / "stderr.txt").open("a") as errlog:
        for project in projects[:10]:  # a claimcheck each: ten, to keep the run short
            connect = stdio_client(serve, errlog=errlog)
            async with Client(connect, mode="legacy", list_roots_callback=roots_of(project)) as client:
                seen.append(allowed(text_of(await client.call_tool("fs__list_allowed_directories", {}))))
    wrong = [(str(project), got) for project, got in zip(projects, seen, strict=False) if got != [str(project)]]
    assert not wrong, f"{len(wrong)} of 10 first calls saw other directories: {wrong[:3]}"


CHANGES = 10


class MovingRoots:
    """A client's roots that it changes mid-session: the answer to `roots/list` is the current project."""

    def __init__(self, project: Path) -> None:
        self.project = project

    async def __call__(self, context: Any) -> types.ListRootsResult:
        root = types.Root(uri=self.project.as_uri(), name=self.project.name)  # type: ignore[arg-type]
        return types.ListRootsResult(roots=[root])


async def moved_calls(client: Client, roots: MovingRoots, projects: list[Path]) -> list[tuple[str, list[str]]]:
    """For each project in turn: change the roots, tell the server at once, and call at once after."""
    seen: list[tuple[str, list[str]]] = []
    for project in projects:
        roots.project = project
        await client.send_roots_list_changed()
        listing = allowed(text_of(await client.call_tool("fs__list_allowed_directories", {})))
        seen.append((str(project), listing))
    return seen


async def test_a_call_right_after_a_roots_change_over_stdio_sees_the_new_roots(tmp_path: Path) -> None:
    """The call that follows `notifications/roots/list_changed` at once waits until the server has been asked for
    the new roots and had its chance to apply them: it never sees the roots before the change."""
    _, projects, config = workspace(tmp_path)
    serve = StdioServerParameters(command=PYTHON, args=["-m", "server", "serve", "--config", str(config), "--no-api"])
    roots = MovingRoots(projects[0])
    with anyio.fail_after(300), (tmp_path / "stderr.txt").open("a") as errlog:
        async with Client(stdio_client(serve, errlog=errlog), mode="legacy", list_roots_callback=roots) as client:
            first = allowed(text_of(await client.call_tool("fs__list_allowed_directories", {})))
            seen = await moved_calls(client, roots, projects[1 : 1 + CHANGES])
    assert first == [str(projects[0])], first
    wrong = [(project, got) for project, got in seen if got != [project]]
    assert not wrong, f"{len(wrong)} of {CHANGES} calls after a change saw other directories: {wrong[:3]}"


async def test_a_call_right_after_a_roots_change_over_http_sees_the_new_roots(tmp_path: Path) -> None:
    _, projects, config = workspace(tmp_path)
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--no-api", "--transport", "http"]
    roots = MovingRoots(projects[0])
    with anyio.fail_after(300):
        async with announced_url([*command, "--port", "0"], SERVING) as url:
            async with Client(url, mode="legacy", list_roots_callback=roots) as client:
                first = allowed(text_of(await client.call_tool("fs__list_allowed_directories", {})))
                seen = await moved_calls(client, roots, projects[1 : 1 + CHANGES])
    assert first == [str(projects[0])], first
    wrong = [(project, got) for project, got in seen if got != [project]]
    assert not wrong, f"{len(wrong)} of {CHANGES} calls after a change saw other directories: {wrong[:3]}"
