"""`claimcheck init`: a client's servers move into claimcheck's config, the client gets the entry that starts
claimcheck (absolute paths), `--apply` backs the client's file up first and `--undo` puts it back; nothing of the
user's is ever lost, and a file that does not parse is left exactly as it was."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from server.cli_args import parse
from server.client_files import latest_backup, launch_of, points_at_claimcheck, write_replacing
from server.client_places import CLIENTS, NAMES, locate, usual_paths
from server.config import Config, load_config
from server.config_text import loads_jsonc as load_jsonc
from server.errors import ConfigError
from server.init_cmd import run_init
from server.platform import app_config_dir

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "client_configs"


def init(*argv: str, environ: dict[str, str] | None = None) -> int:
    return run_init(parse(["init", *argv]), environ or {})


def copy(relative: str, tmp_path: Path) -> Path:
    target = tmp_path / "client" / Path(relative).name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / relative, target)
    return target


def load_config_text(path: Path, text: str) -> Config:
    """`text` as claimcheck would load it from a file like `path` (same name: the same dialect)."""
    pasted = path.parent / "pasted" / path.name
    pasted.parent.mkdir(exist_ok=True)
    pasted.write_text(text, encoding="utf-8")
    return load_config(pasted, {})


def entry_starts_claimcheck(entry: dict[str, Any], config: Path) -> None:
    assert Path(entry["command"]).is_absolute()
    assert entry["args"][-3:] == ["serve", "--config", str(config)]


def test_apply_moves_the_servers_keeps_every_other_key_and_undo_restores_the_file_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = copy("claude-desktop/claude_desktop_config.json", tmp_path)
    original = client.read_bytes()
    config = tmp_path / "cc" / "config.json"

    assert init(str(client), "--apply", "--config", str(config)) == 0

    written = json.loads(client.read_text(encoding="utf-8"))
    assert written["globalShortcut"] == "Ctrl+Space" and written["preferences"] == {"menuBarEnabled": False}
    assert list(written["mcpServers"]) == ["claimcheck"]
    entry_starts_claimcheck(written["mcpServers"]["claimcheck"], config)
    ours = json.loads(config.read_text(encoding="utf-8"))["mcpServers"]
    assert ours == json.loads(original)["mcpServers"]  # as written: ${HOME} is still a reference
    saved = latest_backup(client)
    assert saved is not None and saved.read_bytes() == original
    assert saved.name.startswith("claude_desktop_config.json.bak-") and len(saved.name.split(".bak-")[1]) == 15
    assert str(client) in capsys.readouterr().out

    assert init(str(client), "--undo") == 0
    assert client.read_bytes() == original
    assert latest_backup(client) is None
    assert [p.name for p in client.parent.glob("*.undone-*")]  # what undo replaced is kept too


def test_without_apply_the_client_file_is_not_touched_and_the_entry_is_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = copy("claude-code/.mcp.json", tmp_path)
    original = client.read_bytes()
    config = tmp_path / "config.json"
    assert init(str(client), "--config", str(config)) == 0
    assert client.read_bytes() == original
    assert latest_backup(client) is None
    shown = capsys.readouterr().out
    block = json.loads(shown[shown.index("{") : shown.rindex("}") + 1])
    assert block["mcpServers"]["claimcheck"]["type"] == "stdio"  # Claude Code's .mcp.json names the type
    entry_starts_claimcheck(block["mcpServers"]["claimcheck"], config)
    assert set(json.loads(config.read_text(encoding="utf-8"))["mcpServers"]) == {"memory", "api", "legacy"}


@pytest.mark.parametrize("text", ['{"mcpServers": {"a": {"command": "x"}', "", "[1, 2", '{"mcpServers": 7}'])
def test_a_file_that_cannot_be_parsed_is_left_untouched_with_the_reason_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    client = tmp_path / "claude_desktop_config.json"
    client.write_text(text, encoding="utf-8")
    config = tmp_path / "config.json"
    assert init(str(client), "--apply", "--config", str(config)) == 2
    assert client.read_text(encoding="utf-8") == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["claude_desktop_config.json"]  # no backup, no config
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "left untouched" in err and "Traceback" not in err


def test_a_file_of_servers_at_its_top_level_is_no_client_s_and_the_line_says_how_to_serve_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snippet saved as it was pasted (`{"github": {…}}`) has no client's table to route: one line, naming the
    command that serves it as claimcheck's own config (which reads such a file)."""
    snippet = tmp_path / "my servers.json"
    text = '{"github": {"command": "gh-mcp"}, "web": {"url": "https://x/mcp"}}'
    snippet.write_text(text, encoding="utf-8")
    assert init(str(snippet), "--apply", "--config", str(tmp_path / "config.json")) == 2
    assert snippet.read_text(encoding="utf-8") == text and not (tmp_path / "config.json").exists()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    command = err.rstrip().rsplit(": ", 1)[1]
    assert command == f"claimcheck serve --config '{snippet}'"
    assert list(load_config(snippet, {}).mcp_servers) == ["github", "web"]


