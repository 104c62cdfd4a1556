"""The clients' own config files: where each client keeps its servers on this system, the entry that routes a
client through claimcheck, and the one safe way to rewrite such a file (a timestamped backup beside it first,
the new content checked to hold every entry it should before it replaces the old, `undo` to go back)."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server.client_dialects import (
    continue_servers,
    gemini_settings,
    gemini_starting,
    is_gemini_file,
    opencode_servers,
)
from server.config_text import strip_jsonc
from server.errors import ConfigError
from server.jsonc_edit import NotEditable, edit_members, set_value
from server.platform import given_path

__all__ = [
    "ClientFile",
    "backup",
    "claimcheck_entry",
    "config_of_entry",
    "entry_text",
    "latest_backup",
    "launch_of",
    "points_at_claimcheck",
    "rewritten",
    "serves_file",
    "undo",
    "write_replacing",
]


@dataclass(frozen=True, slots=True)
class ClientFile:
    """One client's config file, and the key its servers live under."""

    path: Path
    client: str | None
    """The client's name when it was asked for by name."""
    project: str | None = None
    """Claude Code's local scope (`claude mcp add`'s default): the project whose servers in `~/.claude.json`
    (`projects.<path>.mcpServers`) are meant, rather than the file's own `mcpServers`."""

    @property
    def yaml(self) -> bool:
        """Whether the file is YAML (goose's, Continue's): read, never rewritten (its comments and layout would go)."""
        return self.path.suffix.lower() in (".yaml", ".yml")

    def written_servers(self, data: Any) -> Any:
        """The servers as the file writes them: `servers_in`, but Continue's list as a list."""
        if self.yaml and isinstance(data, dict) and isinstance(data.get("mcpServers"), list):
            return data["mcpServers"]
        return self.servers_in(data)

    def servers_in(self, data: Any) -> Any:
        """The servers object of this file's parsed `data`, by name (None where there is none)."""
        if not isinstance(data, dict):
            return None
        if self.table == "mcp":  # opencode: `mcp`, or `mcp.servers` in its second version
            return opencode_servers(data.get("mcp"), [])[1]
        if self.yaml and isinstance(data.get("mcpServers"), list):  # Continue: a list of named entries
            try:
                return continue_servers(data["mcpServers"], [])
            except ConfigError:
                return None
        if self.project is None:
            return data.get(self.table)
        projects = data.get("projects")
        project = projects.get(self.project) if isinstance(projects, dict) else None
        return project.get("mcpServers") if isinstance(project, dict) else None

    def table_path(self, data: Any) -> list[str]:
        """The keys from the top of this file's parsed `data` to its servers object."""
        if self.table == "mcp" and opencode_servers(data.get("mcp"), [])[0] == "mcp.servers":
            return ["mcp", "servers"]
        return [self.table] if self.project is None else ["projects", self.project, "mcpServers"]

    def with_servers(self, data: dict[str, Any], servers: dict[str, Any]) -> dict[str, Any]:
        """`data` with this file's servers object (at `table_path`) replaced, every other key as it was."""

        def put(node: dict[str, Any], keys: list[str]) -> Any:
            return {**node, keys[0]: put(node.get(keys[0]) or {}, keys[1:])} if keys else servers

        return dict(put(data, self.table_path(data)))

    @property
    def gemini(self) -> bool:
        """Whether this is Gemini CLI's settings file, by the client asked for or its place."""
        return self.client == "gemini" or is_gemini_file(self.path)

    def in_project(self, data: Any, cwd: Path) -> ClientFile:
        """This file, at Claude Code's local scope of `cwd` when `~/.claude.json` has servers there."""
        if self.path.name != ".claude.json":
            return self
        local = ClientFile(self.path, self.client, str(cwd))
        servers = local.servers_in(data)
        return local if isinstance(servers, dict) and servers else self

    @property
    def table(self) -> str:
        if self.path.suffix.lower() == ".toml":
            return "mcp_servers"
        if self.client == "goose" or (self.yaml and self.path.parent.name == "goose"):
            return "extensions"
        if self.client == "opencode" or self.path.name in ("opencode.json", "opencode.jsonc"):
            return "mcp"
        if self.client == "zed" or (self.path.name == "settings.json" and self.path.parent.name.lower() == "zed"):
            return "context_servers"
        if self.client == "vscode" or (self.path.name == "mcp.json" and self.path.parent.name in (".vscode", "User")):
            return "servers"
        return "mcpServers"


