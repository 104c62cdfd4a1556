"""The one place in `server` that knows the operating system (fs_sandbox has its twin, `fs_sandbox.platform`).

Process information (start time, liveness, zombie state, the boot's identity) comes from procfs on Linux, where
it is exact and costs no import, and from psutil everywhere else (macOS's sysctl, Windows' API), imported only
when first asked. What neither can tell is "": a start time or boot that cannot be read never makes a live
process look dead, since a run root's sweep deletes on "gone" and a relay starts a second shared claimcheck on
it. The rest: process groups and their signals, the shared claimcheck's rendezvous (a Unix socket whose path
fits this system's `sun_path`: 104 bytes on macOS), the pipes of stdio (read on the event loop where the
loop polls pipes, else by the SDK's thread-backed transport), an exclusive lock, vectored writes, `O_NOFOLLOW`.
This module imports only the standard library at module level: the relay (`server.upstream.shared_relay`)
starts in tens of milliseconds on it. `CLAIMCHECK_PROCESS_INFO=procfs|psutil` forces one reading (for tests).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import anyio

__all__ = [
    "INHERITED_ENV_VARS",
    "NOFOLLOW",
    "NONBLOCK",
    "SOCKET_PATH_MAX",
    "VARIABLE",
    "app_config_dir",
    "boot_identity",
    "cancel_on_stop_signal",
    "exclusive_lock",
    "given_path",
    "group_options",
    "hangup_signals",
    "is_zombie",
    "loop_reads_pipes",
    "owned_by_user",
    "pid_alive",
    "private_duplicate",
    "process_start",
    "same_boot",
    "same_start",
    "signal_group",
    "socket_path_fits",
    "unix_socket",
    "unix_sockets",
    "user_id",
    "widen_pipe",
    "write_vector",
]

VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
"""An environment variable as a shell reads it in a path: `${NAME}` (group 1) or `$NAME` (group 2)."""
POSIX = os.name == "posix"
NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
"""Added to every `os.open` of claimcheck's own files: a symbolic link planted there is refused, not followed."""
NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)
"""Added to an open that must not wait on a FIFO planted where a file is expected."""
SOCKET_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
"""Bytes in a Unix socket's path: `sun_path` is 108 bytes on Linux, 104 on macOS and the BSDs, with its NUL."""
INHERITED_ENV_VARS: tuple[str, ...] = (
    (
        "APPDATA",
        "HOMEDRIVE",
        "HOMEPATH",
        "LOCALAPPDATA",
        "PATH",
        "PATHEXT",
        "PROCESSOR_ARCHITECTURE",
        "SYSTEMDRIVE",
        "SYSTEMROOT",
        "TEMP",
        "USERNAME",
        "USERPROFILE",
    )
    if sys.platform == "win32"
    else ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
)
"""What a stdio server inherits of claimcheck's environment: the SDK's `DEFAULT_INHERITED_ENV_VARS`, kept here so
that spawning needs no SDK import (`server.downstream.processes`); tests/test_compat_canary.py checks they agree."""
START_TOLERANCE_SECS = 1.0
"""Two start times this close name the same process (psutil's seconds may move by one when the clock is set)."""
BOOT_TOLERANCE_SECS = 120.0
"""Two boot times this close are the same boot (a reboot takes longer; a clock set by less is not a reboot)."""
PROC = "/proc"


# --- process information ---------------------------------------------------------------------------------------


@cache
def _procfs() -> bool:
    """Whether process information comes from procfs (Linux with /proc mounted) rather than psutil."""
    forced = os.environ.get("CLAIMCHECK_PROCESS_INFO")
    if forced in ("procfs", "psutil"):
        return forced == "procfs"
    return sys.platform.startswith("linux") and os.path.exists(f"{PROC}/self/stat")