def test_a_path_under_the_home_of_no_such_user_is_a_file_not_found_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`~name/…` is another user's home; pathlib raises RuntimeError where there is no such user, the shell leaves
    the text as it is, and so does claimcheck."""
    monkeypatch.chdir(tmp_path)
    assert init("~no-such-user-here/mcp.json", "--config", str(tmp_path / "config.json")) == 2
    err = capsys.readouterr().err
    missing = tmp_path / "~no-such-user-here" / "mcp.json"
    assert err == f"claimcheck: {missing}: no such file, so no servers to import (give the file's path)\n"


def test_a_lone_surrogate_escape_elsewhere_in_the_file_is_written_back_escaped(tmp_path: Path) -> None:
    """`"\\ud800"` reads as half a character, which no encoding writes: the file is written with escapes."""
    client = tmp_path / "mcp.json"
    client.write_text('{"theme": "\\ud800 é", "mcpServers": {"a": {"command": "x"}}}', encoding="utf-8")
    assert init(str(client), "--apply", "--config", str(tmp_path / "config.json")) == 0
    after = client.read_text(encoding="utf-8")
    assert json.loads(after)["theme"] == "\ud800 é" and list(json.loads(after)["mcpServers"]) == ["claimcheck"]


def test_a_client_entry_whose_args_are_no_list_starts_nothing_and_is_no_claimcheck_entry() -> None:
    assert launch_of({"command": "claimcheck", "args": 5}) is None
    assert not points_at_claimcheck({"command": "claimcheck", "args": "serve"})
    assert launch_of({"command": ["uvx", "x"], "args": ["-v"]}) == ("uvx", ["x", "-v"])


def test_text_that_no_encoding_can_write_is_one_line_and_the_file_is_left_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "mcp.json"
    target.write_text("{}", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"mcp\.json: cannot write '\\ud800', half of a character"):
        write_replacing(target, '{"a": "\ud800"}')
    assert target.read_text(encoding="utf-8") == "{}" and [p.name for p in tmp_path.iterdir()] == ["mcp.json"]


def test_entries_claimcheck_cannot_take_stay_in_the_client_and_an_old_claimcheck_entry_is_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = tmp_path / "mcp.json"
    old_entry = {"command": "/old/venv/bin/claimcheck", "args": ["serve"]}
    bad = {"command": "x", "url": "http://y"}
    client.write_text(
        json.dumps(
            {"mcpServers": {"claimcheck": old_entry, "bad": bad, "same": {"command": "a"}, "clash": {"command": "b"}}}
        ),
        encoding="utf-8",
    )
    config = tmp_path / "config.json"
    mine = {"mcpServers": {"clash": {"command": "mine"}, "kept": {"command": "k"}}, "settings": {"asyncTimeoutSecs": 2}}
    config.write_text(json.dumps(mine), encoding="utf-8")

    assert init(str(client), "--apply", "--config", str(config)) == 0

    servers = json.loads(client.read_text(encoding="utf-8"))["mcpServers"]
    assert servers["bad"] == bad and servers["clash"] == {"command": "b"}
    assert "same" not in servers
    entry_starts_claimcheck(servers["claimcheck"], config)
    ours = json.loads(config.read_text(encoding="utf-8"))
    assert ours["mcpServers"] == {"clash": {"command": "mine"}, "kept": {"command": "k"}, "same": {"command": "a"}}
    assert ours["settings"] == {"asyncTimeoutSecs": 2}
    out = capsys.readouterr().out
    assert "bad: left in mcp.json" in out and "clash: left in mcp.json" in out


def test_codex_toml_is_edited_in_place_and_round_trips(tmp_path: Path) -> None:
    client = copy("codex/config.toml", tmp_path)
    original = client.read_bytes()
    before = tomllib.loads(original.decode())
    config = tmp_path / "config.json"

    assert init(str(client), "--apply", "--config", str(config)) == 0

    after = tomllib.loads(client.read_text(encoding="utf-8"))
    assert {k: v for k, v in after.items() if k != "mcp_servers"} == {
        k: v for k, v in before.items() if k != "mcp_servers"
    }
    assert list(after["mcp_servers"]) == ["claimcheck"]
    entry_starts_claimcheck(after["mcp_servers"]["claimcheck"], config)
    ours = json.loads(config.read_text(encoding="utf-8"))["mcpServers"]
    assert ours["figma"]["headers"]["Authorization"] == "Bearer ${FIGMA_OAUTH_TOKEN}"
    assert ours["off"]["disabled"] is True
    assert init(str(client), "--undo") == 0
    assert client.read_bytes() == original


@pytest.mark.parametrize("version", ["opencode.json", "opencode-v2.jsonc"])
def test_opencode_s_file_gets_an_entry_of_its_own_shape_keeps_its_other_keys_and_undo_restores_it(
    tmp_path: Path, version: str
) -> None:
    nested = version == "opencode-v2.jsonc"
    client = tmp_path / "project" / ("opencode.jsonc" if nested else "opencode.json")
    client.parent.mkdir()
    # the fixture without its comments: a file with comments is not rewritten (as VS Code's, above)
    client.write_text(json.dumps(load_jsonc((FIXTURES / "opencode" / version).read_text("utf-8"))), "utf-8")
    original = client.read_bytes()
    config = tmp_path / "config.json"

    assert init(str(client), "--apply", "--config", str(config)) == 0

    before, after = json.loads(original), json.loads(client.read_text(encoding="utf-8"))
    servers = after["mcp"]["servers"] if nested else after["mcp"]
    assert list(servers) == ["claimcheck"] and servers["claimcheck"]["type"] == "local"
    command = servers["claimcheck"]["command"]
    assert Path(command[0]).is_absolute() and command[-3:] == ["serve", "--config", str(config)]
    assert {k: v for k, v in after.items() if k != "mcp"} == {k: v for k, v in before.items() if k != "mcp"}
    ours = load_config(config, {"REMOTE_TOKEN": "rt-5"}).mcp_servers
    if nested:
        assert (ours["my-server"].command, ours["paused"].disabled) == ("npx", True)
    else:
        assert ours["filesystem"].args == ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
        assert ours["jira"].headers == {"Authorization": "Bearer rt-5"} and ours["old"].disabled
    assert init(str(client), "--undo") == 0
    assert client.read_bytes() == original


@pytest.mark.parametrize("comments", [False, True], ids=["plain", "with-comments"])
def test_zed_s_settings_keep_an_extension_s_server_and_every_other_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], comments: bool
) -> None:
    """Zed's settings.json, as JSON or as Zed writes it (comments at the top, which the edit keeps)."""
    client = tmp_path / "zed" / "settings.json"
    client.parent.mkdir()
    written = (FIXTURES / "zed" / "settings.json").read_text("utf-8")
    client.write_text(written if comments else json.dumps(load_jsonc(written)), "utf-8")
    before = load_jsonc(client.read_text(encoding="utf-8"))
    config = tmp_path / "config.json"

    assert init(str(client), "--apply", "--config", str(config)) == 0

    text = client.read_text(encoding="utf-8")
    after = load_jsonc(text)
    assert text.startswith("// Zed settings\n{\n") == comments
    assert list(after["context_servers"]) == ["mcp-server-github", "claimcheck"]  # only Zed starts the first
    entry = after["context_servers"]["claimcheck"]
    assert entry["source"] == "custom" and entry["env"] == {}
    entry_starts_claimcheck(entry, config)
    assert {k: v for k, v in after.items() if k != "context_servers"} == {
        k: v for k, v in before.items() if k != "context_servers"
    }
    assert sorted(json.loads(config.read_text(encoding="utf-8"))["mcpServers"]) == [
        "hexdocs-mcp",
        "my-context-server",
        "off",
        "remote",
    ]
    assert "  mcp-server-github: left in settings.json (only the client can start it)" in capsys.readouterr().out


