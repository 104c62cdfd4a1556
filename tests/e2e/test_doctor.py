"""`claimcheck doctor`: one line per check, each failure naming its fix, and exit status 0 only when all pass."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import threading
from argparse import Namespace
from collections.abc import Mapping
from pathlib import Path

import anyio
import pytest

from server.config import Config
from server.doctor import Report, check_clients, check_port, check_redis, check_status_api
from server.status.discovery import discovery_file
from tests.support.processes import PYTHON
from tests.support.servers import raw_downstream

REPO_ROOT = Path(__file__).resolve().parents[2]
RAW_DOWNSTREAM = str(REPO_ROOT / "tests" / "support" / "servers" / "raw_downstream.py")  # stdlib only: by path


def doctor(tmp_path: Path, config: Mapping[str, object], **env: str) -> subprocess.CompletedProcess[str]:
    """`claimcheck doctor` in a home of its own (no client config but the test's), from an empty folder."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, "settings": {"stateDir": str(tmp_path / "state")}}), encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("CLAIMCHECK_", "XDG_", "CODEX_", "OTEL_"))}
    environ.update(HOME=str(home), PYTHONPATH=str(REPO_ROOT), **env)
    return subprocess.run(
        [PYTHON, "-m", "server", "doctor", "--config", str(path), "--timeout", "60"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        env=environ,
    )


@pytest.mark.subprocess
def test_a_setup_that_works_passes_every_check_and_exits_0(tmp_path: Path) -> None:
    config = {"mcpServers": {"down": {"command": PYTHON, "args": [RAW_DOWNSTREAM]}}}
    cursor = tmp_path / "home" / ".cursor" / "mcp.json"
    cursor.parent.mkdir(parents=True)
    entry = {"command": PYTHON, "args": ["-m", "server", "serve", "--config", str(tmp_path / "config.json")]}
    cursor.write_text(json.dumps({"mcpServers": {"claimcheck": entry}}), encoding="utf-8")

    done = doctor(tmp_path, config)

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert all(line.startswith(("ok    ", "skip  ")) for line in lines), lines
    assert f"ok    server down: started, {len(raw_downstream.TOOLS)} tools" in lines
    assert any(line.startswith("ok    client cursor") for line in lines)


@pytest.mark.subprocess
def test_a_command_not_on_path_fails_with_the_fix_and_exit_status_1(tmp_path: Path) -> None:
    config = {
        "mcpServers": {
            "down": {"command": "no-such-command-for-doctor"},
            "web": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]},
            "mine": {"command": "~/bin/my-server"},
        }
    }
    done = doctor(tmp_path, config, PATH=str(tmp_path / "empty-bin"))

    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert (
        "FAIL  command no-such-command-for-doctor (down): not on PATH; "
        "fix: install it, or write its absolute path in the server's command"
    ) in lines
    assert any(line.startswith("FAIL  command npx (web): not on PATH; fix: install Node.js") for line in lines)
    assert "skip  server down: not started (its command is missing)" in lines
    assert (
        "FAIL  command ~/bin/my-server (mine): does not exist or is not executable; fix: a ~ is not expanded (no "
        f"shell starts it): write {tmp_path / 'home' / 'bin' / 'my-server'}"
    ) in lines
    assert any(line.startswith("FAIL  no client config starts claimcheck") for line in lines)
    assert "Traceback" not in done.stderr


