"""The platform seam: procfs (Linux) and psutil (every other OS) tell the same things about processes, and nothing
outside the two seams touches the OS's own parts.

psutil is what macOS and Windows run; on Linux it reads procfs itself, so both readings are checked here against
the same processes. The rendezvous of the shared claimcheck always fits the smallest `sun_path`.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from server import platform
from server.upstream import shared_relay
from server.upstream.shared_relay import SharedError, shared_paths
from tests.support.processes import write_config
from tests.support.source import ROOT

SEAMS = {"server/platform.py", "fs_sandbox/platform.py"}
OS_ONLY_ATTRIBUTES = {
    ("os", "killpg"),
    ("os", "getuid"),
    ("os", "setsid"),
    ("os", "writev"),
    ("os", "O_NOFOLLOW"),
    ("os", "O_DIRECTORY"),
    ("socket", "AF_UNIX"),
}


def _uses_outside_the_seams() -> list[str]:
    found = []
    for package in ("server", "extraction", "fs_sandbox"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name in SEAMS:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                    if (node.value.id, node.attr) in OS_ONLY_ATTRIBUTES:
                        found.append(f"{name}:{node.lineno} {node.value.id}.{node.attr}")
                elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("/proc"):
                    found.append(f"{name}:{node.lineno} {node.value}")
                elif isinstance(node, ast.keyword) and node.arg == "start_new_session":
                    found.append(f"{name}:{node.lineno} start_new_session")
    return found


def test_no_module_but_the_seams_reads_proc_signals_groups_or_opens_unix_sockets() -> None:
    assert _uses_outside_the_seams() == []


@pytest.fixture(params=["procfs", "psutil"])
def reading(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Process information read one way, then the other."""
    if request.param == "procfs" and not Path("/proc/self/stat").exists():
        pytest.skip("no procfs here")
    monkeypatch.setenv("CLAIMCHECK_PROCESS_INFO", request.param)
    platform._procfs.cache_clear()
    yield request.param
    platform._procfs.cache_clear()


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    yield process
    process.kill()
    process.wait(timeout=30)


@pytest.mark.subprocess
def test_a_running_process_keeps_its_start_time_and_a_reaped_one_is_gone(
    reading: str, child: subprocess.Popen[bytes]
) -> None:
    start = platform.process_start(child.pid)
    assert start and platform.same_start(start, platform.process_start(child.pid))
    assert start.isdigit() if reading == "procfs" else start.startswith("s")
    assert platform.pid_alive(child.pid) and not platform.is_zombie(child.pid)
    child.kill()
    child.wait(timeout=30)
    assert not platform.pid_alive(child.pid) and platform.process_start(child.pid) == ""


@pytest.mark.subprocess
def test_a_killed_child_not_yet_reaped_is_a_zombie(reading: str, child: subprocess.Popen[bytes]) -> None:
    os.kill(child.pid, signal.SIGKILL)
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, and left unreaped
    assert platform.pid_alive(child.pid) and platform.is_zombie(child.pid)