@pytest.mark.parametrize("client", ["goose", "continue"])
def test_a_yaml_client_s_servers_move_and_its_entry_is_shown_to_paste_never_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], client: str
) -> None:
    """goose's and Continue's files are YAML: read, never rewritten (that would reformat them and drop their
    comments); the entry shown, pasted in, is one that loads as claimcheck started on its config."""
    home = tmp_path / "home"
    target = usual_paths(client, {"HOME": str(home)}, tmp_path / "workspace")[-1]  # the user's file
    target.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / client / "config.yaml", target)
    original = target.read_bytes()
    config = tmp_path / "config.json"
    env = {"HOME": str(home), "GITHUB_TOKEN": "gh-1"}

    assert init(client, "--config", str(config), environ=env) == 0
    shown = capsys.readouterr().out
    assert init(client, "--apply", "--config", str(config), environ=env) == 2
    refused = capsys.readouterr().err

    assert target.read_bytes() == original and latest_backup(target) is None
    moved = sorted(json.loads(config.read_text(encoding="utf-8"))["mcpServers"])
    assert moved == (
        ["docs", "events", "github"] if client == "goose" else ["GitHub", "Remote docs", "SQLite MCP", "events"]
    )
    pasted = shown.split(f"for {target}:\n\n", 1)[1].split("\n\n", 1)[0]
    routed = load_config_text(target, pasted)
    assert list(routed.mcp_servers) == ["claimcheck"]
    entry_starts_claimcheck(routed.mcp_servers["claimcheck"].model_dump(), config)
    assert "claimcheck does not rewrite YAML files" in shown and "take out" in shown
    assert refused.startswith(f"claimcheck: {target}: is YAML, which rewriting would reformat and strip of comments")


