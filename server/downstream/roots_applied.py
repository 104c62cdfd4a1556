"""When a server that asked for roots has had the chance to apply them, before a client's first call goes to it.

A server gets our answer to its `roots/list` and applies it in its own time: server-filesystem
(@modelcontextprotocol/server-filesystem) checks each root on disk (`fs.realpath`, `fs.stat`) before it replaces its
allowed directories, and a call that arrives meanwhile is served with the directories it started with. No message
of the protocol says "roots applied". What a real server does give:

1. a `ping` sent after our answer is read after it (a server reads its messages in order), so its reply says the
   answer arrived, though not that it was applied (server-filesystem answers the ping while its checks run);
2. server-filesystem then writes one line on stderr ("Updated allowed directories from MCP roots: …", or why it kept
   its directories): the signal, for a stdio server, is the first line it ends on stderr after our answer.

A server that writes nothing is given `ROOTS_SETTLE_S` after the ping's reply; one served over HTTP, the ping only.
"""

from __future__ import annotations

import logging
import math
import warnings
from typing import Protocol

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

from server.downstream.stdio import StdioProcess

__all__ = ["ROOTS_SETTLE_S", "ROOTS_WAIT_S", "Downstream", "RootsInPlace", "roots_applied"]

logger = logging.getLogger(__name__)

ROOTS_SETTLE_S = 0.5
"""The most a client's first call waits, after the ping's reply, for a stdio server's line on stderr."""
ROOTS_WAIT_S = 5.0
"""The most a call waits, with one client, for the roots question of its server to be answered and applied."""


class Downstream(Protocol):
    """What is read of a server (`server.downstream.server.Downstream`)."""

    name: str
    connect_timeout: float
    process: StdioProcess | None

    async def connected(self) -> Client | str: ...


class RootsInPlace:
    """With one client (stdio) a server's one process hears that client's roots. It asks as it starts, often before
    the client has come (and is told there are none), and again when told the client's roots changed (as the client
    initializes). A call waits (`wait`) while such a question is expected (`expect`) or being answered, and until the
    last answer had its chance to apply (`roots_applied`)."""

    def __init__(self) -> None:
        self._asking = 0
        self._expected = 0.0  # until when (anyio time) a question is expected: the server was told roots changed
        self._answered_since = False
        self._mark = 0
        self._changed: anyio.Event | None = None
        self._lock = anyio.Lock()

    @property
    def settled(self) -> bool:
        """Whether a call need not wait (the fast paths take only those)."""
        waiting = self._asking or self._answered_since
        return not waiting and self._expected <= anyio.current_time()

    def expect(self, until: float) -> None:
        """The server was told the roots changed and asks for them then: a question is expected until `until`."""
        self._expected = until
        self._pulse()

    def asked(self) -> None:
        self._asking += 1
        self._expected = 0.0
        self._pulse()

    def answered(self, mark: int) -> None:
        """A roots question was answered; `mark`: the server's count of stderr lines then."""
        self._asking -= 1
        self._answered_since, self._mark = True, mark
        self._pulse()

    def _pulse(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def wait(self, downstream: Downstream) -> None:
        with anyio.move_on_after(ROOTS_WAIT_S):
            while self._asking or (left := self._expected - anyio.current_time()) > 0:
                if self._changed is None:
                    self._changed = anyio.Event()
                with anyio.move_on_after(math.inf if self._asking else left):
                    await self._changed.wait()
            async with self._lock:  # one settles; the calls behind it find it done
                if self._answered_since:
                    await roots_applied(downstream, self._mark)
                    self._answered_since = False


async def roots_applied(downstream: Downstream, mark: int) -> None:
    """Until `downstream` has had its chance to apply the roots just answered: a ping's round trip, then (a stdio
    server) its first line on stderr past `mark` (its count of lines when the answer was made), or `ROOTS_SETTLE_S`.
    Returns early, never raises, when the server is gone: the call then meets whatever is there."""
    client = await downstream.connected()
    if isinstance(client, str):  # gone: why is the call's to report
        logger.debug("server %r: no ping after its roots (%s)", downstream.name, client)
        return
    try:
        with anyio.move_on_after(downstream.connect_timeout), warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)  # ping is deprecated at 2026-07-28 only
            await client.send_ping()
    except Exception as exc:  # boundary: a server that went away is reported by the call itself
        logger.debug("server %r: no ping after its roots (%s)", downstream.name, exc)
        return
    process = downstream.process
    if process is not None:
        with anyio.move_on_after(ROOTS_SETTLE_S):
            await process.stderr.line_after(mark)
