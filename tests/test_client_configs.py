"""Other clients' config files load as they are written: each fixture is written from that client's documentation
(Claude Desktop, Claude Code's `.mcp.json`, Cursor, VS Code's `.vscode/mcp.json`, Windsurf, Codex CLI's TOML,
opencode's `opencode.json` in both its versions, Zed's settings.json, goose's and Continue's YAML)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from server.client_configs import translate
from server.config import Config, load_config, parse_config
from server.config_sections import ServerConfig
from server.config_text import loads_jsonc, read_config_data
from server.errors import ConfigError

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "client_configs"
ENV = {
    "HOME": "/home/me",
    "API_KEY": "k-123",
    "GITHUB_TOKEN": "gh-1",
    "DB_URL": "postgres://db",
    "PERPLEXITY_KEY": "px-9",
    "REMOTE_TOKEN": "rt-5",
    "FIGMA_OAUTH_TOKEN": "fig-7",
    "FIGMA_TEAM": "team-3",
    "DOCS_TOKEN": "dt-2",
}


def shape(config: Config) -> dict[str, dict[str, Any]]:
    """What each server is, in the terms claimcheck acts on."""
    found = {}
    for name, server in config.mcp_servers.items():
        entry: dict[str, Any] = {"kind": server.kind}
        if server.command is not None:
            entry.update(command=server.command, args=server.args, env=server.env, cwd=server.cwd)
        else:
            entry.update(url=server.url, headers=server.headers)
        if server.disabled:
            entry["disabled"] = True
        found[name] = entry
    return found


def load(relative: str, caplog: pytest.LogCaptureFixture) -> tuple[Config, list[str]]:
    with caplog.at_level(logging.WARNING, logger="server.config"):
        config = load_config(FIXTURES / relative, ENV)
    return config, [r.getMessage() for r in caplog.records if r.name == "server.config"]


def test_a_whole_claude_desktop_file_loads_its_servers_and_says_once_what_it_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config, notices = load("claude-desktop/claude_desktop_config.json", caplog)
    assert shape(config) == {
        "filesystem": {
            "kind": "stdio",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop", "/Users/me/Downloads"],
            "env": {},
            "cwd": None,
        },
        "git": {
            "kind": "stdio",
            "command": "uvx",
            "args": ["mcp-server-git", "--repository", "/home/me/src/project"],
            "env": {"GIT_TRACE": "0"},
            "cwd": None,
        },
    }
    assert notices == ["read mcpServers from claude_desktop_config.json; ignored: globalShortcut, preferences"]


def test_claude_code_s_mcp_json_takes_type_and_default_values(caplog: pytest.LogCaptureFixture) -> None:
    config, notices = load("claude-code/.mcp.json", caplog)
    assert shape(config) == {
        "memory": {
            "kind": "stdio",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-memory"],
            "env": {"MEMORY_FILE_PATH": "/tmp/memory.json"},
            "cwd": None,
        },
        "api": {
            "kind": "streamable-http",
            "url": "https://api.example.com/mcp",
            "headers": {"Authorization": "Bearer k-123"},
        },
        "legacy": {"kind": "sse", "url": "https://legacy.example.com/sse", "headers": {}},
    }
    assert notices == []  # every key was understood: nothing to say


def test_cursor_s_file_takes_env_variables_the_workspace_folder_and_an_env_file(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config, _ = load("cursor/mcp.json", caplog)
    workspace = FIXTURES / "cursor"
    assert shape(config) == {
        "time": {
            "kind": "stdio",
            "command": "uvx",
            "args": ["mcp-server-time", "--local-timezone=Europe/Paris"],
            "env": {},
            "cwd": None,
        },
        "github": {
            "kind": "streamable-http",
            "url": "https://api.githubcopilot.com/mcp/",
            "headers": {"Authorization": "Bearer gh-1"},
        },
        "local-db": {
            "kind": "stdio",
            "command": "node",
            "args": [f"{workspace}/tools/db-server.js"],
            "env": {"DB_POOL": "4", "DB_URL": "postgres://db"},
            "cwd": None,
        },
    }


def test_vscode_s_servers_with_inputs_comments_and_its_own_keys(caplog: pytest.LogCaptureFixture) -> None:
    config, notices = load("vscode/.vscode/mcp.json", caplog)
    workspace = str(FIXTURES / "vscode")
    assert shape(config) == {
        "perplexity": {
            "kind": "stdio",
            "command": "npx",
            "args": ["-y", "server-perplexity-ask"],
            "env": {"FETCH_LOG": "1", "REGION": "eu-west-1", "PERPLEXITY_API_KEY": "px-9"},
            "cwd": None,
        },
        "fetch": {"kind": "stdio", "command": "uvx", "args": ["mcp-server-fetch"], "env": {}, "cwd": workspace},
        "github": {
            "kind": "streamable-http",
            "url": "https://api.githubcopilot.com/mcp/",
            "headers": {"X-Workspace": workspace},
        },
        "events": {"kind": "sse", "url": "http://localhost:3000/sse", "headers": {}},
    }
    assert notices == [
        "read servers (and inputs) from mcp.json; ignored: servers.fetch.dev, servers.github.gallery, "
        "servers.github.version"
    ]


def test_a_vscode_input_without_its_variable_names_the_variable_to_set() -> None:
    env = {k: v for k, v in ENV.items() if k != "PERPLEXITY_KEY"}
    with pytest.raises(ConfigError) as caught:
        load_config(FIXTURES / "vscode/.vscode/mcp.json", env)
    message = str(caught.value)
    assert "servers.perplexity.env.PERPLEXITY_API_KEY" in message
    assert "Perplexity API Key" in message
    assert message.endswith("set the environment variable PERPLEXITY_KEY")


def test_windsurf_s_server_url_disabled_tools_and_disabled_servers(caplog: pytest.LogCaptureFixture) -> None:
    config, notices = load("windsurf/mcp_config.json", caplog)
    assert shape(config)["remote"] == {
        "kind": "streamable-http",
        "url": "https://mcp.example.com/mcp",
        "headers": {"Authorization": "Bearer rt-5"},
    }
    assert config.mcp_servers["remote"].tools.exclude == ["delete_everything"]
    assert shape(config)["old"]["disabled"] is True
    assert shape(config)["sequential-thinking"]["kind"] == "stdio"
    assert notices == []


def test_gemini_cli_s_http_url_tool_lists_variables_and_excluded_servers_are_read_and_its_own_keys_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Gemini CLI's `~/.gemini/settings.json`: `httpUrl` for streamable HTTP, `includeTools`/`excludeTools` (exclude
    wins, as claimcheck's own `tools`), `$VAR` as well as `${VAR}`, a server in `mcp.excluded` not started;
    `timeout` (how long Gemini waits, in milliseconds), `trust` and `authProviderType` its own business."""
    config, notices = load("gemini/settings.json", caplog)
    assert shape(config)["github"] == {
        "kind": "streamable-http",
        "url": "https://api.githubcopilot.com/mcp/",
        "headers": {"Authorization": "Bearer gh-1"},
    }
    assert config.mcp_servers["github"].timeout == ServerConfig(command="x").timeout  # claimcheck's default
    tools = config.mcp_servers["github"].tools
    assert (tools.include, tools.exclude) == (["get_issue", "list_issues", "create_issue"], ["create_issue"])
    assert shape(config)["pythonTools"]["env"] == {"DATABASE_URL": "postgres://db", "API_KEY": "k-123"}
    assert shape(config)["experimental"]["disabled"] is True
    assert not config.mcp_servers["pythonTools"].disabled
    assert notices == [
        "read mcpServers from settings.json; ignored: mcpServers.github.trust, mcpServers.github.timeout, "
        "mcpServers.pythonTools.authProviderType, mcpServers.pythonTools.description, theme"
    ]