@pytest.mark.parametrize(
    ("client", "fixture", "moved"),
    [
        ("cline", "cline/cline_mcp_settings.json", ["git", "remote"]),
        ("roo", "roo/mcp_settings.json", ["local-server"]),
        ("gemini", "gemini/settings.json", ["experimental", "github", "pythonTools"]),
        ("kiro", "kiro/mcp.json", ["local-server-name", "remote-server-name"]),
        ("lmstudio", "lmstudio/mcp.json", ["hf-mcp-server"]),
    ],
)
def test_cline_roo_gemini_kiro_and_lm_studio_are_found_where_they_keep_servers_and_routed_through_claimcheck(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: str, fixture: str, moved: list[str]
) -> None:
    """Cline and Roo Code (VS Code extensions, their files in VS Code's global storage), Gemini CLI
    (`~/.gemini/settings.json`), Kiro (`~/.kiro/settings/mcp.json`) and LM Studio (`~/.lmstudio/mcp.json`): their own
    keys (`alwaysAllow`, `networkTimeout`, `watchPaths`, `trust`, `autoApprove`) do not stop the move, and every key
    but the servers stays."""
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home"
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "API_KEY": "k", "GITHUB_TOKEN": "t"}
    target = usual_paths(client, env, tmp_path, "linux")[-1]
    target.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / fixture, target)
    before = json.loads(target.read_text(encoding="utf-8"))
    config = tmp_path / "config.json"

    assert init(client, "--apply", "--config", str(config), environ=env) == 0

    after = json.loads(target.read_text(encoding="utf-8"))
    assert sorted(json.loads(config.read_text(encoding="utf-8"))["mcpServers"]) == moved
    assert list(after["mcpServers"]) == ["claimcheck"]
    entry_starts_claimcheck(after["mcpServers"]["claimcheck"], config)
    assert {k: v for k, v in after.items() if k != "mcpServers"} == {
        k: v for k, v in before.items() if k != "mcpServers"
    }


def test_a_command_line_in_command_moves_as_its_program_and_arguments(tmp_path: Path) -> None:
    """`"command": "npx -y pkg"` moves as `npx` with `-y pkg`, as claimcheck would read it, so its config is written
    the way it is read; a command whose first word is no program moves as it was written."""
    (tmp_path / "npx").write_text("#!/bin/sh\n", encoding="utf-8")
    (tmp_path / "npx").chmod(0o755)
    client = tmp_path / "claude_desktop_config.json"
    servers = {"memory": {"command": "npx -y @modelcontextprotocol/server-memory"}, "typo": {"command": "npz -y x"}}
    client.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    config = tmp_path / "config.json"

    assert init(str(client), "--config", str(config), environ={"HOME": str(tmp_path), "PATH": str(tmp_path)}) == 0

    moved = json.loads(config.read_text(encoding="utf-8"))["mcpServers"]
    assert moved["memory"] == {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}
    assert moved["typo"] == {"command": "npz -y x"}


def test_gemini_cli_s_servers_move_as_gemini_starts_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What Gemini CLI reads its own way moves as claimcheck's: `$VAR` as `${VAR}` (filled in when claimcheck
    starts), a server in `mcp.excluded` disabled, Gemini's `timeout` (milliseconds it waits) left out; `mcp` stays
    in Gemini's file."""
    monkeypatch.chdir(tmp_path)
    target = tmp_path / ".gemini" / "settings.json"
    target.parent.mkdir()
    shutil.copy(FIXTURES / "gemini" / "settings.json", target)
    config = tmp_path / "config.json"

    assert init("gemini", "--apply", "--config", str(config), environ={"HOME": str(tmp_path / "home")}) == 0

    servers = json.loads(config.read_text(encoding="utf-8"))["mcpServers"]
    assert servers["pythonTools"]["env"] == {"DATABASE_URL": "${DB_URL}", "API_KEY": "${API_KEY}"}
    assert servers["experimental"]["disabled"] is True
    assert "disabled" not in servers["github"] and "timeout" not in servers["github"]
    assert json.loads(target.read_text(encoding="utf-8"))["mcp"] == {"excluded": ["experimental"]}


@pytest.mark.parametrize(
    "lists",
    [{"mcp": {"allowed": ["github"], "excluded": ["claimcheck"]}}, {"allowMCPServers": ["github"]}],
    ids=["v2", "v1"],
)
def test_gemini_s_allow_list_lets_the_claimcheck_entry_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lists: dict[str, Any]
) -> None:
    """Gemini starts only the servers its `allowed` list names: the entry that replaces them is added to it (and
    taken out of `excluded`), or Gemini would start nothing."""
    monkeypatch.chdir(tmp_path)
    target = tmp_path / ".gemini" / "settings.json"
    target.parent.mkdir()
    target.write_text(json.dumps({**lists, "mcpServers": {"github": {"command": "gh-mcp"}}}), encoding="utf-8")
    config = tmp_path / "config.json"

    assert init("gemini", "--apply", "--config", str(config), environ={"HOME": str(tmp_path / "home")}) == 0

    routed = load_config(target, {})
    assert list(routed.mcp_servers) == ["claimcheck"] and not routed.mcp_servers["claimcheck"].disabled
    after = json.loads(target.read_text(encoding="utf-8"))
    assert after.get("mcp", {}).get("excluded", []) == []


