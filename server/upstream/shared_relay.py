"""`claimcheck serve --shared`: a thin stdio relay to the user's shared claimcheck for this config.

The relay imports only the standard library (no SDK, no pydantic), so it starts in a few tens of milliseconds,
and it only moves bytes: both protocol eras, progress, cancellation, sampling and elicitation pass through as
they are. The shared claimcheck (`server.upstream.shared_serve`) listens on a Unix socket `<key>.sock` in a 0700
directory of the user's under `$XDG_RUNTIME_DIR`, else the temp dir, else /tmp (the first where the socket's path
fits macOS's 104-byte limit, `server.platform`), the socket 0600; the key is a hash of
the resolved config (its path, its text with `${VAR}` expanded, the flags that change the proxy, the version
and the interpreter). If none answers, the relay starts one, holding `<key>.lock` so that racing relays end
with exactly one. `<key>.pid` lives as long as the shared claimcheck and names it by pid, start time and boot id:
found naming no such process (none with that pid, or another process that has the pid now), the last one was
killed, and the relay starts a new one at once and says that earlier handles are gone.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import socket
import stat
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from server.handles.run_root import Marker  # standard library only
from server.platform import (
    boot_identity,
    exclusive_lock,
    given_path,
    group_options,
    is_zombie,
    owned_by_user,
    pid_alive,
    process_start,
    socket_path_fits,
    unix_socket,
    unix_sockets,
    user_id,
)

if TYPE_CHECKING:
    import subprocess

__all__ = ["SharedPaths", "pid_line", "relay_main", "running_shared", "shared_paths", "wants_shared"]

_CHUNK = 1 << 16
_START_WAIT_SECS = 120.0  # a loaded machine can take long to start Python and the SDK
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")  # as `root` takes them
_KEYED_FLAGS = ("--no-async", "--no-api")  # flags that change what the shared claimcheck does
_KEYED_OPTIONS = ("--async-timeout", "--token-threshold", "--auth-token-env", "--log-level")
EXIT_CONFIG = 2
LAST_RESORT = "/tmp"  # short everywhere: where the socket goes when the runtime and temp dirs are too long
EXIT_FAILED = 1


class SharedPaths:
    """Where the shared claimcheck of one config lives: its directory, socket, lock, pid file and log."""

    def __init__(self, directory: Path, key: str) -> None:
        self.directory = directory
        self.key = key
        self.socket = directory / f"{key}.sock"
        self.lock = directory / f"{key}.lock"
        self.pid = directory / f"{key}.pid"
        self.log = directory / f"{key}.log"


def _option(args: list[str], name: str) -> str | None:
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(name + "="):
            return arg.partition("=")[2]
    return None


def config_path(args: list[str], environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """The config `serve` would read (as `server.config.default_config_path`, without importing pydantic)."""
    given = _option(args, "--config")
    if given:
        return given_path(given, environ)
    if environ.get("CLAIMCHECK_CONFIG"):
        return given_path(environ["CLAIMCHECK_CONFIG"], environ)
    base = Path(environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "claimcheck" / "config.json"


def wants_shared(args: list[str]) -> bool:
    """Whether these `claimcheck` arguments ask for the relay: `serve --shared`, or `serve` (over stdio) with
    `settings.shared: true` in its config."""
    if "serve" not in args or _option(args, "--shared-socket") is not None:
        return False
    if (_option(args, "--transport") or "stdio") != "stdio":
        return False  # `serve` says that --shared is for stdio only
    if "--shared" in args:
        return True
    try:
        data = json.loads(config_path(args).read_text(encoding="utf-8"))
        return data.get("settings", {}).get("shared") is True
    except (OSError, ValueError, AttributeError):
        return False  # `serve` itself reports a config it cannot read


def shared_paths(args: list[str], environ: dict[str, str] | os._Environ[str] = os.environ) -> SharedPaths:
    """The directory (made 0700 if missing, refused unless it is the user's own and private) and the key."""
    path = config_path(args, environ)
    text = _config_text(path)
    resolved = _VAR.sub(lambda m: environ.get(m.group(1) or m.group(2), m.group(0)), text)
    keyed = [arg for arg in args if arg in _KEYED_FLAGS]
    keyed += [f"{name}={_option(args, name)}" for name in _KEYED_OPTIONS if _option(args, name) is not None]
    from server.version import VERSION  # a constant, no imports

    material = "\0".join([VERSION, sys.executable, str(path.resolve()), resolved, *keyed])
    key = hashlib.sha256(material.encode("utf-8", "replace")).hexdigest()[:20]
    directory = _directory(environ, key)
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise SharedError(f"cannot make the shared claimcheck's directory {directory}: {exc.strerror}") from None
    info = directory.lstat()
    if not stat.S_ISDIR(info.st_mode) or not owned_by_user(info) or info.st_mode & 0o077:
        raise SharedError(
            f"refusing {directory} for the shared claimcheck: it must be a directory of yours with mode 0700"
        )
    return SharedPaths(directory, key)


def _config_text(path: Path) -> str:
    """What the key is made of: the config file's text, or a config folder's (each file's name and text, in the
    order of their names)."""
    if not path.is_dir():
        return path.read_text(encoding="utf-8")
    files = sorted(file for file in path.iterdir() if file.is_file())
    return "\0".join(f"{file.name}\0{file.read_text(encoding='utf-8', errors='replace')}" for file in files)


def _directory(environ: dict[str, str] | os._Environ[str], key: str) -> Path:
    """`claimcheck-shared-<uid>` under `$XDG_RUNTIME_DIR`, else the temp dir, else /tmp: the first where the
    socket's path fits the platform's limit (macOS's `$TMPDIR` is 49 characters; `sun_path` holds 103)."""
    if not unix_sockets():
        raise SharedError("this platform has no Unix sockets, which serve --shared needs: run without --shared")
    tried = []
    for base in (environ.get("XDG_RUNTIME_DIR"), *(environ.get(n) for n in ("TMPDIR", "TEMP", "TMP")), LAST_RESORT):
        if not base:
            continue
        directory = Path(base) / f"claimcheck-shared-{user_id()}"
        if socket_path_fits(directory / f"{key}.sock"):  # the longest name in it (`shared_serve` binds shorter)
            return directory
        tried.append(str(directory))
    raise SharedError(f"no directory for the shared claimcheck's socket is short enough: {', '.join(tried)}")


def running_shared(environ: dict[str, str] | os._Environ[str] = os.environ) -> list[int]:
    """The pids of this user's shared claimcheck processes that the relays of this environment reach (one per
    config and keyed flags), read from their pid files; `claimcheck stop` ends them."""
    try:
        directory = _directory(environ, "0" * 20)  # the directory depends on the key's length only: 20 characters
    except SharedError:
        return []
    recorded = [_recorded(path) for path in sorted(directory.glob("*.pid"))]
    return [marker.pid for marker in recorded if marker is not None and _runs(marker)]


class SharedError(Exception):
    """The relay cannot reach or start the shared claimcheck; the message says why."""


def connect(path: Path) -> socket.socket | None:
    """A connection to the shared claimcheck at `path`, or None if none listens there."""
    sock = unix_socket()
    try:
        sock.connect(str(path))
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.ENOENT, errno.ECONNREFUSED):
            return None
        raise SharedError(f"cannot connect to the shared claimcheck at {path}: {exc.strerror}") from None
    return sock