@pytest.mark.parametrize(
    ("settings", "started"),
    [
        ({"mcp": {"allowed": ["a", "b"], "excluded": ["b"], "serverCommand": "x"}}, ["a"]),
        ({"allowMCPServers": ["c"]}, ["c"]),  # Gemini's first settings version
        ({"excludeMCPServers": ["a", "c"], "mcpServerCommand": "x"}, ["b"]),
        ({}, ["a", "b", "c"]),
    ],
    ids=["v2", "v1-allow", "v1-exclude", "none"],
)
def test_gemini_cli_s_allowed_and_excluded_servers_decide_which_start(
    settings: dict[str, Any], started: list[str]
) -> None:
    """Gemini starts only the servers `allowed` names (where given) and none that `excluded` names: the others are
    disabled, not refused (its `mcp` block is no table of servers, as opencode's is). The file is known for Gemini's
    by its place."""
    servers = {name: {"command": "node", "args": [f"{name}.js"]} for name in "abc"}
    config = parse_config({**settings, "mcpServers": servers}, ENV, source=Path("/p/.gemini/settings.json"))
    assert [name for name, server in config.mcp_servers.items() if not server.disabled] == started


def test_a_gemini_server_list_that_is_no_list_of_names_is_one_line() -> None:
    for settings, where in (
        ({"mcp": {"allowed": "a"}}, "mcp.allowed"),
        ({"excludeMCPServers": [1]}, "excludeMCPServers"),
    ):
        with pytest.raises(ConfigError, match=rf"^invalid config: {where}: give a list of server names$"):
            parse_config(
                {**settings, "mcpServers": {"a": {"command": "x"}}}, ENV, source=Path("/p/.gemini/settings.json")
            )


