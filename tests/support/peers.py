"""Real third-party MCP servers from npm, installed on first use into the git-ignored `.cache/npm-peers`.

Missing `node`/`npm` skips the tests that need a peer on a developer's machine, and fails them in CI
(env `CI` set), where a silent skip would hide that interop was never tested.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = [
    "EVERYTHING_PACKAGE",
    "EVERYTHING_VERSION",
    "FILESYSTEM_PACKAGE",
    "MEMORY_PACKAGE",
    "NPM_PEERS_DIR",
    "everything_command",
    "npm_server_command",
]

EVERYTHING_PACKAGE = "@modelcontextprotocol/server-everything"
EVERYTHING_VERSION = "2026.8.31"
FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem"
MEMORY_PACKAGE = "@modelcontextprotocol/server-memory"
REFERENCE_SERVERS_VERSION = "2026.8.31"
NPM_PEERS_DIR = Path(__file__).resolve().parents[2] / ".cache" / "npm-peers"

_INSTALL_TIMEOUT_S = 600


@functools.cache
def everything_command() -> tuple[str, ...]:
    """The argv that runs server-everything over stdio, installing it first if needed."""
    node = _require("node")
    package_dir = NPM_PEERS_DIR / "node_modules" / EVERYTHING_PACKAGE
    entry = _ensure_installed(EVERYTHING_PACKAGE, EVERYTHING_VERSION, package_dir)
    return (node, str(entry), "stdio")


@functools.cache
def npm_server_command(package: str, version: str = REFERENCE_SERVERS_VERSION) -> tuple[str, ...]:
    """The argv that runs a stdio MCP server from npm (its `bin` script under node), installing it first if needed."""
    node = _require("node")
    entry = _ensure_installed(package, version, NPM_PEERS_DIR / "node_modules" / package)
    return (node, str(entry))


def _ensure_installed(package: str, version: str, package_dir: Path) -> Path:
    if (entry := _installed_entry(package_dir, version)) is not None:
        return entry
    NPM_PEERS_DIR.mkdir(parents=True, exist_ok=True)
    with open(NPM_PEERS_DIR / ".install.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test session may be installing right now
        if (entry := _installed_entry(package_dir, version)) is not None:
            return entry
        npm = _require("npm")
        command = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(NPM_PEERS_DIR), f"{package}@{version}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    if (entry := _installed_entry(package_dir, version)) is None:
        raise RuntimeError(f"npm installed {package}@{version} but {package_dir} has no {version} entry point")
    return entry


def _installed_entry(package_dir: Path, version: str) -> Path | None:
    """The package's `bin` script if exactly `version` is installed in `package_dir`."""
    try:
        manifest = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if manifest.get("version") != version:
        return None
    bin_field = manifest.get("bin")
    relative = next(iter(bin_field.values())) if isinstance(bin_field, dict) and bin_field else bin_field
    entry = package_dir / (relative if isinstance(relative, str) else "dist/index.js")
    return entry if entry.is_file() else None


def _require(program: str) -> str:
    path = shutil.which(program)
    if path is not None:
        return path
    reason = f"{program!r} is not on PATH; the interop tests run real MCP servers from npm"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        raise RuntimeError(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)
