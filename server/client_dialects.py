"""The server entries of clients whose keys differ from the `mcpServers` shape, turned into it, one client each.

Codex CLI (TOML, `[mcp_servers.NAME]`), opencode (`mcp.NAME`, or `mcp.servers.NAME` in its second config version),
Zed (`context_servers.NAME` in its settings.json), goose (YAML, `extensions.NAME`), Continue (YAML, `mcpServers`
as a list of entries with a `name`) and Gemini CLI (`mcpServers` with `$VAR`, and its `mcp.allowed`/`excluded`).
Each function takes one entry (a dict) and gives it in claimcheck's keys, or None for an entry claimcheck cannot
start (a Zed extension's server, a goose built-in); what it drops is added to `ignored` by its path.
`server.client_configs.translate` calls them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from server.errors import ConfigError

__all__ = [
    "codex",
    "continue_entry",
    "continue_servers",
    "gemini",
    "gemini_enabled",
    "gemini_settings",
    "gemini_starting",
    "goose",
    "is_gemini_file",
    "joined",
    "looks_gemini",
    "merged",
    "opencode",
    "opencode_servers",
    "zed",
]

_OPENCODE_VAR = re.compile(r"\{(env|file):([^}]*)\}")
_CONTINUE_VAR = re.compile(r"\$\{\{\s*(?:secrets|inputs)\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_GEMINI_VAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_GEMINI_ENTRY = frozenset({"httpUrl", "includeTools", "excludeTools", "trust", "authProviderType"})
"""Keys only Gemini CLI's entries have."""
_GEMINI_MCP = frozenset({"allowed", "excluded", "serverCommand"})
_GEMINI_TOP = ("allowMCPServers", "excludeMCPServers", "mcpServerCommand")  # its first settings version
_GOOSE_OWN = ("builtin", "platform", "frontend", "inline_python")
"""goose's extensions that run inside goose, which claimcheck cannot start."""


def merged(*parts: Any) -> Any:
    """Objects merged, a later part's keys winning, where every part is an object (or empty); else the first part
    that is not, for the config's check to name as the wrong type (`"env": ["A=1"]`)."""
    for part in parts:
        if part and not isinstance(part, dict):
            return part
    out: dict[Any, Any] = {}
    for part in parts:
        out.update(part or {})
    return out


def joined(*parts: Any) -> Any:
    """Lists joined, where every part is a list (or empty); else the first part that is not (as `merged`)."""
    for part in parts:
        if part and not isinstance(part, list):
            return part
    return [item for part in parts for item in part or []]


