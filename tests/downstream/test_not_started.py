"""A stdio server whose program cannot be started is one line saying which part is wrong and what to do: the
`cwd` (which the OS reports as if the program were missing), a bare name not on the PATH (a client such as Claude
Desktop starts claimcheck with a PATH that lacks nvm's or Homebrew's folders), a file that is not executable."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from server.downstream.listing import describe
from server.downstream.processes import spawn
from server.errors import ProcessNotStarted

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.subprocess,  # it starts (or fails to start) programs
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths and modes"),
]


async def why(command: str, cwd: str | None = None, env: dict[str, str] | None = None) -> str:
    with anyio.fail_after(10), pytest.raises(ProcessNotStarted) as caught:
        await spawn(command, [], env or {}, cwd)
    assert isinstance(caught.value, OSError)  # what the head start's `except OSError` leaves to the transport
    return describe(caught.value)


async def test_a_missing_cwd_is_named_as_the_cwd_not_as_the_command(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    assert (
        await why(sys.executable, str(missing))
        == f'its "cwd" {missing} is no directory here; create it, or correct "cwd"'
    )


async def test_a_bare_name_not_on_the_path_says_to_give_its_full_path_and_what_installs_it(tmp_path: Path) -> None:
    empty = {"PATH": str(tmp_path)}
    assert await why("npx", env=empty) == (
        "command not found: npx, on the PATH it was started with; give its full path, as `command -v npx` prints it "
        "in your shell (npx comes with Node.js)"
    )
    assert await why("my-mcp-server", env=empty) == (
        "command not found: my-mcp-server, on the PATH it was started with; give its full path, as "
        "`command -v my-mcp-server` prints it in your shell"
    )
    assert await why(str(tmp_path / "nothing")) == f"command not found: {tmp_path / 'nothing'}"


async def test_a_file_that_is_not_executable_says_so(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text("print(1)\n", encoding="utf-8")  # mode 0644: not even root may run a file of no x bit
    assert await why(str(script)) == (
        f"command not runnable: {script} (permission denied); make it executable, or run it with its interpreter"
    )


async def test_a_command_written_for_a_shell_says_what_to_write_instead(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients start servers without a shell, and so does claimcheck: `~` and `$HOME` stay as written."""
    monkeypatch.setenv("HOME", "/home/someone")
    assert await why("~/.local/bin/my-server") == (
        "command not found: ~/.local/bin/my-server; a ~ is not expanded (no shell starts it): write "
        "/home/someone/.local/bin/my-server"
    )
    assert await why("$HOME/bin/my-server") == (
        "command not found: $HOME/bin/my-server; $HOME is not expanded (no shell starts it): write "
        "${HOME}/bin/my-server, which claimcheck fills in"
    )
