"""Handles shared by several replicas through Redis; `redis` is imported only when this is used.

Keys (under `state.keyPrefix`, "cc:" by default):
- `h:<handle>` hash: status, owner replica, tool, times, sizes, error, `cancel` flag. Written before the
  handle is returned; a final status is set by compare-and-set (Lua) and never undone. Kept while running,
  then for `retainSecs`.
- `s:<session>` sorted set of the session's handles by start time (`list_tool_outputs`).
- `running` sorted set of every replica's running handles by start time (the status API's live part),
- `o:<replica>` set of the replica's running handles, `replica:<replica>` its liveness key (`SET … PX`,
  renewed three times a lease), `reaper` the lease of the one replica that fails a dead replica's handles.
- channels `done` (a handle finished: waiters read again) and `cancel:<replica>` (cancel this handle).
Pub/sub is at-most-once, so waiters also poll (`pollSecs`); an owner writes again on its next heartbeat
what did not reach Redis, and everything Redis no longer has when it finds its own liveness key gone (a
restarted Redis without persistence).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.abc

from server.config import StateSettings
from server.distribution import install_command
from server.errors import StartupError
from server.handles.redis_wire import CANCEL, PUT, REAP, fields, state_of, subscribe_forever
from server.handles.state import HandleState, StateUnavailable

if TYPE_CHECKING:
    from server.handles.session import Session

__all__ = ["RedisBackend"]

logger = logging.getLogger(__name__)


def _shown(url: str) -> str:
    """`url` as a message may show it: a password in it replaced by `***`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


