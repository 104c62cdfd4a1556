"""`claimcheck init`: import a client's servers into claimcheck's config and route the client through claimcheck.

Without `--apply` nothing of the client's is touched: claimcheck's config is written (merged into the one there
is) and the entry for the client is shown. `--apply` also rewrites the client's file after a timestamped backup:
the imported servers leave it (they are in claimcheck's config and in the backup), the claimcheck entry joins it,
everything else stays as it was. `--undo` puts the newest backup back. A file that cannot be read or parsed is
left untouched and the reason is one line. A folder (Continue's `.continue/mcpServers/`) is read file by file;
nothing in it is written: the block file to add there is shown, with the files whose servers moved.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from server.client_configs import all_servers, env_name_of_input, translate
from server.client_dialects import gemini_settings
from server.client_files import (
    ClientFile,
    backup,
    claimcheck_entry,
    entry_text,
    points_at_claimcheck,
    rewritten,
    undo,
    write_replacing,
)
from server.client_places import CLIENTS, NAMES, locate, tool_name_room, unknown_client, usual_paths
from server.config import (
    TOOL_NAME_MAX,
    TOOL_NAME_MIN,
    Config,
    ServerConfig,
    config_files,
    default_config_path,
    workspace_of,
)
from server.config_errors import describe_errors
from server.config_text import parse_config_text, read_config_text
from server.config_vars import command_line
from server.errors import ConfigError
from server.platform import given_path

__all__ = ["claimcheck_command", "run_init"]

EXIT_OK = 0
EXIT_REFUSED = 2


def claimcheck_command() -> list[str]:
    """How a client starts this claimcheck, absolute: the `claimcheck` script running now, else the one on PATH,
    else this Python with `-m server`."""
    running = Path(sys.argv[0])
    if running.name in ("claimcheck", "claimcheck.exe") and running.exists():
        return [str(running.absolute())]
    found = shutil.which("claimcheck")
    if found:
        return [str(Path(found).absolute())]
    return [sys.executable, "-m", "server"]


def run_init(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> int:
    """The command; its exit status."""
    try:
        return _init(args, environ)
    except ConfigError as exc:
        print(f"claimcheck: {exc}", file=sys.stderr)
        return EXIT_REFUSED


def _init(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if not args.client:
        found = [f"{name} ({path})" for name in CLIENTS for path in usual_paths(name, environ) if path.exists()]
        where = f"found here: {', '.join(found)}" if found else "none of their usual files exists here"
        raise ConfigError(f"name a client ({', '.join(CLIENTS)}) or a config file: claimcheck init cursor; {where}")
    if (unknown := unknown_client(args.client)) is not None:
        raise ConfigError(f"{unknown[0]}: {unknown[1]}")
    file = locate(args.client, environ)
    if file.path.is_dir():
        if args.undo:
            raise ConfigError(f"{file.path}: init writes nothing into a folder, so there is nothing to undo")
        return _init_folder(args, file.path, _config_path(args, environ), environ)
    if args.undo:
        restored, kept = undo(file.path)
        print(f"claimcheck: restored {file.path} from {restored.name} (what it replaced: {kept.name})")
        return EXIT_OK
    config_path = _config_path(args, environ)
    if file.path.exists() and config_path.exists() and file.path.samefile(config_path):
        raise ConfigError(f"{file.path} is claimcheck's own config; name the client's file (or --config another)")
    try:
        text, encoding = read_config_text(file.path)
        data = parse_config_text(file.path, text)
    except FileNotFoundError:
        raise ConfigError(f"{file.path}: no such file, so no servers to import (give the file's path)") from None
    except ConfigError as exc:  # unreadable or unparsable, in one line
        raise ConfigError(f"{file.path}: {exc}; left untouched") from None
    file = file.in_project(data, Path.cwd())
    raw = file.servers_in(data)
    if not isinstance(raw, dict) and isinstance(data, dict) and all_servers(data):
        raise ConfigError(
            f"{file.path}: its servers are at its top level, not under a client's \"mcpServers\", so it is no client's "
            f"file to route; claimcheck serves it as it is: claimcheck serve --config {shlex.quote(str(file.path))}"
        )
    if not isinstance(raw, dict):
        raise ConfigError(f'{file.path}: has no "{file.table}" servers to import; left untouched')
    if file.project is not None:
        print(f"claimcheck: reading the servers of project {file.project} in {file.path} (Claude Code's local scope)")
    inputs = data.get("inputs") if file.table == "servers" else None
    geminis = gemini_settings(data) if file.table == "mcpServers" and isinstance(data, dict) else {}
    try:
        translated = translate(
            {file.table: file.written_servers(data), **({"inputs": inputs} if inputs else {}), **geminis},
            environ=environ,
            workspace=workspace_of(file.path),
            check_inputs=False,
            gemini_file=file.gemini,
        )
    except ConfigError as exc:
        raise ConfigError(f"{file.path}: {exc}; left untouched") from None
    existing = _claimcheck_config(config_path)
    ours = dict(existing.get("mcpServers") or {})
    notes, client = [], NAMES.get(file.client or "")
    for name in raw.keys() - translated.data["mcpServers"].keys():  # a Zed extension's server
        notes.append(f"  {name}: left in {file.path.name} (only {client or 'the client'} can start it)")
    moved, left = _take(raw, translated.data["mcpServers"], ours, file.path.name, config_path.name, environ)
    roomy = _room_for_names(existing, file.client, args.name)
    _save(config_path, roomy, ours, moved, file.path, [*notes, *left], changed=roomy is not existing)
    entry = claimcheck_entry(claimcheck_command(), config_path, file)
    inputs = _inputs_used(translated.data["mcpServers"], moved, file, text)
    if inputs:
        entry["env"] = inputs  # VS Code still asks the user, and hands the answer to claimcheck
    print(f"\nThe entry that routes {client or file.path.name} through claimcheck, for {file.path}:\n")
    print(entry_text(args.name, entry, file, data))
    if not args.apply and file.yaml:  # read, never rewritten (`rewritten`)
        moved_out = f", and take out {', '.join(moved)}, which claimcheck serves now" if moved else ""
        print(f"\nPaste it into {file.path.name} by hand{moved_out}; claimcheck does not rewrite YAML files.")
        return EXIT_OK
    if not args.apply:
        print(f"\nclaimcheck init {args.client} --apply writes it there (after a backup; --undo restores it).")
        return EXIT_OK
    try:
        new = rewritten(file, text, moved, args.name, entry)
    except ConfigError as exc:
        raise ConfigError(f"{file.path}: {exc}") from None
    if new == text:
        print(f"\nclaimcheck: {file.path} already routes through claimcheck; nothing to write")
        return EXIT_OK
    saved = backup(file.path)
    write_replacing(file.path, new, encoding)
    print(
        f"\nclaimcheck: wrote {file.path} (backup: {saved.name}); restart the client to use it, "
        f"or claimcheck init {args.client} --undo to go back"
    )
    return EXIT_OK


def _config_path(args: argparse.Namespace, environ: Mapping[str, str]) -> Path:
    return given_path(args.config, environ).absolute() if args.config else default_config_path(environ)


def _take(
    raw: Mapping[str, Any],
    entries: Mapping[str, Any],
    ours: dict[str, Any],
    source: str,
    config: str,
    environ: Mapping[str, str],
) -> tuple[list[str], list[str]]:
    """Move the client's `entries` (translated; `raw` as written) into `ours`: the names moved, and a note for each
    one left where it is (`source`) and why. An entry that starts claimcheck is neither. A `command` written as a
    command line moves as its program and arguments (`config_vars.command_line`)."""
    moved, notes = [], []
    for name, written in entries.items():
        if points_at_claimcheck(raw.get(name)):
            continue
        entry = _command_split(name, written, environ)
        problem = _problem(name, entry)
        if problem:
            notes.append(f"  {name}: left in {source} ({problem})")
        elif name in ours and ours[name] != entry:
            notes.append(f"  {name}: left in {source} ({config} has another {name}; rename one)")
        else:
            ours[name] = entry
            moved.append(name)
    return moved, notes


def _room_for_names(existing: dict[str, Any], client: str | None, name: str) -> dict[str, Any]:
    """claimcheck's config with `settings.toolNameMax` lowered to what `client` leaves for tool names behind an entry
    called `name`, where that is less than it is now (said in a line); else `existing` itself."""
    room = tool_name_room(client, name)
    settings = existing.get("settings")
    settings = settings if isinstance(settings, dict) else {}
    now = settings.get("toolNameMax", TOOL_NAME_MAX)
    if room is None or not isinstance(now, int) or room >= now:
        return existing
    most = max(room, TOOL_NAME_MIN)
    said = NAMES[client or ""]
    print(f"claimcheck: settings.toolNameMax set to {most}: {said} takes no longer tool names behind {name!r}")
    return {**existing, "settings": {**settings, "toolNameMax": most}}


def _save(
    config_path: Path,
    existing: dict[str, Any],
    ours: dict[str, Any],
    moved: list[str],
    source: Path,
    notes: list[str],
    *,
    changed: bool = False,
) -> None:
    """Write claimcheck's config with the servers moved from `source` (if any; or when `changed`), and say what moved
    and what not."""
    if moved or changed:
        write_replacing(config_path, json.dumps({**existing, "mcpServers": ours}, indent=2) + "\n")
    if moved:
        print(
            f"claimcheck: {config_path} now serves {len(moved)} server{'s' if len(moved) != 1 else ''} of "
            f"{source}: {', '.join(moved)}"
        )
    else:
        print(f"claimcheck: no server of {source} to import")
    for note in notes:
        print(note)


def _init_folder(args: argparse.Namespace, folder: Path, config_path: Path, environ: Mapping[str, str]) -> int:
    """Continue's `.continue/mcpServers/` (or any folder of client files): each file's servers move into claimcheck's
    config; the block file that routes Continue through claimcheck is shown, never written (nor are the files)."""
    existing = _claimcheck_config(config_path)
    ours = dict(existing.get("mcpServers") or {})
    moved, notes, emptied = [], [], []
    for path in config_files(folder):
        if config_path.exists() and path.samefile(config_path):
            notes.append(f"  {path.name}: claimcheck's own config, left as it is")
            continue
        file = ClientFile(path, "continue")
        try:
            text, _ = read_config_text(path)
            data = parse_config_text(path, text)
            raw = file.servers_in(data)
            servers = file.written_servers(data) if isinstance(raw, dict) else None
            where = workspace_of(path)
            found = (
                translate({file.table: servers}, environ=environ, workspace=where, check_inputs=False)
                if servers
                else None
            )
        except ConfigError as exc:
            notes.append(f"  {path.name}: left as it is ({exc})")
            continue
        if found is None or not isinstance(raw, dict):
            notes.append(f"  {path.name}: no servers in it")
            continue
        taken, left = _take(raw, found.data["mcpServers"], ours, path.name, config_path.name, environ)
        moved += taken
        notes += left
        if taken and not left:
            emptied.append(path.name)
    _save(config_path, existing, ours, moved, folder, notes)
    block = ClientFile(folder / "claimcheck.yaml", "continue")
    entry = claimcheck_entry(claimcheck_command(), config_path, block)
    print(f"\nThe block file that routes Continue through claimcheck, {block.path}:\n")
    print("\n".join(["name: claimcheck", "version: 0.0.1", "schema: v1", entry_text(args.name, entry, block)]))
    take_out = f", and take out {', '.join(emptied)}, whose servers claimcheck serves now" if emptied else ""
    print(f"\nCreate it{take_out}; claimcheck writes nothing into the folder.")
    return EXIT_OK


def _claimcheck_config(path: Path) -> dict[str, Any]:
    """claimcheck's config as it is now (a JSON object), {} when there is none; refused when it does not parse."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read claimcheck's config to add to it ({exc}); nothing written") from None
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        raise ConfigError(f'{path}: claimcheck\'s config is not an object with "mcpServers"; nothing written')
    return data