def test_gemini_s_allow_list_in_a_file_with_comments_is_edited_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gemini CLI reads comments in its settings: the allow list gains the entry and the block list loses it where
    they are, every comment kept."""
    monkeypatch.chdir(tmp_path)
    target = tmp_path / ".gemini" / "settings.json"
    target.parent.mkdir()
    text = """{
  // which servers Gemini may start
  "mcp": {
    "allowed": ["github"], // reviewed
    "excluded": [
      "claimcheck",
      "old"
    ]
  },
  "mcpServers": {
    "github": {"command": "gh-mcp"} // the CLI's
  }
}
"""
    target.write_text(text, encoding="utf-8")
    config = tmp_path / "config.json"

    assert init("gemini", "--apply", "--config", str(config), environ={"HOME": str(tmp_path / "home")}) == 0

    after = target.read_text(encoding="utf-8")
    assert load_jsonc(after)["mcp"] == {"allowed": ["github", "claimcheck"], "excluded": ["old"]}
    assert '"allowed": ["github", "claimcheck"], // reviewed' in after
    assert "// which servers Gemini may start" in after
    routed = load_config(target, {})
    assert list(routed.mcp_servers) == ["claimcheck"] and not routed.mcp_servers["claimcheck"].disabled


def test_gemini_s_allow_list_with_a_comment_inside_is_left_to_the_user_with_what_to_add_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / ".gemini" / "settings.json"
    target.parent.mkdir()
    text = '{\n  "mcp": {"allowed": ["github" /* reviewed */]},\n  "mcpServers": {"github": {"command": "gh-mcp"}}\n}\n'
    target.write_text(text, encoding="utf-8")
    config = tmp_path / "config.json"

    assert init("gemini", "--apply", "--config", str(config), environ={"HOME": str(tmp_path / "home")}) == 2

    assert target.read_text(encoding="utf-8") == text
    said = capsys.readouterr().err.rstrip()
    assert said.endswith(
        "left untouched: add the entry above by hand, take out github, which claimcheck serves now, and its name "
        "to mcp.allowed"
    )


def test_continue_s_workspace_folder_moves_every_file_s_servers_and_shows_the_block_file_to_add(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`.continue/mcpServers/` in the workspace, one server block per file (YAML, or a JSON file copied from another
    client): every file's servers move, a file left with a server claimcheck cannot serve is named, and the block
    file shown loads as claimcheck started on its config. Nothing in the folder is written."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / ".continue" / "mcpServers"
    shutil.copytree(FIXTURES / "continue" / "mcpServers", folder)
    (folder / "broken.yaml").write_text("mcpServers:\n  - name: numbered\n    command: 5\n", encoding="utf-8")
    (folder / "README.md").write_text("# not a config\n", encoding="utf-8")
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    config = tmp_path / "config.json"
    env = {"HOME": str(tmp_path / "home")}

    assert init("continue", "--config", str(config), environ=env) == 0
    shown = capsys.readouterr().out
    assert init("continue", "--undo", "--config", str(config), environ=env) == 2
    refused = capsys.readouterr().err

    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before
    assert sorted(json.loads(config.read_text(encoding="utf-8"))["mcpServers"]) == ["Browser search", "filesystem"]
    assert "  numbered: left in broken.yaml (mcpServers.numbered.command: Input should be a valid string)" in shown
    block = shown.split(f"{folder / 'claimcheck.yaml'}:\n\n", 1)[1].split("\n\n", 1)[0]
    assert block.startswith("name: claimcheck\nversion: 0.0.1\nschema: v1\nmcpServers:\n")
    routed = load_config_text(folder / "claimcheck.yaml", block)
    assert list(routed.mcp_servers) == ["claimcheck"]
    entry_starts_claimcheck(routed.mcp_servers["claimcheck"].model_dump(), config)
    assert "Create it, and take out mcp.json, playwright-mcp.yaml, whose servers claimcheck serves now" in shown
    assert refused == f"claimcheck: {folder}: init writes nothing into a folder, so there is nothing to undo\n"

    (folder / "claimcheck.yaml").write_text(block, encoding="utf-8")  # as the user adds it
    assert init("continue", "--config", str(config), environ=env) == 0
    again = capsys.readouterr().out
    assert "claimcheck.yaml" not in again.split("The block file")[0]  # the entry that starts claimcheck stays


def test_claimcheck_s_own_config_inside_the_folder_is_not_taken_for_a_client_s(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """claimcheck's config kept in `.continue/mcpServers/` is neither read as Continue's servers nor named as a file
    to take out."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / ".continue" / "mcpServers"
    folder.mkdir(parents=True)
    config = folder / "claimcheck-servers.json"
    config.write_text(json.dumps({"mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git"]}}}), "utf-8")
    before = config.read_bytes()

    assert init("continue", "--config", str(config), environ={"HOME": str(tmp_path / "home")}) == 0
    shown = capsys.readouterr().out

    assert "  claimcheck-servers.json: claimcheck's own config, left as it is" in shown
    assert "take out" not in shown and "now serves" not in shown
    assert config.read_bytes() == before


