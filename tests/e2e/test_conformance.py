"""The official MCP conformance suite's server scenarios, against a fixture server alone and behind claimcheck.

claimcheck is transparent: any conformance check a downstream passes on its own it also passes through claimcheck
(with `prefix: ""`). The suite (`@modelcontextprotocol/conformance`, tests/support/conformance_peer.py) runs
twice: against `tests/support/servers/conformance_server.py` serving streamable HTTP itself (the baseline), and
against `claimcheck serve --transport http` with the same file as its one stdio downstream. A
scenario counts as passed when none of its checks is a FAILURE or a WARNING (the suite's own
baseline rule); through claimcheck no scenario may do worse than alone, except those listed in
EXPECTED_FAILURES, and a listed one that no longer does worse fails the test until it is removed.
docs/conformance.md has the results and what each expected failure needs.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support import conformance_peer
from tests.support.processes import announced_url, program, program_entry, write_config

pytestmark = [pytest.mark.conformance, pytest.mark.subprocess]

LIST_S = 60
SUITE_S = 300  # the whole suite takes a few seconds; its own per-request timeouts are 10 s
_SERVING = r"serving MCP over streamable HTTP at (http://\S+/mcp)"
_RESULT_DIR = re.compile(r"server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z")
_SCENARIO_LINE = re.compile(r"^\s+- (?P<scenario>\S+)", re.MULTILINE)


EXPECTED_FAILURES: dict[str, str] = {}
"""Scenarios that do worse through claimcheck than against the fixture alone, and why."""

FIXTURE_NOT_CLEAN: dict[str, str] = {
    "server-sse-polling": (
        "the suite POSTs test_reconnection with `mcp-protocol-version: 2025-03-26`, and the SDK sends a priming "
        "event (and retry field) and allows closing the stream only from 2025-11-25 on: two WARNINGs"
    ),
}
"""Scenarios the fixture alone does not pass cleanly, and why."""


class Outcome(IntEnum):
    PASSED = 0
    WARNING = 1
    FAILED = 2


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    outcome: Outcome
    messages: tuple[str, ...]
    """`<check name>: <message>` for every check that failed or warned."""


@dataclass(frozen=True, slots=True)
class Runs:
    scenarios: tuple[str, ...]
    alone: Mapping[str, ScenarioResult]
    through: Mapping[str, ScenarioResult]
    work: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, fast_path: str | None) -> Runs:
    suite = conformance_peer.suite_command()
    work = tmp_path_factory.mktemp("conformance")
    downstream = {**program_entry("conformance_server"), "prefix": ""}
    config = write_config(work, {"mcpServers": {"conf": downstream}})
    listing, alone, through = anyio.run(_run_both, suite, config, work)
    scenarios = tuple(_SCENARIO_LINE.findall(listing))
    assert scenarios, f"`conformance list --server` listed nothing:\n{listing}"
    return Runs(scenarios, _results(alone, scenarios), _results(through, scenarios), work)


def test_the_fixture_alone_passes_every_scenario_but_the_known_ones(runs: Runs) -> None:
    unclean = {s for s in runs.scenarios if runs.alone[s].outcome is not Outcome.PASSED}
    assert unclean == FIXTURE_NOT_CLEAN.keys(), _table(runs)


def test_no_scenario_does_worse_through_claimcheck_than_against_the_fixture_alone(runs: Runs) -> None:
    unexpected = [s for s in runs.scenarios if _worse(runs, s) and s not in EXPECTED_FAILURES]
    stale = [s for s in EXPECTED_FAILURES if s not in runs.scenarios or not _worse(runs, s)]
    problems = [f"does worse through claimcheck: {s}" for s in unexpected]
    problems += [f"in EXPECTED_FAILURES but no longer does worse (remove it): {s}" for s in stale]
    assert not problems, "\n".join([*problems, "", _table(runs)])


def _worse(runs: Runs, scenario: str) -> bool:
    return runs.through[scenario].outcome > runs.alone[scenario].outcome


async def _run_both(suite: Sequence[str], config: Path, work: Path) -> tuple[str, Path, Path]:
    """The suite's scenario listing, and where each run left its results: fixture alone, then claimcheck."""
    with anyio.fail_after(LIST_S):
        listed = await anyio.run_process([*suite, "list", "--server"], check=True)

    alone, through = work / "alone", work / "claimcheck"
    async with announced_url(program("conformance_server", "--http", "0"), _SERVING) as url:
        await _run_suite(suite, url, alone)

    serve = [sys.executable, "-m", "server", "serve", "--config", str(config), "--transport", "http"]
    async with announced_url([*serve, "--host", "127.0.0.1", "--port", "0"], _SERVING) as url:
        await _run_suite(suite, url, through)
    return listed.stdout.decode(), alone, through