def test_dollar_variables_are_the_environment_s_in_gemini_s_files_alone() -> None:
    """`$VAR` is filled in where Gemini CLI would (a file at `.gemini/settings.json`, or one with Gemini's own keys),
    an unset one named at its place; in Claude Desktop's file, which fills in nothing, `$` stays text."""
    entry = {"command": "srv", "args": ["--db", "$DB_URL", "^a$", "$1", "${API_KEY}x"], "env": {"K": "$API_KEY"}}
    gemini = parse_config({"mcpServers": {"s": entry}}, ENV, source=Path("/p/.gemini/settings.json"))
    keyed = parse_config({"mcpServers": {"s": {**entry, "trust": True}}}, ENV, source=Path("/p/servers.json"))
    plain = parse_config({"mcpServers": {"s": entry}}, ENV, source=Path("/p/claude_desktop_config.json"))
    for config in (gemini, keyed):
        assert config.mcp_servers["s"].args == ["--db", "postgres://db", "^a$", "$1", "k-123x"]
        assert config.mcp_servers["s"].env == {"K": "k-123"}
    assert plain.mcp_servers["s"].args == ["--db", "$DB_URL", "^a$", "$1", "k-123x"]
    assert plain.mcp_servers["s"].env == {"K": "$API_KEY"}
    with pytest.raises(ConfigError, match=r"^mcpServers\.s\.env\.K: environment variable \$\{NOPE\} is not set$"):
        parse_config(
            {"mcpServers": {"s": {"command": "srv", "env": {"K": "$NOPE"}}}},
            ENV,
            source=Path("/h/.gemini/settings.json"),
        )


def test_kiro_s_and_lm_studio_s_files_load_as_they_are_written(caplog: pytest.LogCaptureFixture) -> None:
    """Kiro's `mcp.json` (IDE and CLI): `disabledTools` not offered, `autoApprove` its own, `disabled` as claimcheck's;
    LM Studio's `mcp.json` in Cursor's notation."""
    kiro, notices = load("kiro/mcp.json", caplog)
    assert shape(kiro) == {
        "local-server-name": {
            "kind": "stdio",
            "command": "command-to-run-server",
            "args": ["arg1", "arg2"],
            "env": {"ENV_VAR1": "hard-coded-variable", "ENV_VAR2": "k-123"},
            "cwd": None,
        },
        "remote-server-name": {
            "kind": "streamable-http",
            "url": "https://endpoint.to.connect.to",
            "headers": {"HEADER1": "value1", "Authorization": "Bearer rt-5"},
            "disabled": True,
        },
    }
    assert kiro.mcp_servers["local-server-name"].tools.exclude == ["tool_name3"]
    assert notices == [
        "read mcpServers from mcp.json; ignored: mcpServers.local-server-name.autoApprove, "
        "mcpServers.remote-server-name.autoApprove"
    ]
    lmstudio, _ = load("lmstudio/mcp.json", caplog)
    assert shape(lmstudio) == {
        "hf-mcp-server": {
            "kind": "streamable-http",
            "url": "https://huggingface.co/mcp",
            "headers": {"Authorization": "Bearer dt-2"},
        }
    }


def test_roo_code_s_watch_paths_are_ignored_and_its_disabled_tools_are_not_offered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config, notices = load("roo/mcp_settings.json", caplog)
    assert shape(config)["local-server"]["command"] == "node"
    assert config.mcp_servers["local-server"].tools.exclude == ["tool3"]
    assert notices == [
        "read mcpServers from mcp_settings.json; ignored: mcpServers.local-server.alwaysAllow, "
        "mcpServers.local-server.watchPaths"
    ]


def test_codex_s_toml_maps_its_own_keys_and_ignores_the_rest_of_the_file(caplog: pytest.LogCaptureFixture) -> None:
    config, notices = load("codex/config.toml", caplog)
    assert shape(config) == {
        "docs": {
            "kind": "stdio",
            "command": "npx",
            "args": ["-y", "mcp-server-docs"],
            "env": {"DOCS_TOKEN": "dt-2", "DOCS_LANG": "en"},  # env_vars: only the ones that are set
            "cwd": "/srv/docs",
        },
        "figma": {
            "kind": "streamable-http",
            "url": "https://mcp.figma.com/mcp",
            "headers": {"X-Figma-Region": "us-east-1", "X-Team": "team-3", "Authorization": "Bearer fig-7"},
        },
        "off": {"kind": "stdio", "command": "mcp-off", "args": [], "env": {}, "cwd": None, "disabled": True},
    }
    docs = config.mcp_servers["docs"]
    assert (docs.timeout, docs.tools.include) == (120, ["search", "read"])
    assert config.mcp_servers["off"].tools.exclude == ["dangerous"]
    assert notices == [
        "read mcp_servers from config.toml; ignored: mcp_servers.docs.startup_timeout_sec, model, approval_policy, "
        "profiles"
    ]