def _psutil() -> Any:
    """psutil, imported on first use (it costs ~15 ms and a few MB, never spent on Linux); None if missing."""
    try:
        import psutil
    except ImportError:
        return None
    return psutil


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (another user's counts as alive; a zombie too, see `is_zombie`)."""
    if not POSIX:
        psutil = _psutil()
        return psutil is None or bool(psutil.pid_exists(pid))  # unknown: alive, never deleted on a guess
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start(pid: int) -> str:
    """When `pid` started, as seconds since boot ("12345" clock ticks from procfs, "s12.34" from psutil), or "".

    `same_start` compares the two kinds in seconds, so a marker written by one reading stays valid to the other."""
    if _procfs():
        return _stat_field(pid, 19)
    psutil = _psutil()
    if psutil is None:
        return ""
    try:
        seconds = psutil.Process(pid).create_time() - psutil.boot_time()
    except (psutil.Error, OSError, RuntimeError):  # psutil on Linux without /proc raises plain OSError
        return ""
    return f"s{seconds:.2f}"


def same_start(recorded: str, current: str) -> bool:
    """False only when both start times are known and name different processes; an unknown one is the same."""
    then, now = _start_secs(recorded), _start_secs(current)
    if then is None or now is None:
        return True
    if recorded.isdigit() and current.isdigit():
        return recorded == current  # clock ticks from procfs: exact
    return abs(then - now) <= START_TOLERANCE_SECS


def _start_secs(value: str) -> float | None:
    try:
        if value.isdigit():
            return int(value) / _clock_ticks()
        return float(value[1:]) if value.startswith("s") else None
    except ValueError:
        return None


@cache
def _clock_ticks() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):
        return 100


def is_zombie(pid: int) -> bool:
    """Whether `pid` has ended and waits for its parent to reap it; False where that cannot be told."""
    if _procfs():
        return _stat_field(pid, 0) == "Z"
    psutil = _psutil()
    if psutil is None:
        return False
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.ZombieProcess:
        return True
    except (psutil.Error, OSError, RuntimeError):
        return False


def boot_identity() -> str:
    """This boot's identity: the kernel's boot id (Linux), "t<boot time>" from psutil elsewhere, or ""."""
    if _procfs():
        try:
            with open(f"{PROC}/sys/kernel/random/boot_id", encoding="ascii") as boot:
                return boot.read().strip()
        except OSError:
            return ""
    psutil = _psutil()
    if psutil is None:
        return ""
    try:
        return f"t{psutil.boot_time():.0f}"
    except (OSError, RuntimeError):
        return ""


def same_boot(recorded: str, current: str) -> bool:
    """False only when both identities are known, of one kind, and name different boots."""
    if not recorded or not current:
        return True
    timed = recorded.startswith("t")
    if timed != current.startswith("t"):
        return True  # a kernel's boot id beside a boot time: cannot tell
    if not timed:
        return recorded == current
    try:
        return abs(float(recorded[1:]) - float(current[1:])) <= BOOT_TOLERANCE_SECS
    except ValueError:
        return True


def _stat_field(pid: int, index: int) -> str:
    """Field `index` after the command name of /proc/<pid>/stat (0: the state), or "" where it cannot be read."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as proc_stat:
            raw = proc_stat.read()
    except OSError:
        return ""
    # The command name (field 2) may hold spaces and parentheses; the fields after its last ")" are plain.
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[index].decode("ascii") if len(fields) > index else ""


# --- users, groups and signals ---------------------------------------------------------------------------------


def user_id() -> int | None:
    """The user's numeric id (None where the OS has none: Windows)."""
    getuid = getattr(os, "getuid", None)
    return getuid() if getuid is not None else None


def owned_by_user(info: os.stat_result) -> bool:
    """Whether a file's owner is this user (where owners cannot be told, every file of the user's own is)."""
    uid = user_id()
    return uid is None or info.st_uid == uid


def group_options() -> dict[str, Any]:
    """Options for starting a child in a process group of its own, so that its grandchildren can be stopped too."""
    if POSIX:
        return {"start_new_session": True}
    return {"creationflags": getattr(__import__("subprocess"), "CREATE_NEW_PROCESS_GROUP", 0)}


def signal_group(pid: int, *, kill: bool = False) -> None:
    """SIGTERM (or SIGKILL) the process group `pid` leads; where there are no groups, the process itself."""
    with contextlib.suppress(OSError):  # gone already, or not ours
        if POSIX:
            os.killpg(pid, signal.SIGKILL if kill else signal.SIGTERM)
        else:
            os.kill(pid, signal.SIGTERM)  # TerminateProcess on Windows


def terminate(pid: int) -> bool:
    """SIGTERM one process (TerminateProcess on Windows): claimcheck exits cleanly on it. False when it is gone, or
    not this user's."""
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return False
    return True


async def cancel_on_stop_signal(scope: anyio.CancelScope) -> None:
    """Cancel `scope` at SIGINT or SIGTERM. Where the loop takes no signal handlers (Windows), Ctrl+C still
    arrives as KeyboardInterrupt, and this waits for nothing."""
    import anyio

    if not POSIX:
        await anyio.sleep_forever()
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return


