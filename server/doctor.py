"""`claimcheck doctor`: what breaks a first run, checked one line at a time, each failure with its fix.

Checks, in order: the config loads; the commands its stdio servers need are on PATH (and `node` under `npx`);
each server starts (initialize and tools/list within `--timeout`); the HTTP port is free (with `--transport
http|sse` or `--port`); the extras the config needs are installed (redis, joserfc, OpenTelemetry); Redis answers;
the status API of each running instance answers; a client's config starts claimcheck with this config. The exit
status is 0 only when nothing failed (a check that does not apply is skipped, and says so).
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import logging
import os
import shutil
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2

from server import tracing
from server.client_files import (
    ClientFile,
    config_of_entry,
    launch_of,
    points_at_claimcheck,
)
from server.client_places import CLIENTS, NAMES, locate, tool_name_room, unknown_client, usual_paths
from server.config import (
    TOOL_NAME_MAX,
    TOOL_NAME_MIN,
    CliOverrides,
    Config,
    ServerConfig,
    config_files,
    default_config_path,
    load_config,
    resolved,
    state_dir,
)
from server.config_text import read_config_data
from server.config_vars import shell_only
from server.distribution import foreign_files, install_command
from server.downstream.connect import NO_ENDPOINT
from server.downstream.listing import UNANSWERED, UNKNOWN_HOST
from server.downstream.processes import COMES_WITH
from server.errors import ConfigError, clip
from server.platform import given_path
from server.proxy import Proxy
from server.status.discovery import instances
from server.version import VERSION

__all__ = ["Report", "run_doctor"]

DEFAULT_HTTP_PORT = 8765
_INSTALL = {  # by what installs the program (`processes.COMES_WITH`)
    "Node.js": "install Node.js 18 or later (https://nodejs.org, or your package manager), which brings npm and npx",
    "uv": "install uv (https://docs.astral.sh/uv/: curl -LsSf https://astral.sh/uv/install.sh | sh), which brings uvx",
    "Docker": "install Docker (https://docs.docker.com/get-docker/) and start it",
}
_EXTRAS = {"redis": ["redis"], "oauth": ["joserfc"], "otel": ["opentelemetry.sdk", "opentelemetry.exporter.otlp"]}


@dataclass
class Report:
    """The lines printed so far, and whether one failed."""

    failed: bool = False
    lines: list[str] = field(default_factory=list)

    def ok(self, what: str) -> None:
        self._say(f"ok    {what}")

    def skip(self, what: str) -> None:
        self._say(f"skip  {what}")

    def fail(self, what: str, fix: str) -> None:
        self.failed = True
        self._say(f"FAIL  {what}; fix: {fix}")

    def _say(self, line: str) -> None:
        self.lines.append(line)
        print(line, flush=True)


def run_doctor(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> Callable[[], Awaitable[int]]:
    """The command's step (it starts servers, so it runs in the event loop)."""
    config_path = given_path(args.config, environ).absolute() if args.config else default_config_path(environ)
    return partial(doctor, args, config_path, environ)


async def doctor(args: argparse.Namespace, config_path: Path, environ: Mapping[str, str] = os.environ) -> int:
    """Every check, printed as it is made; 1 when one failed."""
    report = Report()
    try:
        config = load_config(config_path, environ)
    except ConfigError as exc:
        fix = (
            "make one from a client's servers: claimcheck init CLIENT (or give --config PATH)"
            if "config file not found" in str(exc)
            else "correct the file as the message says, or run claimcheck init CLIENT"
        )
        report.fail(f"config: {exc}", fix)
        config = None
    if config is not None:
        servers = {name: s for name, s in config.mcp_servers.items() if not s.disabled}
        if servers:
            report.ok(f"config {config_path}: {len(servers)} server{'s' if len(servers) != 1 else ''} to start")
        else:
            fix = "add one to mcpServers, or import a client's: claimcheck init CLIENT"
            report.fail(f"config {config_path}: no server to start (none, or all disabled)", fix)
        missing = check_commands(report, servers, environ)
        await check_servers(report, config, missing, args.timeout)
        check_port(report, args)
        check_extras(report, config, environ)
        await check_redis(report, config)
        await check_status_api(report, config)
    most = config.settings.tool_name_max if config is not None else TOOL_NAME_MAX
    check_clients(report, args.client, config_path, environ, most)
    check_install(report)
    return 1 if report.failed else 0