def test_opencode_s_file_takes_its_command_lists_environment_and_env_variables(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config, notices = load("opencode/opencode.json", caplog)
    assert shape(config) == {
        "filesystem": {
            "kind": "stdio",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
            "env": {"NODE_ENV": "production"},
            "cwd": None,
        },
        "jira": {
            "kind": "streamable-http",
            "url": "https://jira.example.com/mcp",
            "headers": {"Authorization": "Bearer rt-5"},
        },
        "old": {"kind": "stdio", "command": "mcp-old", "args": [], "env": {}, "cwd": None, "disabled": True},
    }
    assert config.mcp_servers["filesystem"].timeout == 3600  # opencode's 10 s wait is not a call's timeout here
    assert notices == ["read mcp from opencode.json; ignored: mcp.filesystem.timeout, $schema, model"]


def test_opencode_s_second_version_keeps_servers_under_mcp_servers(caplog: pytest.LogCaptureFixture) -> None:
    config, notices = load("opencode/opencode-v2.jsonc", caplog)
    assert shape(config) == {
        "my-server": {"kind": "stdio", "command": "npx", "args": ["-y", "example-mcp-server"], "env": {}, "cwd": None},
        "paused": {"kind": "stdio", "command": "mcp-paused", "args": [], "env": {}, "cwd": None, "disabled": True},
    }
    assert notices == ["read mcp.servers from opencode-v2.jsonc; ignored: $schema"]


def test_an_opencode_file_variable_is_refused_naming_what_to_write_instead() -> None:
    data = {"mcp": {"x": {"type": "remote", "url": "https://x.example/mcp", "headers": {"K": "{file:~/.key}"}}}}
    with pytest.raises(ConfigError, match=r"mcp\.x\.headers\.K: \{file:~/\.key\} is read by opencode; .* \{env:NAME\}"):
        parse_config(data, {})


def test_zed_s_settings_take_custom_and_older_command_servers_and_leave_out_extensions(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config, notices = load("zed/settings.json", caplog)
    assert shape(config) == {
        "hexdocs-mcp": {"kind": "stdio", "command": "npx", "args": ["-y", "hexdocs-mcp@0.5.0"], "env": {}, "cwd": None},
        "my-context-server": {
            "kind": "stdio",
            "command": "/path/to/my-context-server",
            "args": ["run"],
            "env": {"DB_URL": "postgres://db"},
            "cwd": None,
        },
        "remote": {
            "kind": "streamable-http",
            "url": "https://mcp.example.com/mcp",
            "headers": {"Authorization": "Bearer rt-5"},
        },
        "off": {"kind": "stdio", "command": "mcp-off", "args": [], "env": {}, "cwd": None, "disabled": True},
    }
    assert notices == [
        "read context_servers from settings.json; ignored: context_servers.mcp-server-github (a Zed extension's "
        "server: only Zed can start it), context_servers.my-context-server.settings, theme, ui_font_size, "
        "buffer_font_size, format_on_save, show_edit_predictions, and 4 more"
    ]


@pytest.mark.parametrize("alias", ["type", "transportType", "transport"])
@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("http", "streamable-http"),
        ("streamable-http", "streamable-http"),
        ("streamableHttp", "streamable-http"),
        ("sse", "sse"),
    ],
)
def test_every_transport_alias_names_an_http_transport(alias: str, value: str, kind: str) -> None:
    config = parse_config({"mcpServers": {"s": {"url": "http://h/mcp", alias: value}}}, {})
    assert config.mcp_servers["s"].kind == kind


@pytest.mark.parametrize("alias", ["type", "transportType", "transport"])
def test_stdio_is_a_transport_alias_too(alias: str) -> None:
    config = parse_config({"mcpServers": {"s": {"command": "x", alias: "stdio"}}}, {})
    assert config.mcp_servers["s"].kind == "stdio"


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"url": "http://h", "type": "stdio"}, 'mcpServers.s.type: "stdio" needs a "command"'),
        ({"command": "x", "type": "http"}, "mcpServers.s.type: 'http' needs a \"url\""),
        ({"url": "http://h", "type": "ws"}, "mcpServers.s.type: 'ws' is not a transport"),
        ({"url": "http://h", "type": "http", "transport": "sse"}, "type, transport name different transports"),
        ({"url": "http://h", "serverUrl": "http://i"}, 'give "url" or "serverUrl", not both'),
        ({"command": "x", "autoStart": True}, "mcpServers.s.autoStart: unknown key"),
    ],
)
def test_a_wrong_entry_is_one_error_naming_its_path(entry: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"mcpServers": {"s": entry}}, {})
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"mcp_servers": {"s": {"url": "http://x/mcp", "headers": ["A: b"], "http_headers": {"C": "d"}}}},
            'mcp_servers.s.headers: give an object, such as {"A": "b"}',
        ),
        (
            {"mcp_servers": {"s": {"url": "http://x/mcp", "env_http_headers": 5}}},
            "mcp_servers.s.env_http_headers: give a table of headers to variable names",
        ),
        ({"mcp_servers": {"s": {"command": "x", "env_vars": 5}}}, "mcp_servers.s.env_vars: give a list of variable"),
        (
            {"mcp": {"s": {"type": "local", "command": ["x"], "environment": ["A=1"], "env": {"B": "2"}}}},
            'mcp.s.env: give an object, such as {"A": "1"}',
        ),
        ({"context_servers": {"s": {"command": {"path": "x", "env": 5}}}}, "context_servers.s.env: give an object"),
        (
            {"context_servers": {"s": {"command": {"path": "x", "args": "a b"}, "args": ["c"]}}},
            'context_servers.s.args: give a list of strings, such as ["a", "b"]',
        ),
        ({"mcpServers": {"s": {"command": "x", "disabledTools": ["a"], "tools": "all"}}}, "mcpServers.s.tools: give"),
        (
            {"extensions": {"s": {"cmd": "x", "type": "stdio", "available_tools": 7}}},
            "extensions.s.available_tools: give a list of tool names",
        ),
    ],
    ids=[
        "codex-headers-a-list",
        "codex-env-http-headers-a-number",
        "codex-env-vars-a-number",
        "opencode-environment-a-list",
        "zed-command-env-a-number",
        "zed-command-args-a-string",
        "disabled-tools-beside-tools-a-string",
        "goose-available-tools-a-number",
    ],
)
def test_a_client_s_key_of_the_wrong_type_is_one_line_naming_it_not_a_traceback(
    data: dict[str, Any], expected: str
) -> None:
    """Where a client's keys are merged into claimcheck's (Codex's three kinds of headers, opencode's `environment`,
    Zed's command object), a value of the wrong type is said as any other (it was a TypeError or ValueError)."""
    with pytest.raises(ConfigError) as caught:
        parse_config(data, {})
    said = str(caught.value)
    assert expected in said and "\n" not in said
    assert said.count("; ") == 0 or "unknown key" not in said  # one mistake, not a made-up second one


