#!/usr/bin/env bash
# The figures of docs/benchmarks.md's "At the limit", taken in one go on a quiet multi-core machine that has no
# network (the lent device): installs from bench/.wheels (bash bench/device_wheels.sh, here, first), then runs
# each bench in order of what is least known, as long as the time budget allows, and writes every result and a
# log of the machine's load to $OUT (else bench/results/device-<time>/). A step that fails is logged and the
# next one runs; the script always ends 0 so that what was measured comes back.
#
#     bash bench/device_run.sh [--quick]      # --quick: small sizes, to check the script itself (minutes here)
#
# BUDGET_SECS (default 450): no step starts once this much has passed, and none runs past it.
# PYTHON (default: the first of python3, python3.14 … python3.11 that is 3.11 or later): the venvs' interpreter.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
wheels="$here/.wheels"
work="$here/.device"
out="${OUT:-$root/bench/results/device-$(date -u +%Y%m%d-%H%M)}"
budget="${BUDGET_SECS:-450}"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then  # the first CPython 3.11 or later on PATH
    for candidate in python3 python3.14 python3.13 python3.12 python3.11; do
        if command -v "$candidate" >/dev/null &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            python="$candidate"
            break
        fi
    done
fi
quick=""
[[ "${1:-}" == "--quick" ]] && quick=1
began=$SECONDS
mkdir -p "$out" "$work"

log() { echo "[$((SECONDS - began)) s] $*" | tee -a "$out/run.log"; }

if [[ -z "$python" ]]; then
    log "no CPython 3.11 or later on PATH: set PYTHON"
    exit 0
fi
if [[ ! -d "$wheels" ]]; then
    log "no bench/.wheels: run bash bench/device_wheels.sh where the package index answers, and carry bench/.wheels"
    exit 0
fi

{
    date -u
    uname -a
    echo "cores: $(nproc)"
    lscpu 2>/dev/null | grep -E '^(Model name|CPU\(s\)|Thread|Socket|CPU max MHz)'
    free -m
    uptime
    "$python" -V
    df -h /tmp /dev/shm
    findmnt -T /tmp 2>/dev/null
    git -C "$root" log -1 --format='commit %H %s' 2>/dev/null
} >"$out/machine.txt" 2>&1
log "machine: $(nproc) cores, $("$python" -V 2>&1), load $(cut -d' ' -f1-3 /proc/loadavg)"

venv() {  # a venv at $1 with pip, from the wheelhouse only (a Python without ensurepip gets pip from its wheel)
    if ! "$python" -m venv "$1" >/dev/null 2>&1; then
        rm -rf "$1"
        "$python" -m venv --without-pip "$1" || return 1
    fi
    if [[ ! -x "$1/bin/pip" ]]; then
        local wheel
        wheel="$(ls "$wheels"/pip-*.whl | head -1)"
        "$1/bin/python" "$wheel/pip" install --quiet --no-index --find-links "$wheels" pip || return 1
    fi
}

install() {
    venv "$work/venv" &&
        "$work/venv/bin/pip" install --quiet --disable-pip-version-check --no-index --find-links "$wheels" hatchling editables &&
        "$work/venv/bin/pip" install --quiet --disable-pip-version-check --no-index --find-links "$wheels" \
            -c "$wheels/constraints.txt" --no-build-isolation -e "$root"
}
if ! install >>"$out/run.log" 2>&1; then
    log "installing claimcheck from bench/.wheels failed (see above in run.log)"
    exit 0
fi
fastmcp_python="$work/fastmcp/bin/python"
if ! { venv "$work/fastmcp" && "$work/fastmcp/bin/pip" install --quiet --disable-pip-version-check --no-index \
    --find-links "$wheels" "${FASTMCP_SPEC:-fastmcp==4.2.3}"; } >>"$out/run.log" 2>&1; then
    log "installing FastMCP failed: the HTTP comparison runs without it"
    fastmcp_python=""
fi
py="$work/venv/bin/python"
log "installed: $("$py" -c 'import mcp, pydantic_core; print("mcp", mcp.__version__ if hasattr(mcp, "__version__") else "", "pydantic-core", pydantic_core.__version__)' 2>&1)"

step() {  # step NAME ESTIMATED_SECS COMMAND...: runs it if the budget has room, output to $out/NAME.txt
    local name="$1" estimate="$2"
    shift 2
    local left=$((budget - (SECONDS - began)))
    if ((left < estimate)); then
        log "skipped $name: ${left} s left, it needs about ${estimate} s"
        return
    fi
    log "start $name (load $(cut -d' ' -f1-3 /proc/loadavg))"
    (cd "$root" && timeout --kill-after=5 "$left" "$@") >"$out/$name.txt" 2>&1
    log "end $name: exit $? (load $(cut -d' ' -f1-3 /proc/loadavg))"
}

if [[ -n "$quick" ]]; then
    sizes=10,50 chain_sizes=20,50 calls=200 levels=1,8 rounds=1 repeat=1
else
    sizes=100,1000 chain_sizes=200,1000 calls=600 levels=1,8,32 rounds=2 repeat=3
fi
fastmcp_args=(--no-fastmcp)
[[ -n "$fastmcp_python" ]] && fastmcp_args=(--fastmcp-python "$fastmcp_python")

# In order of what is least known: a large output against its floors (both texts), HTTP against FastMCP, a
# chain, then what the 2-core machine has measured already (both eras, HTTP downstreams, tmpfs).
step large_outputs_stdio 60 "$py" bench/large_outputs.py --sizes "$sizes" --kinds stdio --skip direct,fastmcp \
    --repeat "$repeat" --json "$out/large_outputs_stdio.json"
step large_outputs_stdio_ascii 60 "$py" bench/large_outputs.py --ascii --sizes "$sizes" --kinds stdio \
    --skip direct,fastmcp --repeat "$repeat" --json "$out/large_outputs_stdio_ascii.json"
step http_load 120 "$py" bench/http_load.py "${fastmcp_args[@]}" --calls "$calls" --levels "$levels" \
    --json "$out/http_load.json"
step chain_large 60 "$py" bench/chain_large.py --sizes "$chain_sizes" --rounds "$rounds" \
    --paths single,chain,chain-http --json "$out/chain_large.json"
step raw_calls_eras 60 "$py" bench/raw_calls.py --eras handshake,2026-07-28 --calls "$((calls * 4))" --rounds 3
step chain_large_ascii 40 "$py" bench/chain_large.py --ascii --sizes "$chain_sizes" --rounds "$rounds" \
    --paths single,chain --json "$out/chain_large_ascii.json"
step large_outputs_http 40 "$py" bench/large_outputs.py --sizes "$sizes" --kinds http \
    --skip direct,fastmcp,python-floor --repeat "$repeat" --json "$out/large_outputs_http.json"
step large_outputs_tmpfs 40 env TMPDIR=/dev/shm "$py" bench/large_outputs.py --sizes "$sizes" --kinds stdio \
    --skip direct,fastmcp --repeat "$repeat" --json "$out/large_outputs_stdio_tmpfs.json"
"$py" bench/device_summary.py "$out" >"$out/summary.md" 2>>"$out/run.log"
log "done: results in $out, each target beside its figure in summary.md"
exit 0
