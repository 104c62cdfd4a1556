"""What claimcheck is installed as: the distribution's name, the command that adds an extra to this very install, and
whether another project has written into claimcheck's top-level packages.

The distribution is `mcp-claimcheck` (the name `claimcheck` on the package index is another project); the command is
`claimcheck`. The wheel installs three top-level packages, `server`, `extraction` and `fs_sandbox`, so a second
project in the same environment that ships one of those names overwrites claimcheck's files or has its own
overwritten, silently (pip does not warn). The README installs claimcheck in an environment of its own;
`foreign_files` finds the clash where that was not done.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import sys
from pathlib import Path

__all__ = ["DISTRIBUTION", "PACKAGES", "clash_warning", "foreign_files", "install_command"]

DISTRIBUTION = "mcp-claimcheck"
PACKAGES = ("server", "extraction", "fs_sandbox")

_SHOWN = 3


def install_command(extra: str) -> str:
    """The command that installs `extra` into the environment this claimcheck runs from, whether claimcheck came from
    the package index or a checkout: pip takes the installed claimcheck as it is and adds only the extra's packages."""
    return f"{sys.executable} -m pip install '{DISTRIBUTION}[{extra}]'"


def foreign_files() -> list[str]:
    """Files under claimcheck's top-level packages that its installed record does not list, or lists with other
    contents: another project's, sharing the environment. Empty for a checkout or an editable install, whose files
    are the checkout's, and where claimcheck's record cannot be read."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return []
    ours = {path.as_posix(): path for path in dist.files or () if path.parts and path.parts[0] in PACKAGES}
    if not ours:
        return []  # an editable install: the packages are a checkout's
    base = Path(str(dist.locate_file("")))
    found: list[str] = []
    for package in PACKAGES:
        for path in sorted((base / package).rglob("*")):
            name = path.relative_to(base).as_posix()
            if "__pycache__" in path.parts or not path.is_file():
                continue
            mine = ours.get(name)
            if mine is None or (mine.hash is not None and not _same(path, mine.hash)):
                found.append(name)
    return found


def clash_warning() -> str | None:
    """One line for stderr when another project shares claimcheck's packages, naming the files and the fix."""
    found = foreign_files()
    if not found:
        return None
    shown = ", ".join(found[:_SHOWN]) + (f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else "")
    return (
        f"claimcheck: warning: another project installed files into claimcheck's packages in {sys.prefix} ({shown}); "
        "each can break the other. Install claimcheck in an environment of its own "
        "(python3 -m venv ~/.claimcheck, then ~/.claimcheck/bin/pip install it there; README, Install)."
    )


def _same(path: Path, hash_: importlib.metadata.FileHash) -> bool:
    if hash_.mode != "sha256":
        return True
    digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
    return digest == hash_.value