def test_an_unknown_key_in_a_vscode_entry_is_named_by_the_file_s_own_path() -> None:
    with pytest.raises(ConfigError, match=r"servers\.s\.autoStart: unknown key"):
        parse_config({"servers": {"s": {"type": "stdio", "command": "x", "autoStart": True}}}, {})


def test_claimcheck_s_own_file_keeps_refusing_unknown_top_level_keys() -> None:
    with pytest.raises(ConfigError, match="globalShortcut: unknown key"):
        parse_config({"mcpServers": {}, "settings": {}, "globalShortcut": "x"}, {})


def test_a_misspelled_top_level_key_is_an_error_not_an_ignored_client_key() -> None:
    with pytest.raises(ConfigError, match="mcpServer: unknown key"):
        parse_config({"mcpServer": {"s": {"command": "x"}}}, {})


def test_a_file_with_two_server_tables_is_refused() -> None:
    with pytest.raises(ConfigError, match="both mcpServers and servers hold servers"):
        translate({"mcpServers": {}, "servers": {}})


def test_comments_and_trailing_commas_are_read_but_strings_are_left_alone() -> None:
    text = '{\n  // c\n  "a": "http://x/*y*/", /* z */\n  "b": [1, 2,],\n}'
    assert loads_jsonc(text) == {"a": "http://x/*y*/", "b": [1, 2]}
    # a comma before a bracket inside a string is the string's, comments or not (it was taken for a trailing comma)
    text = '// c\n{"args": ["--filter=[a,]", "{b, }"], "c": [1, /* d */ ],}'
    assert loads_jsonc(text) == {"args": ["--filter=[a,]", "{b, }"], "c": [1]}


def test_a_file_saved_with_a_byte_order_mark_loads_as_without(tmp_path: Path) -> None:
    """Notepad on Windows writes UTF-8 with a byte order mark; a config pasted there loads as it is."""
    path = tmp_path / "claude_desktop_config.json"
    path.write_bytes(b'\xef\xbb\xbf{"mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git"]}}}')
    assert load_config(path, {}).mcp_servers["git"].args == ["mcp-server-git"]


