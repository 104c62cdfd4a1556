"""The `claimcheck` command line: global flags before or after the sub-command, and `claimcheck tools`
showing what a client sees (claimcheck's own tools included) or saying clearly that there is nothing to show."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from server.cli_args import parser
from tests.support.processes import PYTHON, demo_server_entry, write_config
from tests.support.proxies import OWN_TOOLS, text_of

REPO_ROOT = Path(__file__).resolve().parents[2]


def claimcheck(*args: str) -> list[str]:
    return [PYTHON, "-m", "server", *args]


@pytest.mark.parametrize(
    ("argv", "level", "config"),
    [
        (["serve"], "warning", None),
        (["--log-level", "info", "serve"], "info", None),
        (["serve", "--log-level", "debug"], "debug", None),
        (["--log-level", "info", "tools", "--log-level", "error"], "error", None),
        (["--config", "a.json", "serve"], "warning", "a.json"),
        (["serve", "--config", "b.json", "--transport", "http"], "warning", "b.json"),
        (["ps", "--config", "c.json"], "warning", "c.json"),
        (["demo", "--log-level", "debug"], "debug", None),
    ],
)
def test_global_flags_work_before_and_after_the_sub_command(argv: list[str], level: str, config: str | None) -> None:
    args = parser().parse_args(argv)
    assert (args.log_level, args.config) == (level, config)


@pytest.mark.subprocess
def test_tools_lists_claimcheck_s_own_tools_marked_and_takes_its_flags_after_the_sub_command(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    done = subprocess.run(
        claimcheck("tools", "--config", str(config), "--log-level", "debug"),
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split("\t", 1) for line in done.stdout.splitlines() if "\t" in line)
    assert OWN_TOOLS <= set(lines)
    assert all(lines[name].startswith("[claimcheck's own] ") for name in OWN_TOOLS)
    assert "demo__echo" in lines and not lines["demo__echo"].startswith("[claimcheck")
    assert "claimcheck DEBUG " in done.stderr  # --log-level after the sub-command took effect


@pytest.mark.subprocess
@pytest.mark.parametrize("servers", [{}, {"off": {"command": "x", "disabled": True}}])
def test_tools_with_no_server_to_start_exits_2_saying_so(tmp_path: Path, servers: dict[str, object]) -> None:
    config = write_config(tmp_path, {"mcpServers": servers})
    command = claimcheck("tools", "--config", str(config))
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(f"claimcheck: {config} configures no servers to start")
    assert '"mcpServers": {"fs": {"command": "npx"' in done.stderr


@pytest.mark.subprocess
@pytest.mark.anyio
async def test_serve_takes_its_config_from_claimcheck_config_as_the_inspector_form_in_the_readme_needs(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    env = {**os.environ, "CLAIMCHECK_CONFIG": str(config), "CLAIMCHECK_API_ENABLED": "false"}
    params = StdioServerParameters(command=PYTHON, args=["-m", "server", "serve"], env=env, cwd=REPO_ROOT)
    with anyio.fail_after(180):
        async with Client(params, mode="legacy") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            echoed = await client.call_tool("demo__echo", {"text": "from the environment's config"})
    assert "demo__echo" in names and OWN_TOOLS <= names
    assert text_of(echoed) == "from the environment's config"
