"""Run roots and their marker: claimcheck deletes only directories it made itself.

A run root is `<root>/claimcheck-run-<24 hex>/`. Its first content is the marker file `.claimcheck-run`:
a magic line, then `version`, `pid`, `start` (the process start time, so a reused pid is told apart),
`boot` (the boot's identity) and `run` (the hex of the directory's own name). The root is built under a
`.new` name with the marker in it and then renamed, so a run root without its marker never exists. The
sweep removes a directory only when its name fits, it is a real directory of this user, and its marker is
well-formed and names a process that is gone; anything else is left alone, whatever its name or age.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from server.platform import (
    NOFOLLOW,
    NONBLOCK,
    boot_identity,
    owned_by_user,
    pid_alive,
    process_start,
    same_boot,
    same_start,
)

__all__ = [
    "MARKER_FILE",
    "MARKER_MAGIC",
    "RUN_ROOT_PATTERN",
    "Marker",
    "make_run_root",
    "read_marker",
    "remove_stale_roots",
]

logger = logging.getLogger(__name__)

MARKER_FILE = ".claimcheck-run"
MARKER_MAGIC = "claimcheck run root"
MARKER_VERSION = 1
RUN_ROOT_PATTERN = re.compile(r"claimcheck-run-([0-9a-f]{24})(\.new)?")

_MARKER_MAX_BYTES = 1024
_FIELDS = ("version", "pid", "start", "boot", "run")


@dataclass(frozen=True, slots=True)
class Marker:
    """What a run root's marker says about the process that made it."""

    pid: int
    start: str
    boot: str
    run: str

    def render(self) -> str:
        return (
            f"{MARKER_MAGIC}\nversion={MARKER_VERSION}\npid={self.pid}\nstart={self.start}\n"
            f"boot={self.boot}\nrun={self.run}\n"
        )

    def owner_is_gone(self) -> bool:
        """True when the process named here no longer runs: pid dead, or reused by a later process."""
        if not same_boot(self.boot, boot_identity()):
            return True
        if not pid_alive(self.pid):
            return True
        return not same_start(self.start, process_start(self.pid))


def make_run_root(base: Path) -> Path:
    """Create a new private run root under `base`, marker first; return its path."""
    run = os.urandom(12).hex()
    final = base / f"claimcheck-run-{run}"
    staging = base / f"claimcheck-run-{run}.new"
    staging.mkdir(mode=0o700)
    marker = Marker(pid=os.getpid(), start=process_start(os.getpid()), boot=boot_identity(), run=run)
    fd = os.open(staging / MARKER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600)
    with open(fd, "w", encoding="utf-8") as out:
        out.write(marker.render())
    os.rename(staging, final)
    return final


def read_marker(run_root: Path) -> Marker | None:
    """The marker of `run_root`, or None when it is missing, not a regular file, or not well-formed."""
    match = RUN_ROOT_PATTERN.fullmatch(run_root.name)
    if match is None:
        return None
    try:
        fd = os.open(run_root / MARKER_FILE, os.O_RDONLY | NOFOLLOW | NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = os.read(fd, _MARKER_MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(raw) > _MARKER_MAX_BYTES:
        return None
    return _parse(raw, expected_run=match.group(1))


def _parse(raw: bytes, *, expected_run: str) -> Marker | None:
    try:
        lines = raw.decode("ascii").split("\n")
    except UnicodeDecodeError:
        return None
    if lines[-1:] == [""]:
        lines.pop()
    if len(lines) != 1 + len(_FIELDS) or lines[0] != MARKER_MAGIC:
        return None
    fields: dict[str, str] = {}
    for line, name in zip(lines[1:], _FIELDS, strict=True):
        key, sep, value = line.partition("=")
        if key != name or not sep:
            return None
        fields[key] = value
    pid = fields["pid"]
    if fields["version"] != str(MARKER_VERSION) or not pid.isdigit() or fields["run"] != expected_run:
        return None
    if not 0 < int(pid) < 2**31:  # 0 and negatives would name process groups
        return None
    return Marker(pid=int(pid), start=fields["start"], boot=fields["boot"], run=fields["run"])


def remove_stale_roots(base: Path) -> list[Path]:
    """Remove the run roots under `base` whose marker names a process that is gone; return them."""
    try:
        names = sorted(entry.name for entry in os.scandir(base))
    except FileNotFoundError:
        return []
    except OSError as exc:
        logger.warning("could not look for stale run roots in %s: %s", base, _reason(exc))
        return []
    removed = []
    for name in names:
        if RUN_ROOT_PATTERN.fullmatch(name) is None:
            continue
        entry = base / name
        try:
            info = entry.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or not owned_by_user(info):
            continue
        marker = read_marker(entry)
        if marker is None or not marker.owner_is_gone():
            continue
        try:
            shutil.rmtree(entry)
        except OSError as exc:
            logger.warning("could not remove stale run root %s: %s", entry, _reason(exc))
            continue
        logger.info("removed stale run root %s: its process %d is gone", entry, marker.pid)
        removed.append(entry)
    return removed


def _reason(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
