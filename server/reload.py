"""The config file, watched: a change (or SIGHUP) is read again and applied to the running proxy.

The file's stat (modification time, size, inode) is polled every `POLL_S`; a change is read once the stat is the
same twice, so a file an editor is still writing is not. SIGHUP reads it at once (not on Windows, which has no
SIGHUP). A file that does not load is refused with its error in one line, and the running config is kept. What a
new config changes is `Changes`: only servers whose enabled entry was added, removed or changed are touched (the
proxy applies them: `Proxy.reload`); global `settings` keep their running values until claimcheck restarts, and one
warning names the keys that changed.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc

from server.config import CONFIG_SUFFIXES, Config, ServerConfig, load_config
from server.errors import ConfigError
from server.platform import hangup_signals

__all__ = ["POLL_S", "Changes", "ConfigWatch", "changes"]

logger = logging.getLogger(__name__)

POLL_S = 1.0
"""How often the config file's stat is read."""

_Stat = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class Changes:
    """What a reloaded config changes, by server name (enabled entries only; a server disabled now is removed)."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()
    """The global settings keys whose value changed: they apply at the next start."""

    @property
    def servers(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def summary(self) -> str:
        """One line of what was done: `restarted git; started web; stopped old`."""
        parts = [
            f"{verb} {', '.join(names)}"
            for verb, names in (("restarted", self.changed), ("started", self.added), ("stopped", self.removed))
            if names
        ]
        return "; ".join(parts) or "no server changed"


def _enabled(config: Config) -> dict[str, ServerConfig]:
    return {name: server for name, server in config.mcp_servers.items() if not server.disabled}


def changes(old: Config, new: Config) -> Changes:
    """Compare two validated configs: servers by their whole entry, settings key by key."""
    before, after = _enabled(old), _enabled(new)
    was = old.settings.model_dump(by_alias=True)
    now = new.settings.model_dump(by_alias=True)
    return Changes(
        added=tuple(name for name in after if name not in before),
        removed=tuple(name for name in before if name not in after),
        changed=tuple(name for name in after if name in before and after[name] != before[name]),
        settings=tuple(key for key in now if now[key] != was.get(key)),
    )


def _stat(path: Path) -> _Stat | None:
    """What tells a change of the config: its file's stat, or for a directory of config files (`load_config_dir`)
    the latest change of any of them, their sizes and how many there are."""
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            files = [os.stat(file) for file in path.iterdir() if file.suffix.lower() in CONFIG_SUFFIXES]
            latest = max([info.st_mtime_ns, *(file.st_mtime_ns for file in files)])
            return (latest, sum(file.st_size for file in files), len(files), info.st_ino)
    except OSError:
        return None  # not there at the moment (an editor that replaces the file): wait for it
    return (info.st_mtime_ns, info.st_size, info.st_ino, info.st_dev)


class ConfigWatch:
    """Reads `path` again when it changes or at SIGHUP, and hands a config that loads to `apply`."""

    def __init__(
        self,
        path: Path,
        apply: Callable[[Config], Awaitable[Changes]],
        *,
        poll_s: float = POLL_S,
        load: Callable[[Path], Config] = load_config,
    ) -> None:
        self.path = path
        self._apply = apply
        self._poll_s = poll_s
        self._load = load
        self._seen = _stat(path)  # the file as it was loaded, near enough: the proxy is made right after
        self._pending: _Stat | None = None
        self._lock = anyio.Lock()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Watch until cancelled; `started` comes once SIGHUP is taken (before, it would end the process)."""
        with hangup_signals() as hangups:
            async with anyio.create_task_group() as tg:
                if hangups is not None:
                    tg.start_soon(self._on_hangups, hangups)
                task_status.started()
                while True:
                    await anyio.sleep(self._poll_s)
                    await self.poll()

    async def _on_hangups(self, hangups: AsyncIterator[object]) -> None:
        async for _ in hangups:
            logger.info("SIGHUP: reading %s again", self.path)
            await self.reload()

    async def poll(self) -> None:
        """Reload when the file's stat changed and then stayed the same for one more poll."""
        current = _stat(self.path)
        if current is None or current == self._seen:
            self._pending = None
        elif current == self._pending:
            await self.reload()
        else:
            self._pending = current

    async def reload(self) -> Changes | None:
        """Read the file and apply it; a file that does not load is refused (None) and the running config kept."""
        async with self._lock:
            self._seen, self._pending = _stat(self.path), None
            try:
                config = await anyio.to_thread.run_sync(self._load, self.path)
            except ConfigError as exc:
                logger.error("config reload refused: %s; still serving the previous config", exc)
                return None
            try:
                done = await self._apply(config)
            except Exception:  # boundary: a reload that fails must not end serve
                logger.exception("config reload failed part-way; the servers not yet changed keep running")
                return None
        if done.settings:
            keys = ", ".join(f"settings.{key}" for key in done.settings)
            logger.warning("config reload: %s changed, which applies when claimcheck restarts; kept as running", keys)
        if done.servers:
            logger.warning("config reloaded: %s", done.summary())
        else:
            logger.info("config reloaded: %s", done.summary())
        return done
