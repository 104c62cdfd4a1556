"""A start-up failure a user can fix is one line on stderr that names the fix, and exit status 2 (`EXIT_USAGE`);
never a traceback. A bug still shows its traceback."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import anyio
import pytest

from server.errors import EXIT_USAGE, ConfigError, StartupError
from server.launch import user_error
from tests.support.processes import PYTHON, announcing, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]


def claimcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "CLAIMCHECK_API_ENABLED": "false", **(env or {})}
    return subprocess.run(
        [PYTHON, "-m", "server", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=environ,
    )


def no_servers(tmp_path: Path, **settings: object) -> Path:
    return write_config(tmp_path, {"mcpServers": {}, "settings": settings})


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_a_port_in_use_is_one_line_naming_the_port_and_port_0(tmp_path: Path) -> None:
    config = no_servers(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = claimcheck("serve", "--config", str(config), "--transport", "http", "--port", str(port))
    assert done.returncode == EXIT_USAGE
    assert done.stderr.splitlines() == [
        f"claimcheck: port {port} on 127.0.0.1 is taken by another program; use --port 0 (a free port) or another "
        "--port"
    ]


def test_a_state_url_without_the_redis_extra_names_the_extra_and_its_install_command(tmp_path: Path) -> None:
    hidden = tmp_path / "no-redis" / "redis"
    hidden.mkdir(parents=True)  # a `redis` that cannot be imported, first on the path: as if the extra were missing
    (hidden / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'redis'\", name='redis')\n")
    path = os.pathsep.join(p for p in (str(hidden.parent), os.environ.get("PYTHONPATH", "")) if p)
    config = no_servers(tmp_path)
    done = claimcheck(
        "serve", "--config", str(config), "--state-url", "redis://127.0.0.1:1/0", env={"PYTHONPATH": path}
    )
    assert done.returncode == EXIT_USAGE
    assert done.stderr.splitlines() == [
        "claimcheck: a state URL (--state-url or settings.state.url) needs the redis extra: "
        f"{PYTHON} -m pip install 'mcp-claimcheck[redis]'"
    ]


def test_redis_unreachable_is_one_line_with_the_url_and_the_error_and_no_password(tmp_path: Path) -> None:
    pytest.importorskip("redis")
    config = no_servers(tmp_path)
    port = unused_port()
    done = claimcheck("serve", "--config", str(config), "--state-url", f"redis://:s3cret-pw@127.0.0.1:{port}/0")
    assert done.returncode == EXIT_USAGE
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"claimcheck: cannot reach Redis at redis://:***@127.0.0.1:{port}/0 (--state-url or ")
    assert "onnect" in line and line.endswith("; start it, or correct the URL")  # redis-py's own words, then the fix
    assert "s3cret-pw" not in done.stderr


def test_a_config_folder_without_a_config_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a config", encoding="utf-8")
    done = claimcheck("serve", "--config", str(tmp_path))  # a folder is read for its config files: it has none
    assert done.returncode == EXIT_USAGE
    (line,) = done.stderr.splitlines()
    assert line == (
        f"claimcheck: {tmp_path}: a directory with no config file in it (.json, .jsonc, .yaml, .yml, .toml); give "
        "the config file's path, or a directory of server files"
    )


def test_a_state_directory_that_cannot_be_made_is_one_line_naming_it_and_the_setting(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    state = tmp_path / "a-file" / "state"  # under a regular file: no user, root included, can make it
    config = no_servers(tmp_path, stateDir=str(state))
    done = claimcheck(
        "serve", "--config", str(config), env={"CLAIMCHECK_API_ENABLED": "true", "CLAIMCHECK_API_PORT": "0"}
    )
    assert done.returncode == EXIT_USAGE
    assert done.stderr.splitlines() == [
        f"claimcheck: cannot keep the call history in the state directory {state}: Not a directory; set "
        "settings.stateDir to a directory this user can write, or turn the status API off (--no-api)"
    ]


def test_an_output_root_that_cannot_be_made_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    root = tmp_path / "a-file" / "root"
    config = no_servers(tmp_path, root=str(root))
    done = claimcheck("serve", "--config", str(config))
    assert done.returncode == EXIT_USAGE
    assert done.stderr.splitlines() == [
        f"claimcheck: could not create the output store under {root}: Not a directory; set settings.root to a "
        "directory this user can write"
    ]


def test_user_errors_inside_nested_exception_groups_are_one_line_each_said_once() -> None:
    taken = StartupError("port 1 is taken")
    nested = ExceptionGroup("outer", [ExceptionGroup("inner", [taken, ConfigError("bad\nkey")]), taken])
    assert user_error(nested) == "port 1 is taken; bad key"
    assert user_error(ConfigError("x.json: config file not found")) == "x.json: config file not found"


def test_a_bug_anywhere_in_the_group_keeps_the_traceback() -> None:
    assert user_error(RuntimeError("a bug")) is None
    assert user_error(ExceptionGroup("g", [StartupError("port 1 is taken"), KeyError("a bug")])) is None
    assert user_error(ExceptionGroup("g", [ExceptionGroup("g", [ValueError("a bug")])])) is None


def test_the_top_of_the_command_prints_a_grouped_user_error_as_one_line_and_lets_a_bug_through(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import server.cli
    from server.launch import main

    def stopped(argv: list[str]) -> int:
        raise ExceptionGroup("task group", [StartupError("port 1 is taken; use --port 0")])

    monkeypatch.setattr(server.cli, "main", stopped)
    assert main(["ps"]) == EXIT_USAGE
    assert capsys.readouterr().err == "claimcheck: port 1 is taken; use --port 0\n"

    def bug(argv: list[str]) -> int:
        raise ExceptionGroup("task group", [RuntimeError("a bug")])

    monkeypatch.setattr(server.cli, "main", bug)
    with pytest.raises(ExceptionGroup) as raised:
        main(["ps"])
    assert isinstance(raised.value.exceptions[0], RuntimeError)


def test_serve_with_no_servers_says_so_in_one_line_and_serves_on(tmp_path: Path) -> None:
    """`tools` and `doctor` refuse such a file; `serve` runs (the file is read again when it changes), saying why a
    client sees only claimcheck's own tools."""
    config = no_servers(tmp_path)
    done = claimcheck("serve", "--config", str(config))  # stdin closed: it serves, then ends
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"claimcheck WARNING server.proxy: {config} configures no servers to start (mcpServers is empty or every one "
        'is disabled); add one, e.g. "mcpServers": {"fs": {"command": "npx", "args": ["-y", '
        '"@modelcontextprotocol/server-filesystem", "/tmp"]}}; serving only claimcheck\'s own tools until it does'
    ]


async def test_a_short_auth_token_env_token_over_http_is_served_with_one_warning(tmp_path: Path) -> None:
    """A tokens file refuses tokens under 32 bytes; the environment's token is warned about (refusing it would stop
    setups that work)."""
    config = no_servers(tmp_path)
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--transport", "http", "--port", "0"]
    env = {**os.environ, "CLAIMCHECK_API_ENABLED": "false", "SHORT_TOKEN": "abc"}
    with anyio.fail_after(60):
        async with announcing([*command, "--auth-token-env", "SHORT_TOKEN"], r"serving MCP", env=env) as started:
            said = b"".join(started.said).decode()
    assert (
        "the token in $SHORT_TOKEN is under 32 bytes: whoever reaches the port may guess it; make one with "
        "`openssl rand -hex 32` (a tokens file refuses shorter ones)"
    ) in said
