"""Other clients' config files, read as they are written, turned into claimcheck's own shape.

Claude Desktop, Claude Code (`.mcp.json`), Cursor and Windsurf keep servers under `mcpServers`; VS Code under
`servers` (with `inputs`); Codex CLI in TOML under `[mcp_servers.NAME]`. Entries may name their transport with
`type`, `transportType` or `transport`, Windsurf its URL with `serverUrl`, VS Code and Cursor variables as
`${env:X}`, `${workspaceFolder}`, `${userHome}` and `${input:id}`; opencode (`mcp`), Zed (`context_servers`),
goose (`extensions`, YAML), Continue (`mcpServers` as a list, YAML) and Gemini CLI (`$VAR`, `mcp.allowed`) have
entries of their own shape (`server.client_dialects`). A file's text is read by `server.config_text`.
`translate` maps all of it onto `{"mcpServers": …, "settings": …}`; what it does not use is listed in one notice,
and what it does not know is left for the config's validation to refuse with its path.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server.client_dialects import (
    codex,
    continue_entry,
    continue_servers,
    gemini,
    gemini_enabled,
    gemini_settings,
    goose,
    joined,
    looks_gemini,
    merged,
    opencode,
    opencode_servers,
    zed,
)
from server.errors import ConfigError

__all__ = [
    "SERVER_TABLES",
    "Translated",
    "env_name_of_input",
    "translate",
]

SERVER_TABLES = ("mcpServers", "servers", "mcp_servers", "mcp", "context_servers", "extensions")
"""Where a file keeps its servers: Claude Desktop, Claude Code, Cursor, Windsurf, Continue and claimcheck; VS Code;
Codex; opencode; Zed; goose."""
_SHOWN_IGNORED = 8  # keys named in the notice; a settings.json of Zed's has dozens

_OWN_TOP = {"mcpServers", "settings"}
_TRANSPORT_KEYS = ("type", "transportType", "transport")
_TRANSPORTS = {
    "stdio": "stdio",
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "streamablehttp": "streamable-http",
    "streamable_http": "streamable-http",
    "sse": "sse",
}
_IGNORED_IN_ENTRY = frozenset(
    {
        "autoApprove",  # Cline, Roo, Windsurf: approvals are the client's business
        "networkTimeout",  # Cline: how long it waits (milliseconds); claimcheck gives a slow call a handle
        "alwaysAllow",
        "description",
        "gallery",  # VS Code: where a server was installed from
        "version",
        "dev",  # VS Code: watch and debug settings for server authors
        "sandbox",
        "sandboxEnabled",
        "oauth",  # Claude Code, Codex: the client's own OAuth login, which claimcheck does not do for a server
        "scopes",
        "trust",  # Gemini CLI
        "authProviderType",
        "watchPaths",  # Roo Code: restarts the server when these files change
        "required",  # Codex: refuse to start when the server fails
        "startup_timeout_sec",  # Codex: claimcheck has settings.startupWaitSecs
        "startup_timeout_ms",
    }
)
_CLIENT_VAR_RE = re.compile(r"\$\{(env|input):([^}]+)\}|\$\{(workspaceFolder|userHome|pathSeparator)\}")


@dataclass(frozen=True, slots=True)
class Translated:
    """A file's data in claimcheck's shape, and what was read and left out to get it."""

    data: Any
    table: str = "mcpServers"
    ignored: tuple[str, ...] = ()
    foreign: bool = False
    """Whether the file is another client's (its servers under another key, or keys of its own beside them)."""

    def notice(self, source: str) -> str | None:
        """The one line that says what was read of another client's file, or None for claimcheck's own."""
        if not self.foreign and not self.ignored:
            return None
        extra = " (and inputs)" if self.table == "servers" and "inputs" in self.ignored else ""
        ignored = [key for key in self.ignored if key != "inputs" or self.table != "servers"]
        said = f"read {self.table}{extra} from {source}" if self.table else f"read servers at the top of {source}"
        if len(ignored) > _SHOWN_IGNORED:
            ignored = [*ignored[: _SHOWN_IGNORED - 1], f"and {len(ignored) - _SHOWN_IGNORED + 1} more"]
        return f"{said}; ignored: {', '.join(ignored)}" if ignored else said


