"""Native Windows, simulated at import: every claimcheck module imports without the POSIX-only parts of Python.

Windows has no `fcntl`, `pwd`, `grp`, `resource` or `termios`, no `socket.AF_UNIX` in CPython, and its `os` lacks
`O_NOFOLLOW`, `O_DIRECTORY`, `getuid`, `killpg`, `setsid`, `writev` and more. A fresh interpreter first imports
the libraries claimcheck uses (on Windows they take their own Windows paths, which Linux cannot run), then takes
those parts away and imports every module of `server`, `extraction` and `fs_sandbox`: one that reaches for them
at import (as `import fcntl` at the top of a module did) is named with its error. This is what the README claims
for native Windows, and all it claims: the package imports; it is not yet claimed to serve there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.source import ROOT, imported_top_levels

PACKAGES = ("server", "extraction", "fs_sandbox")
POSIX_ONLY_MODULES = ("fcntl", "pwd", "grp", "resource", "termios")
POSIX_ONLY_OS = (
    "O_NOFOLLOW",
    "O_DIRECTORY",
    "O_NONBLOCK",
    "O_NOCTTY",
    "O_CLOEXEC",
    "getuid",
    "geteuid",
    "getpgid",
    "killpg",
    "setsid",
    "writev",
    "fchmod",
)

SCRIPT = """
import importlib, os, pkgutil, socket, sys
for name in {libraries!r}:
    try:
        importlib.import_module(name)
    except ImportError:
        pass  # an optional extra that is not installed: claimcheck imports it only when used
for name in {modules!r}:
    sys.modules[name] = None  # `import fcntl` now raises ImportError, as on Windows
for name in {os_names!r}:
    if hasattr(os, name):
        delattr(os, name)
del socket.AF_UNIX
failed = []
for package in {packages!r}:
    for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        if info.name.endswith(".__main__"):
            continue  # it runs the command line; what it imports, server.cli, is imported here too
        try:
            importlib.import_module(info.name)
        except BaseException as exc:
            failed.append(f"{{info.name}}: {{type(exc).__name__}}: {{exc}}")
print("\\n".join(failed) or "every module imported")
"""


def _libraries() -> list[str]:
    """The modules outside claimcheck that its source imports, by their full dotted names."""
    import ast

    found: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                found.update(name for name in names if name.split(".")[0] not in PACKAGES)
    return sorted(name for name in found if name.split(".")[0] not in POSIX_ONLY_MODULES)


def _run(script: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    return done.stdout.strip() + done.stderr.strip()


@pytest.mark.subprocess
def test_every_module_imports_without_fcntl_pwd_resource_and_unix_sockets() -> None:
    script = SCRIPT.format(
        libraries=_libraries(), modules=POSIX_ONLY_MODULES, os_names=POSIX_ONLY_OS, packages=PACKAGES
    )
    assert _run(script) == "every module imported"


@pytest.mark.subprocess
def test_the_simulation_names_a_module_that_imports_fcntl(tmp_path: Path) -> None:
    bad = tmp_path / "server"
    bad.mkdir()
    (bad / "__init__.py").write_text("", encoding="utf-8")
    (bad / "posixonly.py").write_text("import fcntl\n", encoding="utf-8")
    script = SCRIPT.format(libraries=[], modules=POSIX_ONLY_MODULES, os_names=POSIX_ONLY_OS, packages=("server",))
    found = _run(f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n{script}")
    assert found == "server.posixonly: ModuleNotFoundError: import of fcntl halted; None in sys.modules"


def test_the_package_imports_no_posix_only_module_anywhere_but_the_platform_seams() -> None:
    for package in PACKAGES:
        for module, files in imported_top_levels(package).items():
            if module in POSIX_ONLY_MODULES:
                assert files <= {"server/platform.py", "fs_sandbox/platform.py"}, (module, files)