async def _run_suite(suite: Sequence[str], url: str, output: Path) -> None:
    """Run every scenario against `url`: checks.json per scenario, and the suite's own output, under `output`."""
    command = [*suite, "server", "--url", url, "--suite", "all", "-o", str(output)]
    with anyio.fail_after(SUITE_S):
        done = await anyio.run_process(command, check=False)  # exits 1 whenever a check fails
    await anyio.Path(output, "suite-output.txt").write_bytes(done.stdout + b"\n" + done.stderr)


def _results(output: Path, scenarios: Sequence[str]) -> dict[str, ScenarioResult]:
    """Every scenario's result from its checks.json (`-o` makes `server-<scenario>-<timestamp>/`)."""
    found: dict[str, ScenarioResult] = {}
    for checks_file in output.glob("*/checks.json"):
        if (match := _RESULT_DIR.fullmatch(checks_file.parent.name)) is not None:
            found[match["scenario"]] = _result(json.loads(checks_file.read_text(encoding="utf-8")))
    log = output / "suite-output.txt"
    missing = ScenarioResult(Outcome.FAILED, (f"no checks.json: the scenario did not run to the end; see {log}",))
    return {scenario: found.get(scenario, missing) for scenario in scenarios}


def _result(checks: list[dict[str, Any]]) -> ScenarioResult:
    statuses = {check.get("status") for check in checks}
    outcome = Outcome.FAILED if "FAILURE" in statuses else Outcome.WARNING if "WARNING" in statuses else Outcome.PASSED
    messages = tuple(
        f"{check.get('name')}: {check.get('errorMessage') or check.get('description')}"
        for check in checks
        if check.get("status") in ("FAILURE", "WARNING")
    )
    return ScenarioResult(outcome, messages)


def _table(runs: Runs) -> str:
    """One line per scenario (alone, through claimcheck, and why when known), then the failed checks."""
    width = max(len(s) for s in runs.scenarios)
    lines = [f"{'scenario':<{width}}  {'alone':<7}  {'claimcheck':<10}  note", "-" * (width + 40)]
    for scenario in runs.scenarios:
        alone, through = runs.alone[scenario], runs.through[scenario]
        note = ""
        if scenario in EXPECTED_FAILURES:
            note = f"expected: {EXPECTED_FAILURES[scenario]}"
        elif scenario in FIXTURE_NOT_CLEAN:
            note = f"alone: {FIXTURE_NOT_CLEAN[scenario]}"
        flag = "  <-- worse" if through.outcome > alone.outcome else ""
        if scenario in EXPECTED_FAILURES and not flag:
            flag = "  <-- listed, but no worse"
        lines.append(
            f"{scenario:<{width}}  {alone.outcome.name.lower():<7}  {through.outcome.name.lower():<10}  "
            f"{note[:60]}{flag}"
        )
        lines += [f"    alone:      {message}" for message in alone.messages]
        lines += [f"    claimcheck: {message}" for message in through.messages]
    lines.append(f"results (checks.json per scenario, suite-output.txt): {runs.work}")
    return "\n".join(lines)
