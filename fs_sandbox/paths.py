"""Turning a model-supplied name into a regular file inside the root, or refusing it."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from fs_sandbox.errors import NotAFile, NotFound, PathRefused

__all__ = ["confine", "open_regular"]

_DRIVE = re.compile(r"^[A-Za-z]:")


def confine(root: Path, name: str) -> Path:
    """The real path of the regular file `name` names under `root`; a `SandboxError` otherwise.

    Backslashes count as separators. Symlinks are followed only when the file they end at is a
    regular file inside the root.
    """
    if not isinstance(name, str) or not name.strip():
        raise PathRefused("the file name is empty")
    if "\x00" in name:
        raise PathRefused("the file name contains a NUL byte")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise PathRefused("the file name is not valid text (it contains a lone surrogate)") from None
    normal = name.replace("\\", "/")
    if normal.startswith("/") or _DRIVE.match(normal):
        raise PathRefused(f"absolute paths are not allowed ({name!r}); use a handle")
    parts = [part for part in normal.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise PathRefused(f"'..' is not allowed in a file name ({name!r})")
    if not parts:
        raise PathRefused(f"{name!r} names no file")
    real_root = os.path.realpath(root)
    candidate = os.path.join(real_root, *parts)
    try:
        real = os.path.realpath(candidate, strict=True)
    except FileNotFoundError:
        raise NotFound(f"no file named {name!r}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotAFile(f"{name!r} is a symlink loop") from None
        raise NotFound(f"{name!r} cannot be reached: {exc.strerror}") from None
    if os.path.commonpath([real_root, real]) != real_root:
        raise PathRefused(f"{name!r} leads outside the sandbox")
    try:
        mode = os.stat(real).st_mode
    except OSError as exc:
        raise NotFound(f"{name!r} cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise NotAFile(f"{name!r} is not a regular file")
    return Path(real)


def open_regular(path: Path) -> int:
    """A read-only descriptor of `path`, checked again after opening (no blocking on FIFOs, no links)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotFound(f"{path.name!r} no longer exists") from None
    except OSError as exc:
        raise NotAFile(f"{path.name!r} cannot be opened: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotAFile(f"{path.name!r} is not a regular file")
    os.set_blocking(fd, True)
    return fd