def _which(command: str, server: ServerConfig, environ: Mapping[str, str]) -> str | None:
    path = server.env.get("PATH") or environ.get("PATH")
    if os.sep in command or (os.altsep and os.altsep in command):
        return command if os.access(command, os.X_OK) and Path(command).is_file() else None
    return shutil.which(command, path=path)


def check_commands(report: Report, servers: Mapping[str, ServerConfig], environ: Mapping[str, str]) -> set[str]:
    """One line per command the stdio servers run (and `node` under npx); the names of servers whose is missing."""
    users: dict[str, list[str]] = {}
    for name, server in servers.items():
        if server.command is not None:
            users.setdefault(server.command, []).append(name)
            if Path(server.command).name in ("npx", "npm"):
                users.setdefault("node", [])
    missing: set[str] = set()
    for command, names in users.items():
        sample = servers[names[0]] if names else ServerConfig(command=command)
        found = _which(command, sample, environ)
        used_by = f" ({', '.join(names)})" if names else " (npx runs on it)"
        if found:
            report.ok(f"command {command}: {found}{used_by}")
            continue
        missing.update(names)
        provider = COMES_WITH.get(Path(command).name)
        fix = _INSTALL[provider] if provider else "install it, or write its absolute path in the server's command"
        fix = shell_only(command) or fix
        where = "does not exist or is not executable" if os.sep in command else "not on PATH"
        report.fail(f"command {command}{used_by}: {where}", fix)
    return missing


async def check_servers(report: Report, config: Config, missing: set[str], wait_secs: float) -> None:
    """Start every enabled server whose command is there, as `serve` would, and report each."""
    servers = {
        name: server.model_copy(update={"disabled": True}) if name in missing else server
        for name, server in config.mcp_servers.items()
    }
    for name in sorted(missing):
        report.skip(f"server {name}: not started (its command is missing)")
    if not any(not server.disabled for server in servers.values()):
        return
    quiet = logging.getLogger("server.downstream")
    level = quiet.level
    if quiet.getEffectiveLevel() >= logging.WARNING:
        quiet.setLevel(logging.CRITICAL)  # the lines below say what the pool would log while it retries
    try:
        await _start_and_report(report, config.model_copy(update={"mcp_servers": servers}), wait_secs)
    finally:
        quiet.setLevel(level)


async def _start_and_report(report: Report, config: Config, wait_secs: float) -> None:
    servers = config.mcp_servers
    async with Proxy.start(resolved(config, CliOverrides(no_api=True)), connect_timeout=wait_secs) as proxy:
        with anyio.move_on_after(wait_secs):
            await proxy.pool.settled()
        for downstream in proxy.pool.downstreams:
            server = servers[downstream.name]
            if downstream.state == "ready":
                count = len(downstream.tools)
                report.ok(f"server {downstream.name}: started, {count} tool{'s' if count != 1 else ''}")
                continue
            why = clip(downstream.last_error or f"no answer within {wait_secs:g} s", 300)
            if server.command is not None:
                line = " ".join([server.command, *server.args])
                fix = f"run `{line}` in a terminal to see why it stops (or give it more time: --timeout)"
            else:
                fix = _url_fix(downstream.name, str(server.url), why)
            report.fail(f"server {downstream.name}: {downstream.state} ({why})", fix)


