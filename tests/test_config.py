"""The config file: shape, strictness, ${VAR} expansion, precedence, and how errors read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from server.config import CliOverrides, Policy, default_config_path, load_config, parse_config, policy_for
from server.errors import ConfigError


def errors_of(data: Any, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, environ or {})
    return str(caught.value)


def test_a_claude_desktop_config_is_accepted_as_is() -> None:
    config = parse_config(
        {
            "mcpServers": {
                "git": {"command": "uvx", "args": ["mcp-server-git", "--repository", "."], "env": {"X": "${HOME}"}},
                "web": {"url": "http://127.0.0.1:3101/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
                "old": {"url": "http://127.0.0.1:3102/sse", "transport": "sse", "asyncTimeoutSecs": 2},
                "quiet": {"command": "x", "disabled": True, "tools": {"include": ["a*"], "exclude": ["a_admin"]}},
            },
            "settings": {"asyncTokenThreshold": 10000, "asyncTimeoutSecs": 5},
        },
        {"HOME": "/home/me", "TOKEN": "s3cret"},
    )
    assert config.mcp_servers["git"].env == {"X": "/home/me"}
    assert config.mcp_servers["web"].headers == {"Authorization": "Bearer s3cret"}
    assert [s.kind for s in config.mcp_servers.values()] == ["stdio", "streamable-http", "sse", "stdio"]
    assert config.mcp_servers["quiet"].tools.exclude == ["a_admin"]
    assert config.settings.wait_max_secs == 50
    assert config.settings.tool_separator == "__"


def test_variables_expand_in_args_url_command_and_cwd() -> None:
    config = parse_config(
        {
            "mcpServers": {
                "a": {"command": "${BIN}/srv", "args": ["--root", "${ROOT}/x"], "cwd": "${ROOT}"},
                "b": {"url": "http://${HOST}/mcp"},
            }
        },
        {"BIN": "/opt/bin", "ROOT": "/srv", "HOST": "127.0.0.1:9"},
    )
    assert config.mcp_servers["a"].command == "/opt/bin/srv"
    assert config.mcp_servers["a"].args == ["--root", "/srv/x"]
    assert config.mcp_servers["a"].cwd == "/srv"
    assert config.mcp_servers["b"].url == "http://127.0.0.1:9/mcp"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"mcpServer": {}}, "mcpServer: unknown key (did you mean `mcpServers`?)"),
        (
            {"mcpServers": {"git": {"command": "x", "comand": "y"}}},
            "mcpServers.git.comand: unknown key (did you mean `command`?)",
        ),
        (
            {"mcpServers": {"g": {"command": "x", "tools": {"includ": []}}}},
            "mcpServers.g.tools.includ: unknown key (did you mean `include`?)",
        ),
        ({"settings": {"asyncTimeout": 3}}, "settings.asyncTimeout: unknown key (did you mean `asyncTimeoutSecs`?)"),
        (
            {"settings": {"async_token_threshold": 3}},
            "settings.async_token_threshold: unknown key (did you mean `asyncTokenThreshold`?)",
        ),
        (
            {"settings": {"extraction": {"modle": "x"}}},
            "settings.extraction.modle: unknown key (did you mean `model`?)",
        ),
        ({"settings": {"api": {"prot": 1}}}, "settings.api.prot: unknown key (did you mean `port`?)"),
        (
            {"settings": {"history": {"storeArgs": False}}},
            "settings.history.storeArgs: unknown key (did you mean `storeArguments`?)",
        ),
        ({"settings": {"state": {"ur": "redis://x"}}}, "settings.state.ur: unknown key (did you mean `url`?)"),
        ({"settings": {"zzzz": 1}}, "settings.zzzz: unknown key"),
    ],
)
def test_an_unknown_key_at_any_level_names_the_key_it_was_most_likely_meant_to_be(data: Any, expected: str) -> None:
    assert errors_of(data) == f"invalid config: {expected}"


def test_an_unknown_key_of_the_auth_settings_is_suggested_its_known_key_too() -> None:
    assert "settings.auth.isuer: unknown key (did you mean `issuer`?)" in errors_of(
        {"settings": {"auth": {"isuer": "x"}}}
    )


@pytest.mark.parametrize(
    "url", ["not a url", "localhost:8080/mcp", "ws://127.0.0.1:9000/", "${BASE}/mcp", "https:///x"]
)
def test_a_url_that_is_no_http_address_once_filled_in_is_one_line_giving_the_form(url: str) -> None:
    filled = url.replace("${BASE}", "localhost:8080")
    assert errors_of({"mcpServers": {"web": {"url": url}}}, {"BASE": "localhost:8080"}) == (
        f"mcpServers.web.url: {filled!r} is not an http:// or https:// address; claimcheck reaches a server over HTTP "
        "(streamable HTTP or SSE) at its full URL, e.g. https://example.com/mcp"
    )


def test_an_entry_written_as_a_command_line_or_args_as_one_string_is_told_the_shape_to_give() -> None:
    """`"git": "uvx mcp-server-git"` and `"args": "-m srv"`: the line gives the entry as it is written, from the
    text given (no class names of claimcheck's, no "valid dictionary")."""
    said = errors_of(
        {
            "mcpServers": {
                "git": 'uvx mcp-server-git --repository "/my repo"',
                "web": "https://x/mcp",
                "py": {"command": "python3", "args": "-m srv", "env": ["A=1", "B=x=2"]},
                "remote": {"url": "https://x/mcp", "headers": ["Authorization: Bearer t"]},
                "odd": 5,
            }
        }
    )
    assert said == (
        'invalid config: mcpServers.git: give an object, such as {"command": "uvx", "args": ["mcp-server-git", '
        '"--repository", "/my repo"]}; mcpServers.web: give an object, such as {"url": "https://x/mcp"}; '
        'mcpServers.py.args: give a list of strings, such as ["-m", "srv"]; mcpServers.py.env: give an object, such '
        'as {"A": "1", "B": "x=2"}; mcpServers.remote.headers: give an object, such as {"Authorization": "Bearer t"}; '
        "mcpServers.odd: give an object ({…})"
    )


def test_a_command_written_as_a_command_line_is_read_as_its_program_and_arguments(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`"command": "npx -y pkg"`: no file has that name and `npx` is a program on the PATH, so it is `npx` with
    `-y pkg` before `args`, said once. A program whose path has a space stays whole; so does a first word that is
    no program (the start then says the command is not found)."""
    spaced = tmp_path / "my tools" / "server"
    spaced.parent.mkdir()
    spaced.write_text("#!/bin/sh\n", encoding="utf-8")
    spaced.chmod(0o755)
    (tmp_path / "npx").write_text("#!/bin/sh\n", encoding="utf-8")
    (tmp_path / "npx").chmod(0o755)
    environ = {"PATH": str(tmp_path)}
    servers = {
        "memory": {"command": "npx -y @modelcontextprotocol/server-memory", "args": ["--x"]},
        "spaced": {"command": str(spaced)},
        "typo": {"command": "npz -y pkg"},
    }
    with caplog.at_level("WARNING", logger="server.config"):
        config = parse_config({"mcpServers": servers}, environ)
    memory = config.mcp_servers["memory"]
    assert (memory.command, memory.args) == ("npx", ["-y", "@modelcontextprotocol/server-memory", "--x"])
    assert config.mcp_servers["spaced"].command == str(spaced)
    assert config.mcp_servers["typo"].command == "npz -y pkg"
    assert [r.getMessage() for r in caplog.records] == [
        "mcpServers.memory.command 'npx -y @modelcontextprotocol/server-memory' is a command line: read as "
        '{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory", "--x"]}, as it is better written'
    ]


def test_the_entry_suggested_from_a_long_string_is_clipped() -> None:
    said = errors_of({"mcpServers": {"long": "srv " + "x " * 5000}})
    assert said.startswith('invalid config: mcpServers.long: give an object, such as {"command": "srv"')
    assert len(said) < 500 and said.endswith("bytes)")


def test_an_item_of_a_list_is_named_by_its_index_in_brackets() -> None:
    said = errors_of({"mcpServers": {"a": {"command": "x", "args": ["ok", None]}}})
    assert said == "invalid config: mcpServers.a.args[1]: Input should be a valid string"


def test_spaces_pasted_around_a_command_or_a_url_are_no_part_of_it() -> None:
    """A URL copied with a space before it was refused as "not an http:// address", which it is."""
    config = parse_config({"mcpServers": {"web": {"url": " https://x.example/mcp\n"}, "git": {"command": "uvx "}}})
    assert (config.mcp_servers["web"].url, config.mcp_servers["git"].command) == ("https://x.example/mcp", "uvx")


def test_http_addresses_of_any_case_and_with_a_variable_are_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BASE", "http://127.0.0.1:8080")
    urls = ["HTTPS://Example.com/mcp", "${BASE}/mcp", "http://[::1]:9/sse", "http://host/${CLAIMCHECK_INSTANCE}"]
    config = parse_config({"mcpServers": {f"s{n}": {"url": url} for n, url in enumerate(urls)}})
    assert [server.url for server in config.mcp_servers.values()] == [
        "HTTPS://Example.com/mcp",
        "http://127.0.0.1:8080/mcp",
        "http://[::1]:9/sse",
        "http://host/${CLAIMCHECK_INSTANCE}",
    ]


def test_numbers_and_true_false_in_args_env_and_headers_are_taken_as_their_text() -> None:
    """As written in many a pasted config (and as YAML reads `PORT: 3000`): a program's arguments, environment and
    an HTTP header are text, so a shell would pass them so."""
    config = parse_config(
        {
            "mcpServers": {
                "local": {"command": "x", "args": ["--port", 3000, "--ratio", 1.5, True], "env": {"DEBUG": False}},
                "remote": {"url": "http://h/mcp", "headers": {"X-Tenant": 42}},
            }
        },
        {},
    )
    assert config.mcp_servers["local"].args == ["--port", "3000", "--ratio", "1.5", "true"]
    assert config.mcp_servers["local"].env == {"DEBUG": "false"}
    assert config.mcp_servers["remote"].headers == {"X-Tenant": "42"}
    assert errors_of({"mcpServers": {"s": {"command": "x", "env": {"N": None}}}}) == (
        "invalid config: mcpServers.s.env.N: Input should be a valid string"
    )


def test_a_missing_variable_is_an_error_naming_it_and_where_it_is_used() -> None:
    message = errors_of({"mcpServers": {"web": {"url": "http://x/mcp", "headers": {"Authorization": "${NOPE}"}}}})
    assert message == "mcpServers.web.headers.Authorization: environment variable ${NOPE} is not set"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"mcpServer": {}}, "mcpServer: unknown key"),
        ({"mcpServers": {"g": {"command": "x", "comand": "y"}}}, "mcpServers.g.comand: unknown key"),
        ({"settings": {"asyncTimeout": 3}}, "settings.asyncTimeout: unknown key"),
        ({"settings": {"extraction": {"modle": "x"}}}, "settings.extraction.modle: unknown key"),
        ({"mcpServers": {"g": {}}}, 'mcpServers.g: give exactly one of "command" (stdio) or "url" (HTTP)'),
        ({"mcpServers": {"g": {"command": "x", "url": "http://y"}}}, "give exactly one of"),
        ({"mcpServers": {"g": {"command": "x", "headers": {"a": "b"}}}}, '"transport" and "headers" only apply'),
        ({"mcpServers": {"g": {"url": "http://y", "args": ["a"]}}}, '"args", "env" and "cwd" only apply'),
        (
            {"mcpServers": {"g": {"url": "http://y", "transport": "websocket"}}},
            "mcpServers.g.transport: 'websocket' is not a transport",
        ),
        ({"mcpServers": {"g": {"command": "x", "timeout": 0}}}, "mcpServers.g.timeout: Input should be greater than 0"),
        ({"mcpServers": {"g": {"command": 5}}}, "mcpServers.g.command: Input should be a valid string"),
        ({"mcpServers": {"+ +": {"command": "x"}}}, "server key '+ +' has no letter or digit to name its tools by"),
        ({"mcpServers": {"g": {"command": "x", "prefix": "a b"}}}, "\"prefix\" 'a b' may only contain"),
        ({"settings": {"toolSeparator": ""}}, "settings.toolSeparator: String should have at least 1 character"),
        ([], 'the file is an array; a config is one JSON object: {"mcpServers": {"NAME": {…}}}'),
        ("servers", "the file is not an object; a config is one JSON object"),
    ],
)
def test_malformed_configs_are_errors_that_name_the_key_path(data: Any, expected: str) -> None:
    assert expected in errors_of(data)


def test_a_server_key_that_is_not_a_valid_prefix_names_its_tools_by_one_made_of_it_or_by_its_prefix() -> None:
    config = parse_config({"mcpServers": {"my server": {"command": "x", "prefix": "mine"}}}, {})
    assert config.prefix_of("my server") == "mine"
    made = parse_config({"mcpServers": {"SQLite MCP": {"command": "x"}, " Dé/jà ": {"command": "y"}}}, {})
    assert [made.prefix_of(name) for name in made.mcp_servers] == ["SQLite_MCP", "D_j"]


def test_variables_and_home_expand_in_the_root_and_state_directories() -> None:
    environ = {"TMPDIR": "/scratch/tmp", "XDG_STATE_HOME": "/state"}
    settings = {"root": "$TMPDIR/x", "stateDir": "${XDG_STATE_HOME}/cc-$TMPDIR"}
    config = parse_config({"mcpServers": {}, "settings": settings}, environ)
    home = parse_config({"mcpServers": {}, "settings": {"root": "~/outputs"}}, {})
    assert config.settings.root == "/scratch/tmp/x"
    assert config.settings.state_dir == "/state/cc-/scratch/tmp"
    assert home.settings.root == str(Path.home() / "outputs")


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"root": "$TMPDIR/x"}, "settings.root: environment variable ${TMPDIR} is not set"),
        ({"stateDir": "${NOPE}/state"}, "settings.stateDir: environment variable ${NOPE} is not set"),
        ({"root": "/data/$1/x"}, "settings.root: '/data/$1/x' has a '$' that is not a $VAR or ${VAR} reference"),
        ({"root": "/data/${}/x"}, "settings.root: '/data/${}/x' has a '$' that is not a $VAR or ${VAR} reference"),
    ],
)
def test_a_root_or_state_directory_that_cannot_be_expanded_is_an_error_naming_it(
    settings: dict[str, str], expected: str
) -> None:
    assert errors_of({"mcpServers": {}, "settings": settings}) == expected


def test_no_config_at_the_default_place_says_how_to_make_one(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    with pytest.raises(ConfigError) as missing:
        load_config(None, environ)
    assert str(missing.value) == (
        f"{tmp_path / 'xdg' / 'claimcheck' / 'config.json'}: config file not found: make it from a client's servers "
        "with `claimcheck init CLIENT`, or pass --config PATH (or set CLAIMCHECK_CONFIG)"
    )


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigError, match=r"nope\.json: config file not found"):
        load_config(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"mcpServers": {\n  "a": }', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.json: not valid JSON: Expecting value at line 2 column 8"):
        load_config(broken)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"mcpServers": {"a": {"cmd": "x"}}}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"wrong\.json: invalid config: mcpServers\.a\.cmd: unknown key"):
        load_config(wrong)


def test_the_config_is_found_through_the_environment_then_xdg_then_home(tmp_path: Path) -> None:
    assert default_config_path({"CLAIMCHECK_CONFIG": "/etc/cc.json"}) == Path("/etc/cc.json")
    assert default_config_path({"XDG_CONFIG_HOME": "/x"}) == Path("/x/claimcheck/config.json")
    assert default_config_path({}) == Path.home() / ".config" / "claimcheck" / "config.json"
    path = tmp_path / "c.json"
    path.write_text('{"mcpServers": {"a": {"command": "x"}}}', encoding="utf-8")
    assert list(load_config(None, {"CLAIMCHECK_CONFIG": str(path)}).mcp_servers) == ["a"]


def test_cli_beats_server_beats_settings_beats_default() -> None:
    config = parse_config(
        {
            "mcpServers": {
                "own": {"command": "x", "asyncTimeoutSecs": 2, "async": True, "timeout": 30},
                "plain": {"command": "x"},
            },
            "settings": {"asyncTimeoutSecs": 7, "async": False},
        },
        {},
    )
    assert policy_for(config, "own") == Policy(True, 2, 10_000, 30)
    assert policy_for(config, "plain") == Policy(False, 7, 10_000, 3600)
    cli = CliOverrides(no_async=True, async_timeout_secs=1, async_token_threshold=500)
    assert policy_for(config, "own", cli) == Policy(False, 1, 500, 30)


def test_claimcheck_instance_is_left_for_each_process_and_put_in_by_for_instance() -> None:
    from server.config_vars import for_instance

    entry = {"command": "srv", "args": ["--db", "/d/${CLAIMCHECK_INSTANCE}.db"], "env": {"F": "${CLAIMCHECK_INSTANCE}"}}
    config = parse_config({"mcpServers": {"s": {**entry, "scope": "owner", "idleSecs": 5}}}, {})
    server = config.mcp_servers["s"]
    mine = for_instance(server, "owner-0123456789abcdef")
    assert server.args == ["--db", "/d/${CLAIMCHECK_INSTANCE}.db"] and server.scope == "owner"
    assert mine.args == ["--db", "/d/owner-0123456789abcdef.db"] and mine.env == {"F": "owner-0123456789abcdef"}
    assert (server.idle_secs, server.max_instances) == (5, 16)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"mcpServers": {"s": {"command": "x", "scope": "user"}}}, "mcpServers.s.scope: Input should be 'auto'"),
        ({"mcpServers": {"s": {"command": "x", "maxInstances": 0}}}, "mcpServers.s.maxInstances: Input should be"),
        ({"settings": {"roots": ["relative/dir"]}}, "settings.roots[0]: 'relative/dir' is not an absolute directory"),
        ({"settings": {"roots": ["$NOPE/x"]}}, "settings.roots[0]: environment variable ${NOPE} is not set"),
    ],
)
def test_bad_scopes_and_roots_are_errors_naming_them(data: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(data, {})
    assert expected in str(error.value)


def test_settings_roots_take_paths_file_uris_and_home() -> None:
    config = parse_config({"settings": {"roots": ["/srv/a", "file:///srv/b", "~/c"]}}, {"HOME": "/home/u"})
    assert config.settings.roots[:2] == ["/srv/a", "/srv/b"] and config.settings.roots[2].endswith("/c")
