"""A 200 MiB stored output is read by every reader in bounded memory, with the answers of a plain read.

One subprocess (tests/support/servers/read_probe.py) runs claimcheck's own readers on it: tool_output slice (offset and
anchor), raw, truncate, full-chunked extraction (evidence checked against the file), token counting,
Read and Grep. Each reader's peak RSS above where it started, and the grep workers' peak RSS, must stay
under 64 MiB: far below the output's size, so nothing read it whole. The text is generated line by line
(`read_probe.line`), so every expected answer is computed here without reading the file either. The file
has its line index beside it, built while it was written (as claimcheck's writers do), so Read and slice
start near what they want.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from extraction import count_tokens, head_tokens, tail_tokens
from tests.support.processes import ROOT, program
from tests.support.servers import read_probe
from tests.support.servers.read_probe import LINE_CHARS, chars, line, needle_lines

pytestmark = pytest.mark.subprocess  # one process runs claimcheck's readers on the big file
LINES = 200 * 2**20 // LINE_CHARS  # 200 MiB of characters, a little more in bytes
LIMIT_KIB = 64 * 1024
PROBES = [
    "slice-offset",
    "slice-anchor",
    "raw",
    "truncate",
    "full-chunked",
    "tokens",
    "read-tail",
    "read-middle",
    "grep-literal",
    "grep-regex",
    "grep-insensitive",
]


def run_probes(big: Path, workdir: Path, probes: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        program("read_probe", str(big), str(LINES), str(workdir), *probes),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={"CLAIMCHECK_API_ENABLED": "false", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    workdir = tmp_path_factory.mktemp("large")
    big = workdir / "big"
    read_probe.write(big, LINES)
    found = run_probes(big, workdir, PROBES)
    if not found["reset"]:  # no way to reset the peak in one process: one process per reader
        runs = [run_probes(big, workdir, [name]) for name in PROBES]
        found = {
            "probes": {name: run["probes"][name] for name, run in zip(PROBES, runs, strict=True)},
            "workers_peak_kib": max(run["workers_peak_kib"] for run in runs),
        }
    big.unlink()
    big.with_name("big.lines").unlink()
    yield found


def answer(report: dict[str, Any], probe: str) -> Any:
    result = report["probes"][probe]
    assert result["peak_kib"] < LIMIT_KIB, f"{probe} took {result['peak_kib']} KiB above where it started"
    return result["answer"]


def body(text: str, strategy: str) -> str:
    head, marker, rest = text.partition(f", STRATEGY:{strategy}:\n\n")
    assert marker and head.startswith("ABSTRACT FROM TOOL OUTPUT probe__big WITH HANDLE "), text[:300]
    return rest


TOTAL_CHARS = LINES * LINE_CHARS


def test_a_slice_near_the_end_is_the_plain_texts_characters(report: dict[str, Any]) -> None:
    start = TOTAL_CHARS - 100
    expected = f"[characters {start}-{start + 50} of {TOTAL_CHARS}]\n{chars(start, start + 50, LINES)}"
    assert body(answer(report, "slice-offset"), "slice") == expected


def test_an_anchor_slice_finds_the_third_occurrence_near_the_end(report: dict[str, Any]) -> None:
    at = needle_lines(LINES)[2] * LINE_CHARS + line(needle_lines(LINES)[2], LINES).index("NEEDLE")
    start, end = at - 500, min(TOTAL_CHARS, at + len("NEEDLE") + 500)
    expected = f"[characters {start}-{end} of {TOTAL_CHARS}]\n{chars(start, end, LINES)}"
    assert body(answer(report, "slice-anchor"), "slice") == expected


def test_raw_refuses_the_big_output_without_reading_it(report: dict[str, Any]) -> None:
    assert "The output is too large for raw" in answer(report, "raw")


def test_truncate_gives_the_plain_texts_head_and_tail_and_counts_the_middle(report: dict[str, Any]) -> None:
    budget = 10000 // 2 - 40
    span = budget * 128 // 16 + budget
    head = head_tokens(chars(0, span, LINES), budget)
    tail = tail_tokens(chars(TOTAL_CHARS - span, TOTAL_CHARS, LINES), budget)
    omitted, lines = TOTAL_CHARS - len(head) - len(tail), LINES - head.count("\n") - tail.count("\n")
    marker = (
        f"\n\n[... {omitted} characters ({lines} lines) omitted by truncate; "
        'mode "slice" or Read/Grep reach them ...]\n\n'
    )
    assert body(answer(report, "truncate"), "truncate") == head + marker + tail


def test_full_chunked_reads_its_chunks_from_the_file_and_places_evidence_at_the_end(report: dict[str, Any]) -> None:
    needle = needle_lines(LINES)[2]
    quote = line(needle, LINES)[10:60].strip()
    start = needle * LINE_CHARS + 10
    text = body(answer(report, "full-chunked"), "full-chunked")
    assert f'> "{quote}" (chars {start}-{start + len(quote)})' in text
    assert " chunks=64/" in text


def test_token_counting_stops_early_and_the_estimate_is_close(report: dict[str, Any]) -> None:
    over, estimate = answer(report, "tokens")
    per_line = sum(count_tokens(line(i, LINES)) for i in range(1000, 1700)) / 700
    assert over is True
    assert abs(estimate - per_line * LINES) / (per_line * LINES) < 0.03


def test_read_reaches_the_last_lines_and_a_line_in_the_middle(report: dict[str, Any]) -> None:
    tail = answer(report, "read-tail").splitlines()
    middle = answer(report, "read-middle").splitlines()
    assert tail[0].endswith(f": lines {LINES - 2}-{LINES} of {LINES}:")
    assert tail[1:] == [f"{n:>6}  {line(n - 1, LINES)[:-1]}" for n in range(LINES - 2, LINES + 1)]
    assert middle[1:] == [f"{n:>6}  {line(n - 1, LINES)[:-1]}" for n in (1_000_001, 1_000_002)]


def grep_lines(text: str) -> list[str]:
    return text.splitlines()[1:]


def test_grep_finds_literals_regexes_and_either_case_across_the_whole_file(report: dict[str, Any]) -> None:
    numbers = [n + 1 for n in needle_lines(LINES)]

    def shown(number: int, marked: bool) -> str:
        return f"{number:>6}{' →' if marked else '  '} {line(number - 1, LINES)[:-1]}"

    with_context = []
    for index, n in enumerate(numbers):
        with_context += ([] if not index else ["───"]) + [shown(n - 1, False), shown(n, True), shown(n + 1, False)]
    assert answer(report, "grep-literal").startswith("3 matching lines for 'NEEDLE' in session-")
    assert grep_lines(answer(report, "grep-literal")) == with_context
    marked = [shown(numbers[0], True), "───", shown(numbers[1], True), "───", shown(numbers[2], True)]
    assert grep_lines(answer(report, "grep-regex")) == marked
    assert grep_lines(answer(report, "grep-insensitive")) == [shown(numbers[2], True)]


def test_the_grep_workers_stay_small_too(report: dict[str, Any]) -> None:
    assert 0 < report["workers_peak_kib"] < LIMIT_KIB
