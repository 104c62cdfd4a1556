"""`${VAR}` in a server's entry: the environment's, filled in as the config loads (`expand_server`), as in the
settings' paths (`expand_path`, where `$VAR` and `~` count too), and
`${CLAIMCHECK_INSTANCE}`, left for each of the server's processes (`for_instance`). A `url` that, filled in, is no
http(s) address is refused there: it could never connect. A `command` written as a whole command line is read as
its program and arguments (`command_line`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Mapping

from server.config_sections import ServerConfig
from server.errors import ConfigError, clip
from server.platform import POSIX, VARIABLE

__all__ = [
    "INSTANCE_VAR",
    "PRIMARY_INSTANCE",
    "command_line",
    "expand_path",
    "expand_server",
    "expand_servers",
    "for_instance",
    "shell_only",
]

_HTTP_URL = re.compile(r"https?://[^/\s?#]+", re.IGNORECASE)
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")  # `${X:-default}` as Claude Code writes it


INSTANCE_VAR = "CLAIMCHECK_INSTANCE"
"""`${CLAIMCHECK_INSTANCE}` in a server's command, args, env, cwd, url or headers is left for each of its processes:
"shared" for the first, `owner-<digest>` or `session-<hex>` for one per owner or client connection (a file path
with it gives each owner its own state)."""


PRIMARY_INSTANCE = "shared"
"""The instance name of a server's first process (the only one with one client)."""


def for_instance(server: ServerConfig, instance: str) -> ServerConfig:
    """`server` with `${CLAIMCHECK_INSTANCE}` replaced by `instance`."""
    placeholder = "${" + INSTANCE_VAR + "}"

    def put(value: str) -> str:
        return value.replace(placeholder, instance)

    return server.model_copy(
        update={
            "command": None if server.command is None else put(server.command),
            "cwd": None if server.cwd is None else put(server.cwd),
            "url": None if server.url is None else put(server.url),
            "args": [put(a) for a in server.args],
            "env": {k: put(v) for k, v in server.env.items()},
            "headers": {k: put(v) for k, v in server.headers.items()},
        }
    )


def expand_server(
    name: str, server: ServerConfig, environ: Mapping[str, str], table: str = "mcpServers"
) -> ServerConfig:
    """`server` (the entry `<table>.<name>`: `table` is where the file keeps its servers, "" at its top) with the
    environment's `${VAR}` (and `${VAR:-default}`) filled in; an unset one is a `ConfigError` naming where it is."""
    entry = f"{table}.{name}" if table else name

    def expand(value: str, where: str) -> str:
        def sub(match: re.Match[str]) -> str:
            var = match.group(1)
            if var == INSTANCE_VAR:
                return match.group(0)  # each process's own (`for_instance`)
            if var not in environ and match.group(2) is not None:
                return match.group(2)
            if var not in environ:
                raise ConfigError(f"{entry}.{where}: environment variable ${{{var}}} is not set")
            return environ[var]

        return _VAR_RE.sub(sub, value)

    url = None if server.url is None else expand(server.url, "url")
    if url is not None and not _HTTP_URL.match(url):  # it could never connect: say so now, not at each retry
        raise ConfigError(
            f"{entry}.url: {clip(url, 80)!r} is not an http:// or https:// address; claimcheck reaches a "
            "server over HTTP (streamable HTTP or SSE) at its full URL, e.g. https://example.com/mcp"
        )
    return server.model_copy(
        update={
            "command": None if server.command is None else expand(server.command, "command"),
            "cwd": None if server.cwd is None else expand(server.cwd, "cwd"),
            "url": url,
            "args": [expand(a, f"args[{i}]") for i, a in enumerate(server.args)],
            "env": {k: expand(v, f"env.{k}") for k, v in server.env.items()},
            "headers": {k: expand(v, f"headers.{k}") for k, v in server.headers.items()},
        }
    )


def expand_path(value: str, where: str, environ: Mapping[str, str]) -> str:
    """A path of the settings (`where`: `settings.root`) with `${VAR}`, `$VAR` and a leading `~` expanded, as a shell
    would: never made as a literal `./$TMPDIR`. An unset variable, or a `$` left over, is a `ConfigError`."""

    def sub(match: re.Match[str]) -> str:
        var = match.group(1) or match.group(2)
        if var not in environ:
            raise ConfigError(f"{where}: environment variable ${{{var}}} is not set")
        return environ[var]

    expanded = VARIABLE.sub(sub, value)
    if "$" in VARIABLE.sub("", value):
        raise ConfigError(f"{where}: {value!r} has a '$' that is not a $VAR or ${{VAR}} reference")
    return os.path.expanduser(expanded)


def command_line(
    name: str, server: ServerConfig, environ: Mapping[str, str], table: str = "mcpServers"
) -> tuple[ServerConfig, str | None]:
    """A `command` written as a whole command line (`npx -y pkg`): read as its program, with the rest as arguments
    before `args`, where no file has the whole text for its name and the first word is a program on the PATH; and
    the warning that says so. Else `server` as it is, and None."""
    command = server.command
    if command is None or not POSIX or not re.search(r"\s", command.strip()):
        return server, None
    here = server.cwd or "."
    if os.path.exists(os.path.join(here, command)):
        return server, None
    try:
        words = shlex.split(command)
    except ValueError:  # an unclosed quote
        return server, None
    if len(words) < 2:
        return server, None
    program, rest = words[0], words[1:]
    if os.sep in program:
        found = os.path.isfile(os.path.join(here, program))
    else:
        found = shutil.which(program, path=server.env.get("PATH") or environ.get("PATH")) is not None
    if not found:
        return server, None
    entry = f"{table}.{name}" if table else name
    written = json.dumps({"command": program, "args": [*rest, *server.args]}, ensure_ascii=False)
    said = clip(command, 80)
    note = f"{entry}.command {said!r} is a command line: read as {clip(written, 160)}, as it is better written"
    return server.model_copy(update={"command": program, "args": [*rest, *server.args]}), note


def expand_servers(
    servers: Mapping[str, ServerConfig], environ: Mapping[str, str], table: str = "mcpServers"
) -> tuple[dict[str, ServerConfig], list[str]]:
    """Every server with `expand_server` and `command_line` applied, and the warnings to log."""
    expanded, notes = {}, []
    for name, server in servers.items():
        expanded[name], note = command_line(name, expand_server(name, server, environ, table), environ, table)
        if note is not None:
            notes.append(note)
    return expanded, notes


def shell_only(path: str) -> str | None:
    """What to write instead, when a server's `command` needs a shell to mean what it says (`~/bin/x`, `$HOME/bin/x`):
    clients start servers without one, and so does claimcheck, so neither is expanded. None otherwise."""
    if path.startswith("~"):
        return f"a ~ is not expanded (no shell starts it): write {os.path.expanduser(path)}"
    if (found := next((m for m in VARIABLE.finditer(path) if m.group(2)), None)) is not None:  # `${NAME}` is filled in
        braced = VARIABLE.sub(lambda m: "${" + (m.group(1) or m.group(2)) + "}", path)
        return f"${found.group(2)} is not expanded (no shell starts it): write {braced}, which claimcheck fills in"
    return None
