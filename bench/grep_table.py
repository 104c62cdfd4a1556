"""The grep table: claimcheck's Grep, Read and slice on a stored output, with `grep` and `rg` beside, and
the time rule at 1 GiB. Run through `python bench/grep_speed.py --table 100,1024 [--repeats 3]`.

For each size a deterministic log is written with its line index beside it (as claimcheck's writers keep
one), page cache warm. Every repeat runs every tool on every case in turn (interleaved), and the median is
reported. claimcheck's figure is `Sandbox.grep` (worker hop, line numbers, the lines' text) with
maxMatches 1000; `grep -n -m 1000` and `rg -n -m 1000` (the `ripgrep` PyPI package's binary) print the same
lines to a pipe. Read is 50 lines at the start, middle and end, slice 1000 characters there and an anchor
slice of the last needle, each with the index and without it (the file scanned from its start, as before).
The time rule: `claimcheck serve` in front of tests/support/servers/raw_downstream.py asked for a 1 GiB output, with
asyncTimeoutSecs 5: when the handle answer arrives.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from extraction import find_all  # noqa: E402
from fs_sandbox import INDEX_SUFFIX, IndexBuilder, Sandbox, open_file  # noqa: E402
from fs_sandbox import sandbox as sandbox_module  # noqa: E402
from server.handles.retrieval import SliceRequest, slice_text  # noqa: E402

MIB = 1 << 20
NEEDLE = "NEEDLE_XYZZY"
RG = shutil.which("rg", path=str(Path(sys.executable).parent)) or shutil.which("rg")
# (label, claimcheck pattern, case-sensitive, grep -E pattern, rg pattern)
CASES = [
    ("literal, rare", NEEDLE, True, NEEDLE, NEEDLE),
    ("literal, rare, case-insensitive", NEEDLE.lower(), False, NEEDLE.lower(), NEEDLE.lower()),
    ("regex, rare", r"NEEDLE_\w+Y", True, r"NEEDLE_\w+Y", r"NEEDLE_\w+Y"),
    ("regex, rare, case-insensitive", r"needle_\w+y", False, r"needle_\w+y", r"needle_\w+y"),
    (r"regex `gamma\d+` (every line; first 1000)", r"gamma\d+", True, "gamma[0-9]+", r"gamma\d+"),
    (
        r"selective `gamma\d{2}777 delta` (first 1000)",
        r"gamma\d{2}777 delta",
        True,
        "gamma[0-9]{2}777 delta",
        r"gamma\d{2}777 delta",
    ),
]


def make_log(path: Path, size: int) -> int:
    """A log of `size` bytes, a needle every 500 000 lines, with its line index; the number of lines."""
    index = IndexBuilder()
    written = number = 0
    with open(path, "wb") as out:
        while written < size:
            lines = []
            for i in range(number, number + 20_000):
                needle = f" {NEEDLE}" if i % 500_000 == 250_000 else ""
                lines.append(
                    f"2026-11-22T10:{i // 60 % 60:02d}:{i % 60:02d} host{i % 7} app[{i % 311}]: INFO alpha beta "
                    f"gamma{i % 100_000} delta op={i}{needle}\n"
                )
            number += 20_000
            data = "".join(lines).encode()
            index.feed(data)
            out.write(data)
            written += len(data)
    path.with_name(path.name + INDEX_SUFFIX).write_bytes(index.finish())
    return index.lines


def timed(run: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


async def grep_cases(folder: Path, name: str, repeats: int) -> dict[str, dict[str, float]]:
    path = str(folder / name)
    sandbox = Sandbox(folder, timeout=60)
    times: dict[str, dict[str, list[float]]] = {case[0]: {"claimcheck": [], "grep": [], "rg": []} for case in CASES}
    try:
        await sandbox.grep(name, "warm the workers", case_sensitive=True)
        for _ in range(repeats):
            for label, pattern, case_sensitive, ere, rgx in CASES:
                start = time.perf_counter()
                found = await sandbox.grep(
                    name, pattern, before=0, after=0, case_sensitive=case_sensitive, max_matches=1000
                )
                times[label]["claimcheck"].append(time.perf_counter() - start)
                flag = [] if case_sensitive else ["-i"]
                for tool, command in (
                    ("grep", ["grep", "-n", "-E", "-m", "1000", *flag, ere, path]),
                    ("rg", [RG or "rg", "--no-config", "-n", "-m", "1000", *flag, rgx, path]),
                ):
                    took, done = timed(
                        lambda command=command: subprocess.run(command, capture_output=True, check=False)
                    )
                    times[label][tool].append(took)
                    lines = len(done.stdout.splitlines())
                    assert lines == found.matches, (label, tool, lines, found.matches)
    finally:
        await sandbox.aclose()
    return {
        label: {tool: statistics.median(values) * 1000 for tool, values in row.items()} for label, row in times.items()
    }


async def read_cases(folder: Path, name: str, lines: int, repeats: int) -> dict[str, dict[str, float]]:
    sandbox = Sandbox(folder)
    places = {"start": 0, "middle": lines // 2, "end": lines - 50}
    chars = _chars_of(folder / name)
    with open_file(folder, name) as opened:
        last_needle = len(list(find_all(opened, NEEDLE))) - 1
    results: dict[str, dict[str, list[float]]] = {}
    index_from = sandbox_module.INDEX_FROM_BYTES

    def note(label: str, column: str, took: float) -> None:
        results.setdefault(label, {}).setdefault(column, []).append(took)

    try:
        for _ in range(repeats):
            for column in ("indexed", "scanned"):
                opened = await anyio.to_thread.run_sync(open_file, folder, name)
                try:
                    if column == "scanned":  # as before the line index: no index, and none built on the way
                        opened.index = None
                    sandbox_module.INDEX_FROM_BYTES = 1 << 62 if column == "scanned" else index_from
                    for place, line in places.items():
                        start = time.perf_counter()
                        read = await sandbox.read(opened, start=line, lines=50)
                        note(f"Read 50 lines at the {place}", column, time.perf_counter() - start)
                        assert read.lines[0][0] == line + 1
                    for place, fraction in (("start", 0.0), ("middle", 0.5), ("end", 0.999)):
                        request = SliceRequest(start=int(chars * fraction), length=1000)
                        took = await _sliced(opened, request)
                        note(f"slice 1000 characters at the {place}", column, took)
                    took = await _sliced(opened, SliceRequest(anchor=NEEDLE, match_index=last_needle))
                    note("slice by anchor, the last needle", column, took)
                finally:
                    opened.close()
    finally:
        sandbox_module.INDEX_FROM_BYTES = index_from
        await sandbox.aclose()
    return {label: {column: statistics.median(v) * 1000 for column, v in row.items()} for label, row in results.items()}


_CHARS: dict[Path, int] = {}


def _chars_of(path: Path) -> int:
    if path not in _CHARS:
        with open_file(path.parent, path.name) as opened:
            assert opened.index is not None
            _CHARS[path] = opened.index.chars
    return _CHARS[path]


async def _sliced(opened: Any, request: SliceRequest) -> float:
    start = time.perf_counter()
    await anyio.to_thread.run_sync(lambda: slice_text(opened, request, threshold=10_000))
    return time.perf_counter() - start


def time_rule(mib: int) -> dict[str, Any]:
    from large_outputs import RAW, Wire

    with tempfile.TemporaryDirectory(prefix="bench-time-rule-") as tmp:
        config = Path(tmp) / "claimcheck.json"
        entry = {"command": sys.executable, "args": [RAW]}
        settings = {"root": str(Path(tmp) / "out"), "asyncTimeoutSecs": 5}
        config.write_text(json.dumps({"mcpServers": {"raw": entry}, "settings": settings}))
        wire = Wire([sys.executable, "-m", "server", "serve", "--no-api", "--config", str(config)], cwd=REPO)
        try:
            wire.handshake()
            wire.send("tools/list")
            wire.line()
            start = time.perf_counter()
            wire.send("tools/call", {"name": "raw__big", "arguments": {"mib": mib}})
            answer = json.loads(wire.line())
            elapsed = time.perf_counter() - start
            text = answer["result"]["content"][0]["text"]
            return {"mib": mib, "seconds": elapsed, "answer": text[:120]}
        finally:
            wire.close()


def run_table(sizes: list[int], repeats: int, json_path: Path | None, skip_time_rule: bool) -> int:
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; rg: {RG}")
    report: dict[str, Any] = {"sizes": {}, "load_before": load}
    for mib in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-grep-table-") as tmp:
            folder = Path(tmp)
            lines = make_log(folder / "big.log", mib * MIB)
            subprocess.run(["cat", str(folder / "big.log")], stdout=subprocess.DEVNULL, check=True)  # warm the cache
            greps = anyio.run(grep_cases, folder, "big.log", repeats)
            reads = anyio.run(read_cases, folder, "big.log", lines, repeats)
        report["sizes"][mib] = {"lines": lines, "grep": greps, "read": reads}
        print(f"\n### {mib} MiB ({lines} lines), median of {repeats}, ms\n")
        print("| Grep case | claimcheck | `grep` | `rg` |\n|---|---:|---:|---:|")
        for label, row in greps.items():
            print(f"| {label} | {row['claimcheck']:.0f} | {row['grep']:.0f} | {row['rg']:.0f} |")
        print("\n| Read / slice | with the line index | scanned from the start (before) |\n|---|---:|---:|")
        for label, row in reads.items():
            print(f"| {label} | {row['indexed']:.1f} | {row['scanned']:.1f} |")
    if not skip_time_rule:
        rule = time_rule(1024)
        report["time_rule"] = rule
        print(
            f"\ntime rule (asyncTimeoutSecs 5), 1 GiB output: answer after {rule['seconds']:.2f} s: {rule['answer']!r}"
        )
    load = os.getloadavg()
    report["load_after"] = load
    print(f"\nload average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if json_path:
        json_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0
