"""macOS, simulated on Linux: the core of claimcheck runs with /proc hidden and a `$TMPDIR` as long as macOS's.

No machine here runs macOS, so what macOS changes for claimcheck is reproduced: there is no procfs (claimcheck's
processes see an empty tmpfs over /proc, in a mount namespace of their own), `$TMPDIR` is
`/var/folders/xx/…/T/`-long (49 characters) and `$XDG_RUNTIME_DIR` is unset, so the shared claimcheck's socket
goes under `$TMPDIR` and must fit macOS's 104-byte `sun_path`. `server.platform` then takes the path it takes on
macOS (psutil rather than procfs). Linux's psutil cannot read processes without procfs either, so the simulation
runs at the floor below real macOS (no start times, no boot identity, no zombie state, as a platform psutil
could not read would): liveness comes from `kill(pid, 0)`, and the sweep, the relay, discovery and `ps` must
still be exact. On real macOS psutil adds the start times and boot identity back, which only sharpens them.

`test_the_core_suite_passes_*` starts `unshare --mount --fork`, mounts the tmpfs, and runs the chosen core files
(`INNER`, this one included) in a pytest inside; there the tests below `SIMULATED` run. The harness itself still
needs to see processes (test_shared counts the shared claimcheck's), so the real /proc is bind-mounted at a path
only the tests are told of (`CLAIMCHECK_TEST_PROC`); claimcheck's code knows nothing of it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.abc
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from server.platform import boot_identity, pid_alive, process_start
from server.upstream.shared_relay import shared_paths
from tests.support.os_packages import in_ci
from tests.support.processes import PYTHON, announced, demo_server_entry, write_config
from tests.support.proxies import text_of

ROOT = Path(__file__).resolve().parent.parent
SIMULATED = os.environ.get("CLAIMCHECK_SIMULATED_MACOS") == "1"
MACOS_TMPDIR_CHARS = 49  # /var/folders/xx/<28 characters>/T/
MACOS_SOCKET_PATH_MAX = 103  # sun_path is 104 bytes there, with its NUL
INNER = [
    "tests/test_macos_simulated.py",
    "tests/handles/test_run_root.py",
    "tests/upstream/test_shared.py",
    "tests/e2e/test_lifecycle.py",
    "tests/e2e/test_many_instances.py",
    "tests/downstream/test_subprocess.py::test_the_demo_runs_and_shows_forwarding_handles_errors_and_restart",
]
"""The core the simulation runs: the stale-root sweep, the shared relay, `ps` and discovery, stdio sessions and
the demo. Not the browser, replica or model tests, nor the command line's parsing (nothing there reads
processes); about two minutes in one of CI's two workers."""

_outside = pytest.mark.skipif(not SIMULATED, reason="runs inside the macOS simulation (test_the_core_suite_passes_…)")
_Test = TypeVar("_Test", bound=Callable[..., Any])


def inside(test: _Test) -> _Test:
    """A test that runs inside the simulation only; marked `subprocess`, as the launcher that runs it is."""
    marked: _Test = pytest.mark.subprocess(_outside(test))
    return marked


def _namespaces_missing() -> str | None:
    """Why a mount namespace with its own /proc cannot be made here, or None."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is missing"
    probe = subprocess.run(
        ["unshare", "--mount", "--fork", "sh", "-c", "mount -t tmpfs none /proc && test ! -e /proc/self"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return None if probe.returncode == 0 else f"no mount namespace here: {probe.stderr.strip() or probe.returncode}"


@pytest.fixture
def macos_tmpdir() -> Iterator[Path]:
    """A real directory whose path, with its trailing slash, is as long as macOS's `$TMPDIR`."""
    with tempfile.TemporaryDirectory(prefix="cc-mac-", dir="/tmp") as base:
        stem = f"{base}/folders/xx/"
        path = Path(stem + "y" * (MACOS_TMPDIR_CHARS - len(stem) - len("/T/")) + "/T")
        path.mkdir(parents=True, mode=0o700)
        assert len(f"{path}/") == MACOS_TMPDIR_CHARS
        yield path