def env_name_of_input(input_id: str) -> str:
    """The environment variable that stands in for VS Code's `${input:ID}` (claimcheck cannot prompt)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", input_id).strip("_").upper() or "INPUT"


def translate(
    data: Any,
    *,
    environ: Mapping[str, str] = os.environ,
    workspace: Path | None = None,
    check_inputs: bool = True,
    gemini_file: bool = False,
) -> Translated:
    """`data` (a parsed config file of any known client) in claimcheck's shape. `workspace` is what
    `${workspaceFolder}` means (the folder above `.vscode/` or `.cursor/`). With `check_inputs`, a `${input:id}`
    whose variable is unset is a `ConfigError` that says which variable to set. `gemini_file`: the file is Gemini
    CLI's (by its place), read as Gemini reads it even where nothing in it is Gemini's alone."""
    if not isinstance(data, dict):
        kind = "an array" if isinstance(data, list) else "not an object"
        raise ConfigError(f'the file is {kind}; a config is one JSON object: {{"mcpServers": {{"NAME": {{…}}}}}}')
    _text_keys(data, "")
    geminis = gemini_settings(data) if "settings" not in data else {}
    tables = [key for key in SERVER_TABLES if key in data and key not in geminis]
    if not tables and "settings" not in data and all_servers(data):  # `{"github": {"command": …}}`, as Warp takes
        data, tables = {"": data}, [""]
    if len(tables) > 1:
        raise ConfigError(f"both {' and '.join(tables)} hold servers; keep one of them")
    table = tables[0] if tables else "mcpServers"
    if "settings" in data:  # claimcheck's own file: every key is checked, none ignored
        if table != "mcpServers":
            raise ConfigError(f'{table}: unknown key (claimcheck\'s own config keeps its servers in "mcpServers")')
        others: list[str] = []
    else:
        others = [key for key in data if key != table and key not in _OWN_TOP and key not in geminis]
        known = ["settings"] if tables else [*SERVER_TABLES, "settings"]  # a found table needs no near miss
        for key in others:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
            if close:
                raise ConfigError(f"{key}: unknown key (did you mean `{close[0]}`?)")
        if others and not tables:
            raise ConfigError(f"{others[0]}: unknown key (and no {', '.join(SERVER_TABLES)} in the file)")
    inputs = _inputs(data.get("inputs")) if table == "servers" else {}
    ignored: list[str] = []  # within the servers first (a server left out among them), then the file's other keys
    path, servers = (table, data.get(table, {}))
    if table == "mcp":
        path, servers = opencode_servers(servers, ignored)
    dialect = table
    if table == "mcpServers" and isinstance(servers, list):  # Continue's list of named entries
        servers, dialect = continue_servers(servers, ignored), "continue"
    elif table in ("mcpServers", "") and "settings" not in data and (gemini_file or geminis or looks_gemini(servers)):
        dialect = "gemini"
    if isinstance(servers, dict):
        _text_keys(servers, f"{path}." if path else "")
        context = _Context(dialect, path, environ, workspace, inputs, check_inputs, ignored)
        entries = {name: context.entry(str(name), entry) for name, entry in servers.items()}
        servers = {name: entry for name, entry in entries.items() if entry is not None}
        if dialect == "gemini":
            servers = gemini_enabled(servers, geminis, ignored)
    out = {key: value for key, value in data.items() if key not in others and key != table and key not in geminis}
    out["mcpServers"] = servers
    foreign = table != "mcpServers" or dialect in ("continue", "gemini") or bool(others)
    return Translated(out, path, (*ignored, *others), foreign=foreign)


def all_servers(data: dict[str, Any]) -> bool:
    """Whether every top-level value of `data` is a server's entry (a `command`, or a URL under any client's key)."""
    keys = ("command", "url", "serverUrl", "httpUrl")
    return bool(data) and all(isinstance(entry, dict) and any(k in entry for k in keys) for entry in data.values())


def _text_keys(mapping: dict[Any, Any], where: str) -> None:
    """Refuse a key that is not text (YAML reads `null:`, `1:` and `yes:` as null, a number, true): at the top of a
    file and among its servers, where a key is a name."""
    for key in mapping:
        if not isinstance(key, str):
            shown = json.dumps(key) if key is None or isinstance(key, bool | int | float) else str(key)
            raise ConfigError(f"{where}{shown}: YAML reads this key as {shown}, not as text; quote it")


def _inputs(raw: Any) -> dict[str, str]:
    """VS Code's `inputs`: id → description."""
    found = {}
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            found[item["id"]] = str(item.get("description") or item["id"])
    return found


