"""The wheel as a user gets it: installed alone into a fresh environment outside the checkout, it answers `--version`,
runs the demo and serves a real server's tools over stdio; and what a user sees when another project's top-level
`server` package shares its environment.

The environments here are made without the package index: a fresh venv whose only other path is the site-packages of
the interpreter running the tests (for claimcheck's dependencies; its `.pth` files, the checkout's editable install
among them, are not read from there). `.ci/check-release` runs the tests of the installed claimcheck again against an
environment installed from the index (`CLAIMCHECK_RELEASE_ENV`), after building the sdist and the wheel from it (the
others need no index: they ran in the suite).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from server.version import VERSION
from tests.support.peers import MEMORY_PACKAGE, npm_server_command

pytestmark = pytest.mark.subprocess

REPO_ROOT = Path(__file__).resolve().parents[2]
_TIMEOUT_S = 300


def _run(*argv: str | Path, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(arg) for arg in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    if check:
        assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def _build_wheel(project: Path, out: Path) -> Path:
    _run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", out, project, cwd=project)
    (wheel,) = out.glob("*.whl")
    return wheel


def _fresh_env(where: Path) -> Path:
    """A venv with no packages of its own; the running interpreter's site-packages supply the dependencies."""
    _run(sys.executable, "-m", "venv", "--without-pip", where, cwd=where.parent)
    (site,) = where.glob("lib/python*/site-packages")
    (site / "_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return where


def _install(env: Path, *wheels: Path) -> subprocess.CompletedProcess[str]:
    return _run(
        sys.executable, "-m", "pip", "--python", env / "bin" / "python", "install", "--no-deps", "--no-index",
        "--ignore-installed", *wheels, cwd=env,
    )  # fmt: skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_wheel(REPO_ROOT, tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def user_env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The environment under test: `CLAIMCHECK_RELEASE_ENV` (installed from the index by .ci/check-release), else the
    wheel alone in a fresh venv (the wheel is built only then)."""
    if given := os.environ.get("CLAIMCHECK_RELEASE_ENV"):
        return Path(given)
    env = _fresh_env(tmp_path_factory.mktemp("user") / "env")
    _install(env, request.getfixturevalue("wheel"))
    return env


def test_the_wheel_carries_every_file_the_packages_need(wheel: Path) -> None:
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = _run("git", "ls-files", "server", "extraction", "fs_sandbox", cwd=REPO_ROOT).stdout.split()
    assert set(tracked) <= names, sorted(set(tracked) - names)
    assert f"mcp_claimcheck-{VERSION}.dist-info/licenses/LICENSE" in names
    assert not any(name.startswith(("tests/", "bench/", "docs/")) for name in names)


def test_the_installed_claimcheck_is_the_wheel_s_and_says_its_version(user_env: Path, tmp_path: Path) -> None:
    found = _run(user_env / "bin" / "python", "-c", "import server; print(server.__file__)", cwd=tmp_path)
    assert Path(found.stdout.strip()).is_relative_to(user_env)
    assert _run(user_env / "bin" / "claimcheck", "--version", cwd=tmp_path).stdout.strip() == f"claimcheck {VERSION}"


def test_the_installed_claimcheck_runs_the_demo(user_env: Path, tmp_path: Path) -> None:
    done = _run(user_env / "bin" / "claimcheck", "demo", cwd=tmp_path)
    assert "== Done" in done.stdout
    assert "warning" not in done.stderr


@pytest.mark.anyio
async def test_the_installed_claimcheck_serves_a_real_server_s_tools_over_stdio(user_env: Path, tmp_path: Path) -> None:
    node, entry = npm_server_command(MEMORY_PACKAGE)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"mcpServers": {"memory": {"command": node, "args": [entry]}}}), encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    params = StdioServerParameters(
        command=str(user_env / "bin" / "claimcheck"),
        args=["serve", "--config", str(config), "--no-api"],
        env=env,
        cwd=tmp_path,
    )
    with anyio.fail_after(_TIMEOUT_S):
        async with Client(params, mode="legacy") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
    assert {"memory__create_entities", "memory__read_graph", "tool_output"} <= names


@pytest.fixture(scope="module")
def decoy_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another project that ships a top-level `server` package, as many do."""
    tmp_path = tmp_path_factory.mktemp("decoy")
    project = tmp_path / "decoy"
    (project / "server").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [build-system]
            requires = ["hatchling"]
            build-backend = "hatchling.build"
            [project]
            name = "decoy-server"
            version = "1.0"
            [tool.hatch.build.targets.wheel]
            packages = ["server"]
            """
        ),
        encoding="utf-8",
    )
    (project / "server" / "__init__.py").write_text('WHO = "decoy"\n', encoding="utf-8")
    (project / "server" / "app.py").write_text('def app() -> str:\n    return "decoy app"\n', encoding="utf-8")
    return _build_wheel(project, tmp_path / "decoy-dist")


def test_beside_another_top_level_server_package_both_install_silently_and_claimcheck_warns(
    wheel: Path, decoy_wheel: Path, tmp_path: Path
) -> None:
    env = _fresh_env(tmp_path / "shared-env")
    _install(env, decoy_wheel)
    installed = _install(env, wheel)
    assert "server" not in installed.stderr  # pip says nothing of the overwritten package

    # The last one installed owns the shared `server/__init__.py`: the decoy's lost its own, silently.
    probe = "import server, server.app; print(getattr(server, 'WHO', None), server.app.app())"
    assert _run(env / "bin" / "python", "-c", probe, cwd=tmp_path).stdout.split() == ["None", "decoy", "app"]
    # claimcheck still runs, and says on its first line what is wrong and what to do.
    demo = _run(env / "bin" / "claimcheck", "demo", cwd=tmp_path)
    assert "== Done" in demo.stdout
    first = demo.stderr.splitlines()[0]
    assert first.startswith("claimcheck: warning: another project installed files into claimcheck's packages")
    assert "server/app.py" in first and "environment of its own" in first
    # `claimcheck doctor` names it as a failed check, with the same fix.
    doctor = _run(env / "bin" / "claimcheck", "doctor", "--config", tmp_path / "none.json", cwd=tmp_path, check=False)
    install = next(line for line in doctor.stdout.splitlines() if " install " in line)
    assert doctor.returncode == 1 and "FAIL" in install and "server/app.py" in install, doctor.stdout


def test_claimcheck_in_an_environment_of_its_own_never_meets_the_other_package(
    user_env: Path, decoy_wheel: Path, tmp_path: Path
) -> None:
    """The other project in an environment of its own, claimcheck in `user_env` (whose demo runs without a warning:
    `test_the_installed_claimcheck_runs_the_demo`)."""
    other = _fresh_env(tmp_path / "other-env")
    _install(other, decoy_wheel)
    probe = "import server; print(getattr(server, 'WHO', None))"
    assert _run(other / "bin" / "python", "-c", probe, cwd=tmp_path).stdout.split() == ["decoy"]
    assert _run(user_env / "bin" / "python", "-c", probe, cwd=tmp_path).stdout.split() == ["None"]
    own = user_env / "bin" / "claimcheck"
    doctor = _run(own, "doctor", "--config", tmp_path / "none.json", cwd=tmp_path, check=False)
    assert "its packages its own" in doctor.stdout
