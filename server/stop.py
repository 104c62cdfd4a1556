"""`claimcheck stop`: end this user's claimcheck instances with SIGTERM, wait until each has exited, say which.

Instances are found where `claimcheck ps` and the relays find them: the shared claimcheck processes by their pid
files (`server.upstream.shared_relay.running_shared`), every instance with a status API by its discovery file in
the state directory (`server.status.discovery`). A pid is signalled only when one of those names it, and its start
time is checked again before each look, so a pid that a new process took is never waited on as if it were ours.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from server.errors import EXIT_USAGE
from server.platform import is_zombie, pid_alive, process_start, same_start, terminate
from server.status.discovery import instances
from server.upstream.shared_relay import running_shared

__all__ = ["EXIT_NOT_STOPPED", "Instance", "find_instances", "stop"]

EXIT_NOT_STOPPED = 1
_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class Instance:
    """One running claimcheck of this user."""

    pid: int
    start: str  # when the process started (`platform.process_start`), "" where unknown
    shared: bool  # the shared claimcheck of `serve --shared`
    url: str | None = None  # its status API

    def describe(self) -> str:
        what = "the shared claimcheck" if self.shared else "claimcheck"
        api = f", status API {self.url}" if self.url else ""
        return f"{what} (pid {self.pid}{api})"

    def runs(self) -> bool:
        """Still running: alive, not a zombie, and not another process that took its pid since."""
        if not pid_alive(self.pid) or is_zombie(self.pid):
            return False
        return not self.start or same_start(self.start, process_start(self.pid))


def find_instances(state: Path) -> dict[int, Instance]:
    """This user's running instances by pid: the shared ones, and those with a discovery file under `state`."""
    found = {pid: Instance(pid, process_start(pid), shared=True) for pid in running_shared()}
    for info in instances(state):
        pid = int(info["pid"])
        shared = pid in found
        found[pid] = Instance(pid, str(info.get("processStart") or ""), shared=shared, url=info.get("url"))
    found.pop(os.getpid(), None)
    return found


def stop(pids: Sequence[int], *, every: bool, state: Path, timeout: float) -> int:
    """Stop the instances named by `pids`, else all of them (`every`), else the shared ones; 0 when each has exited
    (or none runs), 1 when one is still running after `timeout`, 2 when a pid names no instance of this user."""
    known = find_instances(state)
    strangers = [pid for pid in pids if pid not in known]
    if strangers:
        names = ", ".join(str(pid) for pid in strangers)
        print(
            f"claimcheck: no claimcheck instance of this user has pid {names} (`claimcheck ps` lists them); "
            "nothing was stopped",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if pids:
        targets = [known[pid] for pid in dict.fromkeys(pids)]
    else:
        targets = [instance for instance in known.values() if every or instance.shared]
    if not targets:
        print(f"nothing to stop: {'no claimcheck instance' if every else 'no shared claimcheck'} of this user runs")
        return 0
    for instance in targets:
        terminate(instance.pid)
    waiting = list(targets)
    deadline = time.monotonic() + timeout
    while waiting:
        waiting = [instance for instance in waiting if instance.runs()]
        if not waiting or time.monotonic() > deadline:
            break
        time.sleep(_POLL_S)  # a process's exit cannot be awaited portably
    for instance in targets:
        if instance not in waiting:
            print(f"stopped {instance.describe()}")
    for instance in waiting:
        print(
            f"claimcheck: {instance.describe()} is still running {timeout:g} s after SIGTERM; "
            f"`kill -9 {instance.pid}` ends it at once",
            file=sys.stderr,
        )
    return EXIT_NOT_STOPPED if waiting else 0
