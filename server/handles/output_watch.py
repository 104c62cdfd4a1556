"""Who hears of a session's outputs as resources (`server.handles.resources`), and telling them.

Handshake-era clients that subscribed to an output's URI get `notifications/resources/updated` when its call
finishes; the clients of the session get `notifications/resources/list_changed` when one of its outputs becomes
ready or is forgotten. 2026-era clients hear through `subscriptions/listen` (`publish`, the proxy's bus): a
stream follows only URIs of its own session's outputs (the surface drops the others). `Sessions` reports each
change from plain code (`changed`); one task sends them, so a slow client never holds up a call.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ResourcesListChanged, ResourceUpdated, ServerEvent

from server.handles.calls import Call
from server.handles.resources import uri_of
from server.handles.session import Session

__all__ = ["OutputWatch"]

logger = logging.getLogger(__name__)

_QUEUED = 4096
"""Changes waiting to be told at most; past it a change is dropped (a client re-reads the list on the next)."""


@dataclass(eq=False)
class _Client:
    session_id: str
    client: ServerSession
    uris: set[str] = field(default_factory=set)


class OutputWatch:
    """Handshake-era clients by connection, the session each belongs to, and the output URIs each follows."""

    def __init__(self) -> None:
        self._clients: dict[object, _Client] = {}
        self._send, self._receive = anyio.create_memory_object_stream[tuple[str, str, bool]](_QUEUED)

    def attach(self, key: object, session_id: str, client: ServerSession) -> None:
        """The client on connection `key` belongs to session `session_id` (its list changes reach it)."""
        known = self._clients.get(key)
        if known is None or known.session_id != session_id or known.client is not client:
            self._clients[key] = _Client(session_id, client, known.uris if known is not None else set())

    def forget(self, key: object) -> None:
        self._clients.pop(key, None)

    def subscribe(self, key: object, session_id: str, client: ServerSession, uri: str) -> None:
        self.attach(key, session_id, client)
        self._clients[key].uris.add(uri)

    def unsubscribe(self, key: object, uri: str) -> None:
        known = self._clients.get(key)
        if known is not None:
            known.uris.discard(uri)

    def changed(self, session: Session, call: Call, listed: bool) -> None:
        """`call`'s output changed: it finished (`updated` for its followers), and, with `listed`, the session's
        list of outputs changed too."""
        try:
            self._send.send_nowait((session.id, uri_of(call.handle), listed))
        except anyio.WouldBlock:
            logger.warning("too many output changes waiting to be told; dropping one")

    async def run(self, publish: Callable[[ServerEvent], Awaitable[None]]) -> None:
        """Tell every change, in order, until cancelled."""
        async with self._receive:
            async for session_id, uri, listed in self._receive:
                for key, known in list(self._clients.items()):
                    if known.session_id != session_id:
                        continue
                    try:
                        if uri in known.uris:
                            await known.client.send_resource_updated(uri)
                        if listed:
                            await known.client.send_resource_list_changed()
                    except Exception:  # boundary: a client that went away must not stop the others hearing
                        logger.debug("dropping a client that can no longer be told of outputs", exc_info=True)
                        self.forget(key)
                await publish(ResourceUpdated(uri=uri))
                if listed:
                    await publish(ResourcesListChanged())
