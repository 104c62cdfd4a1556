"""The command line explains itself: `claimcheck` alone lists the commands, `serve --help` says what it is for with
examples, an option a command would ignore is refused, and `serve` typed in a terminal says what it is waiting for."""

from __future__ import annotations

import argparse
import os
import pty
import subprocess
from pathlib import Path

import anyio
import pytest

from server.cli_args import parse
from server.launch import TERMINAL_HINT, serves_a_terminal
from tests.support.processes import PYTHON, write_config

COMMANDS = ("serve", "tools", "demo", "ps", "stop")


def claimcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "server", *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=env
    )


@pytest.mark.subprocess
def test_claimcheck_alone_prints_the_help_with_one_line_per_command_and_exits_2() -> None:
    done = claimcheck()
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("usage: claimcheck ")
    assert "the following arguments are required" not in done.stderr
    listed = [line.split()[0] for line in done.stderr.split("commands:", 1)[1].splitlines() if line.startswith("    ")]
    assert tuple(name for name in listed if name in COMMANDS) == COMMANDS
    assert "claimcheck demo" in done.stderr


@pytest.mark.subprocess
def test_serve_help_says_what_serve_is_for_and_gives_examples() -> None:
    done = claimcheck("serve", "--help")
    assert done.returncode == 0
    assert "meant to be started by an MCP client" in done.stdout
    examples = done.stdout.split("examples:", 1)[1]
    assert '"args": ["serve", "--config", ' in examples
    assert "claimcheck serve --shared" in examples and "--transport http" in examples


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["demo", "--config", "mine.json"], "demo runs claimcheck on its own bundled server and reads no config"),
        (["--config", "mine.json", "demo"], "demo runs claimcheck on its own bundled server and reads no config"),
        (["serve", "--port", "9000"], "--host and --port apply to --transport http or sse"),
        (["serve", "--host", "0.0.0.0"], "--host and --port apply to --transport http or sse"),
        (["serve", "--http"], "--http is written --transport http"),
        (["--log-level", "verbose", "tools"], "argument --log-level: 'verbose' is not a log level: use debug, info"),
        (["tools", "--log-level", "10"], "argument --log-level: '10' is not a log level"),
        (
            ["serve", "--transport", "http", "--port", "99999"],
            "argument --port: 99999 is not a port: give 0 to 65535 (0 picks a free one)",
        ),
        (["doctor", "--port", "http"], "argument --port: 'http' is not a port: give 0 to 65535"),
        (
            ["serve", "--async-timeout", "-1"],
            "argument --async-timeout: -1 is not a number of seconds: give 0 or more (0 hands",
        ),
        (
            ["serve", "--token-threshold", "0"],
            "argument --token-threshold: 0 is not a number of tokens: give 1 or more",
        ),
        (["version"], "did you mean --version? ('version' is no choice of COMMAND)"),
        (["server"], "did you mean serve? ('server' is no choice of COMMAND)"),
        (["serve", "--transport", "htpp"], "did you mean http? ('htpp' is no choice of --transport)"),
        (["serve", "--transport", "pigeon"], "argument --transport: invalid choice: 'pigeon' (choose from 'stdio', "),
        (["tools", "--timeout", "-3"], "argument --timeout: -3 is not a number of seconds: give 0 or more"),
        (["doctor", "--timeout", "soon"], "argument --timeout: 'soon' is not a number of seconds: give 0 or more"),
        (["stop", "abc"], "argument PID: 'abc' is not a process id: give 1 or more (`claimcheck ps` lists them)"),
        (["ps", "--all"], "unrecognized arguments: --all (`claimcheck ps --help` shows the options)"),
        (["--bogus"], "unrecognized arguments: --bogus (`claimcheck --help` shows the options)"),
    ],
)
def test_an_option_the_command_would_ignore_or_cannot_take_is_refused_in_one_line_that_leads(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("claimcheck") and f": error: {said}" in err.splitlines()[0]
    assert len(err.splitlines()) == 1 and "usage:" not in err


def test_log_levels_are_taken_in_any_case() -> None:
    assert [parse(["--log-level", level, "tools"]).log_level for level in ("DEBUG", "Info", "warn")] == [
        "debug",
        "info",
        "warning",
    ]


@pytest.mark.subprocess
def test_a_claimcheck_log_that_names_no_level_is_said_in_one_line_and_claimcheck_runs_on(tmp_path: Path) -> None:
    """It may sit in a client's `env`: refusing to start would break every session for a log setting."""
    config = write_config(tmp_path, {"mcpServers": {}})
    done = claimcheck("ps", "--config", str(config), env={**os.environ, "CLAIMCHECK_LOG": "verbose"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        "claimcheck: CLAIMCHECK_LOG: 'verbose' is not a log level: use debug, info, warning, error or critical; "
        "logging at warning"
    )
    assert "Traceback" not in done.stderr


def test_serve_over_http_still_takes_host_and_port_with_their_defaults() -> None:
    assert (parse(["serve", "--transport", "http"]).host, parse(["serve", "--transport", "http"]).port) == (
        "127.0.0.1",
        8765,
    )
    assert parse(["serve", "--transport", "sse", "--port", "0"]).port == 0


def test_the_terminal_hint_is_for_serve_over_stdio_in_a_terminal_only() -> None:
    def args(*argv: str) -> argparse.Namespace:
        return parse(list(argv))

    assert serves_a_terminal(args("serve"), stdin_is_tty=True)
    assert not serves_a_terminal(args("serve"), stdin_is_tty=False)  # a client's pipe
    assert not serves_a_terminal(args("serve", "--transport", "http"), stdin_is_tty=True)
    assert not serves_a_terminal(args("tools"), stdin_is_tty=True)
    assert not serves_a_terminal(args("serve", "--shared-socket", "/tmp/x.sock"), stdin_is_tty=True)


@pytest.mark.subprocess
@pytest.mark.anyio
async def test_serve_with_a_terminal_on_stdin_says_so_in_one_line_and_still_serves(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": {}})
    terminal, typed = pty.openpty()
    env = {**os.environ, "CLAIMCHECK_API_ENABLED": "false"}
    command = [PYTHON, "-m", "server", "serve", "--config", str(config)]
    try:
        with anyio.fail_after(60):
            async with await anyio.open_process(command, stdin=typed, env=env) as process:
                os.close(typed)
                assert process.stderr is not None
                said = b""
                async for chunk in process.stderr:
                    said += chunk
                    if b"\n" in said:
                        break
                os.close(terminal)  # the terminal goes away: stdin ends, and so does serve
                terminal = -1
                await process.wait()
    finally:
        if terminal >= 0:
            os.close(terminal)
    assert said.decode().splitlines()[0] == f"claimcheck: {TERMINAL_HINT}"
    assert process.returncode == 0