def codex(where: str, entry: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
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
        out["tools"] = merged(out.get("tools"), tools)
    from_env = out.pop("env_http_headers", None)
    if from_env is not None and not isinstance(from_env, dict):
        raise ConfigError(
            f'{where}.env_http_headers: give a table of headers to variable names, such as {{"X-Key" = "KEY"}}'
        )
    if from_env:
        from_env = {header: "${" + str(var) + "}" for header, var in from_env.items()}
    bearer = (
        {"Authorization": "Bearer ${" + str(out.pop("bearer_token_env_var")) + "}"}
        if "bearer_token_env_var" in out
        else None
    )
    headers = merged(out.pop("headers", None), out.pop("http_headers", None), from_env, bearer)
    if headers:
        out["headers"] = headers
    if "env_vars" in out:  # names Codex passes on from its own environment, where they are set
        names = out.pop("env_vars")
        if not isinstance(names, list):
            raise ConfigError(f"{where}.env_vars: give a list of variable names")
        passed = {str(var): "${" + str(var) + "}" for var in names if str(var) in environ}
        out["env"] = merged(passed, out.get("env"))
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
        out["command"], out["args"] = command[0], joined(command[1:], out.get("args"))
    if "environment" in out:
        out["env"] = merged(out.pop("environment"), out.get("env"))
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
        out["args"] = joined(command.get("args"), out.get("args"))
        out["env"] = merged(command.get("env"), out.get("env"))
    if "enabled" in out:
        out["disabled"] = not out.pop("enabled")
    return out


def goose(where: str, entry: dict[str, Any], ignored: list[str], environ: Mapping[str, str]) -> dict[str, Any] | None:
    """goose's keys: `type` "stdio" (`cmd`, `args`, `envs`), "sse" or "streamable_http" (`uri`, `headers`);
    `env_keys`, the variables goose fills from its keyring, are passed on from claimcheck's environment where they
    are set (and named where not); `enabled: false`; `available_tools` as the tools offered. A built-in extension
    runs inside goose: None (left out, and said so). Its `timeout` (how long goose waits) is dropped."""
    out = dict(entry)
    if out.get("type") in _GOOSE_OWN:
        ignored.append(f"{where} (a goose {out['type']} extension: only goose runs it)")
        return None
    if out.get("type") == "stdio":
        del out["type"]
    for theirs, ours in (("cmd", "command"), ("envs", "env"), ("uri", "url")):
        if theirs in out:
            if ours in out:
                raise ConfigError(f'{where}: give "{ours}" or "{theirs}", not both')
            out[ours] = out.pop(theirs)
    keys = out.pop("env_keys", None) or []
    if not isinstance(keys, list):
        raise ConfigError(f"{where}.env_keys: give a list of variable names")
    unset = [str(key) for key in keys if str(key) not in environ]
    passed = {str(key): "${" + str(key) + "}" for key in keys if str(key) in environ}
    if passed:
        out["env"] = merged(passed, out.get("env"))
    if unset:
        unset_names = ", ".join(unset)
        ignored.append(f"{where}.env_keys {unset_names} (in goose's keyring: set them in claimcheck's environment)")
    if "enabled" in out:
        out["disabled"] = not out.pop("enabled")
    tools = out.pop("available_tools", None)
    if tools is not None and not isinstance(tools, list):
        raise ConfigError(f"{where}.available_tools: give a list of tool names")
    if tools:
        out["tools"] = merged(out.get("tools"), {"include": tools})
    for key in ("name", "display_name", "bundled", "timeout"):
        if key in out:
            del out[key]
            if key == "timeout":
                ignored.append(f"{where}.timeout")
    return out


def continue_servers(servers: list[Any], ignored: list[str]) -> dict[str, Any]:
    """Continue's `mcpServers`, a list of entries each with its `name`, as a table by name."""
    table: dict[str, Any] = {}
    for i, entry in enumerate(servers):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f'mcpServers[{i}]: give each server a "name" (Continue\'s list names every one)')
        if name in table:
            raise ConfigError(f"mcpServers[{i}]: {name!r} is named twice; give each server its own name")
        table[name] = entry
    return table


def continue_entry(where: str, entry: dict[str, Any], ignored: list[str]) -> dict[str, Any]:
    """Continue's keys: its `name` (a display name, spaces allowed: `server.config` makes the tools' prefix of it),
    `requestOptions.headers` for `headers`, `${{ secrets.NAME }}` and `${{ inputs.NAME }}` for the environment
    variable NAME (Continue reads them from its .env files or its hub, which claimcheck cannot)."""
    out = {key: value for key, value in entry.items() if key != "name"}
    options = out.pop("requestOptions", None)
    if isinstance(options, dict):
        if "headers" in options:
            out["headers"] = merged(options["headers"], out.get("headers"))
        ignored.extend(f"{where}.requestOptions.{key}" for key in options if key != "headers")
    if "connectionTimeout" in out:
        del out["connectionTimeout"]
        ignored.append(f"{where}.connectionTimeout")
    return {key: _env_refs(value, _CONTINUE_VAR) for key, value in out.items()}


def _env_refs(value: Any, pattern: re.Pattern[str]) -> Any:
    """`value` (a string, or lists and maps of them) with each match of `pattern` as `${NAME}`, NAME its group 1."""
    if isinstance(value, str):
        return pattern.sub(lambda match: "${" + match.group(1) + "}", value)
    if isinstance(value, list):
        return [_env_refs(item, pattern) for item in value]
    if isinstance(value, dict):
        return {key: _env_refs(item, pattern) for key, item in value.items()}
    return value


def is_gemini_file(path: Path) -> bool:
    """Whether `path` is one of Gemini CLI's settings files (`.gemini/settings.json`, in a project or the home)."""
    return path.parent.name == ".gemini"