class _NotFound(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # every path is 404, as a web server without MCP answers
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.subprocess
def test_a_url_that_nothing_answers_or_that_has_no_mcp_at_its_path_is_told_apart_with_its_own_fix(
    tmp_path: Path,
) -> None:
    """What to do differs: start the server (or correct the URL), against correct the path."""
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        off = f"http://127.0.0.1:{probe.getsockname()[1]}/mcp"
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    wrong = f"http://127.0.0.1:{web.server_address[1]}/mcp"
    try:
        done = doctor(tmp_path, {"mcpServers": {"off": {"url": off}, "wrong": {"url": wrong}}})
    finally:
        web.shutdown()
        web.server_close()

    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert (
        f"FAIL  server off: failed ({off}: nothing answered a connection there (refused or unreachable: All "
        f"connection attempts failed)); fix: start the server that answers at {off}, or correct mcpServers.off.url"
    ) in lines, lines
    assert (
        f"FAIL  server wrong: failed ({wrong}: HTTP 404 Not Found over streamable HTTP and SSE (nothing serves MCP "
        "at this path)); fix: correct the path in mcpServers.wrong.url (the server's documentation names it: often "
        "/mcp, or /sse)"
    ) in lines, lines


@pytest.mark.subprocess
def test_a_config_that_does_not_load_is_one_failed_check(tmp_path: Path) -> None:
    done = doctor(tmp_path, {"mcpServers": {"x": {"command": "a", "url": "http://b"}}})
    assert done.returncode == 1
    assert done.stdout.splitlines()[0].startswith("FAIL  config: ")
    assert "Traceback" not in done.stderr


def test_a_port_in_use_fails_and_suggests_port_0(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        report = Report()
        check_port(report, Namespace(transport="http", host="127.0.0.1", port=port))
    assert report.failed
    assert report.lines == [
        f"FAIL  port {port} on 127.0.0.1: in use; fix: stop what listens there, or serve --port 0 (any free)"
    ]


def test_a_client_entry_whose_claimcheck_is_gone_fails_with_init_as_the_fix(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    client = tmp_path / "claude_desktop_config.json"
    entry = {"command": str(tmp_path / "old-venv" / "bin" / "claimcheck"), "args": ["serve", "--config", str(config)]}
    client.write_text(json.dumps({"mcpServers": {"claimcheck": entry}}), encoding="utf-8")
    report = Report()
    check_clients(report, str(client), config, {"HOME": str(tmp_path)})
    assert report.failed
    assert report.lines[0].endswith(
        f"which is not there (moved or uninstalled); fix: claimcheck init {client} --apply "
        "(it writes the absolute path)"
    )


def test_a_client_named_wrong_or_a_file_that_is_not_there_fails_with_the_names_to_use(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    report = Report()
    check_clients(report, "vs-code", config, {"HOME": str(tmp_path)})
    check_clients(report, str(tmp_path / "mcp.json"), config, {"HOME": str(tmp_path)})
    assert report.lines[0] == (
        "FAIL  client vs-code is neither a client claimcheck knows nor a file here; fix: did you mean vscode? name "
        "one of claude-desktop, claude-code, cursor, vscode, windsurf, codex, opencode, zed, goose, continue, gemini, "
        "cline, roo, kiro, lmstudio, or the path of the client's config file"
    )
    assert report.lines[2] == (
        f"FAIL  client mcp.json ({tmp_path / 'mcp.json'}): no such file; "
        "fix: name the client's config file by its path, as it is on disk"
    )


def test_goose_s_extension_that_starts_claimcheck_counts_and_a_gone_one_is_fixed_by_pasting_init_s_entry(
    tmp_path: Path,
) -> None:
    """goose names the program `cmd`; its YAML is never rewritten, so the fix is to paste what init shows."""
    config = tmp_path / "config.json"
    client = tmp_path / ".config" / "goose" / "config.yaml"
    client.parent.mkdir(parents=True)
    gone = tmp_path / "old-venv" / "bin" / "python"
    client.write_text(
        "extensions:\n"
        f"  claimcheck: {{type: stdio, cmd: {PYTHON}, args: [-m, server, serve, --config, {config}], enabled: true}}\n"
        f"  old: {{type: stdio, cmd: {gone}, args: [-m, server, serve, --config, {config}], enabled: true}}\n",
        encoding="utf-8",
    )
    report = Report()
    check_clients(report, "goose", config, {"HOME": str(tmp_path)})
    assert report.lines == [
        f"ok    client goose ({client}): claimcheck starts claimcheck with this config",
        f"FAIL  client goose ({client}): old starts {gone}, which is not there (moved or uninstalled); fix: claimcheck "
        "init goose, and paste the entry it shows (with the absolute path)",
    ]


def test_continue_s_block_file_in_the_workspace_folder_that_starts_claimcheck_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Continue reads every file of `.continue/mcpServers/`: the block file `init continue` shows, once added,
    counts, whether `continue` is named or every client's usual files are looked at."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "config.json"
    folder = tmp_path / ".continue" / "mcpServers"
    folder.mkdir(parents=True)
    (folder / "claimcheck.yaml").write_text(
        f"name: claimcheck\nversion: 0.0.1\nschema: v1\nmcpServers:\n  - name: claimcheck\n    command: {PYTHON}\n"
        f"    args: [-m, server, serve, --config, {config}]\n",
        encoding="utf-8",
    )
    (folder / "other.json").write_text('{"mcpServers": {"git": {"command": "uvx"}}}', encoding="utf-8")
    for client in ("continue", None):
        report = Report()
        check_clients(report, client, config, {"HOME": str(tmp_path / "home")})
        assert report.lines == [
            f"ok    client continue ({folder / 'claimcheck.yaml'}): claimcheck starts claimcheck with this config"
        ]


def test_claude_code_s_project_scoped_entries_count_as_a_client_config(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    entry = {"type": "stdio", "command": PYTHON, "args": ["-m", "server", "serve", "--config", str(config)]}
    data = {"numStartups": 3, "projects": {"/src/app": {"mcpServers": {"claimcheck": entry}}}}
    (tmp_path / ".claude.json").write_text(json.dumps(data), encoding="utf-8")
    report = Report()
    check_clients(report, "claude-code", config, {"HOME": str(tmp_path)})
    assert not report.failed, report.lines
    assert report.lines == [
        f"ok    client claude-code ({tmp_path / '.claude.json'}): "
        "/src/app:claimcheck starts claimcheck with this config"
    ]


def test_an_entry_name_that_leaves_claude_code_less_room_than_tool_name_max_fails_with_the_value_to_set(
    tmp_path: Path,
) -> None:
    """Claude Code calls a tool `mcp__<entry>__<tool>`, 64 at most: an entry named `my-claimcheck-proxy` leaves 38."""
    config = tmp_path / "config.json"
    entry = {"command": PYTHON, "args": ["-m", "server", "serve", "--config", str(config)]}
    (tmp_path / ".claude.json").write_text(json.dumps({"mcpServers": {"my-claimcheck-proxy": entry}}), "utf-8")
    report, fitted = Report(), Report()
    check_clients(report, "claude-code", config, {"HOME": str(tmp_path)})
    check_clients(fitted, "claude-code", config, {"HOME": str(tmp_path)}, 38)
    assert report.lines == [
        f"FAIL  client claude-code ({tmp_path / '.claude.json'}): my-claimcheck-proxy starts claimcheck with this "
        "config, but Claude Code takes tool names of 38 characters behind that entry name, and settings.toolNameMax "
        f'is 47; fix: set "toolNameMax": 38 in the settings of {config} (or rename the entry)'
    ]
    assert not fitted.failed and fitted.lines[0].startswith("ok    client claude-code")


@pytest.mark.subprocess
def test_a_config_without_servers_fails_and_points_at_init(tmp_path: Path) -> None:
    done = doctor(tmp_path, {"mcpServers": {"a": {"command": "x", "disabled": True}}})
    assert done.returncode == 1
    assert done.stdout.splitlines()[0].endswith(
        "no server to start (none, or all disabled); fix: add one to "
        "mcpServers, or import a client's: claimcheck init CLIENT"
    )


@pytest.mark.anyio
async def test_a_running_instance_whose_status_api_does_not_answer_fails(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there once it is closed
    config = Config.model_validate({"settings": {"stateDir": str(tmp_path)}})
    info = {"url": f"http://127.0.0.1:{port}/", "pid": os.getpid(), "port": port, "token": "t"}
    report = Report()
    with discovery_file(tmp_path, info), anyio.fail_after(20):
        await check_status_api(report, config)
    assert report.failed
    assert report.lines[0].startswith(f"FAIL  status API of pid {os.getpid()} at http://127.0.0.1:{port}/: ")
    assert "fix: stop pid" in report.lines[0]


@pytest.mark.anyio
async def test_an_unreachable_redis_fails_with_its_url_and_the_fix() -> None:
    pytest.importorskip("redis")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    config = Config.model_validate({"settings": {"state": {"url": url}}})
    report = Report()
    with anyio.fail_after(30):
        await check_redis(report, config)
    assert report.failed
    assert report.lines[0].startswith(f"FAIL  redis {url}: ")
    assert report.lines[0].endswith("fix: start Redis there, or correct settings.state.url")
