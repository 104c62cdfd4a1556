"""The targets of "At the limit" against what one `bench/device_run.sh` measured: one markdown table per target.

Reads the results folder the run wrote (every file optional: a step that did not run is left out) and prints
each figure beside its target, with the machine it came from. A ratio is claimcheck's against its mark, as
docs/benchmarks.md gives them: a large output's time over the bare reader's (at most 1.5), the 2026-07-28 era's
CPU and p50 per call over the 2025-11-25 era's (at most 1.1), HTTP calls/s over FastMCP's (at least 3) and over
the server serving HTTP itself at one client (at least 1/1.1), a chain's time over one claimcheck's (at most 1.3).

    python bench/device_summary.py RESULTS_DIR
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any


def _load(folder: Path, name: str) -> Any:
    path = folder / name
    return json.loads(path.read_text()) if path.is_file() else None


def _verdict(value: float, target: float, *, at_most: bool) -> str:
    return "met" if (value <= target if at_most else value >= target) else "not met"


def large_outputs(folder: Path) -> list[str]:
    rows = []
    for name, text in (
        ("large_outputs_stdio.json", "é and an emoji"),
        ("large_outputs_stdio_ascii.json", "ASCII"),
        ("large_outputs_stdio_tmpfs.json", "é and an emoji, tmpfs"),
        ("large_outputs_http.json", "é and an emoji, HTTP server"),
    ):
        for row in _load(folder, name) or []:
            floor, mine = row["floor"], row["claimcheck"]
            gbps = floor["bytes"] / floor["seconds"] / 1e9
            python = f"{row['ratio_to_python_floor']:.2f}" if row.get("ratio_to_python_floor") else "–"
            rows.append(
                f"| {text} | {row['mib']} | {floor['seconds']:.3f} ({gbps:.1f} GB/s) | {mine['seconds']:.3f} | "
                f"**{row['ratio']:.2f}** | {python} | {mine['user_s_per_gib']:.2f} + {mine['sys_s_per_gib']:.2f} | "
                f"{mine['peak_above_idle_mib']:.1f} | {_verdict(row['ratio'], 1.5, at_most=True)} |"
            )
    if not rows:
        return []
    head = (
        "| text | MiB | bare reader s | claimcheck s | ratio (≤ 1.5) | ÷ Python floor | CPU s/GiB, user + system "
        "| peak above idle MiB | |\n|---|---:|---:|---:|---:|---:|---|---:|---|"
    )
    return ["**A large output to its handle**", "", head, *rows, ""]


def eras(folder: Path) -> list[str]:
    lines = []
    path = folder / "raw_calls_eras.txt"
    if path.is_file():
        found: dict[str, list[tuple[float, float]]] = {}
        for match in re.finditer(
            r"^\| \d+ \| (handshake|2026-07-28) \| claimcheck \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$",
            path.read_text(),
            re.MULTILINE,
        ):
            era, p50, user, system = match.groups()
            found.setdefault(era, []).append((float(p50), float(user) + float(system)))
        if len(found) == 2:
            old, new = found["handshake"], found["2026-07-28"]
            cpu = statistics.mean(c for _, c in new) / statistics.mean(c for _, c in old)
            p50 = statistics.mean(p for p, _ in new) / statistics.mean(p for p, _ in old)
            lines += [
                "| stdio, raw downstream | CPU ms/call | "
                f"{statistics.mean(c for _, c in old):.3f} | {statistics.mean(c for _, c in new):.3f} | "
                f"**{cpu:.2f}** | {_verdict(cpu, 1.1, at_most=True)} |",
                f"| stdio, raw downstream | p50 ms | {statistics.mean(p for p, _ in old):.3f} | "
                f"{statistics.mean(p for p, _ in new):.3f} | **{p50:.2f}** | {_verdict(p50, 1.1, at_most=True)} |",
            ]
    http = _load(folder, "http_load.json")
    if http:
        results = http["results"]
        old, new = results.get("claimcheck 2025-11-25", {}), results.get("claimcheck 2026-07-28", {})
        for level in sorted(set(old) & set(new), key=int):
            for key, what in (("cpu_ms_per_call", "CPU ms/call"), ("p50_ms", "p50 ms")):
                ratio = new[level][key] / old[level][key]
                lines.append(
                    f"| HTTP, demo downstream, clients: {level} | {what} | {old[level][key]:.3f} | "
                    f"{new[level][key]:.3f} | **{ratio:.2f}** | {_verdict(ratio, 1.1, at_most=True)} |"
                )
    if not lines:
        return []
    head = "| path | figure | 2025-11-25 | 2026-07-28 | ratio (≤ 1.1) | |\n|---|---|---:|---:|---:|---|"
    return ["**Both eras at one cost**", "", head, *lines, ""]


def http(folder: Path) -> list[str]:
    data = _load(folder, "http_load.json")
    if not data:
        return []
    results = data["results"]
    mine, fastmcp = results.get("claimcheck 2025-11-25", {}), results.get("fastmcp 2025-11-25", {})
    direct = results.get("direct 2025-11-25", {})
    rows = []
    for level in sorted(mine, key=int):
        calls = mine[level]["calls_per_s"]
        peer = fastmcp.get(level, {}).get("calls_per_s")
        itself = direct.get(level, {}).get("calls_per_s")
        ratio = f"**{calls / peer:.2f}** ({_verdict(calls / peer, 3, at_most=False)})" if peer else "–"
        mark = "–"
        if itself and level == "1":
            mark = f"**{calls / itself:.2f}** ({_verdict(calls / itself, 1 / 1.1, at_most=False)})"
        elif itself:
            mark = f"{calls / itself:.2f}"
        peer_cpu = fastmcp.get(level, {}).get("cpu_ms_per_call", float("nan"))
        cpu = f"{mine[level]['cpu_ms_per_call']:.2f} / {peer_cpu:.2f}"
        peer_text = f"{peer:.0f}" if peer else "–"
        rows.append(
            f"| {level} | {calls:.0f} | {peer_text} | {itself or float('nan'):.0f} | {ratio} | {mark} | {cpu} |"
        )
    head = (
        "| clients | claimcheck calls/s | FastMCP | the server itself | ÷ FastMCP (≥ 3) | ÷ the server itself "
        "(≥ 0.91 at 1) | CPU ms/call, claimcheck / FastMCP |\n|---:|---:|---:|---:|---|---|---|"
    )
    return ["**HTTP against FastMCP and the server itself** (2025-11-25 era)", "", head, *rows, ""]


def chains(folder: Path) -> list[str]:
    rows = []
    for name, text in (("chain_large.json", "é and an emoji"), ("chain_large_ascii.json", "ASCII")):
        data = _load(folder, name)
        if not data:
            continue
        summary = {(row["path"], row["mib"]): row for row in data["summary"]}
        for (path, mib), row in sorted(summary.items(), key=lambda item: (item[0][1], item[0][0])):
            single = summary.get(("single", mib))
            if path == "single" or single is None:
                continue
            ratio = row["median_seconds"] / single["median_seconds"]
            cpu = ", ".join(f"{who} {seconds:.2f}" for who, seconds in row["median_cpu_s"].items())
            rows.append(
                f"| {text} | {path} | {mib} | {single['median_seconds']:.3f} | {row['median_seconds']:.3f} | "
                f"**{ratio:.2f}** | {cpu} | {_verdict(ratio, 1.3, at_most=True)} |"
            )
    if not rows:
        return []
    head = (
        "| text | path | MiB | one claimcheck s | chain s | ratio (≤ 1.3) | CPU s of each claimcheck | |\n"
        "|---|---|---:|---:|---:|---:|---|---|"
    )
    return ["**A chain against one claimcheck**", "", head, *rows, ""]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    folder = Path(argv[0])
    machine = folder / "machine.txt"
    lines = ["# At the limit: what the run measured", ""]
    if machine.is_file():
        lines += ["```", machine.read_text().strip(), "```", ""]
    for part in (large_outputs, eras, http, chains):
        lines += part(folder)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