def gemini_settings(data: Mapping[str, Any]) -> dict[str, Any]:
    """Gemini CLI's own settings about its servers in a settings file's `data`, by key: `mcp` holding `allowed`,
    `excluded` or `serverCommand` (an `mcp` of servers is opencode's), or its first version's `allowMCPServers`,
    `excludeMCPServers` and `mcpServerCommand`. Empty where there are none."""
    found = {key: data[key] for key in _GEMINI_TOP if key in data}
    mcp = data.get("mcp")
    settings_only = isinstance(mcp, dict) and not any(isinstance(value, dict) for value in mcp.values())
    if settings_only and mcp and mcp.keys() <= _GEMINI_MCP:
        found["mcp"] = mcp
    return found


def looks_gemini(servers: Any) -> bool:
    """Whether an entry of `servers` has a key only Gemini CLI writes (`httpUrl`, `includeTools`, `trust`, …)."""
    return isinstance(servers, dict) and any(isinstance(e, dict) and _GEMINI_ENTRY & e.keys() for e in servers.values())


def gemini(where: str, entry: dict[str, Any], ignored: list[str]) -> dict[str, Any]:
    """Gemini CLI's entry: `$VAR` is the environment's, as `${VAR}` is (Gemini fills in both, in every string);
    its `timeout` (how long Gemini waits for a call, in milliseconds) is dropped: claimcheck hands a slow call a
    handle instead. `httpUrl`, `includeTools` and `excludeTools` are read as any client's are."""
    out = dict(entry)
    if "timeout" in out:
        del out["timeout"]
        ignored.append(f"{where}.timeout")
    return {key: value if key == "tools" else _env_refs(value, _GEMINI_VAR) for key, value in out.items()}


def gemini_enabled(servers: dict[str, Any], settings: Mapping[str, Any], ignored: list[str]) -> dict[str, Any]:
    """`servers` with those Gemini CLI does not start disabled: any not in `mcp.allowed` (where it is given) and
    any in `mcp.excluded` (`settings`: `gemini_settings`). `serverCommand` is Gemini's own, ignored."""
    mcp = settings.get("mcp") or {}
    lists: dict[str, set[str]] = {}
    for key, old in (("allowed", "allowMCPServers"), ("excluded", "excludeMCPServers")):
        for where, names in ((f"mcp.{key}", mcp.get(key)), (old, settings.get(old))):
            if names is None:
                continue
            if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
                raise ConfigError(f"{where}: give a list of server names")
            lists.setdefault(key, set()).update(names)
    if "serverCommand" in mcp:
        ignored.append("mcp.serverCommand")
    if "mcpServerCommand" in settings:
        ignored.append("mcpServerCommand")
    allowed, excluded = lists.get("allowed"), lists.get("excluded", set())
    out = {}
    for name, entry in servers.items():
        off = (allowed is not None and name not in allowed) or name in excluded
        out[name] = {**entry, "disabled": True} if off and isinstance(entry, dict) else entry
    return out


def gemini_starting(data: dict[str, Any], name: str) -> dict[str, Any]:
    """Gemini CLI's settings `data` with the server `name` among those it starts: added to `mcp.allowed` (and the
    first version's `allowMCPServers`) where that list is given, taken out of `excluded` where it is named."""
    out = dict(data)
    mcp = out.get("mcp")
    if "mcp" in gemini_settings(data) and isinstance(mcp, dict):
        mcp = dict(mcp)
        if isinstance(mcp.get("allowed"), list) and name not in mcp["allowed"]:
            mcp["allowed"] = [*mcp["allowed"], name]
        if isinstance(mcp.get("excluded"), list) and name in mcp["excluded"]:
            mcp["excluded"] = [item for item in mcp["excluded"] if item != name]
        out["mcp"] = mcp
    if isinstance(out.get("allowMCPServers"), list) and name not in out["allowMCPServers"]:
        out["allowMCPServers"] = [*out["allowMCPServers"], name]
    if isinstance(out.get("excludeMCPServers"), list) and name in out["excludeMCPServers"]:
        out["excludeMCPServers"] = [item for item in out["excludeMCPServers"] if item != name]
    return out


def _is_entry(value: dict[str, Any]) -> bool:
    """Whether a dict under `mcp` looks like one server's entry rather than a table of them."""
    return "type" in value or "command" in value or "url" in value
