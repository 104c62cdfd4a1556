"""The sections of the config that stand alone: a server's tool filter and the `settings` sub-objects
(`extraction`, `api`, `history`, `state`). `server.config` composes them and re-exports each."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ApiSettings", "ExtractionSettings", "HistorySettings", "StateSettings", "StrictModel", "ToolFilter"]


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