def _command_split(name: str, entry: Any, environ: Mapping[str, str]) -> Any:
    """`entry` with a command line in `command` as its program and arguments, where `command_line` reads it so."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return entry
    try:
        server = ServerConfig.model_validate(entry, by_alias=True, by_name=False)
    except ValidationError:  # `_problem` says why
        return entry
    split, note = command_line(name, server, environ)
    return entry if note is None else {**entry, "command": split.command, "args": split.args}


def _problem(name: str, entry: Any) -> str | None:
    """Why claimcheck could not serve this entry, or None."""
    try:
        Config.model_validate({"mcpServers": {name: entry}}, by_alias=True, by_name=False)
    except ValidationError as exc:
        return describe_errors(exc, Config).removeprefix("invalid config: ")
    return None


def _inputs_used(servers: Mapping[str, Any], moved: list[str], file: ClientFile, source: str) -> dict[str, str]:
    """VS Code's `${input:id}` in the moved servers (`source`: the client's file), as the variables claimcheck's entry
    is given."""
    if file.table != "servers":
        return {}
    text = json.dumps([servers[name] for name in moved])
    found = {}
    for input_id in re.findall(r"\$\{input:([^}]+)\}", source):
        variable = env_name_of_input(input_id)
        if "${" + variable + "}" in text:
            found[variable] = "${input:" + input_id + "}"
    return found