@dataclass(slots=True)
class _Context:
    dialect: str  # the table's name, or "continue" (Continue's list under `mcpServers`), or "gemini"
    path: str  # where the servers are in the file (`mcp.servers` in opencode's second version)
    environ: Mapping[str, str]
    workspace: Path | None
    inputs: dict[str, str]
    check_inputs: bool
    ignored: list[str]

    def entry(self, name: str, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        where = f"{self.path}.{name}" if self.path else name
        if name in SERVER_TABLES and all_servers(raw):  # `{"mcpServers": {"mcpServers": {…}}}`
            raise ConfigError(f'{where}: servers inside the servers; take out the inner "{name}" and its braces')
        entry = dict(raw)
        for key in sorted(_IGNORED_IN_ENTRY & entry.keys()):
            del entry[key]
            self.ignored.append(f"{where}.{key}")
        if self.dialect == "mcp_servers":
            entry = codex(where, entry, self.environ)
        elif self.dialect == "mcp":
            entry = opencode(where, entry, self.ignored)
        elif self.dialect == "continue":
            entry = continue_entry(where, entry, self.ignored)
        elif self.dialect == "gemini":
            entry = gemini(where, entry, self.ignored)
        elif self.dialect in ("context_servers", "extensions"):
            if self.dialect == "extensions":
                own = goose(where, entry, self.ignored, self.environ)
            else:
                own = zed(where, entry, self.ignored)
            if own is None:
                return None
            entry = own
        for alias in ("serverUrl", "httpUrl"):  # Windsurf; Gemini CLI
            if alias in entry:
                if "url" in entry:
                    raise ConfigError(f'{where}: give "url" or "{alias}", not both')
                entry["url"] = entry.pop(alias)
                if alias == "httpUrl":
                    entry.setdefault("type", "http")
        # Windsurf's and Cline's `disabledTools`, Gemini CLI's `excludeTools`: tools the model is not offered;
        # Gemini CLI's `includeTools`: the only ones it is
        for alias, kind in (("disabledTools", "exclude"), ("excludeTools", "exclude"), ("includeTools", "include")):
            if isinstance(entry.get(alias), list):
                tools, names = entry.get("tools") or {}, entry.pop(alias)
                if isinstance(tools, dict):  # else the check names `tools` as the wrong type
                    entry["tools"] = {**tools, kind: joined(tools.get(kind), names)}
        _transport(where, entry)
        entry = {key: self.expand(f"{where}.{key}", value, key) for key, value in entry.items()}
        if "envFile" in entry:
            entry["env"] = merged(_env_file(where, entry.pop("envFile"), self.workspace), entry.get("env"))
        return entry

    def expand(self, where: str, value: Any, key: str) -> Any:
        """The client's own `${…}` variables in a string value (and in lists and maps of them)."""
        if key in ("tools", "settings"):
            return value
        if isinstance(value, str):
            return _CLIENT_VAR_RE.sub(lambda match: self._variable(where, match), value)
        if isinstance(value, list):
            return [self.expand(f"{where}[{i}]", item, key) for i, item in enumerate(value)]
        if isinstance(value, dict):
            return {k: self.expand(f"{where}.{k}", item, key) for k, item in value.items()}
        return value

    def _variable(self, where: str, match: re.Match[str]) -> str:
        kind, arg, plain = match.group(1), match.group(2), match.group(3)
        if plain == "workspaceFolder":
            if self.workspace is None:
                raise ConfigError(f"{where}: ${{workspaceFolder}} has no meaning here; write the folder's path")
            return str(self.workspace)
        if plain == "userHome":
            return str(Path.home())
        if plain == "pathSeparator":
            return os.sep
        if kind == "env":
            return "${" + arg + "}"
        name = env_name_of_input(arg)
        if self.check_inputs and name not in self.environ:
            what = self.inputs.get(arg, arg)
            raise ConfigError(
                f"{where}: ${{input:{arg}}} ({what}) is asked of the user by VS Code, which claimcheck cannot do; "
                f"set the environment variable {name}"
            )
        return "${" + name + "}"


def _transport(where: str, entry: dict[str, Any]) -> None:
    """`type`/`transportType`/`transport` as claimcheck's `transport` (absent for stdio), checked against the entry."""
    given = {key: entry.pop(key) for key in _TRANSPORT_KEYS if key in entry}
    kinds = set()
    for key, value in given.items():
        kind = _TRANSPORTS.get(str(value).strip().lower()) if isinstance(value, str) else None
        if kind is None:
            raise ConfigError(f"{where}.{key}: {value!r} is not a transport (stdio, http, streamable-http or sse)")
        kinds.add(kind)
    if len(kinds) > 1:
        raise ConfigError(f"{where}: {', '.join(given)} name different transports; keep one")
    if not kinds:
        return
    kind = kinds.pop()
    key = next(iter(given))
    if kind == "stdio":
        if "command" not in entry:
            raise ConfigError(f'{where}.{key}: "stdio" needs a "command" (a "url" server is "http" or "sse")')
    elif "url" not in entry:
        raise ConfigError(f'{where}.{key}: {given[key]!r} needs a "url" (a "command" server is "stdio")')
    else:
        entry["transport"] = kind


def _env_file(where: str, value: Any, workspace: Path | None) -> dict[str, str]:
    """VS Code's `envFile`: `KEY=VALUE` lines (`#` comments, optional quotes, `export ` allowed)."""
    path = Path(os.path.expanduser(str(value)))
    if not path.is_absolute() and workspace is not None:
        path = workspace / path
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}.envFile: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    found = {}
    for line in text.splitlines():
        line = line.strip().removeprefix("export ").strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, val = line.partition("=")
        val = val.strip()
        if len(val) >= 2 and val[0] == val[-1] and val[0] in "\"'":
            val = val[1:-1]
        found[key.strip()] = val
    return found
