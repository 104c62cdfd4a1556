"""Grep's scan before and after a change, interleaved: `fs_sandbox` of an older commit against this tree's.

Run from the repo root in the project's venv:  python bench/grep_before_after.py 96a31c7 [--mib 1024] [--repeats 5]

The log of bench/grep_table.py (with its line index) is written once; then, for each repeat, one process
per tree runs `_scan.find_matches` (the worker's search, without the hop) on the grep-table cases, maxMatches
1000, old and new in turn, and an anchor slice's search for every needle (`extraction.find_all`, this tree's,
over either fs_sandbox). The fs_sandbox of the older commit comes from `git archive`. Medians in ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from grep_table import CASES, MIB, make_log  # noqa: E402

_RUN = """
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from fs_sandbox import _scan
from fs_sandbox.paths import open_file
cases = json.loads(sys.argv[3])
with open_file(os.path.dirname(sys.argv[2]), os.path.basename(sys.argv[2])) as opened:
    _scan.find_matches(opened.fd, opened.size, "warm", True, 1, opened.index)
    times = {}
    for label, pattern, case_sensitive in cases:
        start = time.perf_counter()
        found = _scan.find_matches(opened.fd, opened.size, pattern, case_sensitive, 1000, opened.index)
        times[label] = [(time.perf_counter() - start) * 1000, hash(tuple(found.lines))]
    from extraction import find_all  # this tree's extraction on either fs_sandbox: an anchor slice's search
    list(find_all(opened, "NEEDLE_XYZZY"))  # once first: glibc maps fresh 1 MiB buffers until one is freed
    start = time.perf_counter()
    hits = list(find_all(opened, "NEEDLE_XYZZY"))
    times["anchor slice: every needle (find_all)"] = [(time.perf_counter() - start) * 1000, hash(tuple(hits))]
print(json.dumps(times))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("commit")
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cases = [(label, pattern, case_sensitive) for label, pattern, case_sensitive, _, _ in CASES]
    with tempfile.TemporaryDirectory(prefix="bench-grep-ab-") as tmp:
        old = Path(tmp, "old")
        old.mkdir()
        archive = subprocess.run(
            ["git", "archive", args.commit, "fs_sandbox"], cwd=REPO, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
        log = Path(tmp, "big.log")
        make_log(log, args.mib * MIB)
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)
        load = os.getloadavg()
        times: dict[str, dict[str, list[float]]] = {}
        for _ in range(args.repeats):
            for column, tree in (("before", old), ("after", REPO)):
                done = subprocess.run(
                    [sys.executable, "-c", _RUN, str(tree), str(log), json.dumps(cases)],
                    capture_output=True,
                    check=True,
                    text=True,
                )
                for label, (ms, lines) in json.loads(done.stdout).items():
                    times.setdefault(label, {"before": [], "after": []})[column].append(ms)
                    times[label].setdefault("lines", []).append(lines)
        after_load = os.getloadavg()
    print(f"{args.mib} MiB, {args.commit} against {_head()}, load {load[0]:.2f} before, {after_load[0]:.2f} after")
    print("| case | before, ms | after, ms | after / before |\n|---|---:|---:|---:|")
    for label, row in times.items():
        assert len(set(row["lines"])) == 1, label  # both found the same lines
        before, after = statistics.median(row["before"]), statistics.median(row["after"])
        print(f"| {label} | {before:.0f} | {after:.0f} | {after / before:.2f} |")
    return 0


def _head() -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
