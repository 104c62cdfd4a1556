"""The tests are a package with one helpers layer: no test module imports another, nothing changes `sys.path`,
each fixture is defined once, and every folder of tests is a package (read from the source, ast); and a test not
marked `subprocess` cannot start a program, so `pytest -m "not subprocess"` runs in process."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import anyio
import pytest

from tests.support.source import ROOT
from tests.support.spawning import GREP_WORKER, SpawnRefused, is_grep_worker

TESTS = ROOT / "tests"


def _sources() -> list[Path]:
    """The tests' Python files (not what a test installed under a hidden folder such as .cache)."""
    return sorted(
        p for p in TESTS.rglob("*.py") if not any(part.startswith(".") for part in p.relative_to(TESTS).parts)
    )


@cache
def _parsed() -> tuple[tuple[Path, ast.Module], ...]:
    return tuple((path, ast.parse(path.read_text(encoding="utf-8"))) for path in _sources())


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    yield from _parsed()


def _shown(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT).as_posix()}:{getattr(node, 'lineno', 0)}"


def _imported(path: Path, node: ast.AST) -> list[str]:
    """The dotted names an import statement reaches (a relative import resolved against `path`'s package)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        package = path.relative_to(ROOT).with_suffix("").parts[: -node.level]
        base = ".".join([*package, *([base] if base else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def test_modules_that_import_a_test_module() -> None:
    test_stems = {path.stem for path in _sources() if path.name.startswith("test_")}
    found = [
        f"{_shown(path, node)} imports {name}"
        for path, tree in _modules()
        for node in ast.walk(tree)
        for name in _imported(path, node)
        if name.rpartition(".")[2].startswith("test_") or name.split(".")[0] in test_stems
    ]
    assert found == [], "move what they share into tests/support/"


def _changes_sys_path(node: ast.AST) -> bool:
    def is_sys_path(target: ast.AST) -> bool:
        while isinstance(target, ast.Subscript):
            target = target.value
        return isinstance(target, ast.Attribute) and target.attr == "path" and ast.unparse(target.value) == "sys"

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return is_sys_path(node.func.value) and node.func.attr in {"insert", "append", "extend", "remove", "clear"}
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
        targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        return any(is_sys_path(target) for target in targets)
    return False


def test_no_test_file_changes_sys_path() -> None:
    found = [_shown(path, node) for path, tree in _modules() for node in ast.walk(tree) if _changes_sys_path(node)]
    assert found == [], "import through the `tests` package (run programs as `python -m tests.…`)"


def test_each_fixture_is_defined_once() -> None:
    where: dict[str, list[str]] = {}
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                "fixture" in ast.unparse(decorator) for decorator in node.decorator_list
            ):
                where.setdefault(node.name, []).append(_shown(path, node))
    assert {name: places for name, places in where.items() if len(places) > 1} == {}


def test_every_folder_of_tests_is_a_package() -> None:
    folders = {path.parent for path in _sources()}
    assert sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists()) == []


@pytest.mark.parametrize(
    ("source", "changes"),
    [
        ("sys.path.insert(0, 'x')", True),
        ("sys.path[:0] = ['x']", True),
        ("sys.path += ['x']", True),
        ("sys.path = []", True),
        ("print(sys.path)", False),
        ("paths = [*sys.path]", False),
    ],
)
def test_the_sys_path_check_sees_each_way_of_changing_it(source: str, changes: bool) -> None:
    assert any(_changes_sys_path(node) for node in ast.walk(ast.parse(source))) is changes


@pytest.mark.parametrize(
    ("source", "where", "names"),
    [
        ("from tests.handles.test_handles import x", "tests/e2e/test_a.py", ["tests.handles.test_handles"]),
        ("from .test_handles import x", "tests/handles/test_b.py", ["tests.handles.test_handles"]),
        ("from . import test_handles", "tests/handles/test_b.py", ["tests.handles.test_handles"]),
        ("import test_handles", "tests/handles/test_b.py", ["test_handles"]),
    ],
)
def test_the_import_check_resolves_relative_and_bare_imports(source: str, where: str, names: list[str]) -> None:
    node = ast.parse(source).body[0]
    reached = _imported(ROOT / where, node)
    assert all(name in reached for name in names), reached


def test_a_test_not_marked_subprocess_cannot_start_a_program() -> None:
    with pytest.raises(SpawnRefused, match="not marked `subprocess`"):
        subprocess.run(["true"], check=False)


async def _started_by_anyio() -> None:
    await anyio.run_process(["true"])


def test_the_guard_sees_a_program_started_through_anyio_and_asyncio_too() -> None:
    with pytest.raises(SpawnRefused):
        anyio.run(_started_by_anyio)


def test_the_guard_lets_greps_own_worker_start() -> None:
    assert is_grep_worker([sys.executable, "-I", "-S", GREP_WORKER, "5"])
    assert not is_grep_worker([sys.executable, "-c", "print()"]) and not is_grep_worker(GREP_WORKER)
