"""The relay's own decisions, without processes: when `serve` relays, and what keys the shared claimcheck."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from server.upstream.shared_relay import SharedError, shared_paths, wants_shared


def config(tmp_path: Path, settings: dict[str, object], name: str = "c.json") -> Path:
    path = tmp_path / name
    servers = {"demo": {"command": "python", "args": ["${DEMO_ARG}"]}}
    path.write_text(json.dumps({"mcpServers": servers, "settings": settings}))
    return path


def test_serve_relays_with_the_flag_or_the_setting_and_only_over_stdio(tmp_path: Path) -> None:
    plain, shared = config(tmp_path, {}), config(tmp_path, {"shared": True}, "s.json")
    assert wants_shared(["serve", "--shared", "--config", str(plain)])
    assert wants_shared(["serve", "--config", str(shared)])
    assert wants_shared(["--config", str(shared), "serve"])
    assert not wants_shared(["serve", "--config", str(plain)])
    assert not wants_shared(["serve", "--config", str(shared), "--transport", "http"])
    assert not wants_shared(["serve", "--shared", "--transport=sse", "--config", str(plain)])
    assert not wants_shared(["tools", "--config", str(shared)])
    assert not wants_shared(["serve", "--config", str(shared), "--shared-socket", "/x.sock"])  # the shared one itself


def test_the_key_follows_the_resolved_config_and_the_flags(tmp_path: Path, runtime: Path) -> None:
    path = config(tmp_path, {})
    env = {"XDG_RUNTIME_DIR": str(runtime), "DEMO_ARG": "one"}
    first = shared_paths(["serve", "--config", str(path)], env)
    again = shared_paths(["serve", "--shared", "--config", str(path)], env)
    other_var = shared_paths(["serve", "--config", str(path)], {**env, "DEMO_ARG": "two"})
    other_flag = shared_paths(["serve", "--config", str(path), "--no-async"], env)
    assert first.key == again.key
    assert len({first.key, other_var.key, other_flag.key}) == 3
    assert first.socket.parent == runtime / first.directory.name
    assert stat.S_IMODE(first.directory.stat().st_mode) == 0o700


def test_a_config_folder_keys_the_shared_claimcheck_by_every_file_in_it(tmp_path: Path, runtime: Path) -> None:
    folder = tmp_path / "mcpServers"
    folder.mkdir()
    config(folder, {}, "a.json")
    env = {"XDG_RUNTIME_DIR": str(runtime), "DEMO_ARG": "one"}
    first = shared_paths(["serve", "--config", str(folder)], env)
    config(folder, {}, "b.json")
    another_file = shared_paths(["serve", "--config", str(folder)], env)
    (folder / "b.json").write_text('{"mcpServers": {}}')
    changed = shared_paths(["serve", "--config", str(folder)], env)
    assert len({first.key, another_file.key, changed.key}) == 3


def test_a_shared_directory_open_to_others_is_refused(tmp_path: Path, runtime: Path) -> None:
    path = config(tmp_path, {})
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    made = shared_paths(["serve", "--config", str(path)], env)
    made.directory.chmod(0o770)
    with pytest.raises(SharedError, match="must be a directory of yours with mode 0700"):
        shared_paths(["serve", "--config", str(path)], env)