@contextlib.contextmanager
def hangup_signals() -> Iterator[AsyncIterator[object] | None]:
    """SIGHUP, received as an async iterator while the block runs (its default action, ending the process, is off
    meanwhile); None where there is no SIGHUP (Windows) or the loop takes no signal handlers (not the main thread)."""
    import anyio

    with contextlib.ExitStack() as stack:
        signals = None
        if POSIX:
            try:
                signals = stack.enter_context(anyio.open_signal_receiver(signal.SIGHUP))
            except (ValueError, RuntimeError, NotImplementedError):  # the loop takes no handlers here
                signals = None
        yield signals


# --- descriptors, pipes and locks ------------------------------------------------------------------------------


def private_duplicate(fd: int) -> int:
    """A duplicate of `fd` numbered 3 or above that children do not inherit."""
    if POSIX:
        import fcntl

        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    return os.dup(fd)  # not inheritable (PEP 446); 0, 1 and 2 are open, so it is 3 or above


def widen_pipe(fd: int | None, size: int) -> None:
    """Make the pipe at `fd` hold `size` bytes where the system allows it (Linux, up to pipe-max-size)."""
    if fd is None or not POSIX:
        return
    import fcntl

    setting = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setting is None:
        return
    with contextlib.suppress(OSError):  # over pipe-max-size for an unprivileged user: the default stays
        fcntl.fcntl(fd, setting, size)


@contextlib.contextmanager
def exclusive_lock(file: IO[bytes]) -> Iterator[None]:
    """Hold an exclusive lock on an open file for the block; racing holders queue."""
    if POSIX:
        import fcntl

        fcntl.flock(file.fileno(), fcntl.LOCK_EX)
        yield  # released when the file is closed
        return
    import msvcrt  # pragma: no cover - Windows

    locking: Any = msvcrt.locking  # type: ignore[attr-defined,unused-ignore]
    locking(file.fileno(), msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined,unused-ignore]
    try:
        yield
    finally:
        file.seek(0)
        locking(file.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined,unused-ignore]


def write_vector(fd: int, pieces: list[bytes]) -> int:
    """Write `pieces` in one call where the OS takes a vector (`writev`); bytes written."""
    writev = getattr(os, "writev", None)
    return writev(fd, pieces) if writev is not None else os.write(fd, b"".join(pieces))


def loop_reads_pipes() -> bool:
    """Whether the running event loop can poll a pipe (POSIX selector loops can; Windows' proactor cannot)."""
    return POSIX


# --- the shared claimcheck's rendezvous --------------------------------------------------------------------------


def unix_sockets() -> bool:
    return hasattr(socket, "AF_UNIX")


def socket_path_fits(path: str | os.PathLike[str]) -> bool:
    """Whether a Unix socket may be bound at `path` on this system (`SOCKET_PATH_MAX`)."""
    return len(os.fsencode(path)) <= SOCKET_PATH_MAX


def unix_socket() -> socket.socket:
    """A new stream socket of the Unix family; OSError where the platform has none."""
    family = getattr(socket, "AF_UNIX", None)
    if family is None:
        raise OSError("this platform has no Unix sockets (serve --shared needs them): run without --shared")
    return socket.socket(family, socket.SOCK_STREAM)


def app_config_dir(environ: Mapping[str, str] = os.environ, system: str = sys.platform) -> Path:
    """Where desktop applications keep their settings (Claude Desktop's, VS Code's `User/`): macOS
    `~/Library/Application Support`, Windows `%APPDATA%`, else `$XDG_CONFIG_HOME` or `~/.config`."""
    home = Path(environ.get("HOME") or Path.home())
    if system == "darwin":
        return home / "Library" / "Application Support"
    if system == "win32" and environ.get("APPDATA"):
        return Path(environ["APPDATA"])
    return Path(environ.get("XDG_CONFIG_HOME") or home / ".config")


def given_path(path: str | os.PathLike[str], environ: Mapping[str, str] = os.environ) -> Path:
    """A path as a client's entry gives it to claimcheck (`--config`, `CLAIMCHECK_CONFIG`), where no shell expanded
    it: `~`, `$HOME` and `${HOME}` filled in from `environ` (a variable that is not set stays as written, and the
    file is then not found)."""
    path = os.fspath(path)

    def value(found: re.Match[str]) -> str:
        return environ.get(found.group(1) or found.group(2), found.group(0))

    path = VARIABLE.sub(value, path)
    if (path == "~" or path.startswith(("~/", "~" + os.sep))) and environ.get("HOME"):
        return Path(environ["HOME"] + path[1:])
    return Path(os.path.expanduser(path))  # `~user/…` of no such user stays as written (Path's would raise)
