"""A Starlette app served by uvicorn on 127.0.0.1 for one test: the HTTP peer an extraction backend talks to."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import uvicorn
from starlette.applications import Starlette


@asynccontextmanager
async def served(app: Starlette) -> AsyncIterator[str]:
    """The app's base URL (`http://127.0.0.1:PORT`) while the block runs; stopped after it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: server.serve(sockets=[sock]))  # the socket already listens: no wait for startup
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}"
        finally:
            server.should_exit = True
            server.force_exit = True
