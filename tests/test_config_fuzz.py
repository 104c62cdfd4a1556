"""Configs of random shapes and types, in every client's table: each loads, or is refused as one `ConfigError` line,
never another exception (a traceback is not a line a user can act on)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.config import parse_config
from server.errors import ConfigError

ENTRY_KEYS = [
    *("command", "args", "env", "url", "type", "headers", "cwd", "disabled", "tools", "timeout", "transport"),
    *("serverUrl", "httpUrl", "enabled", "environment", "envFile", "disabledTools", "includeTools", "excludeTools"),
    *("trust", "cmd", "envs", "uri", "env_keys", "available_tools", "http_headers", "env_http_headers", "env_vars"),
    *("bearer_token_env_var", "enabled_tools", "disabled_tools", "requestOptions", "source", "name"),
]
WORDS = [
    *("${HOME}", "$HOME", "${NOPE}", "${NOPE:-x}", "${input:x}", "${env:HOME}", "{env:HOME}", "${workspaceFolder}"),
    *("~", "~no-such-user/x", "http://x/mcp", "stdio", "sse", "http", "local", "remote", "npx -y a", "", " ", "a\nb"),
]
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=True)
    | st.text(max_size=10)
    | st.sampled_from(WORDS)
)
VALUES = (
    SCALARS
    | st.lists(SCALARS, max_size=3)
    | st.dictionaries(st.sampled_from(ENTRY_KEYS) | st.text(max_size=6), SCALARS, max_size=3)
)
"""A value of every JSON type, one level deep: where a client's key is merged into claimcheck's, its type is what
breaks."""
ENTRY = st.dictionaries(st.sampled_from(ENTRY_KEYS), VALUES, min_size=1, max_size=5)
TABLES = ["mcpServers", "servers", "mcp", "context_servers", "extensions", "mcp_servers", ""]
SETTINGS = [
    *("asyncTimeoutSecs", "asyncTokenThreshold", "root", "stateDir", "llm", "history", "status", "shared", "state"),
    *("catalog", "tracing", "metrics", "startupWaitSecs", "maxOutputBytes"),
]


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    table = draw(st.sampled_from(TABLES))
    servers = draw(st.dictionaries(st.text(max_size=6), ENTRY, min_size=1, max_size=2))
    data: dict[str, Any] = {table: servers} if table else dict(servers)
    if draw(st.booleans()):
        data["settings"] = draw(st.dictionaries(st.sampled_from(SETTINGS), VALUES, max_size=3))
    data.update(
        draw(st.dictionaries(st.sampled_from(["inputs", "mcp", "allowMCPServers", "excludeMCPServers"]), VALUES))
    )
    return data


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(configs())
def test_any_config_loads_or_is_one_config_error(data: dict[str, Any]) -> None:
    try:
        parse_config(data, {"HOME": "/home/u"})
    except ConfigError:
        pass  # anything else fails the test, with the config that raised it
