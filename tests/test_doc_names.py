"""Every module, file and dotted name that docs/architecture.md puts in backticks still exists in the code: a file
(`pkg/x.py`, or `x.py` anywhere), a module's name (`module.function`, `module.Class.method`, a function's nested
helper) or a class's (`Class.method`, a field, an attribute its methods set), in claimcheck's packages or the
tests (read from the source, ast); a stdlib or SDK name by import."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from tests.support.source import ROOT

DOC = ROOT / "docs" / "architecture.md"
CODE = ("server", "extraction", "fs_sandbox")
FILES = (*CODE, "tests", "bench", "docs")
NOT_CODE = {"history.sqlite3", "claimcheck.call", "_meta.traceparent"}
"""Backticked dotted words that name no code: a database file, a span's name, a wire field."""
INSTANCES = {"settings", "proxy", "call", "connection", "request"}
"""First words that are a value the doc follows (`settings.auth`, `proxy.config`), not a module."""
SDK = {"Server.run": "mcp.server.lowlevel.server.Server"}
"""Names of the SDK the page names, with where they live."""


@dataclass
class Scope:
    """The names one module, class or function defines, and what each of them is when that is a scope too."""

    names: set[str] = field(default_factory=set)
    inner: dict[str, ast.AST] = field(default_factory=dict)


_SCOPES: dict[int, Scope] = {}


def _scope(node: ast.AST) -> Scope:
    """The names `node` defines (kept: the trees live as long as the run)."""
    if id(node) not in _SCOPES:
        _SCOPES[id(node)] = _scoped(node)
    return _SCOPES[id(node)]


def _scoped(node: ast.AST) -> Scope:
    scope = Scope()
    body = getattr(node, "body", [])
    for child in body:
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            scope.names.add(child.name)
            scope.inner[child.name] = child
        elif isinstance(child, ast.Assign | ast.AnnAssign):
            targets = child.targets if isinstance(child, ast.Assign) else [child.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    scope.names.add(target.id)
                    if isinstance(child.value, ast.Call) and isinstance(child.value.func, ast.Name):
                        scope.inner[target.id] = ast.Name(child.value.func.id)  # an instance: its class's names
        elif isinstance(child, ast.ImportFrom):  # a re-export (`extraction.Extractor`): the class it names
            for alias in child.names:
                scope.names.add(alias.asname or alias.name)
                scope.inner[alias.asname or alias.name] = ast.Name(alias.name)
        elif isinstance(child, ast.Import):
            scope.names.update((alias.asname or alias.name).split(".")[0] for alias in child.names)
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):  # nested helpers, self.x = …
        for inner in ast.walk(node):
            if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and inner is not node:
                scope.names.add(inner.name)
                scope.inner.setdefault(inner.name, inner)
            elif isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) and inner.value.id == "self":
                scope.names.add(inner.attr)
    return scope


