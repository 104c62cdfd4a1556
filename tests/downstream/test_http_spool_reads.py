"""A long HTTP body is read in large pieces, not httpcore2's 64 KiB: each read costs the same Python work on its way
up (h11, httpcore2, httpx2, the spool), so the piece size sets the CPU a gigabyte costs (docs/benchmarks.md, "through
a chain")."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx2
import pytest

from server.downstream.http_spool import SpoolingTransport
from server.downstream.spool import SpoolPolicy
from server.downstream.spooled import META_KEY, SpooledOutputs
from tests.support.processes import announced_url, program

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

MIB = 1 << 20


class _Recording(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, sizes: list[int]) -> None:
        self._inner = inner
        self._sizes = sizes

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._inner:
            self._sizes.append(len(piece))
            yield piece

    async def aclose(self) -> None:
        await self._inner.aclose()


class _RecordingTransport(httpx2.AsyncBaseTransport):
    """httpx2's own transport, noting the size of each piece of a response body as the connection reads it."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self.sizes: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        response.stream = _Recording(response.stream, self.sizes)  # type: ignore[arg-type]  # async here
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_a_long_json_body_is_read_in_pieces_larger_than_64_kib_and_spooled_whole(tmp_path: Path) -> None:
    policy = SpoolPolicy(directory=tmp_path, max_output_bytes=1 << 30, outputs=SpooledOutputs())
    recording = _RecordingTransport()
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "fast", "arguments": {"mib": 16}}}
    with anyio.fail_after(60):
        async with (
            announced_url(program("raw_downstream", "--http", "0"), r"(http://127\.0\.0\.1:\d+/mcp)") as url,
            httpx2.AsyncClient(transport=SpoolingTransport(policy, recording)) as client,
        ):
            response = await client.post(url, json=request, headers={"accept": "application/json, text/event-stream"})
    token = json.loads(response.content)["result"]["_meta"][META_KEY]  # the spool's stand-in for the result
    stored = policy.outputs.take(token)
    assert stored is not None
    stored.release()
    assert stored.bytes == 16 * MIB  # the text whole, as the server wrote it
    assert sum(recording.sizes) > 16 * MIB
    assert max(recording.sizes) > 64 * 1024, f"read {len(recording.sizes)} pieces of at most {max(recording.sizes)}"
