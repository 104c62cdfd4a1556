"""What claimcheck sends Redis for shared handles: the Lua scripts that write a handle's hash, ask a cancel and
fail a dead replica's handles; a handle's state as hash fields and back; and a subscription kept up through
Redis restarts (`subscribe_forever`, also the status API's cluster feed's)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from server.handles.state import HandleState

__all__ = ["CANCEL", "PUT", "REAP", "fields", "state_of", "subscribe_forever"]

logger = logging.getLogger(__name__)

ERROR_CHARS = 2000
"""The most characters of a handle's error kept in Redis."""

# KEYS: hash, owner set, session zset, running zset. ARGV: status, retain ms, handle, started, done channel, fields…
PUT = """
local cur = redis.call('HGET', KEYS[1], 'status')
if cur and cur ~= 'running' and cur ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 6))
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
if ARGV[1] == 'running' then
  redis.call('SADD', KEYS[2], ARGV[3])
  redis.call('ZADD', KEYS[4], ARGV[4], ARGV[3])
  redis.call('PERSIST', KEYS[1])
  return 1
end
redis.call('SREM', KEYS[2], ARGV[3])
redis.call('ZREM', KEYS[4], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if cur ~= ARGV[1] then redis.call('PUBLISH', ARGV[5], ARGV[3]) end
return 1
"""
# KEYS: hash. ARGV: cancel channel prefix, handle.
CANCEL = """
local st = redis.call('HMGET', KEYS[1], 'status', 'owner')
if st[1] ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'cancel', '1')
redis.call('PUBLISH', ARGV[1] .. st[2], ARGV[2])
return 1
"""
# KEYS: hash, owner set, running zset. ARGV: owner, finished, error, retain ms, done channel, handle.
REAP = """
redis.call('SREM', KEYS[2], ARGV[6])
local st = redis.call('HMGET', KEYS[1], 'status', 'owner')
if st[1] ~= 'running' or st[2] == ARGV[1] then redis.call('ZREM', KEYS[3], ARGV[6]) end
if st[1] ~= 'running' or st[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'status', 'failed', 'finished', ARGV[2], 'error', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PUBLISH', ARGV[5], ARGV[6])
return 1
"""


def fields(state: HandleState) -> list[Any]:
    error = state.error[:ERROR_CHARS] if state.error is not None else None
    values: dict[str, Any] = {
        "handle": state.handle,
        "session": state.session,
        "owner": state.owner,
        "tool": state.tool,
        "server": state.server,
        "status": state.status,
        "started": repr(state.started),
        "finished": "" if state.finished is None else repr(state.finished),
        "bytes": state.bytes,
        "lines": state.lines,
        "tokens": state.tokens,
        "tokens_exact": int(state.tokens_exact),
        "stored": int(state.stored),
        "inline": int(state.inline),
        "error": "" if error is None else error,
        "has_error": int(error is not None),
        "progress": state.progress or "",
        "origin": state.origin,
    }
    return [item for pair in values.items() for item in pair]


def state_of(row: dict[str, str]) -> HandleState | None:
    try:
        return HandleState(
            handle=row["handle"],
            session=row["session"],
            owner=row["owner"],
            tool=row["tool"],
            server=row["server"],
            status=row["status"],  # type: ignore[arg-type]  # written from a Status, or "failed" by the reaper
            started=float(row["started"]),
            finished=float(row["finished"]) if row.get("finished") else None,
            bytes=int(row["bytes"]),
            lines=int(row["lines"]),
            tokens=int(row["tokens"]),
            tokens_exact=row["tokens_exact"] == "1",
            stored=row["stored"] == "1",
            inline=row["inline"] == "1",
            error=row["error"] if row.get("has_error") == "1" or row.get("error") else None,
            progress=row.get("progress") or None,
            origin=row.get("origin", ""),
        )
    except (KeyError, ValueError):
        return None  # a hash written by another version, or half-restored: treated as not known yet


async def subscribe_forever(
    redis: Any,
    channels: Sequence[str],
    received: Callable[[str, Any], None],
    errors: tuple[type[BaseException], ...],
    *,
    on_change: Callable[[], None] = lambda: None,
    delays: tuple[float, float] = (0.1, 2.0),
) -> None:
    """Stay subscribed to `channels`, handing each message to `received(channel, data)`; a lost subscription is made
    again after `delays[0]` s, doubling up to `delays[1]`. `on_change` runs each time it is made and each time it is
    lost (what was published meanwhile was missed)."""
    delay = delays[0]
    while True:
        pubsub = redis.pubsub()
        try:
            await pubsub.subscribe(*channels)
            on_change()
            delay = delays[0]
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is not None:
                    received(message["channel"], message["data"])
        except errors as exc:
            logger.debug("the Redis subscription to %s was lost (reconnecting): %s", ", ".join(channels), exc)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                try:
                    await pubsub.aclose()
                except errors:
                    pass
        on_change()
        await anyio.sleep(delay)
        delay = min(delay * 2, delays[1])