def _url_fix(name: str, url: str, why: str) -> str:
    """What to do about a server over HTTP that did not come up, by why."""
    where = f"mcpServers.{name}"
    if UNKNOWN_HOST in why:
        return f"correct the host in {where}.url (or this machine's DNS, if the name is right)"
    if UNANSWERED in why:
        return f"start the server that answers at {url}, or correct {where}.url"
    if NO_ENDPOINT in why:
        return f"correct the path in {where}.url (the server's documentation names it: often /mcp, or /sse)"
    if "refused the connection" in why:
        return f"give {where}.headers the credentials the server takes"
    if "the server failed" in why:
        return f"see the log of the server at {url}"
    return f"check that {url} serves MCP (the server's log says why it failed) and that {where}.headers are right"


def check_port(report: Report, args: argparse.Namespace) -> None:
    """Whether `serve --transport http|sse` could listen where it will."""
    if args.transport == "stdio" and args.port is None:
        return
    port = DEFAULT_HTTP_PORT if args.port is None else args.port
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((args.host, port))
        except OSError as exc:
            why = "in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
            report.fail(f"port {port} on {args.host}: {why}", "stop what listens there, or serve --port 0 (any free)")
            return
    report.ok(f"port {port} on {args.host}: free")


def check_install(report: Report) -> None:
    """claimcheck's top-level packages hold only its own files (no other project installed into them)."""
    if found := foreign_files():
        shown = ", ".join(found[:3]) + (" …" if len(found) > 3 else "")
        fix = "install claimcheck in an environment of its own: python3 -m venv ~/.claimcheck (README, Quick start)"
        report.fail(f"install {sys.prefix}: another project's files in claimcheck's packages ({shown})", fix)
    else:
        report.ok(f"install {sys.prefix}: claimcheck {VERSION}, its packages its own")


def check_extras(report: Report, config: Config, environ: Mapping[str, str]) -> None:
    """The optional packages this config (and the OTEL_* variables) need."""
    needed = []
    if config.settings.state.url:
        needed.append(("redis", "settings.state.url"))
    if config.settings.auth is not None:
        needed.append(("oauth", "settings.auth"))
    if tracing.enabled_by(environ):
        needed.append(("otel", "the OTEL_* variables"))
    for extra, why in needed:
        absent = [module for module in _EXTRAS[extra] if not _importable(module)]
        if absent:
            fix = f"{install_command(extra)} (in claimcheck's environment)"
            report.fail(f"extra [{extra}] for {why}: {', '.join(absent)} not installed", fix)
        else:
            report.ok(f"extra [{extra}] for {why}: installed")


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


async def check_redis(report: Report, config: Config) -> None:
    url = config.settings.state.url
    if not url or not _importable("redis"):
        return
    import redis.asyncio as redis_asyncio

    client = redis_asyncio.from_url(url, socket_connect_timeout=5, socket_timeout=5)
    try:
        with anyio.fail_after(10):
            await client.ping()
    except (TimeoutError, OSError, redis_asyncio.RedisError) as exc:
        report.fail(f"redis {url}: {exc or type(exc).__name__}", "start Redis there, or correct settings.state.url")
    else:
        report.ok(f"redis {url}: answers")
    finally:
        await client.aclose()


async def check_status_api(report: Report, config: Config) -> None:
    """The status API of each running claimcheck of this state directory."""
    running = instances(state_dir(config.settings))
    if not running:
        report.skip("status API: no claimcheck runs now (checked while one does)")
        return
    async with httpx2.AsyncClient(timeout=5) as http:
        for info in running:
            url = str(info.get("url") or "")
            headers = {"Authorization": f"Bearer {info['token']}"} if info.get("token") else {}
            try:
                reply = await http.get(f"{url}v1/health", headers=headers)
                reply.raise_for_status()
            except httpx2.HTTPError as exc:
                fix = f"stop pid {info.get('pid')} and start it again (claimcheck ps shows it)"
                report.fail(f"status API of pid {info.get('pid')} at {url}: {exc}", fix)
            else:
                report.ok(f"status API of pid {info.get('pid')} at {url}: answers")


