"""The one door to a file under a root: a checked name, opened step by step by descriptor, never through a link.

Every directory on the way is opened with O_DIRECTORY|O_NOFOLLOW relative to the one before (`dir_fd`), so
a directory swapped for a link at any moment is refused rather than followed; the file itself is opened
with O_NOFOLLOW|O_NONBLOCK (a FIFO never blocks) after an lstat that refuses anything but a regular file,
and the descriptor must still be that same regular file afterwards. The size comes from the descriptor.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from fs_sandbox._index import SUFFIX, LineIndex, ends_digest
from fs_sandbox._index import build as build_index
from fs_sandbox.errors import NotAFile, NotFound, PathRefused, SandboxError
from fs_sandbox.platform import DIRECTORY_FLAGS, FILE_FLAGS, NEW_FILE_FLAGS, require_confinement

__all__ = ["OpenFile", "confine", "keep_index", "open_file", "split_name"]

_DRIVE = re.compile(r"^[A-Za-z]:")
_MAX_INDEX_BYTES = 64 << 20  # an index entry per MiB: enough for 2 PiB


@dataclass(eq=False, slots=True)
class OpenFile:
    """A regular file opened through `open_file`: its descriptor, and its size when it was opened.

    Reads never go past that size, so a file that grows later is seen as it was.
    """

    fd: int
    size: int
    name: str
    index: LineIndex | None = None  # the line index kept beside the file (`<name>.lines`), when it fits the size
    root: str | None = None  # the root `name` was opened under (`open_file`), for `keep_index`

    def read(self, offset: int, length: int) -> bytes:
        """Up to `length` bytes from `offset` (blocking; call it in a worker thread)."""
        length = min(length, self.size - offset)
        return os.pread(self.fd, length, offset) if length > 0 else b""

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> OpenFile:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


def split_name(name: str) -> list[str]:
    """The parts of a relative name; a `PathRefused` for empty, absolute, `..`, NUL or unencodable names.

    Backslashes count as separators; empty and `.` parts are dropped.
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
    return parts


def open_file(root: Path | str, name: str) -> OpenFile:
    """Open the regular file `name` under `root` for reading, following no link; a `SandboxError` otherwise.

    Blocking: call it in a worker thread. The caller closes the result.
    """
    require_confinement()
    parts = split_name(name)
    try:
        directory = os.open(root, DIRECTORY_FLAGS)
    except OSError as exc:
        raise _refused_root(root, name, exc) from None
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, DIRECTORY_FLAGS, dir_fd=directory)
            except OSError as exc:
                raise _refused_directory(directory, part, name, exc) from None
            os.close(directory)
            directory = inner
        opened = _open_regular(directory, parts[-1], name)
        opened.index = _read_index(directory, parts[-1], opened)
        opened.root = os.fspath(root)
        return opened
    finally:
        os.close(directory)


def keep_index(opened: OpenFile) -> LineIndex | None:
    """Build the line index of a file opened without one, give it to `opened`, and keep it beside the file
    (`<name>.lines`, as claimcheck's writers keep one) so that the next open finds it.

    The index is written under a fresh name in the file's directory, reached again through the door (by
    descriptor, no link followed), and renamed over `<name>.lines` only while `name` is still the file
    `opened` holds. Where it cannot be written (a read-only directory, say), it still serves this `opened`.
    Blocking: call it in a worker thread.
    """
    if opened.index is not None:
        return opened.index
    data = build_index(opened.fd, opened.size)
    opened.index = LineIndex.parse(data, opened.size)
    if opened.root is not None:
        try:
            _write_index(opened, data)
        except (OSError, SandboxError):
            pass  # the index is an optimisation: the next open builds it again
    return opened.index


def _write_index(opened: OpenFile, data: bytes) -> None:
    parts = split_name(opened.name)
    assert opened.root is not None
    directory = os.open(opened.root, DIRECTORY_FLAGS)
    try:
        for part in parts[:-1]:
            inner = os.open(part, DIRECTORY_FLAGS, dir_fd=directory)
            os.close(directory)
            directory = inner
        now, held = os.stat(parts[-1], dir_fd=directory, follow_symlinks=False), os.fstat(opened.fd)
        if (now.st_dev, now.st_ino, now.st_size) != (held.st_dev, held.st_ino, opened.size):
            return  # replaced or changed since it was opened: an index of what `opened` holds would be wrong
        temporary = f".{parts[-1]}{SUFFIX}.{secrets.token_hex(8)}.part"
        fd = os.open(temporary, NEW_FILE_FLAGS, 0o600, dir_fd=directory)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.rename(temporary, parts[-1] + SUFFIX, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            os.unlink(temporary, dir_fd=directory)
            raise
    finally:
        os.close(directory)


def confine(root: Path | str, name: str) -> Path:
    """The path of the regular file `name` names under `root`, checked through `open_file`.

    Only a check: a caller that reads should keep what `open_file` returns instead of reopening the path.
    """
    open_file(root, name).close()
    return Path(root, *split_name(name))


def _open_regular(directory: int, part: str, name: str) -> OpenFile:
    try:
        seen = os.stat(part, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        raise NotFound(f"no file named {name!r}") from None
    except OSError as exc:
        raise NotFound(f"{name!r} cannot be reached: {_why(exc)}") from None
    if not stat.S_ISREG(seen.st_mode):
        raise NotAFile(f"{name!r} is {_kind(seen.st_mode)}, not a regular file")
    try:
        fd = os.open(part, FILE_FLAGS, dir_fd=directory)
    except FileNotFoundError:
        raise NotFound(f"{name!r} no longer exists") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotAFile(f"{name!r} is {_kind(stat.S_IFLNK)}, not a regular file") from None
        raise NotAFile(f"{name!r} cannot be opened: {_why(exc)}") from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise NotAFile(f"{name!r} is {_kind(opened.st_mode)}, not a regular file")
        if (opened.st_dev, opened.st_ino) != (seen.st_dev, seen.st_ino):
            raise NotAFile(f"{name!r} was replaced while it was being opened; try again")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return OpenFile(fd, opened.st_size, name)


def _read_index(directory: int, part: str, opened: OpenFile) -> LineIndex | None:
    """The line index beside the file, opened the same way (a regular file, no link), if there is a valid one
    written for this file."""
    try:
        index = _open_regular(directory, part + SUFFIX, part + SUFFIX)
    except (NotFound, NotAFile):
        return None
    with index:
        if index.size > _MAX_INDEX_BYTES:
            return None
        return LineIndex.parse(index.read(0, index.size), opened.size, ends_digest(opened.fd, opened.size))


def _refused_root(root: Path | str, name: str, exc: OSError) -> Exception:
    try:
        if stat.S_ISLNK(os.lstat(root).st_mode):
            return PathRefused(f"the directory holding {name!r} is a symbolic link; links are not followed")
    except OSError:
        pass
    return NotFound(f"the directory holding {name!r} cannot be opened: {_why(exc)}")


def _refused_directory(directory: int, part: str, name: str, exc: OSError) -> Exception:
    """Why the directory `part` on the way to `name` cannot be entered."""
    try:
        mode = os.stat(part, dir_fd=directory, follow_symlinks=False).st_mode
    except OSError:
        return NotFound(f"no file named {name!r}")
    if stat.S_ISLNK(mode):
        return PathRefused(f"{name!r} leads through a symbolic link ({part!r}); links are not followed")
    if not stat.S_ISDIR(mode):
        return NotFound(f"{name!r} cannot be reached: {part!r} is not a directory")
    return NotFound(f"{name!r} cannot be reached: {_why(exc)}")


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link (links are not followed)"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)