@pytest.mark.subprocess
def test_a_start_time_read_by_procfs_is_the_same_process_to_psutil_and_a_later_one_is_not(
    child: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    readings = {}
    for kind in ("procfs", "psutil"):
        monkeypatch.setenv("CLAIMCHECK_PROCESS_INFO", kind)
        platform._procfs.cache_clear()
        readings[kind] = platform.process_start(child.pid)
    platform._procfs.cache_clear()
    assert platform.same_start(readings["procfs"], readings["psutil"])
    seconds = float(readings["psutil"][1:])
    assert not platform.same_start(readings["psutil"], f"s{seconds + 5:.2f}")  # a later process with the pid
    assert not platform.same_start(readings["procfs"], str(int(readings["procfs"]) + 1))  # ticks are exact


def test_an_unknown_start_time_or_boot_is_never_taken_for_another_process() -> None:
    assert platform.same_start("", "s12.00") and platform.same_start("123", "") and platform.same_start("x", "1")
    assert platform.same_boot("", "t100") and platform.same_boot("3f2a-boot-id", "t100")  # of two kinds: unknown
    assert platform.same_boot("t1000", "t1090")  # a clock set by a minute is the same boot
    assert not platform.same_boot("t1000", "t5000") and not platform.same_boot("3f2a", "9c1b")


def test_the_boot_identity_is_the_kernel_s_boot_id_or_a_boot_time_from_psutil(reading: str) -> None:
    identity = platform.boot_identity()
    assert identity.startswith("t") if reading == "psutil" else len(identity) == 36
    assert platform.same_boot(identity, platform.boot_identity())


@pytest.mark.subprocess
def test_process_information_on_linux_never_imports_psutil() -> None:
    probe = "import sys, os; from server import platform as p; p.process_start(os.getpid()); p.boot_identity(); "
    probe += "p.is_zombie(os.getpid()); print('psutil' in sys.modules)"
    env = {k: v for k, v in os.environ.items() if k != "CLAIMCHECK_PROCESS_INFO"}
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr


@pytest.fixture
def long_tmpdir() -> Iterator[str]:
    """A real directory whose path is 49 characters with its slash, as macOS's `$TMPDIR`."""
    with tempfile.TemporaryDirectory(prefix="cc-tmp-", dir="/tmp") as base:
        path = f"{base}/" + "v" * (49 - len(base) - 4) + "/T/"
        os.makedirs(path, mode=0o700)
        assert len(path) == 49
        yield path


@pytest.fixture(autouse=True)
def last_resort(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A short directory of the test's in place of /tmp, the relay's last resort (the machine's is left alone)."""
    with tempfile.TemporaryDirectory(prefix="cc-lr-", dir="/tmp") as directory:
        monkeypatch.setattr(shared_relay, "LAST_RESORT", directory)
        yield directory


def _paths(tmp_path: Path, environ: dict[str, str]) -> Path:
    config = write_config(tmp_path, {"mcpServers": {}})
    return shared_paths(["serve", "--shared", "--config", str(config)], environ).socket


def test_the_shared_socket_goes_under_a_macos_long_tmpdir_and_fits_104_bytes(tmp_path: Path, long_tmpdir: str) -> None:
    socket_path = _paths(tmp_path, {"TMPDIR": long_tmpdir})
    assert str(socket_path).startswith(long_tmpdir) and len(os.fsencode(socket_path)) < 104


def test_a_directory_too_long_for_a_socket_gives_way_to_the_next_and_then_to_tmp(
    tmp_path: Path, long_tmpdir: str, last_resort: str
) -> None:
    too_long = f"{long_tmpdir}{'w' * 60}/"
    os.makedirs(too_long)
    assert str(_paths(tmp_path, {"XDG_RUNTIME_DIR": too_long, "TMPDIR": long_tmpdir})).startswith(long_tmpdir)
    assert str(_paths(tmp_path, {"TMPDIR": too_long})).startswith(f"{last_resort}/claimcheck-shared-")


def test_with_macos_s_limit_a_directory_that_fits_linux_s_gives_way_to_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, last_resort: str
) -> None:
    with tempfile.TemporaryDirectory(prefix="cc-tmp-", dir="/tmp") as base:
        inside = f"/claimcheck-shared-{os.getuid()}/0123456789abcdef0123.sock"
        runtime = f"{base}/" + "r" * (107 - len(base) - 1 - len(inside))
        os.makedirs(runtime)
        assert str(_paths(tmp_path, {"XDG_RUNTIME_DIR": runtime})).startswith(runtime)  # Linux: 107 bytes fit
        monkeypatch.setattr(platform, "SOCKET_PATH_MAX", 103)  # macOS's sun_path
        assert str(_paths(tmp_path, {"XDG_RUNTIME_DIR": runtime})).startswith(f"{last_resort}/claimcheck-shared-")


def test_without_unix_sockets_serve_shared_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr("socket.AF_UNIX")
    with pytest.raises(SharedError, match="no Unix sockets"):
        _paths(tmp_path, {"TMPDIR": str(tmp_path)})


THREAD_READER = (
    "import os, sys\n"
    "import server.upstream.stdio as stdio\n"
    "stdio.loop_reads_pipes = lambda: False  # as on Windows, whose proactor loop polls no pipe\n"
    "sdk = stdio.stdio_server\n"
    "def marked():\n"
    "    open(os.environ['CC_MARK'], 'w').close()\n"
    "    return sdk()\n"
    "stdio.stdio_server = marked\n"
    "from server.launch import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


@pytest.mark.anyio
@pytest.mark.subprocess
async def test_where_the_loop_cannot_poll_stdin_the_sdk_s_thread_backed_reader_serves_the_session(
    tmp_path: Path,
) -> None:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from tests.support.processes import PYTHON, demo_server_entry
    from tests.support.proxies import text_of

    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    args = ["-c", THREAD_READER, "serve", "--config", str(config)]
    mark = tmp_path / "sdk-reader-used"
    env = {**os.environ, "CC_MARK": str(mark)}
    params = StdioServerParameters(command=PYTHON, args=args, env=env, cwd=str(ROOT))
    with anyio.fail_after(120):
        async with Client(stdio_client(params), mode="legacy") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            echoed = text_of(await client.call_tool("demo__echo", {"text": "through threads"}))
    assert "demo__echo" in names and echoed == "through threads"
    assert mark.exists()  # the SDK's reader served it, not the loop's


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("~/c.json", "/home/u/c.json"),
        ("$HOME/c.json", "/home/u/c.json"),
        ("${HOME}/.config/claimcheck/config.json", "/home/u/.config/claimcheck/config.json"),
        ("$UNSET/c.json", "$UNSET/c.json"),
        ("/etc/c.json", "/etc/c.json"),
        ("~other/c.json", "~other/c.json"),
    ],
    ids=["tilde", "dollar-home", "braced-home", "unset-stays", "absolute", "another-user-s-tilde-unexpanded"],
)
def test_a_path_a_client_s_entry_gives_is_expanded_as_a_shell_would_have(given: str, expected: str) -> None:
    """Claude Desktop and the other clients start claimcheck without a shell: `--config ~/…` or `$HOME/…` in an
    entry's args reach it as written."""
    if given.startswith("~other") and os.path.expanduser("~other") != "~other":
        pytest.skip("this machine has a user named other")
    assert platform.given_path(given, {"HOME": "/home/u"}) == Path(expected)