def test_goose_s_yaml_takes_its_command_line_and_remote_extensions_and_leaves_out_its_built_ins(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config, notices = load("goose/config.yaml", caplog)
    assert shape(config) == {
        "github": {
            "kind": "stdio",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_TOKEN": "gh-1", "GITHUB_TOOLSETS": "repos,issues"},  # the key from the environment
            "cwd": None,
        },
        "docs": {
            "kind": "streamable-http",
            "url": "https://docs.example.com/mcp",
            "headers": {"Authorization": "Bearer dt-2"},
        },
        "events": {"kind": "sse", "url": "http://localhost:8931/sse", "headers": {}, "disabled": True},
    }
    assert config.mcp_servers["docs"].tools.include == ["search_docs"]
    assert config.mcp_servers["github"].timeout == 3600  # goose's 300 s wait is not a call's timeout here
    assert notices == [
        "read extensions from config.yaml; ignored: extensions.developer (a goose builtin extension: only goose runs "
        "it), extensions.github.description, extensions.github.env_keys GITHUB_ENTERPRISE_URL (in goose's keyring: "
        "set them in claimcheck's environment), extensions.github.timeout, extensions.docs.timeout, GOOSE_PROVIDER, "
        "GOOSE_MODEL, GOOSE_MODE"
    ]


def test_continue_s_yaml_takes_its_list_of_named_servers_and_its_secrets_from_the_environment(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config, notices = load("continue/config.yaml", caplog)
    assert shape(config) == {
        "SQLite MCP": {
            "kind": "stdio",
            "command": "npx",
            "args": ["-y", "mcp-sqlite", "/path/to/your/database.db"],
            "env": {},
            "cwd": None,
        },
        "GitHub": {
            "kind": "stdio",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "gh-1"},
            "cwd": None,
        },
        "Remote docs": {
            "kind": "streamable-http",
            "url": "https://docs.example.com/mcp",
            "headers": {"Authorization": "Bearer dt-2"},
        },
        "events": {"kind": "sse", "url": "http://localhost:8931/sse", "headers": {}},
    }
    assert [config.prefix_of(name) for name in config.mcp_servers] == ["SQLite_MCP", "GitHub", "Remote_docs", "events"]
    assert notices == [
        "read mcpServers from config.yaml; ignored: mcpServers.Remote docs.requestOptions.timeout, name, version, "
        "schema, models"
    ]


def test_a_block_file_of_continue_s_loads_as_its_config_does(caplog: pytest.LogCaptureFixture) -> None:
    config, notices = load("continue/mcpServers/playwright-mcp.yaml", caplog)
    assert shape(config) == {
        "Browser search": {
            "kind": "stdio",
            "command": "npx",
            "args": ["@playwright/mcp@latest"],
            "env": {},
            "cwd": None,
        }
    }
    assert notices == ["read mcpServers from playwright-mcp.yaml; ignored: name, version, schema"]


def test_continue_s_directory_of_server_blocks_loads_every_file_s_servers(caplog: pytest.LogCaptureFixture) -> None:
    """Continue's quick start keeps each server in a file of `.continue/mcpServers/` (a YAML block, or a client's
    JSON file copied there): the directory is the config."""
    config, notices = load("continue/mcpServers", caplog)
    assert shape(config) == {
        "filesystem": {
            "kind": "stdio",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
            "env": {},
            "cwd": None,
        },
        "Browser search": {
            "kind": "stdio",
            "command": "npx",
            "args": ["@playwright/mcp@latest"],
            "env": {},
            "cwd": None,
        },
    }
    assert notices == ["read mcpServers from playwright-mcp.yaml; ignored: name, version, schema"]


@pytest.mark.parametrize(
    ("files", "error"),
    [
        ({}, r"a directory with no config file in it \(\.json, .*\); give the config file's path"),
        (
            {"a.json": {"mcpServers": {"x": {"command": "a"}}}, "b.json": {"mcpServers": {"x": {"command": "b"}}}},
            r"server 'x' is in both a\.json and b\.json; keep one",
        ),
        (
            {
                "a.json": {"mcpServers": {}, "settings": {"asyncTimeoutSecs": 3}},
                "b.json": {"settings": {"asyncTimeoutSecs": 4}},
            },
            r"settings in both a\.json and b\.json; keep them in one",
        ),
        (
            {"a.json": {"mcpServers": {"x": {"comand": "a"}}}},
            r"a\.json: invalid config: mcpServers\.x\.comand: unknown key",
        ),
    ],
    ids=["empty", "one-server-twice", "settings-twice", "a-bad-file"],
)
def test_a_config_directory_s_mistake_names_the_files(tmp_path: Path, files: dict[str, Any], error: str) -> None:
    for name, data in files.items():
        (tmp_path / name).write_text(json.dumps(data), encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a config", encoding="utf-8")  # other files are not read
    with pytest.raises(ConfigError, match=error):
        load_config(tmp_path, {})


_ALIAS_BOMB = "".join(
    [
        'a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n',
        *(f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]\n" for n in range(1, 10)),
        "extensions:\n  demo: {type: stdio, cmd: echo, args: [], junk: *a9}\n",  # 9**10 values if walked
    ]
)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "mcpServers:\n  - command: npx\n",
            r'config\.yaml: invalid config: mcpServers\[0\]: give each server a "name"',
        ),
        (
            "mcpServers:\n  - {name: a, command: x}\n  - {name: a, command: y}\n",
            r"config\.yaml: invalid config: mcpServers\[1\]: 'a' is named twice",
        ),
        (
            "extensions:\n  a: {type: stdio, cmd: x, command: y}\n",
            r'config\.yaml: invalid config: extensions\.a: give "command" or "cmd", not both',
        ),
        ("mcpServers: [\n  - name: a\n", r"config\.yaml: not valid YAML: line 2, column 3: "),
        ("extensions:\n  a: {type: stdio, cmd: x, env_keys: ABC}\n", r"extensions\.a\.env_keys: give a list of"),
        (
            _ALIAS_BOMB,
            r"config\.yaml: not valid YAML for a config: line \d+, column \d+: its aliases expand it past 100000 "
            r"values \(an alias bomb\?\); write the values out$",
        ),
        ("a: &a [1, *a]\nextensions: {}\n", r"line 1, column 4: an alias makes a value contain itself$"),
        ("x: " + "[" * 3000 + "]" * 3000 + "\n", r"config\.yaml: not valid YAML for a config: nested too deeply$"),
        (
            "extensions:\n  a: {cmd: \x07}\n",
            r"config\.yaml: not valid YAML: line 2, column 12: a character YAML does not ",
        ),
        ("null:\n", r"config\.yaml: invalid config: null: YAML reads this key as null, not as text; quote it$"),
        (
            "extensions:\n  yes: {cmd: x}\n",
            r"invalid config: extensions\.true: YAML reads this key as true, not as text",
        ),
        ("mcpServers:\n  1: {command: x}\n", r"invalid config: mcpServers\.1: YAML reads this key as 1, not as text"),
    ],
    ids=[
        *("no-name", "twice", "cmd-and-command", "broken", "env-keys-not-a-list", "alias-bomb", "itself", "deep"),
        *("a-control-character", "a-null-key", "a-true-server-name", "a-number-server-name"),
    ],
)
def test_a_yaml_mistake_is_one_line_naming_where(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=error):
        load_config(path, {})


