"""The tool outputs of bench/extraction_cases.py, generated deterministically, and the facts they hold.

Each output is a function of (scratch directory, size); the facts are computed from the same parameters, so they
hold on any machine. Answers sit at fixed fractions of each output (`at`), which is what `Case.where` describes.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


def at(count: int, fraction: float) -> int:
    return min(count - 1, int(count * fraction))


# --- logs ------------------------------------------------------------------------------------------------------

LOG_LINES = 500
LOG_ERRORS = {0.12: "disk full on /var/lib/db", 0.55: "TLS handshake failed with 10.1.2.3", 0.97: "OOM killed worker 7"}


def _log_line(i: int, errors: dict[int, str]) -> str:
    level = "ERROR" if i in errors else "WARN" if i % 97 == 0 else "INFO"
    message = errors.get(i) or f"GET /api/items/{i * 7 % 1000} 200 in {i % 113} ms"
    return f"2026-11-22T{8 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d} web-{i % 4} {level} {message}"


def log(_: Path, size: float) -> str:
    count = int(LOG_LINES * size)
    errors = {at(count, f): m for f, m in LOG_ERRORS.items()}
    return "\n".join(_log_line(i, errors) for i in range(count)) + "\n"


def oom_time(size: float) -> list[str]:
    i = at(int(LOG_LINES * size), 0.97)
    return [f"{8 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}"]


# --- JSON ------------------------------------------------------------------------------------------------------

USERS = 330
ADMINS = (0.07, 0.5, 0.9)


def users(_: Path, size: float) -> str:
    count = int(USERS * size)
    admins = {at(count, f) for f in ADMINS}
    countries = ["DE", "FR", "US", "JP", "BR"]
    users = [
        {"id": i, "name": f"user{i:04d}", "country": countries[i % 5], "admin": i in admins, "plan": "pro"}
        for i in range(count)
    ]
    return json.dumps({"users": users, "page": 3, "next_cursor": "c-9f3a21", "has_more": True}, indent=2)


# --- tables ----------------------------------------------------------------------------------------------------

ORDERS = 1000
REFUNDS = (0.1, 0.42, 0.71, 0.96)


def orders(_: Path, size: float) -> str:
    count = int(ORDERS * size)
    refunds = {at(count, f) for f in REFUNDS}
    rows = ["order_id,customer,amount_eur,status"]
    rows += [
        f"{10000 + i},cust{i % 50:02d},{(i * 37) % 1000}.{i % 100:02d},{'refunded' if i in refunds else 'paid'}"
        for i in range(count)
    ]
    return "\n".join(rows) + "\n"


def refund_ids(size: float) -> list[str]:
    count = int(ORDERS * size)
    return [str(10000 + at(count, f)) for f in REFUNDS]


PROCESSES = 350
COMMANDS = ["nginx: worker process", "python3 -m celery worker", "postgres: writer", "node server.js", "sshd: ada"]


def ps(_: Path, size: float) -> str:
    count = int(PROCESSES * size)
    special = at(count, 0.62)
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


def grep(_: Path, size: float) -> str:
    count = int(MATCHES * size)
    definition = at(count, 0.47)
    callers = {at(count, f): path for f, path in CALLERS.items()}
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


def cve_commit(size: float) -> int:
    return COMMITS * 11 // 20 if size >= 1 else max(1, int(COMMITS * size * 0.55))


def git_log(tmp: Path, size: float) -> str:
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
            message = f"{area}: change {i}" + (" (fixes CVE-2026-1234)" if i == cve_commit(size) else "")
            date = f"2026-{1 + i * 12 // count:02d}-{1 + i % 28:02d}T09:00:00"
            subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
            subprocess.run(
                ["git", "commit", "-q", "-m", message, "--date", date, "--author", f"{name} <{email}>"],
                cwd=repo,
                env={**env, "GIT_COMMITTER_DATE": date},
                check=True,
            )
    return subprocess.run(["git", "log", "--stat"], cwd=repo, check=True, capture_output=True, text=True).stdout


# --- a wide CSV table ------------------------------------------------------------------------------------------

ITEMS = 160
RECALLED = 0.72
COLUMNS = (
    "id,sku,name,category,brand,supplier,warehouse,bin,lot,qty_on_hand,qty_reserved,reorder_point,unit_cost,"
    "list_price,currency,weight_kg,length_cm,width_cm,height_cm,color,origin,hs_code,barcode,status,created,updated"
)
CATEGORIES = ["fastener", "cable", "bearing", "valve", "sensor", "filter"]
BRANDS = ["Norda", "Kestrel", "Brightline", "Oxmoor"]
WAREHOUSES = ["FRA1", "AMS2", "WAW1"]
COLORS = ["black", "grey", "blue", "red", "white"]
ORIGINS = ["DE", "PL", "CN", "US", "IT"]


def _sku(i: int) -> str:
    return f"SKU-{(i * 7919 + 2741) % 100000:05d}"


def _bin(i: int) -> str:
    return f"{'ABCDEFGH'[i % 8]}{(i * 37 + 11) % 1000:03d}"  # unique for fewer than 1000 rows


def inventory(_: Path, size: float) -> str:
    count = int(ITEMS * size)
    recalled = at(count, RECALLED)
    rows = [COLUMNS]
    for i in range(count):
        status = "recalled" if i == recalled else ["active", "active", "backorder", "active", "discontinued"][i % 5]
        cells = [
            f"{5000 + i},{_sku(i)},{CATEGORIES[i % 6]}-{i * 13 % 97:02d},{CATEGORIES[i % 6]}s",
            f"{BRANDS[i % 4]},SUP-{i * 17 % 61:03d},{WAREHOUSES[i % 3]}",
            f"{_bin(i)},LOT{(i * 53) % 9000 + 1000},{i * 29 % 500},{i * 7 % 40},{50 + i % 9 * 10}",
            f"{(i * 113) % 5000 / 100:.2f},{(i * 197) % 9000 / 100 + 5:.2f},EUR,{(i * 31) % 2000 / 100:.2f}",
            f"{10 + i % 90},{5 + i * 3 % 60},{2 + i * 7 % 30},{COLORS[i % 5]}",
            f"{ORIGINS[i % 5]},{8400 + i % 90:04d}.{i * 7 % 100:02d},40{(i * 104729) % 10**11:011d}",
            f"{status},2025-{1 + i % 12:02d}-{1 + i % 28:02d},2026-{1 + i * 5 % 12:02d}-{1 + i * 3 % 28:02d}",
        ]
        rows.append(",".join(cells))
    return "\n".join(rows) + "\n"


def recalled(size: float) -> list[str]:
    i = at(int(ITEMS * size), RECALLED)
    return [_sku(i), _bin(i)]


# --- a minified JavaScript bundle ------------------------------------------------------------------------------

BUNDLE_MODULES = 180
BUNDLE_CONFIG = 0.9
API_BASE = "https://api.kestrel-ledger.example/v7"
RELEASE = "3.14.27-b91c"
_MODULES = [
    'function(e,t,n){{"use strict";n.d(t,{{Z:function(){{return o}}}});var r=n({d}),a=n.n(r);function o(e){{var t=e.'
    'value{i},n=void 0===t?{k}:t,o=e.onChange;return a().createElement("div",{{className:"c-{h}",role:"status",'
    '"aria-live":"polite"}},n,o&&a().createElement("button",{{type:"button",onClick:o}},"Retry {i}"))}}}}',
    'function(e,t,n){{"use strict";var r=n({d});e.exports=function(e,t){{if(!r.isPlainObject(e))throw new TypeError('
    '"Minified error #{i}; visit https://docs.kestrel-ledger.example/errors/{i} for the full message");return '
    "Object.keys(e).reduce(function(n,r){{return n[r]=t(e[r],r),n}},{{}})}}}}",
    'function(e,t,n){{"use strict";n.d(t,{{fetchPage:function(){{return i}}}});var r=n({d});function i(e,t){{return '
    'r.Z.get("/v2/{res}/"+encodeURIComponent(e),{{params:{{page:t||1,per_page:{k}0}},timeout:{ms}}}).then(function'
    "(e){{return e.data}})}}}}",
    'function(e){{e.exports=JSON.parse(\'{{"name":"@kestrel/{res}-{i}","version":"1.{k}.{i}","license":'
    '"MIT","sideEffects":false}}\')}}',
    'function(e,t,n){{"use strict";var r=n({d}),o={i}*{k};t.Z=function(e){{for(var t=0,n=e.length;t<n;t++)o=(o<<5)-'
    'o+e.charCodeAt(t)|0;return r.Z.emit("{res}:hash",{{hash:o>>>0,key:"k{h}"}}),o}}}}',
]
_CONFIG_MODULE = (
    'function(e,t,n){{"use strict";t.Z=Object.freeze({{env:"production",apiBaseUrl:"{api}",release:"{release}",'
    'sentry:{{dsn:"https://5d1c@o4471.ingest.example/5521",tracesSampleRate:.2}},features:{{csvExport:!0,'
    "darkMode:!1}}}})}}"
)


def bundle(_: Path, size: float) -> str:
    count = int(BUNDLE_MODULES * size)
    config = at(count, BUNDLE_CONFIG)
    modules = []
    for i in range(count):
        ident = 1000 + i * 37 % 8999
        fields = {"i": i, "d": 1000 + (i * 53 + 7) % 8999, "k": 2 + i % 7, "h": f"{(i + 1) * 2654435761 % 2**32:08x}"}
        fields |= {"res": ["items", "ledgers", "accounts", "invoices"][i % 4], "ms": 5000 + i % 5 * 1000}
        template = _CONFIG_MODULE if i == config else _MODULES[i % len(_MODULES)]
        modules.append(f"{ident}:" + template.format(**fields, api=API_BASE, release=RELEASE))
    runtime = (
        '!function(){"use strict";var e,t,n,r={},o={};function i(e){var t=o[e];if(void 0!==t)return t.exports;'
        "var n=o[e]={exports:{}};return r[e](n,n.exports,i),n.exports}i.m=r,i.p="
        '"https://static.kestrel-ledger.example/assets/",i.d=function(e,t){for(var n in t)i.o(t,n)&&!i.o(e,n)&&'
        "Object.defineProperty(e,n,{enumerable:!0,get:t[n]})},i.o=function(e,t){return Object.prototype."
        "hasOwnProperty.call(e,t)}}();"
    )
    lines = ["/*! For license information please see main.4f1c9a.js.LICENSE.txt */", runtime]
    for chunk in range(0, count, 45):  # one webpack chunk per line, each about ten thousand characters
        body = ",".join(modules[chunk : chunk + 45])
        lines.append(f"(self.webpackChunkkestrel=self.webpackChunkkestrel||[]).push([[{chunk // 45}],{{{body}}}]);")
    return "\n".join([*lines, "//# sourceMappingURL=main.4f1c9a.js.map"]) + "\n"


# --- a multi-file diff -----------------------------------------------------------------------------------------

DIFF_FILES = 80
DIFF_TARGET = 0.88
TARGET_PATH = "src/payments/retry_policy.py"
PACKAGES = ["auth", "billing", "search", "storage", "notifications", "reports"]
MODULE_NAMES = ["client", "models", "views", "settings", "tasks", "limits", "cache", "export"]
WORDS = ["BATCH", "POOL", "CACHE", "PAGE", "QUEUE", "UPLOAD", "SESSION", "EXPORT"]


def _diff_file(path: str, name: str, old: str, new: str, i: int) -> str:
    line = 10 + i * 17 % 400
    digest = f"{(i + 1) * 2654435761 % 16**7:07x}"
    return (
        f"diff --git a/{path} b/{path}\nindex {digest}..{digest[::-1]} 100644\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -{line},7 +{line},7 @@ import logging\n"
        f" from dataclasses import dataclass\n \n log = logging.getLogger(__name__)\n-{name} = {old}\n+{name} = {new}\n"
        f" \n \n class Handler{i}:\n"
        f"@@ -{line + 40},5 +{line + 40},7 @@ class Handler{i}:\n"
        f"     def run(self, request):\n         items = self.load(request)\n"
        f"-        return [item for item in items if item.ready]\n"
        f"+        ready = [item for item in items if item.ready]\n"
        f'+        log.debug("handler {i}: %d ready", len(ready))\n'
        f"+        return ready\n \n     def load(self, request):\n"
    )


def diff(_: Path, size: float) -> str:
    count = int(DIFF_FILES * size)
    target = at(count, DIFF_TARGET)
    files = []
    for i in range(count):
        if i == target:
            files.append(_diff_file(TARGET_PATH, "MAX_RETRY_BACKOFF_MS", "2500", "7250", i))
            continue
        path = f"src/{PACKAGES[i % 6]}/{MODULE_NAMES[i // 6 % 8]}{'' if i < 48 else i}.py"
        name = f"{['MAX', 'DEFAULT', 'MIN'][i % 3]}_{WORDS[i % 8]}_{['SIZE', 'LIMIT', 'COUNT'][i // 8 % 3]}"
        old = 100 + i * 37 % 800
        files.append(_diff_file(path, name, str(old), str(old + 10 + i * 53 % 400), i))
    return "".join(files)