@pytest.mark.subprocess
@pytest.mark.skipif(SIMULATED, reason="this is the simulation's launcher")
def test_the_core_suite_passes_with_proc_hidden_and_a_tmpdir_as_long_as_macos(
    tmp_path: Path, macos_tmpdir: Path
) -> None:
    missing = _namespaces_missing()
    if missing is not None:
        if in_ci():
            pytest.fail(f"{missing} (CI is set, so the macOS simulation must run)")
        pytest.skip(missing)
    harness = tmp_path / "harness-proc"
    harness.mkdir()
    hide = (
        'set -e; mount --bind /proc "$HARNESS"; mount -t tmpfs -o size=64k,mode=555 no-procfs /proc; '
        'test ! -e /proc/self; exec "$@"'
    )
    env = {name: value for name, value in os.environ.items() if name not in ("XDG_RUNTIME_DIR", "PYTEST_ADDOPTS")}
    env |= {
        "TMPDIR": f"{macos_tmpdir}/",
        "HARNESS": str(harness),
        "CLAIMCHECK_TEST_PROC": str(harness),
        "CLAIMCHECK_SIMULATED_MACOS": "1",
    }
    launcher = f"{INNER[0]}::{test_the_core_suite_passes_with_proc_hidden_and_a_tmpdir_as_long_as_macos.__name__}"
    # One process: the core files share the simulated $TMPDIR, where the shared claimcheck's socket goes.
    pytest_args = ["-m", "pytest", "-q", "-n", "0", "-p", "no:randomly", "-p", "no:cacheprovider", "-rs", "-x", *INNER]
    pytest_args += ["--deselect", launcher]
    done = subprocess.run(
        ["unshare", "--mount", "--fork", "sh", "-c", hide, "sh", sys.executable, *pytest_args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    report = done.stdout[-6000:] + done.stderr[-2000:]
    assert done.returncode == 0, report
    assert "test_macos_simulated.py" not in report.split("short test summary info")[-1], report  # none skipped


# --- inside the simulation ---------------------------------------------------------------------------------------


@inside
def test_claimcheck_sees_no_procfs_and_takes_the_path_it_takes_on_macos() -> None:
    from server import platform

    assert not Path("/proc/self").exists()
    assert len(os.environ["TMPDIR"]) == MACOS_TMPDIR_CHARS and "XDG_RUNTIME_DIR" not in os.environ
    assert not platform._procfs()  # psutil, as on darwin
    assert (process_start(os.getpid()), boot_identity()) == ("", "")  # the floor: nothing psutil could read
    assert pid_alive(os.getpid())


STORE = (
    "import sys\n"
    "from pathlib import Path\n"
    "from server.handles.store import OutputStore\n"
    "store = OutputStore.create(Path(sys.argv[1]))\n"
    "print(store.run_root, flush=True)\n"
    "sys.stdin.read()\n"  # until the test closes stdin (or kills it)
)


@inside
def test_the_stale_root_sweep_removes_a_killed_runs_root_and_keeps_a_live_ones(tmp_path: Path) -> None:
    from server.handles.run_root import remove_stale_roots

    def start() -> tuple[subprocess.Popen[str], Path]:
        child = subprocess.Popen(
            [sys.executable, "-c", STORE, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        return child, Path(child.stdout.readline().strip())

    (killed, killed_root), (live, live_root) = start(), start()
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        assert not pid_alive(killed.pid)
        assert remove_stale_roots(tmp_path) == [killed_root]
        assert not killed_root.exists() and live_root.is_dir()
    finally:
        live.communicate("", timeout=60)
    assert remove_stale_roots(tmp_path) == [live_root]  # once it has ended, its root goes too


@inside
@pytest.mark.anyio
async def test_the_relay_s_socket_fits_macos_sun_path_under_its_tmpdir_and_serves_two_relays(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    args = ["serve", "--shared", "--config", str(config)]
    paths = shared_paths(args)
    assert paths.directory.parent == Path(os.environ["TMPDIR"])
    assert len(os.fsencode(paths.socket)) <= MACOS_SOCKET_PATH_MAX
    params = StdioServerParameters(command=PYTHON, args=["-m", "server", *args], env=dict(os.environ))
    pids, echoed = [], []
    try:
        with anyio.fail_after(240):
            for word in ("first", "second"):
                async with Client(stdio_client(params), mode="legacy") as client:
                    echoed.append(text_of(await client.call_tool("demo__echo", {"text": word})))
                    pids.append(int(paths.pid.read_text(encoding="utf-8").split()[0]))
    finally:
        for pid in set(pids):
            os.kill(pid, signal.SIGTERM)
    assert echoed == ["first", "second"]
    assert len(set(pids)) == 1  # the second relay reached the shared claimcheck the first one started
    assert paths.pid.read_text(encoding="utf-8").split()[1:] == ["-", "-"]  # no start time or boot to record here


@inside
@pytest.mark.anyio
async def test_discovery_and_ps_list_a_running_instance_and_forget_a_killed_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": {"stateDir": str(state)}})
    env = {**os.environ, "CLAIMCHECK_API_ENABLED": "true", "CLAIMCHECK_API_PORT": "0"}
    command = [PYTHON, "-m", "server", "serve", "--config", str(config)]
    ps = [PYTHON, "-m", "server", "ps", "--config", str(config)]

    with anyio.fail_after(120):
        async with (
            await anyio.open_process(command, env=env) as kept,
            await anyio.open_process(command, env=env) as killed,
        ):
            for process in (kept, killed):
                assert process.stderr is not None
                await announced(process.stderr, "status API at ", said=[])
            both = (await anyio.run_process(ps, env=env)).stdout.decode()
            killed.kill()
            await killed.wait()
            one = (await anyio.run_process(ps, env=env)).stdout.decode()
            files = sorted(path.name for path in (state / "instances").glob("*.json"))
            assert kept.stdin is not None
            await kept.stdin.aclose()
            await kept.wait()

    def listed(output: str) -> list[int]:
        return sorted(int(line.split()[1]) for line in output.splitlines() if line.startswith("pid "))

    assert listed(both) == sorted([kept.pid, killed.pid]) and "not answering" not in both
    assert listed(one) == [kept.pid]
    assert files == [f"{kept.pid}.json"]  # the killed instance's discovery file was removed