def test_without_pyyaml_a_yaml_config_says_which_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("extensions: {}\n", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "yaml", None)  # as where the extra is not installed: the import fails
    with pytest.raises(ConfigError) as refused:
        load_config(path, {})
    assert str(refused.value).endswith(
        f"reading a YAML config needs the [yaml] extra (PyYAML): {sys.executable} -m pip install 'mcp-claimcheck[yaml]'"
    )


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_a_file_that_powershell_wrote_in_utf_16_loads_as_utf_8_would(tmp_path: Path, encoding: str) -> None:
    """`echo '{…}' > config.json` in Windows PowerShell 5 writes UTF-16 with its byte order mark."""
    path = tmp_path / "config.json"
    text = '{"mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git", "--repository", "C:/Users/é"]}}}'
    path.write_bytes(("\ufeff" + text).encode(encoding))
    assert load_config(path, {}).mcp_servers["git"].args == ["mcp-server-git", "--repository", "C:/Users/é"]


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ('{"a": "\xe9"}'.encode("latin-1"), "not valid UTF-8 text (byte 7: invalid continuation byte)"),
        (b"\xff\xfe{", "not valid UTF-16 text (byte 0: truncated data)"),
    ],
    ids=["latin-1", "utf-16-cut"],
)
def test_a_file_in_another_encoding_is_one_line_saying_to_save_it_as_utf_8(
    tmp_path: Path, data: bytes, said: str
) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as refused:
        read_config_data(path)
    assert str(refused.value) == f"{said}; save the file as UTF-8 in an editor"


def test_a_directory_read_as_a_client_s_file_is_said_so_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^is a directory: give the config file's path$"):
        read_config_data(tmp_path)