def claimcheck_entry(command: list[str], config: Path, file: ClientFile) -> dict[str, Any]:
    """The entry that starts claimcheck for this client, with absolute paths."""
    entry: dict[str, Any] = {"command": command[0], "args": [*command[1:], "serve", "--config", str(config)]}
    if file.table == "mcp":  # opencode: the program and its arguments in one list
        return {"type": "local", "command": [entry["command"], *entry["args"]]}
    if file.table == "context_servers":
        return {"source": "custom", **entry, "env": {}}
    if file.table == "extensions":  # goose: its keys; its timeout is how long goose waits for a call (its default)
        return {
            "type": "stdio",
            "cmd": entry["command"],
            "args": entry["args"],
            "envs": {},
            "enabled": True,
            "timeout": 300,
        }
    if file.table == "servers" or file.client == "claude-code" or file.path.name == ".mcp.json":
        entry = {"type": "stdio", **entry}
    return entry


def entry_text(name: str, entry: Mapping[str, Any], file: ClientFile, data: Any = None) -> str:
    """The entry as it is written in the client's file (a TOML table for Codex; under `mcp.servers` for an opencode
    file of its second version, which `data`, the file's content, shows)."""
    if file.table == "mcp_servers":
        lines = [f"[mcp_servers.{_toml_key(name)}]"]
        lines += [f"{key} = {json.dumps(value, ensure_ascii=False)}" for key, value in entry.items()]
        return "\n".join(lines)
    if file.table == "mcp" and isinstance(data, dict) and opencode_servers(data.get("mcp"), [])[0] == "mcp.servers":
        return json.dumps({"mcp": {"servers": {name: entry}}}, indent=2, ensure_ascii=False)
    if file.yaml:  # goose's and Continue's entries name themselves; each value in JSON's flow style, which YAML reads
        values = [f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in {"name": name, **entry}.items()]
        if file.table == "extensions":
            return "\n".join([f"extensions:\n  {json.dumps(name)}:", *(f"    {line}" for line in values)])
        return "\n".join(["mcpServers:", f"  - {values[0]}", *(f"    {line}" for line in values[1:])])
    return json.dumps({file.table: {name: entry}}, indent=2, ensure_ascii=False)


def launch_of(entry: Any) -> tuple[str, list[str]] | None:
    """The program a client's server entry starts and its arguments (opencode writes both in one `command` list),
    or None for an entry that starts nothing."""
    if not isinstance(entry, Mapping):
        return None
    command = entry.get("command", entry.get("cmd"))  # goose: `cmd`
    args = entry.get("args") or []
    if not isinstance(args, list):  # not an entry any client starts
        return None
    if isinstance(command, list) and command and all(isinstance(part, str) for part in command):
        return command[0], [*command[1:], *(str(arg) for arg in args)]
    if not isinstance(command, str):
        return None
    return command, [str(arg) for arg in args]


def points_at_claimcheck(entry: Any) -> bool:
    """Whether a client's server entry starts claimcheck (its executable, or `uvx`/`pipx run` of it)."""
    launch = launch_of(entry)
    if launch is None:
        return False
    program = Path(launch[0]).name.lower().removesuffix(".exe")
    args = launch[1]
    if program.startswith("claimcheck"):
        return True
    if program in ("uvx", "pipx", "uv") and any(arg.split("@")[0] in ("claimcheck", "mcp-claimcheck") for arg in args):
        return True
    return program.startswith("python") and args[:2] == ["-m", "server"] and "serve" in args