@pytest.mark.parametrize(
    ("encoding", "bom"), [("utf-8", b"\xef\xbb\xbf"), ("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff")]
)
def test_a_file_with_a_byte_order_mark_is_rewritten_in_its_own_encoding(
    tmp_path: Path, encoding: str, bom: bytes
) -> None:
    """Notepad's UTF-8 with a byte order mark, PowerShell's UTF-16: read, and written back as they were."""
    client = tmp_path / "claude_desktop_config.json"
    text = '{"globalShortcut": "Ctrl+Space", "mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-gït"]}}}'
    client.write_bytes(bom + text.encode(encoding))
    original = client.read_bytes()
    config = tmp_path / "config.json"

    assert init(str(client), "--apply", "--config", str(config)) == 0

    written = client.read_bytes()
    assert written.startswith(bom) and not written[len(bom) :].startswith(bom)
    after = json.loads(written[len(bom) :].decode(encoding))
    assert after["globalShortcut"] == "Ctrl+Space" and list(after["mcpServers"]) == ["claimcheck"]
    assert json.loads(config.read_text(encoding="utf-8"))["mcpServers"]["git"]["args"] == ["mcp-server-gït"]
    assert init(str(client), "--undo") == 0
    assert client.read_bytes() == original


def test_vscode_s_file_with_comments_is_edited_in_place_and_its_inputs_go_to_claimcheck_s_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """VS Code's mcp.json with comments and trailing commas: the moved servers are taken out and claimcheck's entry
    put in as text, so the comments, the `inputs` and the layout of what stays are as they were."""
    workspace = tmp_path / "ws"
    shutil.copytree(FIXTURES / "vscode", workspace)
    client = workspace / ".vscode" / "mcp.json"
    original = client.read_text(encoding="utf-8")
    config = tmp_path / "config.json"

    assert init(str(client), "--apply", "--config", str(config)) == 0

    after = client.read_text(encoding="utf-8")
    assert "// VS Code writes JSON with comments" in after
    assert after.startswith(original[: original.index('"servers"')])  # the comment and `inputs`, byte for byte
    data = load_jsonc(after)
    assert list(data) == ["inputs", "servers"] and list(data["servers"]) == ["claimcheck"]
    entry = data["servers"]["claimcheck"]
    assert entry["type"] == "stdio" and entry["env"] == {"PERPLEXITY_KEY": "${input:perplexity-key}"}
    entry_starts_claimcheck(entry, config)
    assert capsys.readouterr().err == ""
    ours = json.loads(config.read_text(encoding="utf-8"))["mcpServers"]
    assert ours["perplexity"]["env"]["PERPLEXITY_API_KEY"] == "${PERPLEXITY_KEY}"
    assert ours["fetch"]["cwd"] == str(workspace)  # ${workspaceFolder} made absolute


def test_a_client_is_found_by_name_at_its_usual_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"t": {"command": "uvx"}}}), "utf-8")
    env = {"HOME": str(home), "CLAIMCHECK_CONFIG": str(tmp_path / "c.json")}
    assert init("cursor", environ=env) == 0
    assert json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))["mcpServers"] == {"t": {"command": "uvx"}}
    assert str(home / ".cursor" / "mcp.json") in capsys.readouterr().out


def test_a_missing_client_file_and_a_missing_backup_are_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(str(tmp_path / "none.json"), "--config", str(tmp_path / "c.json")) == 2
    assert init(str(tmp_path / "none.json"), "--undo") == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert "no such file" in lines[0] and "no backup" in lines[1]


def test_a_client_name_claimcheck_does_not_know_is_answered_with_the_names_it_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert init("vs-code") == 2
    assert init("claude") == 2
    lines = capsys.readouterr().err.splitlines()
    names = (
        "name one of claude-desktop, claude-code, cursor, vscode, windsurf, codex, opencode, zed, goose, continue, "
        "gemini, cline, roo, kiro, lmstudio, or the path of the client's"
    )
    assert lines == [
        f"claimcheck: vs-code is neither a client claimcheck knows nor a file here: did you mean vscode? {names} "
        "config file",
        f"claimcheck: claude is neither a client claimcheck knows nor a file here: did you mean claude-code? {names} "
        "config file",
    ]


