"""The configuration file: Claude-Desktop-shaped `mcpServers` plus claimcheck's `settings`.

Loading validates strictly (unknown keys are errors naming their path), expands `${VAR}` from the
environment (and, in the directories `root` and `stateDir`, `$VAR` and `~` as a shell would), and resolves
the effective per-server policy (CLI > per-server > settings > default).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from server.auth_config import AuthSettings
from server.client_configs import translate
from server.client_dialects import is_gemini_file
from server.client_files import serves_file
from server.config_errors import describe_errors
from server.config_sections import (
    PREFIX_RE,
    ApiSettings,
    ExtractionSettings,
    HistorySettings,
    LimitsSettings,
    ServerConfig,
    StateSettings,
    StrictModel,
    ToolFilter,
)
from server.config_text import read_config_data
from server.config_vars import expand_path, expand_servers
from server.errors import ConfigError
from server.platform import given_path

__all__ = [
    "FAST_PATH_ENV",
    "TOOL_NAME_MAX",
    "TOOL_NAME_MIN",
    "ApiSettings",
    "CliOverrides",
    "Config",
    "ExtractionSettings",
    "HistorySettings",
    "LimitsSettings",
    "Policy",
    "ServerConfig",
    "Settings",
    "StateSettings",
    "ToolFilter",
    "api_port",
    "config_files",
    "default_config_path",
    "fast_path_enabled",
    "load_config",
    "parse_config",
    "policy_for",
    "resolve_policy",
    "resolved",
    "state_dir",
    "workspace_of",
]

logger = logging.getLogger(__name__)

_NOT_A_PREFIX = re.compile(r"[^A-Za-z0-9_.-]+")  # what a server key may hold that a tool prefix may not

TOOL_NAME_MAX = 47
"""The longest tool name listed by default: Claude Code calls a server's tool `mcp__<entry>__<tool>` and the model
API refuses a name over 64 characters, so an entry named `claimcheck` leaves 47; Cursor hides a tool whose entry
and tool names together reach 60. Tool names claimcheck makes are its servers' names with a prefix: longer than the
same server's tools reached without it, which is why claimcheck must keep them short."""
TOOL_NAME_MIN = 16
"""The least `toolNameMax`: a cut name keeps at least 7 characters of its head before `_` and its 8-character hash."""


