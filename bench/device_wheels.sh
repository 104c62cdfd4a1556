#!/usr/bin/env bash
# Fill bench/.wheels/ with every wheel bench/device_run.sh installs, for CPython 3.11 to 3.14 on x86-64 Linux:
# claimcheck's dependencies at the versions of this checkout's .venv (so the device runs what was measured
# here), FastMCP 4.2.3 (the peer the issue's figures name) with its own, pip, and hatchling with editables (to
# install the tree editable). The device has no network: this is how the packages get there. Run it here, where
# the package index answers; then carry bench/.wheels (about 45 MiB, under the device's 64 MiB) with the run:
#     bash bench/device_wheels.sh
#     run: OUT=$OUT bash bench/device_run.sh        carry: ["bench/.wheels"]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
out="$here/.wheels"
pip="${PIP:-$root/.venv/bin/pip}"
versions="${VERSIONS:-3.11 3.12 3.13 3.14}"
fastmcp="${FASTMCP_SPEC:-fastmcp==4.2.3}"
platforms=(--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64
           --platform manylinux_2_27_x86_64 --platform manylinux_2_12_x86_64 --platform manylinux2010_x86_64
           --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64)

mkdir -p "$out"
# The versions this checkout runs with: constraints, not requirements (a package one Python needs and another
# does not is left out where it is not needed).
"$pip" freeze --exclude-editable 2>/dev/null | grep -v '^#' >"$out/constraints.txt"
for version in $versions; do
    echo "wheels for CPython $version"
    "$pip" download --quiet --disable-pip-version-check --only-binary=:all: --implementation cp \
        --python-version "$version" "${platforms[@]}" -c "$out/constraints.txt" -d "$out" "$root" 2>&1 |
        grep -v '^WARNING: Location' || true
    # FastMCP goes into a venv of its own: its versions are its own, not claimcheck's.
    "$pip" download --quiet --disable-pip-version-check --only-binary=:all: --implementation cp \
        --python-version "$version" "${platforms[@]}" -d "$out" "$fastmcp" 2>&1 |
        grep -v '^WARNING: Location' || true
done
"$pip" download --quiet --disable-pip-version-check --only-binary=:all: -d "$out" pip hatchling editables 2>&1 |
    grep -v '^WARNING: Location' || true
rm -f "$out"/mcp_claimcheck-*.whl  # the tree itself is installed, editable, on the device
echo "bench/.wheels: $(ls "$out"/*.whl | wc -l) wheels, $(du -sh "$out" | cut -f1)"
