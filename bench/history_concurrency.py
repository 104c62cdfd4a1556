"""Many claimcheck processes writing one history database at once: errors, lost rows, time.

N worker processes run ROUNDS rounds; in each, all of them open `History` on the same new SQLite file at the
same instant (they spin on the clock), run its writer, record CALLS calls with the updates a real call makes
(created, two progress updates, finished), `--gap-ms` apart, flush and close. Afterwards each round's
database must hold N x CALLS rows and 4 log entries per call; every ERROR or WARNING the workers logged, and
every exception that would have stopped a claimcheck start, is counted (e.g. "database is locked").
Reported: rounds with a loss or a problem, rows and logs missing, and the medians over rounds of the
slowest worker's time to open the database and of the slowest worker's wall time.

Run from the repo root with the project's venv:
  python bench/history_concurrency.py [--workers 8] [--calls 200] [--gap-ms 0] [--rounds 50] [--hold-lock SECS]
                                      [--tree DIR]
(--hold-lock: an outsider holds the database's write lock for SECS from 0.5 s into each round, as a `sqlite3`
shell in a transaction would; the round's database is made beforehand. Use with --gap-ms, so calls are still
being recorded then.)
(--tree imports `server` from another checkout, for an A/B against an older history.py.)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def worker(paths: list[Path], start_at: float, spacing: float, calls: int, gap_s: float) -> list[dict[str, Any]]:
    """One claimcheck-like process: for each round, at its instant, open the round's history, record `calls`
    calls, flush and close. Every worker spins on the clock to the same instant, so the opens collide."""
    import anyio

    from server.handles.calls import Call, Description, Progress
    from server.handles.outcome import Inline, Output
    from server.status.history import History

    problems: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            problems.append(f"{record.levelname} {record.getMessage()[:200]}")

    logging.getLogger().addHandler(Collect(level=logging.WARNING))

    async def one(path: Path) -> dict[str, Any]:
        began = time.perf_counter()
        opened = None
        try:
            history = History(path)
            async with anyio.create_task_group() as tg:
                await tg.start(history.run)
                opened = time.perf_counter() - began
                for number in range(calls):
                    about = Description(f"session-{os.getpid()}/{number}", "demo__echo", "demo", "echo", {"n": number})
                    call = Call(about, observer=history.record)
                    call.note("created")
                    for step in (1, 2):
                        call.report(Progress(step, 2, f"step {step}"))
                    call.settle(Inline(), "ready", Output(bytes=10))
                    if gap_s:
                        await anyio.sleep(gap_s)
                await history.flush()
                tg.cancel_scope.cancel()
        except Exception as exc:  # what a claimcheck start would have died of
            problems.append(f"FAILED {type(exc).__name__}: {exc}")
        return {"open_s": opened, "wall_s": time.perf_counter() - began, "problems": problems[:]}

    reports = []
    for number, path in enumerate(paths):
        at = start_at + number * spacing
        while time.time() < at:
            pass
        problems.clear()
        reports.append(anyio.run(one, path))
    return reports


def hold_locks(paths: list[Path], start_at: float, spacing: float, hold_s: float) -> None:
    """For each round, hold the write lock of its (existing) database for `hold_s` seconds from 0.5 s after its
    instant (the workers are writing by then): what an outsider (a `sqlite3` shell in a transaction) may do."""
    for number, path in enumerate(paths):
        time.sleep(max(0.0, start_at + number * spacing + 0.5 - time.time()))
        with sqlite3.connect(path, isolation_level=None) as db:
            db.execute("BEGIN IMMEDIATE")
            time.sleep(hold_s)
            db.execute("COMMIT")
        db.close()


def run_rounds(workers: int, rounds: int, calls: int, gap_s: float, tree: Path, hold_s: float) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / f"round-{number}" / "history.sqlite3" for number in range(rounds)]
        spacing = 0.3 + calls * gap_s * 1.5 + calls * 0.004  # each round ends before the next one begins
        holder = None
        if hold_s:
            from server.status.history import History

            for path in paths:  # the lock needs a database to lock: made here, with the schema
                History(path).close()
        start_at = time.time() + 3  # every worker has imported everything by then
        if hold_s:
            spacing += hold_s * 1.2
            holder = threading.Thread(target=hold_locks, args=(paths, start_at, spacing, hold_s))
            holder.start()
        code = (
            "import json, sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
            "sys.path.insert(0, sys.argv[2]); import history_concurrency as h; "
            "paths = [Path(p) for p in json.loads(sys.argv[3])]; "
            "print(json.dumps(h.worker(paths, *map(float, sys.argv[4:6]), int(sys.argv[6]), float(sys.argv[7]))))"
        )
        argv = [str(tree), str(REPO / "bench"), json.dumps([str(p) for p in paths])]
        argv += [repr(start_at), repr(spacing), str(calls), repr(gap_s)]
        processes = [
            subprocess.Popen([sys.executable, "-c", code, *argv], stdout=subprocess.PIPE, cwd=tree)
            for _ in range(workers)
        ]
        reports = [json.loads(process.communicate(timeout=3600)[0]) for process in processes]
        if holder is not None:
            holder.join()
        results = []
        for number, path in enumerate(paths):
            rows = logs = 0
            if path.exists():
                with sqlite3.connect(path) as db:
                    rows = db.execute("SELECT COUNT(*) FROM tasks WHERE status = 'ready'").fetchone()[0]
                    logs = db.execute("SELECT COUNT(*) FROM logs").fetchone()[0]
            mine = [report[number] for report in reports]
            problems = [line for report in mine for line in report["problems"]]
            opened = [report["open_s"] for report in mine if report["open_s"] is not None]
            results.append(
                {
                    "missing_rows": workers * calls - rows,
                    "missing_logs": workers * calls * 4 - logs,
                    "problems": len(problems),
                    "first_problem": problems[0] if problems else "",
                    "open_max_s": max(opened, default=float("nan")),
                    "wall_max_s": max(report["wall_s"] for report in mine),
                }
            )
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--gap-ms", type=float, default=0.0)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--hold-lock", type=float, default=0.0, metavar="SECS", help="an outsider holds the lock")
    parser.add_argument("--tree", type=Path, default=REPO)
    parser.add_argument("--json", help="also write the rounds here")
    arguments = parser.parse_args()
    tree = arguments.tree.resolve()
    gap_s = arguments.gap_ms / 1000
    rounds = run_rounds(arguments.workers, arguments.rounds, arguments.calls, gap_s, tree, arguments.hold_lock)
    for result in rounds:
        if result["problems"] or result["missing_rows"] or result["missing_logs"]:
            print(json.dumps(result), flush=True)
    print(
        f"{arguments.workers} workers x {arguments.calls} calls, gap {arguments.gap_ms:g} ms, "
        f"lock held {arguments.hold_lock:g} s, {tree}: "
        f"rounds with loss {sum(r['missing_rows'] > 0 or r['missing_logs'] > 0 for r in rounds)}/{len(rounds)}, "
        f"rounds with problems {sum(r['problems'] > 0 for r in rounds)}, "
        f"rows missing {sum(r['missing_rows'] for r in rounds)}, "
        f"logs missing {sum(r['missing_logs'] for r in rounds)}, "
        f"problems {sum(r['problems'] for r in rounds)}, "
        f"open max median {statistics.median(r['open_max_s'] for r in rounds) * 1000:.0f} ms, "
        f"wall max median {statistics.median(r['wall_max_s'] for r in rounds) * 1000:.0f} ms"
    )
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(rounds, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
