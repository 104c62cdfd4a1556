"""The output store: one private run root per process, one directory per client session, one file per handle.

Outputs are stored whole on disk so they can be served in pieces later; run roots left behind by dead
processes are swept at start, and only those (`server.handles.run_root`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import aiofiles
import anyio

from fs_sandbox import INDEX_SUFFIX, IndexBuilder, NotFound, OpenFile, SandboxError, open_file
from server.errors import ClaimcheckError
from server.handles.run_root import make_run_root, remove_stale_roots
from server.platform import NOFOLLOW

__all__ = [
    "OutputStore",
    "SessionStore",
    "StoreError",
    "StoredFile",
    "random_hex",
    "session_of",
]

logger = logging.getLogger(__name__)

_CHUNK_CHARS = 1 << 20
_RANDOM_POOL = 4096


class _RandomIds:
    """Random version-4 UUIDs as 32 hex digits, from the OS's random bytes read 4 KiB at a time (one system call
    per 256 ids, not one per id: a handle is made on every proxied call)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool = b""
        self._at = 0

    def hex(self) -> str:
        with self._lock:
            if self._at + 16 > len(self._pool):
                self._pool, self._at = os.urandom(_RANDOM_POOL), 0
            raw = bytearray(self._pool[self._at : self._at + 16])
            self._at += 16
        raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
        raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
        return raw.hex()


random_hex = _RandomIds().hex
_HANDLE_RE = re.compile(r"(session-[0-9a-f]{32})/([0-9a-f]{32})")


def session_of(handle: str) -> str | None:
    """The session directory a well-formed handle names (`session-<hex>`), None for anything else."""
    match = _HANDLE_RE.fullmatch(handle)
    return match.group(1) if match else None


class StoreError(ClaimcheckError):
    """An output could not be stored or read back; the message names the handle and the reason."""

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message  # what went wrong, without the handle


@dataclass(frozen=True, slots=True)
class StoredFile:
    """What was written for one handle."""

    handle: str
    path: Path
    bytes: int
    lines: int
    sha256: str


@dataclass(frozen=True, slots=True)
class OutputStore:
    """The run root <root>/claimcheck-run-<hex>/ (see `server.handles.run_root`) and its per-session directories."""

    run_root: Path
    replicated: bool = False  # one directory of every replica (server.handles.redis_state): never removed by one

    @classmethod
    def create(cls, root: Path | None = None) -> OutputStore:
        """Sweep stale run roots under `root` (the temp dir by default), then make this process's own."""
        base = Path(tempfile.gettempdir()) if root is None else root
        try:
            base.mkdir(parents=True, exist_ok=True)
            remove_stale_roots(base)
            run_root = make_run_root(base)
        except OSError as exc:
            raise StoreError(f"could not create the output store under {base}: {_reason(exc)}") from exc
        return cls(run_root)

    @classmethod
    def shared_by_replicas(cls, root: Path | None = None) -> OutputStore:
        """`<root>/claimcheck-shared/`, the run root every replica uses (the same path on each): it has no
        marker, so no replica's sweep of stale run roots ever removes it, and none removes it at exit."""
        base = Path(tempfile.gettempdir()) if root is None else root
        run_root = base / "claimcheck-shared"
        try:
            run_root.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"could not create the shared output store {run_root}: {_reason(exc)}") from exc
        return cls(run_root, replicated=True)

    def open_session(self, key: str | None = None) -> SessionStore:
        """Make a new, empty session directory; with `key` (32 hex, which every replica computes for one
        principal), the directory of that key, made if missing."""
        name = f"session-{key if key is not None else uuid.uuid4().hex}"
        path = self.run_root / name
        try:
            path.mkdir(mode=0o700, exist_ok=key is not None)
        except OSError as exc:
            raise StoreError(f"could not create session directory {name}: {_reason(exc)}") from exc
        return SessionStore(name, path, keep=self.replicated)

    def close(self) -> None:
        """Remove the whole run root (not a shared one); safe to call more than once."""
        if not self.replicated:
            _remove_tree(self.run_root)

    def resolve(self, handle: str) -> Path | None:
        """The stored file of a well-formed handle, or None if the handle is malformed or has no file."""
        if _HANDLE_RE.fullmatch(handle) is None:
            return None
        path = self.run_root / handle
        try:
            return path if stat.S_ISREG(path.lstat().st_mode) else None
        except OSError:
            return None


