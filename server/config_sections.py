"""The sections of the config that stand alone: one server's entry (with its tool filter) and the `settings`
sub-objects (`extraction`, `api`, `history`, `state`, `limits`). `server.config` composes them and re-exports
each."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "PREFIX_RE",
    "ApiSettings",
    "ExtractionSettings",
    "HistorySettings",
    "LimitsSettings",
    "ServerConfig",
    "StateSettings",
    "StrictModel",
    "ToolFilter",
]

PREFIX_RE = re.compile(r"^[A-Za-z0-9_.-]*$")


class StrictModel(BaseModel):
    """Every config object: unknown keys are errors, camelCase aliases or snake_case names, immutable."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class ToolFilter(StrictModel):
    """Glob filters on a server's tool names (before prefixing); exclude wins."""

    include: list[str] | None = None
    exclude: list[str] = Field(default_factory=list)


class ExtractionSettings(StrictModel):
    """LLM extraction settings."""

    provider: Literal["auto", "openai", "sampling", "none"] = "auto"
    base_url: str | None = Field(default=None, alias="baseUrl")
    model: str | None = None
    api_key_env: str | None = Field(default=None, alias="apiKeyEnv")
    context_window: int | None = Field(default=None, alias="contextWindow", gt=0)  # None: what the endpoint says
    max_output_tokens: int | None = Field(default=None, alias="maxOutputTokens", gt=0)  # None: window / 8
    timeout_secs: float = Field(default=120, alias="timeoutSecs", gt=0)  # since the last token received
    first_token_secs: float = Field(default=600, alias="firstTokenSecs", gt=0)  # a CPU reads a long prompt first
    max_chunks: int = Field(default=1, alias="maxChunks", ge=1)
    max_chunks_hard: int = Field(default=64, alias="maxChunksHard", ge=1)
    overlap_percent: float = Field(default=10, alias="overlapPercent", ge=0, lt=100)
    avg_line_bytes_threshold: int = Field(default=1000, alias="avgLineBytesThreshold", gt=0)
    concurrency: int | None = Field(default=None, ge=1)  # None: what the endpoint serves at once
    retries: int = Field(default=2, ge=0)
    max_turns: int = Field(default=4, alias="maxTurns", ge=1)
    sampling_requests: int = Field(default=4, alias="samplingRequests", ge=1)  # one question, the client's model
    sampling_tokens: int = Field(default=100_000, alias="samplingTokens", ge=1000)  # sent with them, in all


class ApiSettings(StrictModel):
    """The local status API."""

    enabled: bool = True
    port: int = Field(default=5165, ge=0, le=65535)
    heartbeat_secs: float = Field(default=30, alias="heartbeatSecs", gt=0)
    allow_origins: list[str] = Field(default_factory=list, alias="allowOrigins")


class HistorySettings(StrictModel):
    """What the call history keeps, and for how long."""

    store_arguments: bool = Field(default=True, alias="storeArguments")
    max_age_days: float = Field(default=30, alias="maxAgeDays", gt=0)
    max_rows: int = Field(default=100_000, alias="maxRows", gt=0)


class StateSettings(StrictModel):
    """Where handles live: this process (no `url`), or a Redis that several replicas share."""

    url: str | None = Field(default=None, pattern=r"^rediss?://")
    lease_secs: float = Field(default=15, alias="leaseSecs", gt=0)
    poll_secs: float = Field(default=1.5, alias="pollSecs", gt=0)
    retain_secs: float = Field(default=86_400, alias="retainSecs", gt=0)
    key_prefix: str = Field(default="cc:", alias="keyPrefix")


class LimitsSettings(StrictModel):
    """Fair shares: what one principal (a tokens file's or OAuth principal, the shared claimcheck's user, a
    client without a token by its connection; never a `Claimcheck-Session` header) may hold at once. One at its
    limit is refused with an error naming the setting; every other principal is served as before. The defaults
    are far above what one user's agents do; a server's `maxInstancesPerPrincipal` is its share of processes."""

    calls: int = Field(default=1024, ge=1)
    """Calls running at once, in the foreground or the background: above the 256 requests a stdio client may
    have waiting for answers (`upstream/stdio.py`'s backpressure), so one client pipelining calls never meets it."""
    greps: int = Field(default=20, ge=1)
    """Grep searches queued or running."""
    grep_workers: int | None = Field(default=None, alias="grepWorkers", ge=1)
    """Grep worker processes held at once; None: all but one (at least one)."""
    stored_bytes: int = Field(default=16 << 30, alias="storedBytes", ge=1)
    """Bytes of outputs stored on disk: past it, a new call is refused until some are removed (16 GiB)."""
    waits: int = Field(default=64, ge=1)
    """`wait_for_tool_output` calls waiting at once."""
    sessions: int = Field(default=64, ge=1)
    """Sessions held at once (one per `Claimcheck-Session` header value or sessionless client name): past it,
    the least recently used one with no call running and no connection attached ends (its outputs with it)."""
    mcp_sessions: int = Field(default=256, alias="mcpSessions", ge=1)
    """MCP sessions open at once over streamable HTTP (of the SDK's 10 000 in all): past it, the least recently
    used one with no request in flight and no GET stream open ends; if every one is in use, the new one is refused
    (`server.upstream.mcp_sessions`). Over legacy SSE, open `GET /sse` streams (each a session) past it are refused."""