def check_clients(
    report: Report, client: str | None, config_path: Path, environ: Mapping[str, str], most: int = TOOL_NAME_MAX
) -> None:
    """Whether a client's config starts claimcheck with this config (and with a claimcheck that exists), under an
    entry name that leaves the client room for tool names of `most` characters (`settings.toolNameMax`)."""
    if client and (unknown := unknown_client(client)) is not None:
        report.fail(f"client {unknown[0]}", unknown[1])
        files = []
    elif client:
        files = [locate(client, environ)]
    else:
        files = [ClientFile(p, name) for name in CLIENTS for p in usual_paths(name, environ) if p.exists()]
    files = [part for file in files for part in _files_of(file)]
    routed = False
    for file in files:
        label = f"client {file.client or file.path.name} ({file.path})"
        try:
            data = read_config_data(file.path)
        except FileNotFoundError:
            if client:  # the one file asked about
                report.fail(f"{label}: no such file", "name the client's config file by its path, as it is on disk")
            else:
                report.skip(f"{label}: no such file")
            continue
        except ConfigError as exc:
            report.skip(f"{label}: cannot read it ({exc})")
            continue
        for name, entry in _entries(data, file):
            if not points_at_claimcheck(entry):
                continue
            given = config_of_entry(entry)
            uses = given_path(given, environ) if given else default_config_path(environ)
            command = launch[0] if (launch := launch_of(entry)) is not None else str(entry.get("command"))
            fix = f"claimcheck init {file.client or file.path} --apply (it writes the absolute path)"
            if file.yaml:  # read, never rewritten
                fix = (
                    f"claimcheck init {file.client or file.path}, and paste the entry it shows (with the absolute path)"
                )
            if os.sep in command and not os.access(command, os.X_OK):
                report.fail(f"{label}: {name} starts {command}, which is not there (moved or uninstalled)", fix)
            elif os.sep not in command and not shutil.which(command, path=environ.get("PATH")):
                report.fail(f"{label}: {name} starts {command}, which is not on PATH", fix)
            elif uses.absolute() != config_path:
                report.skip(f"{label}: {name} starts claimcheck with another config ({uses})")
            elif (room := tool_name_room(file.client, name.rpartition(":")[2])) is not None and room < most:
                report.fail(
                    f"{label}: {name} starts claimcheck with this config, but {NAMES[file.client or '']} takes tool "
                    f"names of {room} characters behind that entry name, and settings.toolNameMax is {most}",
                    f'set "toolNameMax": {max(room, TOOL_NAME_MIN)} in the settings of {config_path} (or rename '
                    "the entry)",
                )
                routed = True
            else:
                report.ok(f"{label}: {name} starts claimcheck with this config")
                routed = True
    if not routed:
        report.fail(
            f"no client config starts claimcheck with {config_path}",
            "claimcheck init CLIENT --apply (CLIENT: " + ", ".join(CLIENTS) + "), or paste what init shows",
        )


def _files_of(file: ClientFile) -> list[ClientFile]:
    """A client's file, or each config file of a client's folder (Continue's `.continue/mcpServers/`)."""
    if not file.path.is_dir():
        return [file]
    try:
        return [ClientFile(path, file.client) for path in config_files(file.path)]
    except ConfigError:
        return [file]  # read as it is: said as a file that cannot be read


def _entries(data: object, file: ClientFile) -> list[tuple[str, Any]]:
    """A client file's server entries; in Claude Code's `~/.claude.json` also each project's (`claude mcp add`'s
    default, local scope), named `project:name`."""
    if not isinstance(data, dict):
        return []
    servers = file.servers_in(data)
    found = list(servers.items()) if isinstance(servers, dict) else []
    projects = data.get("projects") if file.path.name == ".claude.json" else None
    for project, settings in projects.items() if isinstance(projects, dict) else ():
        servers = settings.get("mcpServers") if isinstance(settings, dict) else None
        if isinstance(servers, dict):
            found += [(f"{project}:{name}", entry) for name, entry in servers.items()]
    return found
