"""bench/extraction_eval.py's results: its --json file holds the run and loads back, older files are judged again,
and the totals count credited facts, wrong and invented items, over all cases and past the start."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from extraction_report import Arm, Result, Run, dump, load, report, totals

RUN = Run("qwen-test", 8192, 1.0, 2, "abc1234", "2026-11-25T10:00:00+00:00")


def arm(
    answer: str, found: list[str], wrong: list[str], invented: list[str], credited: list[str], strategy: str = "cut"
) -> Arm:
    return Arm(found, 0, 0, strategy, 1.0, 100, 10, 50, answer, wrong=wrong, invented=invented, credited=credited)


def result(case: str, where: str, facts: list[str], **arms: Arm) -> Result:
    return Result(case, "log", where, facts, 1000, 1500, arms=dict(arms))


def test_a_json_file_holds_the_run_and_its_results_and_loads_back(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    written = [
        result("log-oom-time", "end", ["08:08:05"], baseline=arm("08:08:05", ["08:08:05"], [], [], ["08:08:05"]))
    ]
    dump(path, RUN, written)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["run"] == {
        "model": "qwen-test",
        "context": 8192,
        "size": 1.0,
        "threads": 2,
        "commit": "abc1234",
        "date": "2026-11-25T10:00:00+00:00",
    }
    assert data["results"] == [asdict(r) for r in written]
    assert load([path], size=0.5) == (written, [RUN])


def test_an_older_list_of_results_is_judged_again_from_the_answers_it_stored(tmp_path: Path) -> None:
    baseline = asdict(arm("It was at 08:08:05, or 08:00:01, or 25:61:00.", ["bogus"], [], [], []))
    claimcheck = asdict(arm("08:08:05", ["08:08:05"], [], [], [], strategy="truncate (fallback)"))
    for old in (baseline, claimcheck):
        for key in ("wrong", "invented", "credited"):
            del old[key]
    row = asdict(result("log-oom-time", "end", ["08:08:05"]))
    row["arms"] = {"baseline": baseline, "claimcheck": claimcheck}
    path = tmp_path / "old.json"
    path.write_text(json.dumps([row]), encoding="utf-8")
    (loaded,), runs = load([path], size=1.0)
    judged = loaded.arms["baseline"]
    assert (judged.found, judged.wrong, judged.invented, judged.credited) == (
        ["08:08:05"],
        ["08:00:01"],
        ["25:61:00"],
        [],
    )
    fallback = loaded.arms["claimcheck"]
    assert (fallback.found, fallback.wrong, fallback.invented, fallback.credited) == ([], [], [], [])
    assert runs == []


def test_totals_count_credited_facts_beside_found_wrong_and_invented_items_and_again_past_the_start() -> None:
    results = [
        result(
            "log-hosts",
            "start",
            ["web-0", "web-1"],
            baseline=arm("web-0 web-1", ["web-0", "web-1"], [], [], ["web-0", "web-1"]),
            claimcheck=arm("web-0 web-1 web-9", ["web-0", "web-1"], [], ["web-9"], ["web-0", "web-1"]),
        ),
        result(
            "log-oom-time",
            "end",
            ["08:08:05"],
            baseline=arm("08:00:01 08:08:05 08:00:02", ["08:08:05"], ["08:00:01", "08:00:02"], [], []),
            claimcheck=arm("08:08:05", ["08:08:05"], [], [], ["08:08:05"]),
        ),
    ]
    past = totals(results, "baseline", {"log-oom-time"})
    assert {key: past[key] for key in ("cases", "facts", "credited", "found", "wrong", "invented")} == {
        "cases": 1,
        "facts": 1,
        "credited": 0,
        "found": 1,
        "wrong": 2,
        "invented": 0,
    }
    lines = report(results, [RUN]).splitlines()
    assert lines[3].startswith("| log-oom-time | log | end | 1000 | 0/1 (1 found) | 1/1 | — | 2/0 · 0/0 · — | cut |")
    assert lines[7].startswith("| baseline | 2 | 2/3 (67%) | 3 | 2 | 0 |")
    assert lines[8].startswith("| claimcheck | 2 | 3/3 (100%) | 3 | 0 | 1 |")
    assert lines[10].startswith("| baseline (answer past the start) | 1 | 0/1 (0%) | 1 | 2 | 0 |")
    assert lines[11].startswith("| claimcheck (answer past the start) | 1 | 1/1 (100%) | 1 | 0 | 0 |")
    assert lines[13] == (
        "answer past the start (1 case): claimcheck credited 1 facts, baseline 0 (∞; at least 2× met); "
        "answers credited beside an invented item: claimcheck 0, baseline 0"
    )
    assert lines[14] == (
        "run: model qwen-test, context 8192 tokens, size 1, threads 2, commit abc1234, 2026-11-25T10:00:00+00:00"
    )
