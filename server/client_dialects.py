"""The server entries of clients whose keys differ from the `mcpServers` shape, turned into it, one client each.

Codex CLI (TOML, `[mcp_servers.NAME]`), opencode (`mcp.NAME`, or `mcp.servers.NAME` in its second config version)
and Zed (`context_servers.NAME` in its settings.json). Each function takes one entry (a dict) and gives it in
claimcheck's keys, or None for an entry claimcheck cannot start (a Zed extension's server); what it drops is
added to `ignored` by its path. `server.client_configs.translate` calls them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from server.errors import ConfigError

__all__ = ["codex", "opencode", "opencode_servers", "zed"]

_OPENCODE_VAR = re.compile(r"\{(env|file):([^}]*)\}")


def codex(entry: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Codex CLI's keys for the same things."""
    out = dict(entry)
    if "enabled" in out:
        out["disabled"] = not out.pop("enabled")
    if "tool_timeout_sec" in out:
        out["timeout"] = out.pop("tool_timeout_sec")
    tools = {}
    if "enabled_tools" in out:
        tools["include"] = out.pop("enabled_tools")
    if "disabled_tools" in out:
        tools["exclude"] = out.pop("disabled_tools")
    if tools:
        out["tools"] = {**dict(out.get("tools") or {}), **tools}
    headers = dict(out.pop("headers", None) or {})
    headers.update(out.pop("http_headers", None) or {})
    for header, var in dict(out.pop("env_http_headers", None) or {}).items():
        headers[header] = "${" + str(var) + "}"
    if "bearer_token_env_var" in out:
        headers["Authorization"] = "Bearer ${" + str(out.pop("bearer_token_env_var")) + "}"
    if headers:
        out["headers"] = headers
    if "env_vars" in out:  # names Codex passes on from its own environment, where they are set
        passed = {str(var): "${" + str(var) + "}" for var in out.pop("env_vars") or [] if str(var) in environ}
        out["env"] = {**passed, **dict(out.get("env") or {})}
    return out


def opencode_servers(table: Any, ignored: list[str]) -> tuple[str, Any]:
    """Where opencode's `mcp` keeps its servers: the table itself, or its `servers` in the second config version
    (whose other keys are ignored). The path of the servers, and the servers."""
    if isinstance(table, dict) and isinstance(table.get("servers"), dict) and not _is_entry(table["servers"]):
        ignored.extend(f"mcp.{key}" for key in table if key != "servers")
        return "mcp.servers", table["servers"]
    return "mcp", table


def opencode(where: str, entry: dict[str, Any], ignored: list[str]) -> dict[str, Any]:
    """opencode's keys: `type` "local" or "remote", `command` a list (the program, then its arguments),
    `environment` for `env`, `enabled: false` (or `disabled`), `{env:VAR}` for `${VAR}`. Its `timeout` (how long
    it waits for the server's answer, in milliseconds) is dropped: claimcheck hands a slow call a handle instead."""
    out = dict(entry)
    if out.get("type") in ("local", "remote"):
        del out["type"]
    command = out.get("command")
    if isinstance(command, list):
        if not command or not all(isinstance(part, str) for part in command):
            raise ConfigError(f"{where}.command: give the program and its arguments as a list of strings")
        out["command"], out["args"] = command[0], [*command[1:], *(out.get("args") or [])]
    if "environment" in out:
        out["env"] = {**dict(out.pop("environment") or {}), **dict(out.get("env") or {})}
    if "enabled" in out:
        out["disabled"] = not out.pop("enabled")
    if "timeout" in out:
        del out["timeout"]
        ignored.append(f"{where}.timeout")
    return {key: _opencode_vars(f"{where}.{key}", value) for key, value in out.items()}


def _opencode_vars(where: str, value: Any) -> Any:
    if isinstance(value, str):
        return _OPENCODE_VAR.sub(lambda match: _opencode_var(where, match), value)
    if isinstance(value, list):
        return [_opencode_vars(f"{where}[{i}]", item) for i, item in enumerate(value)]
    if isinstance(value, dict):
        return {key: _opencode_vars(f"{where}.{key}", item) for key, item in value.items()}
    return value


def _opencode_var(where: str, match: re.Match[str]) -> str:
    if match.group(1) == "env":
        return "${" + match.group(2) + "}"
    raise ConfigError(
        f"{where}: {{file:{match.group(2)}}} is read by opencode; put the value in an environment variable and "
        f"write {{env:NAME}}"
    )


def zed(where: str, entry: dict[str, Any], ignored: list[str]) -> dict[str, Any] | None:
    """Zed's keys: `source` "custom" (or none) with `command`, `args`, `env`; the older `command: {path, args,
    env}`; `enabled: false`. A `source: "extension"` server is started by its Zed extension, which claimcheck
    cannot do: None (left out, and said so). A server's `settings` are its extension's, ignored."""
    out = dict(entry)
    source = out.pop("source", None)
    if source == "extension" or (source is None and "command" not in out and "url" not in out):
        ignored.append(f"{where} (a Zed extension's server: only Zed can start it)")
        return None
    if "settings" in out:
        del out["settings"]
        ignored.append(f"{where}.settings")
    command = out.get("command")
    if isinstance(command, dict):
        out["command"] = command.get("path")
        out["args"] = [*(command.get("args") or []), *(out.get("args") or [])]
        out["env"] = {**dict(command.get("env") or {}), **dict(out.get("env") or {})}
    if "enabled" in out:
        out["disabled"] = not out.pop("enabled")
    return out


def _is_entry(value: dict[str, Any]) -> bool:
    """Whether a dict under `mcp` looks like one server's entry rather than a table of them."""
    return "type" in value or "command" in value or "url" in value