def pid_line(pid: int) -> str:
    """What `<key>.pid` holds: the shared claimcheck's pid, its start time and the boot id ("-" where unknown)."""
    return f"{pid} {process_start(pid) or '-'} {boot_identity() or '-'}\n"


def _recorded(path: Path) -> Marker | None:
    """The process a `<key>.pid` names; None without one, or for one no claimcheck wrote (a bad pid)."""
    try:
        pid, start, boot = path.read_text(encoding="utf-8").split()[:3]
        number = int(pid)
    except (OSError, ValueError):
        return None
    if not 0 < number < 2**31:  # 0 and negatives would name process groups, or every process
        return None
    return Marker(pid=number, start=start.strip("-"), boot=boot.strip("-"), run="")


def _runs(recorded: Marker) -> bool:
    """Whether the shared claimcheck a pid file names still runs: its pid alive with the start time and boot
    recorded. Without them (an older file) the process cannot be told from another that took the pid: not it."""
    return bool(recorded.start and recorded.boot) and not recorded.owner_is_gone() and _alive(recorded.pid)


def _alive(pid: int) -> bool:
    # a zombie (its parent, the relay that started it, is gone and nobody reaps it) has ended too
    return pid_alive(pid) and not is_zombie(pid)


def reach(args: list[str], paths: SharedPaths) -> tuple[socket.socket, str | None]:
    """A connection to the shared claimcheck, started if need be; and what to tell the user, if anything."""
    sock = connect(paths.socket)
    if sock is not None:
        return sock, None
    with open(paths.lock, "a+b", opener=_private) as lock, exclusive_lock(lock):  # racing relays queue here
        sock = connect(paths.socket)
        if sock is not None:
            return sock, None
        note = None
        recorded = _recorded(paths.pid)
        if recorded is not None and _runs(recorded):  # ending after its idle time: let it go, then start anew
            deadline = time.monotonic() + 30
            while _runs(recorded) and time.monotonic() < deadline:
                time.sleep(0.05)
        elif recorded is not None:
            note = (
                f"claimcheck: the shared claimcheck for this config (pid {recorded.pid}) was stopped before its idle "
                "time; a new one was started. Handles made before are gone: call those tools again."
            )
        restarted = ["--shared-restarted"] if note else []
        process = _start(args, paths, restarted)
        deadline = time.monotonic() + _START_WAIT_SECS
        while True:
            sock = connect(paths.socket)
            if sock is not None:
                return sock, note
            if process.poll() is not None:
                raise SharedError(
                    f"the shared claimcheck exited ({process.returncode}) before listening: {_log_tail(paths.log)}"
                )
            if time.monotonic() > deadline:
                raise SharedError(f"the shared claimcheck did not listen within {_START_WAIT_SECS:g} s")
            time.sleep(0.01)


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