def test_usual_places_on_linux_and_macos() -> None:
    env = {"HOME": "/h"}
    assert app_config_dir(env, "linux") == Path("/h/.config")
    assert app_config_dir({**env, "XDG_CONFIG_HOME": "/x"}, "linux") == Path("/x")
    assert app_config_dir(env, "darwin") == Path("/h/Library/Application Support")
    assert usual_paths("windsurf", env) == [Path("/h/.codeium/windsurf/mcp_config.json")]
    assert usual_paths("codex", {**env, "CODEX_HOME": "/c"}) == [Path("/c/config.toml")]
    assert usual_paths("cursor", env, Path("/p")) == [Path("/p/.cursor/mcp.json"), Path("/h/.cursor/mcp.json")]
    assert usual_paths("opencode", env, Path("/p")) == [
        Path("/p/opencode.json"),
        Path("/p/opencode.jsonc"),
        Path("/p/.opencode/opencode.json"),
        Path("/h/.config/opencode/opencode.json"),
    ]
    assert usual_paths("zed", env) == [Path("/h/.config/zed/settings.json")]
    assert usual_paths("zed", {**env, "XDG_CONFIG_HOME": "/x"}) == [Path("/x/zed/settings.json")]
    assert usual_paths("goose", env) == [Path("/h/.config/goose/config.yaml")]
    assert usual_paths("continue", env, Path("/p")) == [
        Path("/p/.continue/mcpServers"),
        Path("/h/.continue/config.yaml"),
    ]


