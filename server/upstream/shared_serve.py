"""The user's shared claimcheck: one proxy serving every relay of one config over a Unix socket.

Started by a relay (`server.upstream.shared_relay`) as `serve --shared-socket <dir>/<key>.sock`. Each connection
is served as a stdio client is, in a session of the user's (`server.handles.owners.USER`), so any relay may use
the handles another made. The socket is bound under a temporary name, made 0600, and renamed into place once
listening, so a relay either reaches a listening claimcheck or none. `<key>.pid` (the pid, the process's start
time and the boot id, so a pid reused by another process is told apart) is written once listening and
removed only at the idle exit: a pid file without its process tells the next relay that this one was stopped
or killed, and handles made before are gone.
After `settings.sharedIdleSecs` with no relay attached and no call running it stops listening (the socket goes
first, under the relays' lock, so no relay is lost in between), serves what was already queued, and exits.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.abc
from mcp.server import Server

from server.platform import cancel_on_stop_signal, unix_socket
from server.proxy import Proxy, Starter
from server.upstream.shared_relay import pid_line
from server.upstream.stdio import fd_streams
from server.upstream.surface import build_server

__all__ = ["serve_shared"]

logger = logging.getLogger(__name__)

_IDLE_CHECK_SECS = 1.0


async def serve_shared(start: Starter, socket_path: Path, *, restarted: bool = False) -> None:
    """Serve relays on `socket_path` until idle for `settings.sharedIdleSecs`, or SIGINT/SIGTERM; `start` makes and
    runs the proxy (`Proxy.start` with its config and options) given what the shared claimcheck adds."""
    links = _Links()
    taken_over = dt.datetime.now().astimezone().strftime("%H:%M:%S") if restarted else None
    idle = False  # only the idle exit is a clean end; a signal's is a stop before it, as a kill's is
    with _listening(socket_path) as listener:
        starting = start(shared=True, many_clients=True, relay_count=links.count, restarted_at=taken_over)
        async with starting as proxy, anyio.create_task_group() as tg:
            settings = proxy.config.settings
            server = build_server(proxy)
            tg.start_soon(cancel_on_stop_signal, tg.cancel_scope)
            print(f"claimcheck: shared, serving relays at {socket_path}", file=sys.stderr, flush=True)
            async with anyio.create_task_group() as serving:
                serving.start_soon(_accept, listener, server, proxy, links, serving)
                await _until_idle(proxy, links, settings.shared_idle_secs)
                idle = True
                _withdraw(socket_path)  # no relay reaches this one any more; queued ones are still served
                serving.cancel_scope.cancel()
            async with anyio.create_task_group() as draining:
                _drain_queue(listener, server, proxy, links, draining)
            tg.cancel_scope.cancel()
        if idle:  # a clean end: the next relay has nothing to warn about
            _pid_file(socket_path).unlink(missing_ok=True)


class _Links:
    """The relays attached now."""

    def __init__(self) -> None:
        self.open = 0
        self.last_closed = time.monotonic()

    def count(self) -> int:
        return self.open


@contextlib.contextmanager
def _listening(path: Path) -> Iterator[socket.socket]:
    """A listening 0600 socket at `path` (bound privately, then renamed into place), and `<key>.pid` beside it."""
    temporary = path.with_name(f".bind-{os.getpid()}")  # shorter than `<key>.sock`, so it fits where that does
    temporary.unlink(missing_ok=True)
    sock = unix_socket()
    try:
        sock.bind(str(temporary))
        os.chmod(temporary, 0o600)
        sock.listen(256)
        sock.setblocking(False)
        os.rename(temporary, path)
        _pid_file(path).write_text(pid_line(os.getpid()), encoding="utf-8")
        yield sock
    finally:
        sock.close()
        temporary.unlink(missing_ok=True)
        _withdraw(path)  # the pid file stays unless the end was the idle one: handles were lost (serve_shared)


def _pid_file(path: Path) -> Path:
    return path.with_suffix(".pid")


def _withdraw(path: Path) -> None:
    """Remove the socket if it is still ours (a later claimcheck may have put its own there)."""
    with contextlib.suppress(OSError):
        pid = int(_pid_file(path).read_text(encoding="utf-8").split()[0])
        if pid == os.getpid():
            path.unlink(missing_ok=True)


async def _accept(
    listener: socket.socket, server: Server[Proxy], proxy: Proxy, links: _Links, tg: anyio.abc.TaskGroup
) -> None:
    while True:
        await anyio.wait_readable(listener)
        _drain_queue(listener, server, proxy, links, tg)


def _drain_queue(
    listener: socket.socket, server: Server[Proxy], proxy: Proxy, links: _Links, tg: anyio.abc.TaskGroup
) -> None:
    """Start serving every connection waiting in the listen queue."""
    while True:
        try:
            conn, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            logger.warning("could not accept a relay: %s", exc)
            return
        conn.setblocking(False)
        links.open += 1
        tg.start_soon(_serve_link, conn, server, proxy, links)


async def _serve_link(conn: socket.socket, server: Server[Proxy], proxy: Proxy, links: _Links) -> None:
    """One relay, served as one stdio client is; its calls outlive it (they are the user's)."""
    link = uuid.uuid4().hex  # the requests of this link carry it (`LineLink`): it is their session
    try:
        limit = proxy.config.settings.max_request_bytes
        outputs = proxy.pool.spooled
        async with fd_streams(conn.fileno(), conn.fileno(), limit, outputs=outputs, link=link) as (read, write):
            await server.run(read, write, server.create_initialization_options())
    except Exception:  # boundary: one relay's broken connection must not end the others
        logger.warning("a relay's connection failed", exc_info=True)
    finally:
        conn.close()
        links.open -= 1
        links.last_closed = time.monotonic()


async def _until_idle(proxy: Proxy, links: _Links, idle_secs: float) -> None:
    """Return once no relay was attached and no call ran for `idle_secs`."""
    idle_since = time.monotonic()
    while True:
        await anyio.sleep(min(_IDLE_CHECK_SECS, max(idle_secs / 4, 0.05)))
        running = any(session.running() for session in proxy.sessions.live)
        if links.open or running:
            idle_since = time.monotonic()
        elif time.monotonic() - max(idle_since, links.last_closed) >= idle_secs:
            return
