"""The least a Python reader does with a large text output: the decoding floor, beside `cat`'s copying floor.

It reads the downstream's answer as the bare reader of `large_outputs.py` does (`os.read`, a megabyte at a time,
from a pipe as wide as claimcheck's), skips the message up to the text's opening quote, decodes the inside of the
JSON string in 64 KiB slices with pydantic-core (claimcheck's decoder, the fastest measured: see
docs/benchmarks.md), encodes each slice's text to UTF-8, and hands the bytes in 1 MiB batches to a thread that
writes them (`writev`), at most two batches waiting. Nothing else: no JSON-RPC, no tokenizer, no line index, no
event loop, no second process. The raw downstream ends the text with `"}], "isError": …}}` and a newline, so the
text's end is found from the back of the last block.

What claimcheck takes beyond this is its own; what this takes beyond `cat` is the decoding, which any Python
program that stores the text (not the JSON that carries it) pays.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from pathlib import Path

from pydantic_core import from_json

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from server.downstream.json_cuts import safe_cut_bytes, utf8_cut  # the cuts claimcheck decodes at

SLICE = 64 * 1024  # server.downstream.jsonstream._SLICE_BYTES
BATCH = 1 << 20  # server.downstream.spool_file.FLUSH_BYTES
_OPENING = b'"text": "'
_CLOSING = b'"}]'


def decode_into(stdout: int, target: Path) -> int:
    """Read the answer `stdout` gives, its text decoded into `target`; the text's bytes."""
    batches: queue.Queue[list[bytes] | None] = queue.Queue(2)
    writer = threading.Thread(target=_write, args=(target, batches), name="python floor writer")
    writer.start()
    carry, batch, batched, size = b"", [], 0, 0
    opened = False
    try:
        while True:
            block = os.read(stdout, 1 << 20)
            if not block:
                raise EOFError("the downstream closed stdout")
            data = carry + block if carry else block
            if not opened:
                start = data.find(_OPENING)
                if start < 0:
                    carry = data
                    continue
                data, opened = data[start + len(_OPENING) :], True
            last = data.endswith(b"\n")
            if last:
                data = data[: data.rindex(_CLOSING)]
            position = 0
            while position < len(data):
                piece = data[position : position + SLICE]
                cut = len(piece) if last and position + SLICE >= len(data) else safe_cut_bytes(piece, utf8_cut(piece))
                if cut == 0:
                    break  # an escape or a character cut by the block's end: with the next block
                text = from_json(b"".join((b'"', piece[:cut], b'"')), cache_strings=False).encode()
                batch.append(text)
                batched += len(text)
                size += len(text)
                position += cut
                if batched >= BATCH:
                    batches.put(batch)
                    batch, batched = [], 0
            if last:
                return size
            carry = data[position:]
    finally:
        batches.put(batch)
        batches.put(None)
        writer.join()


def _write(target: Path, batches: queue.Queue[list[bytes] | None]) -> None:
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while (batch := batches.get()) is not None:
            if batch:
                os.writev(fd, batch)
    finally:
        os.close(fd)