def test_a_client_file_that_routes_through_claimcheck_given_to_claimcheck_leaves_out_its_own_entry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`claimcheck serve --config ~/.cursor/mcp.json` where that file's claimcheck entry serves the same file: that
    entry would start claimcheck again, and that one another, without end. It is left out, in one warning line; an
    entry that serves another config (a chain) stays, and so does one naming this file by a relative path from
    elsewhere."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "mcp.json"
    other = tmp_path / "inner.json"
    other.write_text('{"mcpServers": {}}')
    servers = {
        "git": {"command": "uvx", "args": ["mcp-server-git"]},
        "claimcheck": {"command": "claimcheck", "args": ["serve", "--config", str(path)]},
        "relative": {"command": "/opt/bin/claimcheck", "args": ["serve", "--config=mcp.json"]},
        "module": {"command": "python3", "args": ["-m", "server", "serve", "--shared", "--config", "mcp.json"]},
        "by-env": {"command": "uvx", "args": ["claimcheck", "serve"], "env": {"CLAIMCHECK_CONFIG": str(path)}},
        "chain": {"command": "claimcheck", "args": ["serve", "--config", str(other)]},
        "elsewhere": {"command": "claimcheck", "args": ["serve", "--config", "mcp.json"], "cwd": "/"},
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    with caplog.at_level(logging.WARNING):
        config = load_config(path, {})
    assert sorted(config.mcp_servers) == ["chain", "elsewhere", "git"]
    left_out = [record.getMessage() for record in caplog.records if "left out" in record.getMessage()]
    assert len(left_out) == 4
    assert left_out[0] == (
        f"{path}: left out server claimcheck: it is claimcheck serving this same file, which would start itself "
        "without end (give claimcheck a config of its own: `claimcheck init CLIENT`)"
    )
    # the default config, named by nothing: an entry without --config serves it
    assert sorted(load_config(None, {"CLAIMCHECK_CONFIG": str(path)}).mcp_servers) == ["chain", "elsewhere", "git"]


def test_a_config_directory_whose_file_routes_through_claimcheck_on_that_directory_leaves_that_entry_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "mcpServers"
    folder.mkdir()
    (folder / "git.json").write_text(json.dumps({"mcpServers": {"git": {"command": "uvx"}}}), encoding="utf-8")
    entry = {"command": "claimcheck", "args": ["serve", "--config", str(folder)]}
    (folder / "cc.json").write_text(json.dumps({"mcpServers": {"claimcheck": entry}}), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        config = load_config(folder, {})
    assert list(config.mcp_servers) == ["git"]
    assert [r.getMessage() for r in caplog.records if "left out" in r.getMessage()] == [
        f"{folder}: left out server claimcheck: it is claimcheck serving this same folder, which would start itself "
        "without end (give claimcheck a config of its own: `claimcheck init CLIENT`)"
    ]


def test_json_that_is_broken_anyway_names_line_and_column() -> None:
    with pytest.raises(ConfigError, match=r"not valid JSON: .* at line 2 column"):
        loads_jsonc('{\n  "a": }')


@pytest.mark.parametrize(
    "text",
    ['"github": {"command": "npx", "args": ["-y", "srv"]}', '\n  "github": {"url": "u"},\n'],
    ids=["one", "comma"],
)
def test_an_entry_copied_without_the_braces_around_it_is_told_how_to_wrap_it(text: str) -> None:
    """A README's `"github": {…}` pasted alone into a file: the line says how to write it, not "Extra data"."""
    with pytest.raises(ConfigError) as caught:
        loads_jsonc(text)
    assert str(caught.value) == (
        'not valid JSON: the file holds "github": {…} without the braces around it; write it as '
        '{"mcpServers": {"github": {…}}}'
    )


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("name", "text"), [("deep.json", f'{{"a": {DEEP}}}'), ("deep.toml", f"a = {DEEP}")], ids=["json", "toml"]
)
def test_a_file_nested_too_deeply_to_read_is_one_line(tmp_path: Path, name: str, text: str) -> None:
    """Python's readers give up on deep nesting with a RecursionError, which reached the user as a traceback."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^not readable (JSON|TOML): it is nested too deeply"):
        read_config_data(path)


def test_a_table_pasted_without_braces_in_single_quotes_or_twice_is_told_the_fix() -> None:
    with pytest.raises(ConfigError) as caught:
        loads_jsonc('"mcpServers": {"a": {"command": "x"}}\n')
    assert str(caught.value).endswith('without the braces around it; write it as {"mcpServers": {…}}')
    with pytest.raises(ConfigError) as caught:
        loads_jsonc("{'mcpServers': {}}")  # a Python dict
    assert str(caught.value) == (
        "not valid JSON: a string in single quotes at line 1 column 2; JSON's strings take double quotes"
    )
    with pytest.raises(ConfigError) as caught:
        parse_config({"mcpServers": {"mcpServers": {"a": {"command": "x"}}}}, ENV)
    assert str(caught.value) == (
        'invalid config: mcpServers.mcpServers: servers inside the servers; take out the inner "mcpServers" and its '
        "braces"
    )


def test_servers_at_the_top_of_a_file_are_read_as_its_servers(caplog: pytest.LogCaptureFixture) -> None:
    """`{"github": {"command": …}}` with no `mcpServers` around it (as Warp and many READMEs show servers) is read as
    the servers, said once; a mistake in one names it without a table; a file with anything else at the top is no
    such file."""
    servers = {"github": {"command": "npx", "args": ["-y", "srv"], "autoApprove": []}, "web": {"url": "https://x/mcp"}}
    with caplog.at_level(logging.WARNING, logger="server.config"):
        config = parse_config(servers, ENV, source=Path("/p/servers.json"))
    assert shape(config) == {
        "github": {"kind": "stdio", "command": "npx", "args": ["-y", "srv"], "env": {}, "cwd": None},
        "web": {"kind": "streamable-http", "url": "https://x/mcp", "headers": {}},
    }
    assert [r.getMessage() for r in caplog.records] == [
        "read servers at the top of servers.json; ignored: github.autoApprove"
    ]
    with pytest.raises(ConfigError, match=r"^invalid config: github\.command: Input should be a valid string$"):
        parse_config({"github": {"command": ["npx"]}}, ENV)
    with pytest.raises(ConfigError, match=r"^github\.env\.K: environment variable \$\{NOPE\} is not set$"):
        parse_config({"github": {"command": "npx", "env": {"K": "${NOPE}"}}}, ENV)
    with pytest.raises(ConfigError, match=r"^servers\.github\.env\.K: environment variable \$\{NOPE\} is not set$"):
        parse_config({"servers": {"github": {"command": "npx", "env": {"K": "${NOPE}"}}}}, ENV)  # VS Code's
    with pytest.raises(ConfigError, match=r"^invalid config: theme: unknown key \(and no mcpServers"):
        parse_config({"theme": "dark", "github": {"command": "npx"}}, ENV)


def test_a_file_without_any_server_table_is_not_taken_for_a_client_s() -> None:
    with pytest.raises(ConfigError, match=r"globalShortcut: unknown key .and no mcpServers, servers, mcp_servers, mcp"):
        parse_config({"globalShortcut": "x"}, {})