def test_cline_in_cursor_or_another_editor_is_found_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cline and Roo Code are extensions that run in Cursor, Windsurf, VSCodium and VS Code Insiders too: their file
    is looked for in each editor's global storage, and where none has one, VS Code's is the one named. The client
    is named as its makers write it."""
    monkeypatch.chdir(tmp_path)
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    storage = tmp_path / ".config" / "{}" / "User" / "globalStorage" / "saoudrizwan.claude-dev" / "settings"
    vscode = Path(str(storage).format("Code")) / "cline_mcp_settings.json"
    assert locate("cline", env).path == vscode
    in_cursor = Path(str(storage).format("Cursor")) / "cline_mcp_settings.json"
    in_cursor.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "cline" / "cline_mcp_settings.json", in_cursor)
    assert locate("cline", env).path == in_cursor
    assert init("cline", "--config", str(tmp_path / "config.json"), environ=env) == 0
    assert sorted(json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))["mcpServers"]) == ["git", "remote"]
    assert f"The entry that routes Cline through claimcheck, for {in_cursor}:" in capsys.readouterr().out
    assert list(NAMES) == list(CLIENTS)  # every client has its name


def test_usual_places_on_windows_are_under_appdata_where_the_client_keeps_them_there() -> None:
    env = {"HOME": "/u", "APPDATA": "/u/AppData/Roaming"}
    assert usual_paths("claude-desktop", env, system="win32") == [
        Path("/u/AppData/Roaming/Claude/claude_desktop_config.json")
    ]
    assert usual_paths("goose", env, system="win32") == [Path("/u/AppData/Roaming/Block/goose/config/config.yaml")]
    assert usual_paths("zed", env, system="win32") == [Path("/u/AppData/Roaming/Zed/settings.json")]
    assert usual_paths("continue", env, Path("/p"), "win32")[-1] == Path("/u/.continue/config.yaml")
    assert usual_paths("goose", env, system="linux") == [Path("/u/.config/goose/config.yaml")]
    extensions = Path("/u/AppData/Roaming/Code/User/globalStorage")
    assert usual_paths("cline", env, system="win32")[-1] == (
        extensions / "saoudrizwan.claude-dev/settings/cline_mcp_settings.json"
    )
    mac = Path("/u/Library/Application Support/Code/User/globalStorage")
    roo = usual_paths("roo", env, Path("/p"), "darwin")
    assert (roo[0], roo[-1]) == (
        Path("/p/.roo/mcp.json"),
        mac / "rooveterinaryinc.roo-cline/settings/mcp_settings.json",
    )
    assert usual_paths("kiro", env, Path("/p"), "win32") == [
        Path("/p/.kiro/settings/mcp.json"),
        Path("/u/.kiro/settings/mcp.json"),
    ]
    assert usual_paths("lmstudio", env, system="win32") == [Path("/u/.lmstudio/mcp.json")]
    assert usual_paths("gemini", env, Path("/p"), "win32") == [
        Path("/p/.gemini/settings.json"),
        Path("/u/.gemini/settings.json"),
    ]


def test_applying_twice_writes_once_and_a_second_undo_finds_no_backup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = copy("windsurf/mcp_config.json", tmp_path)
    original = client.read_bytes()
    config = tmp_path / "config.json"
    assert init(str(client), "--apply", "--config", str(config)) == 0
    applied = client.read_bytes()
    assert init(str(client), "--apply", "--config", str(config)) == 0
    assert client.read_bytes() == applied
    assert "already routes through claimcheck" in capsys.readouterr().out
    assert init(str(client), "--undo") == 0
    assert client.read_bytes() == original
    assert init(str(client), "--undo") == 2


def test_claimcheck_s_own_config_is_not_taken_for_a_client_s(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"mcpServers": {"a": {"command": "x"}}}), encoding="utf-8")
    assert init(str(config), "--apply", "--config", str(config)) == 2
    assert "is claimcheck's own config" in capsys.readouterr().err


def test_vscode_apply_keeps_the_inputs_so_vscode_still_asks_and_passes_the_answer_to_claimcheck(
    tmp_path: Path,
) -> None:
    client = tmp_path / ".vscode" / "mcp.json"
    client.parent.mkdir()
    inputs = [{"type": "promptString", "id": "gh-token", "description": "GitHub token", "password": True}]
    server = {
        "type": "http",
        "url": "https://api.example.com/mcp",
        "headers": {"Authorization": "Bearer ${input:gh-token}"},
    }
    client.write_text(json.dumps({"inputs": inputs, "servers": {"gh": server}}), encoding="utf-8")
    config = tmp_path / "config.json"

    assert init(str(client), "--apply", "--config", str(config)) == 0

    written = json.loads(client.read_text(encoding="utf-8"))
    assert written["inputs"] == inputs
    entry = written["servers"]["claimcheck"]
    assert entry["type"] == "stdio" and entry["env"] == {"GH_TOKEN": "${input:gh-token}"}
    ours = json.loads(config.read_text(encoding="utf-8"))["mcpServers"]["gh"]
    assert ours == {
        "transport": "streamable-http",
        "url": "https://api.example.com/mcp",
        "headers": {"Authorization": "Bearer ${GH_TOKEN}"},
    }
    assert load_config(config, {"GH_TOKEN": "t"}).mcp_servers["gh"].headers == {"Authorization": "Bearer t"}


@pytest.mark.parametrize(
    ("client", "place", "name", "most"),
    [
        ("claude-code", ".mcp.json", "claimcheck-for-this-repo", 33),  # 64 - len("mcp__claimcheck-for-this-repo__")
        ("cursor", ".cursor/mcp.json", "claimcheck-for-this-repo", 35),  # 59 - 24
        ("claude-code", ".mcp.json", "claimcheck", None),  # 47, the default, is what it leaves
        ("cursor", ".cursor/mcp.json", "cc", None),  # 57: more than the default
    ],
    ids=["claude-code-long-name", "cursor-long-name", "claude-code-default-name", "cursor-short-name"],
)
def test_an_entry_name_that_leaves_a_client_less_room_for_tool_names_lowers_tool_name_max(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: str, place: str, name: str, most: int | None
) -> None:
    """Claude Code calls a tool `mcp__<entry>__<tool>` (64 at most); Cursor hides one whose entry and tool names
    reach 60."""
    monkeypatch.chdir(tmp_path)
    target = tmp_path / place
    target.parent.mkdir(exist_ok=True)
    target.write_text(json.dumps({"mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git"]}}}), "utf-8")
    config = tmp_path / "config.json"

    assert init(client, "--apply", "--name", name, "--config", str(config), environ={"HOME": str(tmp_path)}) == 0

    written = json.loads(config.read_text(encoding="utf-8"))
    assert written.get("settings", {}).get("toolNameMax") == most
    assert load_config(config, {}).settings.tool_name_max == (most or 47)


def test_claude_code_s_local_scope_in_claude_json_is_read_and_rewritten_for_this_project_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "app"
    project.mkdir()
    monkeypatch.chdir(project)
    home = tmp_path / "home"
    home.mkdir()
    other = {"mcpServers": {"o": {"command": "other"}}}
    data = {
        "numStartups": 7,
        "mcpServers": {"user": {"type": "stdio", "command": "u"}},
        "projects": {str(project): {"allowedTools": [], "mcpServers": {"git": {"command": "uvx"}}}, "/else": other},
    }
    state = home / ".claude.json"
    state.write_text(json.dumps(data), encoding="utf-8")
    config = tmp_path / "config.json"

    assert init("claude-code", "--apply", "--config", str(config), environ={"HOME": str(home)}) == 0

    written = json.loads(state.read_text(encoding="utf-8"))
    assert {k: v for k, v in written.items() if k != "projects"} == {k: v for k, v in data.items() if k != "projects"}
    assert written["projects"]["/else"] == other
    here = written["projects"][str(project)]
    assert here["allowedTools"] == [] and list(here["mcpServers"]) == ["claimcheck"]
    entry_starts_claimcheck(here["mcpServers"]["claimcheck"], config)
    assert json.loads(config.read_text(encoding="utf-8"))["mcpServers"] == {"git": {"command": "uvx"}}
    assert init("claude-code", "--undo", environ={"HOME": str(home)}) == 0
    assert json.loads(state.read_text(encoding="utf-8")) == data
