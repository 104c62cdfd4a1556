"""A proxy serving its status API on a real uvicorn on 127.0.0.1, and an HTTP client that holds its token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from server.proxy import Proxy
from tests.support.handles import Downstream
from tests.support.proxies import running_proxy


@asynccontextmanager
async def api_proxy(
    state: Path, down: Downstream, monkeypatch: pytest.MonkeyPatch, **api: Any
) -> AsyncIterator[tuple[Proxy, httpx2.AsyncClient]]:
    monkeypatch.setenv("CLAIMCHECK_API_ENABLED", "true")
    monkeypatch.setenv("CLAIMCHECK_API_PORT", "0")
    settings = {"stateDir": str(state), "asyncTokenThreshold": 1000, "api": api}
    async with running_proxy({"down": down.server}, settings=settings) as proxy:
        assert proxy.api_url is not None and proxy.api_token
        headers = {"Authorization": f"Bearer {proxy.api_token}"}
        async with httpx2.AsyncClient(base_url=proxy.api_url, timeout=10, headers=headers) as http:
            yield proxy, http