class Settings(StrictModel):
    """Process-wide settings; per-server fields override the async ones."""

    async_: bool = Field(default=True, alias="async")
    async_token_threshold: int = Field(default=10_000, alias="asyncTokenThreshold", gt=0)
    async_timeout_secs: float = Field(default=5, alias="asyncTimeoutSecs", ge=0)
    max_output_bytes: int = Field(default=1 << 30, alias="maxOutputBytes", gt=0)
    max_request_bytes: int = Field(default=64 << 20, alias="maxRequestBytes", gt=0)
    startup_wait_secs: float = Field(default=3, alias="startupWaitSecs", ge=0)
    root: str | None = None
    roots: list[str] = Field(default_factory=list)
    """The roots a server's process shared by several clients is given (absolute directories): never a client's."""
    wait_max_secs: float = Field(default=50, alias="waitMaxSecs", gt=0)
    status_footer: bool = Field(default=True, alias="statusFooter")
    tool_separator: str = Field(default="__", alias="toolSeparator", min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    tool_name_max: int = Field(default=TOOL_NAME_MAX, alias="toolNameMax", ge=TOOL_NAME_MIN, le=128)
    """The longest tool name listed; a longer one keeps its head and ends in a stable hash (`downstream.naming`)."""
    background_param: str = Field(default="background", alias="backgroundParam", min_length=1)
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    history: HistorySettings = Field(default_factory=HistorySettings)
    state_dir: str | None = Field(default=None, alias="stateDir")
    # Handles beyond one session: how long an owner's outputs stay after they were last touched,
    # whether `serve` relays to the user's shared claimcheck, and how long that one waits idle before exiting.
    keep_outputs_secs: float = Field(default=600, alias="keepOutputsSecs", ge=0)
    shared: bool = False
    shared_idle_secs: float = Field(default=900, alias="sharedIdleSecs", ge=0)
    state: StateSettings = Field(default_factory=StateSettings)
    fast_path: bool = Field(default=True, alias="fastPath")
    """Plain tool calls over stdio skip the SDK's dispatch; env CLAIMCHECK_FAST_PATH=on|off wins."""
    catalog: Literal["full", "search", "auto"] = "full"
    """What `tools/list` holds of the servers' tools: all ("full"), the pinned ones with find_tools and call_tool
    ("search"), or search once the definitions pass `catalogTokens` ("auto"); `server.upstream.tool_catalog`."""
    catalog_tokens: int = Field(default=8000, alias="catalogTokens", gt=0)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    """Fair shares: what one principal may hold at once (`server.config_sections.LimitsSettings`)."""
    auth: AuthSettings | None = None
    """OAuth access tokens over HTTP/SSE (`server.auth_config`); None: only `--auth-token-env`/`--auth-tokens-file`."""


class Config(StrictModel):
    """The whole file."""

    mcp_servers: dict[str, ServerConfig] = Field(default_factory=dict, alias="mcpServers")
    settings: Settings = Field(default_factory=Settings)

    @model_validator(mode="before")
    @classmethod
    def _prefixes(cls, data: Any) -> Any:
        """A server key that is no tool prefix (`SQLite MCP`, as Claude Desktop and Continue allow) gets one made of
        it (`SQLite_MCP`): a config is taken as it is written. One with nothing to make it of must name its own."""
        servers = data.get("mcpServers") if isinstance(data, dict) else None
        if not isinstance(servers, dict):
            return data
        made = {}
        for name, entry in servers.items():
            if isinstance(entry, dict) and entry.get("prefix") is None and not (name and PREFIX_RE.match(name)):
                prefix = _NOT_A_PREFIX.sub("_", str(name)).strip("_")
                if not prefix:
                    raise ValueError(f'server key {name!r} has no letter or digit to name its tools by; set "prefix"')
                made[name] = {**entry, "prefix": prefix}
        return {**data, "mcpServers": {**servers, **made}} if made else data

    def prefix_of(self, name: str) -> str:
        """What the tools of server `name` are named by: its `prefix`, else its key."""
        prefix = self.mcp_servers[name].prefix
        return name if prefix is None else prefix


@dataclass(frozen=True, slots=True)
class CliOverrides:
    """Flags given on the command line; they beat everything in the file."""

    no_async: bool = False
    async_timeout_secs: float | None = None
    async_token_threshold: int | None = None
    no_api: bool = False
    state_url: str | None = None


@dataclass(frozen=True, slots=True)
class Policy:
    """The effective async policy of one downstream server."""

    async_enabled: bool
    async_timeout_secs: float
    async_token_threshold: int
    call_timeout_secs: float


def resolved(config: Config, cli: CliOverrides) -> Config:
    """The config with the command line merged in, once at start (and for each reload): a flag beats the server's
    own field and `settings`, so it is set in `settings` and the servers' own values of it are dropped."""
    updates: dict[str, Any] = {}
    own: dict[str, None] = {}
    if cli.no_async:
        updates["async_"] = False
        own["async_"] = None
    if cli.async_timeout_secs is not None:
        updates["async_timeout_secs"] = cli.async_timeout_secs
        own["async_timeout_secs"] = None
    if cli.async_token_threshold is not None:
        updates["async_token_threshold"] = cli.async_token_threshold
        own["async_token_threshold"] = None
    settings = config.settings
    if cli.no_api:
        updates["api"] = settings.api.model_copy(update={"enabled": False})
    if cli.state_url:
        updates["state"] = settings.state.model_copy(update={"url": cli.state_url})
    if not updates:
        return config
    servers = {name: server.model_copy(update=own) for name, server in config.mcp_servers.items()}
    return config.model_copy(update={"settings": settings.model_copy(update=updates), "mcp_servers": servers})


def policy_for(config: Config, server: str, cli: CliOverrides | None = None) -> Policy:
    """Resolve CLI > per-server > settings > default for `server`."""
    if cli is not None:
        config = resolved(config, cli)
    return resolve_policy(config.settings, config.mcp_servers[server])


def resolve_policy(settings: Settings, own: ServerConfig) -> Policy:
    """The effective policy of a server configured as `own`, under resolved settings (`resolved`)."""

    def pick(own_value: Any, base_value: Any) -> Any:
        return base_value if own_value is None else own_value

    return Policy(
        async_enabled=pick(own.async_, settings.async_),
        async_timeout_secs=pick(own.async_timeout_secs, settings.async_timeout_secs),
        async_token_threshold=pick(own.async_token_threshold, settings.async_token_threshold),
        call_timeout_secs=own.timeout,
    )


def state_dir(settings: Settings, environ: Mapping[str, str] = os.environ) -> Path:
    """`settings.stateDir`, else `$XDG_STATE_HOME/claimcheck`, else `~/.local/state/claimcheck`."""
    if settings.state_dir:
        return Path(os.path.expanduser(settings.state_dir))
    base = Path(environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "claimcheck"


def api_port(settings: Settings, environ: Mapping[str, str] = os.environ) -> int | None:
    """The status API's first port to try, or None when the API is off (settings, `$CLAIMCHECK_API_*`)."""
    if environ.get("CLAIMCHECK_API_ENABLED", "").strip().lower() in ("0", "false", "no", "off"):
        return None
    if not settings.api.enabled:
        return None
    raw = environ.get("CLAIMCHECK_API_PORT")
    if raw is None or not raw.strip():
        return settings.api.port
    try:
        port = int(raw)
    except ValueError:
        raise ConfigError(f"CLAIMCHECK_API_PORT must be a port number, not {raw!r}") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"CLAIMCHECK_API_PORT must be 0..65535, not {port}")
    return port


def default_config_path(environ: Mapping[str, str] = os.environ) -> Path:
    """`$CLAIMCHECK_CONFIG`, else `$XDG_CONFIG_HOME/claimcheck/config.json` (`~/.config` by default)."""
    if environ.get("CLAIMCHECK_CONFIG"):
        return given_path(environ["CLAIMCHECK_CONFIG"], environ)
    base = Path(environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "claimcheck" / "config.json"


def no_servers(where: str | os.PathLike[str]) -> str:
    """What to say of a config that starts no server, and what to write."""
    return (
        f"{where} configures no servers to start (mcpServers is empty or every one is disabled); add one, e.g. "
        '"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}}'
    )


def load_config(path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] = os.environ) -> Config:
    """Read, expand and validate a config file (claimcheck's own, or another client's as it is written: JSON with
    comments, Codex's TOML), or a directory of them (`load_config_dir`); every failure is a `ConfigError` naming
    the file."""
    where = given_path(path, environ) if path is not None else default_config_path(environ)
    if where.is_dir():
        return load_config_dir(where, environ)
    try:
        data = read_config_data(where)
    except FileNotFoundError:
        hint = (
            ""
            if path is not None
            else ": make it from a client's servers with `claimcheck init CLIENT`, or pass --config PATH (or set "
            "CLAIMCHECK_CONFIG)"
        )
        raise ConfigError(f"{where}: config file not found{hint}") from None
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    try:
        config = parse_config(data, environ, source=where)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return _without_loops(config, where, environ)


def _without_loops(config: Config, where: Path, environ: Mapping[str, str]) -> Config:
    """`config` without the servers that are claimcheck serving `where` itself (a client's file that routes the
    client through claimcheck, given to claimcheck), each left out with one warning."""
    loops = [name for name, server in config.mcp_servers.items() if _serves_this(server, where, environ)]
    for name in loops:
        logger.warning(
            "%s: left out server %s: it is claimcheck serving this same %s, which would start itself without end "
            "(give claimcheck a config of its own: `claimcheck init CLIENT`)",
            where,
            name,
            "folder" if where.is_dir() else "file",
        )
    servers = {name: server for name, server in config.mcp_servers.items() if name not in loops}
    return config.model_copy(update={"mcp_servers": servers}) if loops else config


CONFIG_SUFFIXES = (".json", ".jsonc", ".yaml", ".yml", ".toml")
"""The files a config directory is read from."""


def config_files(where: Path) -> list[Path]:
    """The config files of a directory, by name; a `ConfigError` when it cannot be read or holds none."""
    try:
        files = sorted(path for path in where.iterdir() if path.suffix.lower() in CONFIG_SUFFIXES and path.is_file())
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read the folder: {exc.strerror or exc}") from None
    if not files:
        raise ConfigError(
            f"{where}: a directory with no config file in it ({', '.join(CONFIG_SUFFIXES)}); give the config file's "
            "path, or a directory of server files"
        )
    return files


def load_config_dir(where: Path, environ: Mapping[str, str] = os.environ) -> Config:
    """A directory of config files, as Continue keeps its servers (`.continue/mcpServers/`, a YAML block or a
    client's JSON file each): every file's servers, by name, in the order of the files' names. Two files that name
    one server, or that both give `settings`, are a `ConfigError` naming both."""
    files = config_files(where)
    servers: dict[str, ServerConfig] = {}
    found: dict[str, Path] = {}
    settings: tuple[Path, Settings] | None = None
    for path in files:
        config = load_config(path, environ)
        for name, server in config.mcp_servers.items():
            if name in found:
                raise ConfigError(f"{where}: server {name!r} is in both {found[name].name} and {path.name}; keep one")
            servers[name], found[name] = server, path
        if config.settings != Settings():  # a file that sets something
            if settings is not None:
                raise ConfigError(f"{where}: settings in both {settings[0].name} and {path.name}; keep them in one")
            settings = (path, config.settings)
    merged = Config(mcpServers=servers, **({"settings": settings[1]} if settings is not None else {}))
    return _without_loops(merged, where, environ)


def _serves_this(server: ServerConfig, source: Path, environ: Mapping[str, str]) -> bool:
    if server.command is None or server.disabled:
        return False
    entry = {"command": server.command, "args": server.args, "cwd": server.cwd}
    return serves_file(entry, source, default_config_path({**environ, **server.env}))


def parse_config(data: Any, environ: Mapping[str, str] = os.environ, *, source: Path | None = None) -> Config:
    """Validate already-parsed data (claimcheck's shape or another client's, `server.client_configs`) and expand
    `${VAR}` in env, headers, args, url, command, cwd (and `$VAR`, `~` too in `settings.root` and
    `settings.stateDir`). What was read of another client's file is logged once, as a warning."""
    try:
        gemini = source is not None and is_gemini_file(source)
        translated = translate(data, environ=environ, workspace=workspace_of(source), gemini_file=gemini)
    except ConfigError as exc:
        raise ConfigError(f"invalid config: {exc}") from None
    try:
        config = Config.model_validate(translated.data, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc, Config, table=translated.table)) from None
    servers, notes = expand_servers(config.mcp_servers, environ, translated.table)
    notice = translated.notice(source.name if source is not None else "the config")
    for said in [*notes, *([notice] if notice else [])]:
        logger.warning("%s", said)
    return config.model_copy(update={"mcp_servers": servers, "settings": _expand_dirs(config.settings, environ)})


