"""The cases of bench/extraction_eval.py: tool outputs of the kinds agents meet, a question, the facts to find.

Outputs are generated deterministically (the git history by real `git` in a scratch repository), so the facts,
computed from the same parameters, hold on any machine. `size` scales every output (1.0: about 14 000 tokens of
cl100k each, a few times the small model's context and under Claude Code's 25 000-token cut); `where` says where
the answer sits in the output, which is what decides whether cutting the output can work.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CASES", "Case"]


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # log, json, table, code search, git
    where: str  # start, middle, end, spread: where the answer is in the output
    question: str
    output: Callable[[Path, float], str]  # (scratch directory, size) -> the tool output
    facts: Callable[[float], list[str]]  # size -> what a right answer must contain
    scale: float = 1.0  # this case's output size against the others (small ones fit the model's context whole)

    def make(self, tmp: Path, size: float) -> tuple[str, list[str]]:
        """The output and the facts at `size`."""
        return self.output(tmp, size * self.scale), self.facts(size * self.scale)


def _at(count: int, fraction: float) -> int:
    return min(count - 1, int(count * fraction))


# --- logs ------------------------------------------------------------------------------------------------------

LOG_LINES = 500
LOG_ERRORS = {0.12: "disk full on /var/lib/db", 0.55: "TLS handshake failed with 10.1.2.3", 0.97: "OOM killed worker 7"}


def _log_line(i: int, errors: dict[int, str]) -> str:
    level = "ERROR" if i in errors else "WARN" if i % 97 == 0 else "INFO"
    message = errors.get(i) or f"GET /api/items/{i * 7 % 1000} 200 in {i % 113} ms"
    return f"2026-11-22T{8 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d} web-{i % 4} {level} {message}"


def _log(_: Path, size: float) -> str:
    count = int(LOG_LINES * size)
    errors = {_at(count, f): m for f, m in LOG_ERRORS.items()}
    return "\n".join(_log_line(i, errors) for i in range(count)) + "\n"


def _oom_time(size: float) -> list[str]:
    i = _at(int(LOG_LINES * size), 0.97)
    return [f"{8 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}"]


# --- JSON ------------------------------------------------------------------------------------------------------

USERS = 330
ADMINS = (0.07, 0.5, 0.9)


def _users(_: Path, size: float) -> str:
    count = int(USERS * size)
    admins = {_at(count, f) for f in ADMINS}
    countries = ["DE", "FR", "US", "JP", "BR"]
    users = [
        {"id": i, "name": f"user{i:04d}", "country": countries[i % 5], "admin": i in admins, "plan": "pro"}
        for i in range(count)
    ]
    return json.dumps({"users": users, "page": 3, "next_cursor": "c-9f3a21", "has_more": True}, indent=2)


# --- tables ----------------------------------------------------------------------------------------------------

ORDERS = 1000
REFUNDS = (0.1, 0.42, 0.71, 0.96)


def _orders(_: Path, size: float) -> str:
    count = int(ORDERS * size)
    refunds = {_at(count, f) for f in REFUNDS}
    rows = ["order_id,customer,amount_eur,status"]
    rows += [
        f"{10000 + i},cust{i % 50:02d},{(i * 37) % 1000}.{i % 100:02d},{'refunded' if i in refunds else 'paid'}"
        for i in range(count)
    ]
    return "\n".join(rows) + "\n"


def _refund_ids(size: float) -> list[str]:
    count = int(ORDERS * size)
    return [str(10000 + _at(count, f)) for f in REFUNDS]


PROCESSES = 350
COMMANDS = ["nginx: worker process", "python3 -m celery worker", "postgres: writer", "node server.js", "sshd: ada"]


def _ps(_: Path, size: float) -> str:
    count = int(PROCESSES * size)
    special = _at(count, 0.62)
    rows = ["USER         PID %CPU %MEM    VSZ   RSS TTY      STAT START   TIME COMMAND"]
    for i in range(count):
        user, pid = ("svc-backup", 48213) if i == special else (["root", "www-data", "postgres"][i % 3], 1000 + i * 3)
        command = "backup-agent --full --target s3://vault" if i == special else COMMANDS[i % len(COMMANDS)]
        rows.append(
            f"{user:<10} {pid:>6} {i % 7}.{i % 10} {i % 5}.{i % 9} {100000 + i * 17:>7} {20000 + i * 11:>6} ?"
            f"        S    09:{i % 60:02d}   0:{i % 59:02d} {command}"
        )
    return "\n".join(rows) + "\n"


# --- code search results ---------------------------------------------------------------------------------------

MATCHES = 640
MODULES = ["auth/session", "auth/tokens", "billing/invoice", "search/index", "api/routes", "ui/forms", "jobs/cron"]
CALLERS = {0.3: "src/billing/refunds.py", 0.78: "src/api/admin_routes.py", 0.985: "src/jobs/cleanup.py"}


def _grep(_: Path, size: float) -> str:
    count = int(MATCHES * size)
    definition = _at(count, 0.47)
    callers = {_at(count, f): path for f, path in CALLERS.items()}
    lines = []
    for i in range(count):
        if i == definition:
            lines.append("src/auth/keystore.py:1412:def rotate_keys(store: KeyStore, *, keep: int = 2) -> list[Key]:")
        elif i in callers:
            lines.append(f'{callers[i]}:{100 + i % 300}:        revoke_session(session_id, reason="{i}")')
        else:
            module = MODULES[i % len(MODULES)]
            lines.append(f'src/{module}.py:{10 + i * 13 % 900}:    token = request.headers.get("X-Token-{i}")')
    return "\n".join(lines) + "\n"


# --- git history -----------------------------------------------------------------------------------------------

COMMITS = 140
AUTHORS = [("Ada", "ada@example.com"), ("Linus", "linus@example.com"), ("Grace", "grace@example.com")]


def _cve_commit(size: float) -> int:
    return COMMITS * 11 // 20 if size >= 1 else max(1, int(COMMITS * size * 0.55))


def _git(tmp: Path, size: float) -> str:
    count = max(10, int(COMMITS * size))
    repo = tmp / f"repo-{count}"
    if not repo.exists():
        repo.mkdir(parents=True)
        env = {**os.environ, "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com"}
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        for i in range(count):
            area = ["auth", "billing", "search", "ui", "api"][i % 5]
            (repo / f"{area}.py").write_text(f"# {i}\n" * (1 + i % 4), encoding="utf-8")
            name, email = AUTHORS[i % 3] if i else AUTHORS[0]
            message = f"{area}: change {i}" + (" (fixes CVE-2026-1234)" if i == _cve_commit(size) else "")
            date = f"2026-{1 + i * 12 // count:02d}-{1 + i % 28:02d}T09:00:00"
            subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
            subprocess.run(
                ["git", "commit", "-q", "-m", message, "--date", date, "--author", f"{name} <{email}>"],
                cwd=repo,
                env={**env, "GIT_COMMITTER_DATE": date},
                check=True,
            )
    return subprocess.run(["git", "log", "--stat"], cwd=repo, check=True, capture_output=True, text=True).stdout


CASES = [
    Case(
        "log-errors",
        "log",
        "spread",
        "List every ERROR line of this log with its message.",
        _log,
        lambda s: ["disk full", "TLS handshake failed", "OOM killed"],
    ),
    Case(
        "log-tls-ip",
        "log",
        "middle",
        "A TLS handshake failed: with which IP address?",
        _log,
        lambda s: ["10.1.2.3"],
    ),
    Case("log-oom-time", "log", "end", "At what time was a worker killed for running out of memory?", _log, _oom_time),
    Case(
        "log-hosts",
        "log",
        "start",
        "Which hosts (the field after the timestamp) appear in this log?",
        _log,
        lambda s: ["web-0", "web-1", "web-2", "web-3"],
        scale=0.3,
    ),
    Case(
        "json-admins",
        "json",
        "spread",
        'Which users have "admin": true? Give their names.',
        _users,
        lambda s: [f"user{_at(int(USERS * s), f):04d}" for f in ADMINS],
    ),
    Case(
        "json-cursor",
        "json",
        "end",
        "What cursor value fetches the next page of these results?",
        _users,
        lambda s: ["c-9f3a21"],
    ),
    Case("csv-refunds", "table", "spread", "Which order ids have the status refunded?", _orders, _refund_ids),
    Case(
        "ps-backup",
        "table",
        "middle",
        "Which user runs the backup agent process, and what is its PID?",
        _ps,
        lambda s: ["svc-backup", "48213"],
    ),
    Case(
        "grep-definition",
        "code search",
        "middle",
        "In these search results, which file and line define the function rotate_keys?",
        _grep,
        lambda s: ["src/auth/keystore.py", "1412"],
    ),
    Case(
        "grep-callers",
        "code search",
        "spread",
        "Which files call revoke_session? List their paths.",
        _grep,
        lambda s: list(CALLERS.values()),
    ),
    Case(
        "git-cve",
        "git",
        "middle",
        "Which commit mentions a CVE? Give the CVE id and the commit message.",
        _git,
        lambda s: ["CVE-2026-1234", f"change {_cve_commit(s)}"],
    ),
    Case(
        "git-oldest",
        "git",
        "end",
        "What is the message of the oldest commit (the first one made), and who is its author?",
        _git,
        lambda s: ["auth: change 0", "Ada"],
    ),
    Case(
        "git-authors",
        "git",
        "start",
        "Who are the authors of these commits? List their names.",
        _git,
        lambda s: [name for name, _ in AUTHORS],
        scale=0.3,
    ),
]
