"""A real `claimcheck serve` spoken to by hand over stdio: the test writes any bytes it likes, reads the answers
it chooses to (or none), and knows the process (its pid, for VmHWM/VmRSS; whether it still runs)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from tests.support.processes import PYTHON, demo_server_entry, write_config

MIB = 1 << 20


class Wire:
    """JSON-RPC lines to and from one claimcheck process."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self._buffer = b""
        self._next = 0
        self._answers: dict[int | str | None, dict[str, Any]] = {}  # read while waiting for another
        self.seen: list[dict[str, Any]] = []
        """Every message read so far."""

    async def write(self, line: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(line + b"\n")

    async def send(self, method: str, params: dict[str, Any] | None = None, *, notify: bool = False) -> int:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self._next += 1
            message["id"] = self._next
        await self.write(json.dumps(message).encode())
        return self._next

    async def read_line(self) -> bytes:
        """The next line claimcheck writes, as it wrote it (without its newline); read in linear time."""
        assert self.process.stdout is not None
        parts = [self._buffer]
        while b"\n" not in parts[-1]:
            parts.append(await self.process.stdout.receive())
        line, self._buffer = b"".join(parts).split(b"\n", 1)
        return line

    async def peek(self, size: int) -> bytes:
        """What claimcheck has written and was not read yet, once it is `size` bytes or more (perhaps a part of a
        line): it stays to be read."""
        assert self.process.stdout is not None
        parts, have = [self._buffer], len(self._buffer)
        while have < size:
            parts.append(await self.process.stdout.receive())
            have += len(parts[-1])
        self._buffer = b"".join(parts)
        return self._buffer

    async def read(self) -> dict[str, Any]:
        """The next message claimcheck writes."""
        message: dict[str, Any] = json.loads(await self.read_line())
        self.seen.append(message)
        return message

    async def answer(self, ident: int | str | None) -> dict[str, Any]:
        """The answer to request `ident` (None: an error about no request it could name); notifications skipped,
        answers to other requests kept for their turn."""
        while ident not in self._answers:
            message = await self.read()
            if "method" not in message:
                self._answers[message.get("id")] = message
        return self._answers.pop(ident)

    async def handshake(self, client: str) -> None:
        """initialize, initialized, and the tools listed (claimcheck answers once its servers are up)."""
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": client, "version": "1"}}
        await self.answer(await self.send("initialize", init))
        await self.send("notifications/initialized", notify=True)
        await self.answer(await self.send("tools/list"))

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.answer(await self.send("tools/call", {"name": tool, "arguments": arguments or {}}))

    def memory(self, field: str) -> int:
        """A VmHWM/VmRSS figure of the claimcheck process, in bytes."""
        status = Path(f"/proc/{self.process.pid}/status").read_text(encoding="utf-8")
        match = re.search(rf"^{field}:\s+(\d+) kB$", status, re.M)
        assert match is not None
        return int(match.group(1)) * 1024


@asynccontextmanager
async def serving(
    tmp_path: Path, fast: str, settings: dict[str, Any] | None = None, servers: dict[str, Any] | None = None
) -> AsyncIterator[Wire]:
    """A claimcheck (fast path `fast`: on/off) in front of the demo server (or `servers`), its handshake done and
    the tools listed; outputs under `tmp_path / "out"`."""
    base = {"root": str(tmp_path / "out"), **(settings or {})}
    servers = servers if servers is not None else {"demo": demo_server_entry()}
    config = write_config(tmp_path, {"mcpServers": servers, "settings": base})
    command = [PYTHON, "-m", "server", "serve", "--no-api", "--config", str(config)]
    process = await anyio.open_process(command, stderr=None, env={**os.environ, "CLAIMCHECK_FAST_PATH": fast})
    async with process:
        wire = Wire(process)
        await wire.handshake("wire-test")
        try:
            yield wire
        finally:
            if process.returncode is None:
                process.kill()