def workspace_of(source: Path | None) -> Path | None:
    """What `${workspaceFolder}` means in a config at `source`: the folder above `.vscode/`, `.cursor/` (or any
    dot-folder), else the file's own folder."""
    if source is None:
        return None
    folder = Path(os.path.expanduser(source)).absolute().parent
    return folder.parent if folder.name.startswith(".") else folder


def _expand_dirs(settings: Settings, environ: Mapping[str, str]) -> Settings:
    """`root` and `stateDir` with `${VAR}`, `$VAR` and a leading `~` expanded: a path a shell would take apart is
    never made as a literal `./$TMPDIR` beside the working directory. A `$` left over is an error."""

    def expand(value: str | None, where: str) -> str | None:
        return None if value is None else expand_path(value, f"settings.{where}", environ)

    roots = []
    for index, value in enumerate(settings.roots):
        where = f"roots[{index}]"
        path = value.removeprefix("file://") if value.startswith("file://") else expand(value, where)
        if not path or not os.path.isabs(path):
            raise ConfigError(f"settings.{where}: {value!r} is not an absolute directory")
        roots.append(path)
    return settings.model_copy(
        update={
            "root": expand(settings.root, "root"),
            "state_dir": expand(settings.state_dir, "stateDir"),
            "roots": roots,
        }
    )


FAST_PATH_ENV = "CLAIMCHECK_FAST_PATH"


def fast_path_enabled(settings: Settings) -> bool:
    """Whether the fast path is on: `CLAIMCHECK_FAST_PATH` (on/off) if set, else `settings.fastPath`."""
    value = os.environ.get(FAST_PATH_ENV, "").strip().lower()
    if value in ("1", "on", "true", "yes"):
        return True
    if value in ("0", "off", "false", "no"):
        return False
    return settings.fast_path