class ServerConfig(StrictModel):
    """One downstream server: stdio (`command`) or HTTP (`url`)."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    transport: Literal["streamable-http", "sse"] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(default=3600, gt=0)
    disabled: bool = False
    tools: ToolFilter = Field(default_factory=ToolFilter)
    prefix: str | None = None
    async_: bool | None = Field(default=None, alias="async")
    async_token_threshold: int | None = Field(default=None, alias="asyncTokenThreshold", gt=0)
    async_timeout_secs: float | None = Field(default=None, alias="asyncTimeoutSecs", ge=0)
    scope: Literal["auto", "shared", "owner", "session"] = "auto"
    """Whose world one process of this server is, when claimcheck has several clients (HTTP, SSE, the shared
    claimcheck): "shared" one for all, "owner" one per owner, "session" one per client connection; "auto" is
    "shared" until the server asks for roots, then "session" for the clients that declare roots
    (`server.downstream.scopes`). With one client (stdio) there is one process, that client's."""
    idle_secs: float = Field(default=600, alias="idleSecs", gt=0)
    max_instances: int = Field(default=16, alias="maxInstances", ge=1)
    max_instances_per_principal: int | None = Field(default=None, alias="maxInstancesPerPrincipal", ge=1)
    """How many of `maxInstances` one principal's processes may be (`server.handles.owners.principal_of`);
    None: half of them, rounded up, or all of them where every client is one principal (`instances_per_principal`)."""
    pinned: list[str] = Field(default_factory=list, max_length=1000)
    """Glob patterns on the server's own tool names listed even when `settings.catalog` hides the catalog."""

    @field_validator("args", "env", "headers", mode="before")
    @classmethod
    def _scalars_as_text(cls, value: Any) -> Any:
        """`"args": ["--port", 3000]`, `"env": {"DEBUG": true}`: a number or true/false is taken as its JSON text, as
        a shell would pass it (a program's arguments and environment are text)."""

        def text(item: Any) -> Any:
            return json.dumps(item) if isinstance(item, int | float | bool) else item

        if isinstance(value, list):
            return [text(item) for item in value]
        if isinstance(value, dict):
            return {key: text(item) for key, item in value.items()}
        return value

    @field_validator("command", "url", mode="before")
    @classmethod
    def _without_spaces_around(cls, value: Any) -> Any:
        """`"url": " https://x/mcp "`, `"command": "npx "`: spaces pasted around a command or URL are no part of it."""
        return value.strip() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError('give exactly one of "command" (stdio) or "url" (HTTP)')
        if self.url is None and (self.transport is not None or self.headers):
            raise ValueError('"transport" and "headers" only apply to a "url" server')
        if self.command is None and (self.args or self.env or self.cwd is not None):
            raise ValueError('"args", "env" and "cwd" only apply to a "command" server')
        if self.prefix is not None and not PREFIX_RE.match(self.prefix):
            raise ValueError(f'"prefix" {self.prefix!r} may only contain letters, digits, "_", "-" and "."')
        return self

    @property
    def kind(self) -> Literal["stdio", "streamable-http", "sse"]:
        if self.command is not None:
            return "stdio"
        return self.transport or "streamable-http"

    def instances_per_principal(self, *, one_principal: bool = False) -> int:
        """One principal's share of `maxInstances`; by default half, rounded up, where several principals may come,
        and all of them where every client is one principal (clients without tokens, the shared claimcheck's
        user): a share kept for no one else would only refuse them."""
        default = self.max_instances if one_principal else (self.max_instances + 1) // 2
        return min(self.max_instances, self.max_instances_per_principal or default)
