"""One client's handles: the record each entrance finds (`server.handles.sessions.Sessions.find`) and the own
tools, settling and mirrors work on. A module of its own so that those need not import the registry."""

from __future__ import annotations

import time
from typing import Any

import anyio
from mcp_types.version import is_version_at_least

from extraction import Usage
from server.handles.calls import Call
from server.handles.owners import principal_of
from server.handles.questions import Inbox
from server.handles.store import SessionStore

__all__ = ["LINKS_SINCE", "Session", "reads_links"]

LINKS_SINCE = "2025-06-18"
"""The protocol version that brought `resource_link` content; older clients get the text alone."""


def reads_links(protocol_version: str | None) -> bool:
    """Whether a client on `protocol_version` reads `resource_link` content (None: not said, so yes)."""
    if protocol_version is None:
        return True
    try:
        return is_version_at_least(protocol_version, LINKS_SINCE)
    except ValueError:  # a version this SDK does not know: it would not have been accepted
        return False


class Session:
    """One client's handles, in call order."""

    def __init__(self, store: SessionStore, owner: str | None = None) -> None:
        self.store = store
        self.owner = owner  # None: the connection owns this session (server.handles.owners)
        self.principal = principal_of(owner)  # whose fair shares it counts in (server.handles.shares)
        self.attached = 0  # connections of the owner open now
        self.touched = time.time()  # the last request, or the last connection closing
        self.id = store.name
        self.calls: dict[str, Call] = {}
        self.usage = Usage()
        self.listing: tuple[str, list[str]] = ("", [])  # list_tool_outputs' order, kept while it is paged
        self.conversations: dict[str, Any] = {}  # extractions answered over client rounds (server.upstream.extracting)
        self.mirrors: dict[str, Call] = {}  # handles of this session that other replicas run (handles.mirrors)
        self.inbox = Inbox()  # the questions its calls wait to have answered, and its standing channel
        self.waiting = 0  # wait_for_tool_output calls waiting now (`settings.limits.waits`, server.handles.shares)
        self.passing = 0  # calls running now that start no `Call` (`settings.limits.calls`, server.handles.shares)
        self._changed = anyio.Event()
        self.closed = False
        self.lists_roots = False
        """Whether the client declared roots, as of its latest request (`server.downstream.relay.declares_roots`)."""
        self.last_request = 0.0
        self.takes_links = True
        self.found_tools: dict[str, None] = {}
        """The tools `find_tools` found for a 2026-07-28 client of this session (a handshake-era client's are its
        connection's), oldest first: a searched `tools/list` holds them (`server.upstream.tool_catalog`)."""
        """Whether replies may carry `resource_link` content: the client's protocol, as of its latest request."""

    def call(self, handle: str) -> Call | None:
        found = self.calls.get(handle)
        return found if found is not None and found.handed_out else None

    def handed_out(self) -> list[Call]:
        return [call for call in self.calls.values() if call.handed_out]

    def running(self) -> list[Call]:
        return [call for call in self.handed_out() if call.status == "running"]

    def changed(self) -> anyio.Event:
        """An event set at the next finish of any call in this session."""
        return self._changed

    def pulse(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