def _start(args: list[str], paths: SharedPaths, extra: list[str]) -> subprocess.Popen[bytes]:
    """The shared claimcheck, in a session of its own (it outlives this relay), its stderr to `<key>.log`."""
    import subprocess  # only on the cold path

    kept = [arg for arg in args if arg != "--shared"]  # global flags stay before `serve`
    config = ["--config", str(config_path(args))] if _option(args, "--config") is None else []
    command = [sys.executable, "-m", "server", *kept, *config, "--shared-socket", str(paths.socket), *extra]
    log = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, **group_options()
        )
    finally:
        os.close(log)


def _log_tail(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(lines[-5:]) or "(nothing in its log)"


def pump(sock: socket.socket) -> int:
    """Move bytes both ways until the shared claimcheck closes this connection; its exit status."""
    client_done = threading.Event()

    def upstream() -> None:
        try:
            while chunk := os.read(0, _CHUNK):
                sock.sendall(chunk)
        except OSError:
            pass
        client_done.set()
        try:
            sock.shutdown(socket.SHUT_WR)  # the client is done: the shared claimcheck ends this session
        except OSError:
            pass

    threading.Thread(target=upstream, daemon=True).start()
    while True:
        try:
            chunk = sock.recv(_CHUNK)
        except OSError:
            chunk = b""
        if not chunk:
            if client_done.is_set():
                return 0
            print("claimcheck: the shared claimcheck closed this session (it was stopped)", file=sys.stderr, flush=True)
            return EXIT_FAILED
        view = memoryview(chunk)
        try:
            while view:
                view = view[os.write(1, view) :]
        except OSError:
            return 0  # the client went away


def relay_main(args: list[str]) -> int:
    """Run the relay; its exit status."""
    try:
        paths = shared_paths(args)
        sock, note = reach(args, paths)
    except (SharedError, OSError) as exc:
        print(f"claimcheck: {exc}", file=sys.stderr, flush=True)
        return EXIT_CONFIG if isinstance(exc, OSError) else EXIT_FAILED
    if note is not None:
        print(note, file=sys.stderr, flush=True)
    status = pump(sock)
    sys.stdout.flush()
    os._exit(status)  # the stdin thread may still block in read; nothing else is left to clean up