@cache
def _modules() -> dict[str, list[Path]]:
    """Each module's dotted names (`server.handles.calls`, `handles.calls`, `calls`) with its files."""
    found: dict[str, list[Path]] = {}
    for package in (*CODE, "tests/support"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            for start in range(len(parts)):
                found.setdefault(".".join(parts[start:]), []).append(path)
    return found


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@cache
def _classes() -> dict[str, list[ast.ClassDef]]:
    found: dict[str, list[ast.ClassDef]] = {}
    for path in _all_files():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(node)
    return found


def _resolves(node: ast.AST, rest: list[str]) -> bool:
    """Whether `rest` names something inside `node` (a module, class or function; a Name: that class)."""
    if not rest:
        return True
    if isinstance(node, ast.Name):
        return any(_resolves(cls, rest) for cls in _classes().get(node.id, []))
    scope = _scope(node)
    if rest[0] not in scope.names:
        return False
    inner = scope.inner.get(rest[0])
    return len(rest) == 1 or (inner is not None and _resolves(inner, rest[1:]))


def name_exists(name: str) -> bool:
    parts = name.split(".")
    for split in range(len(parts), 0, -1):  # the longest module prefix first: `status.history.History`
        for path in _modules().get(".".join(parts[:split]), []):
            if _resolves(_tree(path), parts[split:]):
                return True
    if any(_resolves(cls, parts[1:]) for cls in _classes().get(parts[0], [])):
        return True
    if any(_resolves(_tree(path), parts) for path in _all_files()):  # a module-level name: `HEAD_START.take`
        return True
    return parts[0] in sys.stdlib_module_names and _has(parts[0], name)


@cache
def _all_files() -> tuple[Path, ...]:
    return tuple(sorted({path for paths in _modules().values() for path in paths}))


def _has(where: str, name: str) -> bool:
    """Whether `where` (a module, or a module's attribute) has the attributes `name` names after its first word."""
    module, _, attribute = where.rpartition(".")
    value: object = importlib.import_module(module or attribute)
    for part in [*([attribute] if module else []), *name.split(".")[1:]]:
        if not hasattr(value, part):
            return False
        value = getattr(value, part)
    return True


@cache
def _files() -> frozenset[str]:
    found = {path.name for path in ROOT.iterdir() if path.is_file()}
    for top in FILES:
        for path in (ROOT / top).rglob("*"):
            relative = path.relative_to(ROOT)
            if path.is_file() and not any(part.startswith(".") for part in relative.parts):  # not a .cache
                found.add(relative.as_posix())
    return frozenset(found)


def file_exists(name: str) -> bool:
    return any(path == name or path.endswith("/" + name) for path in _files())


def _backticked() -> Iterator[str]:
    yield from sorted(set(re.findall(r"`([^`\n]+)`", DOC.read_text(encoding="utf-8"))))


def _files_named() -> list[str]:
    return [word for word in _backticked() if re.fullmatch(r"[\w./-]+\.(py|toml|html|mjs|md)", word)]


def _names_named() -> list[str]:
    dotted = r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+"
    return [
        word
        for word in _backticked()
        if re.fullmatch(dotted, word) and word not in _files_named() and word not in NOT_CODE | SDK.keys()
        if word.split(".")[0] not in INSTANCES
    ]


def test_every_file_the_architecture_page_names_exists() -> None:
    assert [name for name in _files_named() if not file_exists(name)] == []


def test_every_dotted_name_the_architecture_page_names_exists() -> None:
    assert [name for name in _names_named() if not name_exists(name)] == []


def test_every_sdk_name_the_architecture_page_names_exists() -> None:
    assert [name for name in SDK if not _has(SDK[name], name)] == []


def test_the_page_names_enough_for_the_checks_to_mean_something() -> None:
    assert len(_files_named()) > 50 and len(_names_named()) > 100


@pytest.mark.parametrize(
    ("name", "exists"),
    [
        ("forwarding.begin", True),
        ("server.upstream.forwarding.begin", True),
        ("Sessions.find", True),
        ("status.history.History", True),
        ("surface.build_server._answer", True),  # a nested helper
        ("processes.HEAD_START.spawn", True),  # a module-level instance: its class's method
        ("Call.note", True),
        ("extraction.Extractor.extract", True),  # a class the package re-exports
        ("forwarding.no_such_function", False),
        ("Sessions.no_such_method", False),
        ("no_such_module.begin", False),
        ("sys.path", True),
        ("sys.no_such_thing", False),
    ],
)
def test_the_name_check_finds_what_exists_and_only_that(name: str, exists: bool) -> None:
    assert name_exists(name) is exists


def test_the_file_check_finds_a_file_by_its_path_or_its_tail() -> None:
    assert file_exists("handles/settle.py") and file_exists("settle.py") and file_exists("pyproject.toml")
    assert not file_exists("handles/no_such.py") and not file_exists("upstream/settle.py")


TEST_REFERENCE = re.compile(r"(tests/[\w/]+\.py)::(\w+)")
"""A test named by its file and function in the docs (`tests/x/test_y.py::test_z`), as reliability.md's table
names the test of each row."""


def _test_references() -> list[tuple[str, str, str]]:
    pages = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "CHANGELOG.md"]
    found = []
    for page in pages:
        found += [(page.name, match[1], match[2]) for match in TEST_REFERENCE.finditer(page.read_text("utf-8"))]
    return found


def test_every_test_the_docs_name_by_file_and_function_exists() -> None:
    missing = []
    for page, file, function in _test_references():
        path = ROOT / file
        defined = path.is_file() and re.search(rf"^(async )?def {function}\b", path.read_text("utf-8"), re.MULTILINE)
        if not defined:
            missing.append(f"{page}: {file}::{function}")
    assert not missing, "renamed or removed tests still named in the docs:\n" + "\n".join(missing)
    assert len(_test_references()) > 20  # the check reads the references the pages hold