class RedisBackend:
    """Handles in Redis: any replica answers for any handle; the owner alone runs the call."""

    replicated = True

    def __init__(self, url: str, settings: StateSettings, live: AbstractSet[Session]) -> None:
        """`live`: the live sessions (`Sessions.live`), whose calls a cancel from another replica reaches."""
        try:
            import redis.asyncio as aioredis  # the optional extra, only when a state URL is set
            from redis.exceptions import RedisError
        except ImportError:
            raise StartupError(
                "a state URL (--state-url or settings.state.url) needs the redis extra: " + install_command("redis")
            ) from None

        self.replica = os.urandom(8).hex()
        self.poll_secs = settings.poll_secs
        self.url = url
        self._errors: tuple[type[BaseException], ...] = (RedisError, OSError)
        self._lease_ms = max(1, int(settings.lease_secs * 1000))
        self._retain_ms = max(1, int(settings.retain_secs * 1000))
        self._p = settings.key_prefix
        timeout = max(1.0, settings.lease_secs / 3)
        self._redis: Any = aioredis.Redis.from_url(
            url, decode_responses=True, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        self._put_script = self._redis.register_script(PUT)
        self._cancel_script = self._redis.register_script(CANCEL)
        self._reap_script = self._redis.register_script(REAP)
        self._live = live
        self._mine: dict[str, HandleState] = {}  # this replica's handles, written again when Redis lost them
        self._unsent: set[str] = set()
        self._changed = anyio.Event()
        self.commands = 0  # sent to Redis (bench/replicas.py counts them per call)
        self._started_at = 0.0  # when Redis last started (its uptime, read when a handle was not found)

    # --- the StateBackend protocol ---

    async def put(self, state: HandleState) -> None:
        self._mine[state.handle] = state
        try:
            await self._write(state)
        except self._errors as exc:
            self._unsent.add(state.handle)
            logger.warning("could not record handle %s in Redis (retried on the heartbeat): %s", state.handle, exc)
        else:
            self._unsent.discard(state.handle)

    async def get(self, handles: Sequence[str]) -> list[HandleState | None]:
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for handle in handles:
                    pipe.hgetall(self._p + "h:" + handle)
                rows = await pipe.execute()
            self.commands += len(handles)
        except self._errors as exc:
            raise StateUnavailable(f"the shared state cannot be reached: {exc}") from None
        if not all(rows):
            await self._read_uptime()
        return [state_of(row) if row else None for row in rows]

    async def of_session(self, session: str) -> list[HandleState]:
        try:
            handles = await self._redis.zrange(self._p + "s:" + session, 0, -1)
            self.commands += 1
        except self._errors as exc:
            raise StateUnavailable(f"the shared state cannot be reached: {exc}") from None
        return [state for state in await self.get(handles) if state is not None]

    async def running(self, limit: int) -> tuple[list[HandleState], int]:
        """The newest `limit` running handles of every replica, in 2 + `limit` commands, and how many run."""
        key = self._p + "running"
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.zcard(key)
                pipe.zrevrange(key, 0, max(0, limit - 1))
                total, handles = await pipe.execute()
            self.commands += 2
        except self._errors as exc:
            raise StateUnavailable(f"the shared state cannot be reached: {exc}") from None
        states = await self.get(handles[:limit]) if limit > 0 else []
        return [s for s in states if s is not None and s.status == "running"], int(total)

    async def request_cancel(self, handle: str) -> bool:
        try:
            asked = await self._cancel_script(keys=[self._p + "h:" + handle], args=[self._p + "cancel:", handle])
            self.commands += 1
        except self._errors as exc:
            raise StateUnavailable(f"the shared state cannot be reached to cancel it: {exc}") from None
        return bool(asked)

    def changed(self) -> anyio.Event:
        return self._changed

    def unsent(self, handle: str) -> bool:
        return handle in self._unsent

    def unknown_note(self) -> str:
        """After a restart of a Redis without persistence, each replica writes its handles back at its next
        heartbeat (every third of a lease): until then a live handle reads as unknown."""
        ago = time.time() - self._started_at
        if ago > 2 * self._lease_ms / 1000:  # every replica has written back by then, one missed heartbeat allowed
            return ""
        return (
            f" The shared state (Redis) restarted {ago:.0f} s ago and the replicas are writing their handles back"
            f" into it (each within {self._lease_ms / 3000:.0f} s): if this handle was handed out before, try"
            " again in a few seconds."
        )

    async def _read_uptime(self) -> None:
        """Note when Redis started (one command, only when a handle was not found)."""
        try:
            info = await self._redis.info("server")
            self.commands += 1
        except self._errors:
            return
        uptime = info.get("uptime_in_seconds")
        if isinstance(uptime, int | float):
            self._started_at = time.time() - uptime

    def shared(self) -> tuple[Any, str, tuple[type[BaseException], ...]]:
        """The Redis client, the key prefix and the errors it raises: the status API's cluster feed uses them."""
        return self._redis, self._p, self._errors

    # --- running: liveness, listening, reaping ---

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Announce this replica, then keep it alive, listen and reap until cancelled."""
        try:
            await self._renew()
        except self._errors as exc:
            why = " ".join(str(exc).split()).rstrip(".") or type(exc).__name__
            where = f"{_shown(self.url)} (--state-url or settings.state.url)"
            raise StartupError(f"cannot reach Redis at {where}: {why}; start it, or correct the URL") from None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._listen)
            task_status.started()
            while True:
                await anyio.sleep(self._lease_ms / 3000)
                try:
                    await self._heartbeat()
                except self._errors as exc:
                    logger.warning("heartbeat to Redis failed (retried): %s", exc)

    async def aclose(self) -> None:
        """Leave the cluster: this replica's liveness key goes at once."""
        with anyio.move_on_after(2):
            try:
                await self._redis.delete(self._p + "replica:" + self.replica)
            except self._errors:
                pass
        await self._redis.aclose()

    async def _write(self, state: HandleState) -> None:
        keys = [self._p + "h:" + state.handle, self._p + "o:" + state.owner, self._p + "s:" + state.session]
        keys.append(self._p + "running")
        head = [state.status, self._retain_ms, state.handle, state.started, self._p + "done"]
        await self._put_script(keys=keys, args=[*head, *fields(state)])
        self.commands += 1

    async def _renew(self) -> bool:
        """Renew the liveness key; False when it was gone (a restarted Redis, or a lease let run out)."""
        key = self._p + "replica:" + self.replica
        previous = await self._redis.set(key, str(os.getpid()), px=self._lease_ms, get=True)
        self.commands += 1
        return previous is not None

    async def _heartbeat(self) -> None:
        if await self._renew():
            await self._resend(sorted(self._unsent))
        else:
            await self._restore()
        await self._check_cancels()
        await self._reap()

    async def _resend(self, handles: list[str]) -> None:
        for handle in handles:
            if handle in self._mine:
                await self._write(self._mine[handle])
            self._unsent.discard(handle)

    async def _restore(self) -> None:
        """Redis may have lost what this replica wrote: write again what it no longer has (and what did not
        reach it); forget finished handles older than retainSecs. Only when the liveness key was gone, so a
        heartbeat costs a few commands however many handles there are."""
        horizon = time.time() - self._retain_ms / 1000
        for handle, state in list(self._mine.items()):
            if state.done and (state.finished or state.started) < horizon:
                del self._mine[handle]
        handles = list(self._mine)
        if not handles:
            return
        async with self._redis.pipeline(transaction=False) as pipe:
            for handle in handles:
                pipe.exists(self._p + "h:" + handle)
            present = await pipe.execute()
        self.commands += len(handles)
        await self._resend([h for h, there in zip(handles, present, strict=True) if not there or h in self._unsent])

    async def _check_cancels(self) -> None:
        """Cancel requests whose message was lost: the flag in the hash is what counts."""
        running = [h for h, state in self._mine.items() if not state.done]
        if not running:
            return
        async with self._redis.pipeline(transaction=False) as pipe:
            for handle in running:
                pipe.hget(self._p + "h:" + handle, "cancel")
            flags = await pipe.execute()
        self.commands += len(running)
        for handle, flag in zip(running, flags, strict=True):
            if flag == "1":
                self._cancel_local(handle)

    async def _reap(self) -> None:
        """When this replica holds the reaper lease: fail the running handles of replicas that stopped renewing."""
        key = self._p + "reaper"
        holder = await self._redis.set(key, self.replica, nx=True, px=self._lease_ms, get=True)
        self.commands += 1
        if holder not in (None, self.replica):
            return
        await self._redis.pexpire(key, self._lease_ms)
        prefix = self._p + "o:"
        async for owners in self._redis.scan_iter(match=prefix + "*", count=100):
            owner = owners[len(prefix) :]
            if owner == self.replica or await self._redis.exists(self._p + "replica:" + owner):
                continue
            error = f"the replica running this call ({owner}) stopped: its lease ran out before the call finished"
            for handle in await self._redis.smembers(owners):
                keys = [self._p + "h:" + handle, owners, self._p + "running"]
                args = [owner, time.time(), error, self._retain_ms, self._p + "done", handle]
                if await self._reap_script(keys=keys, args=args):
                    logger.warning("handle %s failed: %s", handle, error)

    async def _listen(self) -> None:
        """One subscription per replica: finished handles wake this replica's waiters; cancels reach their call."""
        cancels = self._p + "cancel:" + self.replica

        def received(channel: str, data: Any) -> None:
            if channel == cancels:
                self._cancel_local(data)
            else:
                self._pulse()

        # what was published while not subscribed is read again by the waiters, so they are woken at each change
        await subscribe_forever(self._redis, [self._p + "done", cancels], received, self._errors, on_change=self._pulse)

    def _cancel_local(self, handle: str) -> None:
        for session in list(self._live):
            call = session.calls.get(handle)
            if call is not None and call.status == "running":
                call.note("cancel-requested", "by another replica")
                call.cancel("cancel_tool_output was called for it on another replica")

    def _pulse(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