def config_of_entry(entry: Mapping[str, Any]) -> str | None:
    """The `--config` an entry that starts claimcheck gives it, or None (the default config)."""
    launch = launch_of(entry)
    args = launch[1] if launch is not None else []
    for index, arg in enumerate(args):
        if arg == "--config" and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("--config="):
            return arg.removeprefix("--config=")
    return None


def serves_file(entry: Mapping[str, Any], source: Path, default: Path) -> bool:
    """Whether `entry` starts claimcheck serving the config at `source` (its `--config`, else `default`: the default
    config as the entry's environment makes it): a client's file that routes the client through claimcheck, given to
    claimcheck itself, whose entry would start claimcheck again, and that one another, without end."""
    if not points_at_claimcheck(entry):
        return False
    named = config_of_entry(entry)
    target = default if named is None else given_path(named)
    if not target.is_absolute():
        target = Path(str(entry.get("cwd") or os.getcwd())) / target
    try:
        return target.samefile(source)
    except OSError:  # no such file (then not this one), or unreadable
        return False


def rewritten(file: ClientFile, text: str, remove: list[str], name: str, entry: dict[str, Any]) -> str:
    """The file's new text: the servers in `remove` gone, `name` set to `entry`, every other key and entry as it
    was. `ConfigError` (one line) when that cannot be written without losing something."""
    if file.table == "mcp_servers":
        return _rewritten_toml(file, text, remove, name, entry)
    if file.yaml:
        moved = f", and take out {', '.join(remove)}, which claimcheck serves now" if remove else ""
        raise ConfigError(
            f"is YAML, which rewriting would reformat and strip of comments; left untouched: add the "
            f"entry above by hand{moved}"
        )
    try:
        data, plain = json.loads(text), True
    except json.JSONDecodeError:
        try:
            data, plain = json.loads(strip_jsonc(text)), False
        except json.JSONDecodeError as exc:
            raise ConfigError(f"not valid JSON ({exc.msg} at line {exc.lineno}); left untouched") from None
    old = file.servers_in(data)
    if not isinstance(data, dict) or not isinstance(old if old is not None else {}, dict):
        raise ConfigError(f'has no "{file.table}" object; left untouched')
    servers = {key: value for key, value in (old or {}).items() if key not in remove}
    servers[name] = entry
    expected = file.with_servers(data, servers)
    if file.gemini or gemini_settings(data):
        expected = gemini_starting(expected, name)  # Gemini's allow list must let the new entry start
    if plain:
        out = json.dumps(expected, indent=2, ensure_ascii=False) + "\n"
        try:
            out.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate, read from a `\ud800` escape: written escaped, as it was
            out = json.dumps(expected, indent=2) + "\n"
        return out
    lists = [path for path in _GEMINI_LISTS if _at(expected, path) != _at(data, path)]  # `gemini_starting` changed
    try:  # comments or trailing commas (VS Code, Cursor, Zed): edited in place, checked to mean what was meant
        new = edit_members(text, file.table_path(data), remove, name, entry)
        for path in lists:
            new = set_value(new, path, _at(expected, path))
        if json.loads(strip_jsonc(new)) == expected:
            return new
    except (NotEditable, json.JSONDecodeError, RecursionError):
        pass
    also = "".join(
        f", and {'take it out of' if name in (_at(data, p) or []) else 'its name to'} {'.'.join(p)}" for p in lists
    )
    moved = f", take out {', '.join(remove)}, which claimcheck serves now" if remove else ""
    raise ConfigError(f"has comments this edit cannot keep; left untouched: add the entry above by hand{moved}{also}")


_GEMINI_LISTS = (("mcp", "allowed"), ("mcp", "excluded"), ("allowMCPServers",), ("excludeMCPServers",))


