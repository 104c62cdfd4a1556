"""The JSON view's needle query against GNU grep -c on the same 1000 MiB single-line JSON file, interleaved.
The file is bench/needle_downstream.py's `json` output, written to /tmp/needle-floor.json.

Usage: python bench/needle_floor.py
"""

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from needle_downstream import pieces

from fs_sandbox import open_file
from server.handles.json_view import query

path = Path("/tmp/needle-floor.json")
with path.open("w") as out:
    for piece in pieces("json", 1000, "NEEDLE-7f3a9c", "K9-TANGO-42"):
        out.write(piece)
print("load", os.getloadavg(), flush=True)
for round_ in range(2):
    t = time.perf_counter()
    subprocess.run(["grep", "-c", "NEEDLE-7f3a9c", str(path)], capture_output=True)
    g = time.perf_counter() - t
    with open_file(path.parent, path.name) as src:
        t = time.perf_counter()
        r = query(src, "records[?contains(to_string(@), 'NEEDLE-7f3a9c')]", max_chars=30000, grep_hint="g")
        q = time.perf_counter() - t
    print(
        f"round {round_}: grep -c {g:.2f} s, JSON view query {q:.2f} s, ratio {q / g:.1f}",
        "K9-TANGO-42" in r[0],
        flush=True,
    )
print("load", os.getloadavg(), flush=True)
path.unlink()