@dataclass(frozen=True, slots=True)
class SessionStore:
    """One client session's directory; it can only name and read its own handles."""

    name: str
    path: Path
    keep: bool = False  # in a shared store: other replicas read these outputs after this one stops

    def new_handle(self) -> str:
        """A fresh, unguessable handle of this session; no file exists for it yet."""
        return f"{self.name}/{random_hex()}"

    def owns(self, handle: str) -> bool:
        match = _HANDLE_RE.fullmatch(handle)
        return match is not None and match.group(1) == self.name

    async def write(self, handle: str, text: str) -> StoredFile:
        """Store `text` as UTF-8 (lone surrogates become "?") in a new 0600 file, measuring it on the way.

        Written under a temporary name and renamed when complete, so a reader (of any replica) never sees
        a partial output under the handle; shielded from cancellation, so no partial file is left behind (a
        cancelled write in a worker thread would go on after any cleanup): the output is in memory already,
        and a call cancelled meanwhile removes it when it ends."""
        with anyio.CancelScope(shield=True):
            stored = await self._write(handle, text)
        return stored

    async def _write(self, handle: str, text: str) -> StoredFile:
        final = self._path_of(handle)
        path = final.with_name(f".{final.name}.part")
        digest = hashlib.sha256()
        index = IndexBuilder()
        size = newlines = 0
        last = b""
        try:
            async with aiofiles.open(path, "wb", opener=_private_opener) as out:
                # Encode chunk by chunk so the full text is never held twice; UTF-8 encodes code point by
                # code point, so splitting anywhere gives the same bytes as encoding the whole text.
                for start in range(0, len(text), _CHUNK_CHARS):
                    data = text[start : start + _CHUNK_CHARS].encode("utf-8", "replace")
                    digest.update(data)
                    size += len(data)
                    newlines += data.count(b"\n")
                    last = data[-1:]
                    index.feed(data)
                    await out.write(data)
            # The index under the final name first: when the output appears, its index is there already.
            async with aiofiles.open(_index_of(final), "wb", opener=_private_opener) as out:
                await out.write(index.finish())
            os.rename(path, final)
        except OSError as exc:
            _unlink_quietly(path)
            _unlink_quietly(_index_of(final))
            raise StoreError(
                f'could not store the output of handle "{handle}": {_reason(exc)}', reason=_reason(exc)
            ) from exc
        lines = newlines + (1 if size and last != b"\n" else 0)
        return StoredFile(handle=handle, path=final, bytes=size, lines=lines, sha256=digest.hexdigest())

    def adopt(self, handle: str, path: Path) -> Path:
        """Make the file at `path` (written elsewhere in the run root) the stored output of `handle`."""
        target = self._path_of(handle)
        try:
            if os.path.lexists(_index_of(path)):  # the line index the writer kept beside it
                os.rename(_index_of(path), _index_of(target))
            os.rename(path, target)
        except OSError as exc:
            _unlink_quietly(_index_of(path))
            _unlink_quietly(path)
            raise StoreError(
                f'could not store the output of handle "{handle}": {_reason(exc)}', reason=_reason(exc)
            ) from exc
        return target

    def open_output(self, handle: str) -> OpenFile:
        """The stored file of `handle`, opened for reading through fs_sandbox's one door.

        Only a regular file directly in this session's own directory is accepted: the directory is opened
        by descriptor and nothing on the way is a link that gets followed; FIFOs, devices and sockets are
        refused at once. The size is the descriptor's. Blocking (run it in a worker thread); the caller
        closes the result. Every read of a stored output starts here.
        """
        name = self._file_of(handle)
        try:
            return open_file(self.path, name)
        except NotFound:
            raise StoreError(f'unknown handle "{handle}": no output is stored for it') from None
        except SandboxError as exc:
            why = str(exc).replace(repr(name), "its file")
            raise StoreError(f'could not read the output of handle "{handle}": {why}', reason=why) from None

    async def read_text(self, handle: str) -> str:
        """The whole stored text of `handle`, exactly as written: for small outputs (and tests) only, since
        it is held whole; readers of outputs of any size stream from `open_output`."""
        opened = await anyio.to_thread.run_sync(self.open_output, handle)

        def blocking() -> str:
            with opened:
                return opened.read(0, opened.size).decode("utf-8")

        try:
            return await anyio.to_thread.run_sync(blocking)
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f'could not read the output of handle "{handle}": {_reason(exc)}') from exc

    def discard(self, handle: str) -> None:
        """Delete the output of `handle`, if one was stored."""
        if self.owns(handle):
            _unlink_quietly(self._path_of(handle))
            _unlink_quietly(_index_of(self._path_of(handle)))

    def remove(self) -> None:
        """Remove this session's directory and every output in it (not in a shared store); safe to call more
        than once."""
        if not self.keep:
            _remove_tree(self.path)

    def _path_of(self, handle: str) -> Path:
        return self.path / self._file_of(handle)

    def _file_of(self, handle: str) -> str:
        if not self.owns(handle):
            raise StoreError(f'unknown handle "{handle}"')
        return handle.partition("/")[2]


def _index_of(path: Path) -> Path:
    """Where the line index of the file at `path` is kept (read by fs_sandbox's `open_file`)."""
    return path.with_name(path.name + INDEX_SUFFIX)


def _private_opener(path: str, flags: int) -> int:
    return os.open(path, flags | NOFOLLOW, 0o600)


def _remove_tree(path: Path) -> None:
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.warning("could not remove %s: %s", path, _reason(exc))


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _reason(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
