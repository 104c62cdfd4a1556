"""The one place in fs_sandbox that knows the operating system (`server.platform` is its twin in server).

Confinement opens each directory of a name relative to the one before (`dir_fd`) and refuses links at every
step (`O_NOFOLLOW`, `O_DIRECTORY`): POSIX offers both, Windows neither. There the flags are 0 so that the package
still imports, and `require_confinement` refuses every open instead of reading through a link unchecked.
"""

from __future__ import annotations

import os
import socket

from fs_sandbox.errors import SandboxError

__all__ = ["DIRECTORY_FLAGS", "FILE_FLAGS", "NEW_FILE_FLAGS", "confines", "require_confinement", "worker_pair"]


def _flag(name: str) -> int:
    return int(getattr(os, name, 0))


_NOFOLLOW, _CLOEXEC = _flag("O_NOFOLLOW"), _flag("O_CLOEXEC")
DIRECTORY_FLAGS = os.O_RDONLY | _flag("O_DIRECTORY") | _NOFOLLOW | _CLOEXEC
FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | _flag("O_NONBLOCK") | _flag("O_NOCTTY") | _CLOEXEC
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC


def confines() -> bool:
    """Whether this OS can open a name step by step without following links (openat with O_NOFOLLOW)."""
    return bool(_NOFOLLOW and _flag("O_DIRECTORY")) and os.open in os.supports_dir_fd and hasattr(os, "pread")


def require_confinement() -> None:
    if not confines():
        raise SandboxError("reading stored files needs openat() with O_NOFOLLOW, which this platform lacks")


def worker_pair() -> tuple[socket.socket, socket.socket]:
    """A connected pair of sockets for a search worker (Unix where there are Unix sockets, else loopback TCP)."""
    return socket.socketpair()