def _at(data: Any, path: tuple[str, ...]) -> Any:
    """What `data` holds at `path` (keys from the top); None where nothing is."""
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


_TOML_HEADER = re.compile(r"^\s*\[\s*mcp_servers\s*\.\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)\s*[.\]]")


def _rewritten_toml(file: ClientFile, text: str, remove: list[str], name: str, entry: dict[str, Any]) -> str:
    """Codex's TOML, edited as text (the standard library writes no TOML): the removed servers' tables cut out, the
    new one appended, and the result parsed again to check that nothing else changed."""
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML ({exc}); left untouched") from None
    kept, skipping = [], False
    for line in text.splitlines(keepends=True):
        header = _TOML_HEADER.match(line)
        if header:
            skipping = header.group(1).strip("\"'") in (*remove, name)
        elif line.lstrip().startswith("["):
            skipping = False if re.match(r"^\s*\[\[?[A-Za-z0-9_\"'.\s-]+\]\]?\s*(#.*)?$", line) else skipping
        if not skipping:
            kept.append(line)
    new = "".join(kept).rstrip("\n") + "\n\n" + entry_text(name, entry, file) + "\n"
    expected = dict(before)
    servers = {k: v for k, v in dict(before.get("mcp_servers") or {}).items() if k not in remove}
    expected["mcp_servers"] = {**servers, name: entry}
    try:
        ok = tomllib.loads(new) == expected
    except tomllib.TOMLDecodeError:
        ok = False
    if not ok:
        raise ConfigError("writes its servers in a form this edit cannot keep; left untouched: add the entry by hand")
    return new


def _toml_key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def _stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def backup(path: Path) -> Path:
    """Copy `path` to `<name>.bak-YYYYmmdd-HHMMSS` beside it (`-2`, `-3`… within one second) and return it."""
    base = path.with_name(f"{path.name}.bak-{_stamp()}")
    target, count = base, 1
    while target.exists():
        count += 1
        target = base.with_name(f"{base.name}-{count}")
    shutil.copy2(path, target)
    return target


def latest_backup(path: Path) -> Path | None:
    """The newest `backup` of `path`, or None."""

    def order(candidate: Path) -> tuple[str, int]:
        suffix = candidate.name.removeprefix(f"{path.name}.bak-")  # YYYYmmdd-HHMMSS, then -N within one second
        return suffix[:15], int(suffix[16:]) if suffix[16:].isdigit() else 1

    found = [p for p in path.parent.glob(f"{glob_escape(path.name)}.bak-*") if p.is_file()]
    return max(found, key=order, default=None)


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def write_replacing(path: Path, text: str, encoding: str = "utf-8") -> None:
    """Write `text` to `path` whole or not at all (a sibling file renamed over it), keeping its mode; in `encoding`
    (one of `server.config_text.read_config_text`'s, byte order mark included)."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o600
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.claimcheck-{os.getpid()}")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w", encoding=encoding) as out:
            out.write("\ufeff" + text if encoding.startswith("utf-16") else text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except UnicodeEncodeError as exc:  # a lone surrogate, read from a `\ud800` escape: no encoding writes one
        bad = exc.object[exc.start : exc.start + 1]
        raise ConfigError(
            f"{path}: cannot write {bad!a}, half of a character (an escape in the file read); left untouched"
        ) from None
    finally:
        temporary.unlink(missing_ok=True)


def undo(path: Path) -> tuple[Path, Path]:
    """Put the newest backup of `path` back in its place; the content it replaces is kept as
    `<name>.undone-YYYYmmdd-HHMMSS`. Returns (the backup restored, where the replaced content went)."""
    restored = latest_backup(path)
    if restored is None:
        raise ConfigError(f"{path}: no backup ({path.name}.bak-…) to restore; init --apply makes one")
    kept = path.with_name(f"{path.name}.undone-{_stamp()}")
    if path.exists():
        shutil.copy2(path, kept)
    os.replace(restored, path)
    return restored, kept
