"""Files only the user who runs claimcheck can read: directories 0700, files 0600.

The state directory holds the call history and the status API's token, so it is made private when it is
made, and tightened when an earlier version left it readable by others.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from server.platform import NOFOLLOW, owned_by_user

__all__ = ["private_dir", "private_file", "write_private"]

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Make `path` (and missing parents) with mode 0700; an existing one of ours loses group and other access."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    _tighten(path, path.stat(), DIR_MODE)  # a link the user made to their own state directory is followed
    return path


def private_file(path: Path) -> Path:
    """Create `path` empty with mode 0600 if it is missing; an existing one loses group and other access."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, FILE_MODE)
    except FileExistsError:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            raise OSError(f"{path} is a symbolic link; claimcheck keeps its state only in regular files") from None
        _tighten(path, info, FILE_MODE)
    else:
        os.close(descriptor)
    return path


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` as a 0600 file, atomically: readers see the old content or the new, whole."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | NOFOLLOW, FILE_MODE)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _tighten(path: Path, info: os.stat_result, mode: int) -> None:
    if owned_by_user(info) and stat.S_IMODE(info.st_mode) & ~mode:
        path.chmod(stat.S_IMODE(info.st_mode) & mode)
