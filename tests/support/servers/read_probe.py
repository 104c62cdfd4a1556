"""Reads one large stored output through claimcheck's own readers and reports each one's peak memory.

Run by tests/handles/test_reading_large_outputs.py as
`python -m tests.support.servers.read_probe BIG_FILE LINES WORKDIR PROBE...`; prints one JSON object: per probe
its answer and its memory (KiB of VmHWM above the RSS it started from), and the peak RSS (VmHWM) of the grep
worker processes. Each probe first runs on a small output (so imports and workers are warm), then the peak is
reset (/proc/self/clear_refs) and it runs on the big one. The text is made by `line`, so the test knows every
answer without reading the file.
"""

from __future__ import annotations

import json
import os
import re
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from fs_sandbox import INDEX_SUFFIX, IndexBuilder

LINE_CHARS = 64
NEEDLE_QUOTE = "marks line"


def needle_lines(total: int) -> list[int]:
    return [5, total // 2, total - 3]


def line(i: int, total: int) -> str:
    """Line `i` (0-based): always LINE_CHARS characters; every 7th has a two-byte character."""
    if i in needle_lines(total):
        body = f"NEEDLE-{needle_lines(total).index(i)} marks line {i} for the search"
        return f"{i:09d} {body}".ljust(LINE_CHARS - 1) + "\n"
    return f"{i:09d}{_rest(i % _PERIOD)}"


_PERIOD = 7000  # the rest of a plain line repeats with i % 7 and i % 1000


def _rest(i: int) -> str:
    body = f"alpha beta gamma delta {'café' if i % 7 == 0 else 'cafe'} epsilon {i % 1000:03d}"
    return f" {body}".ljust(LINE_CHARS - 10) + "\n"


def chars(start: int, stop: int, total: int) -> str:
    """Characters `start`..`stop` of the whole text."""
    first, last = start // LINE_CHARS, min(total, (stop - 1) // LINE_CHARS + 1)
    text = "".join(line(i, total) for i in range(first, last))
    return text[start - first * LINE_CHARS : stop - first * LINE_CHARS]


def write(path: Path, total: int) -> None:
    rests = [_rest(i) for i in range(_PERIOD)]
    needles = set(needle_lines(total))
    index = IndexBuilder()  # the line index, built while the file is written as claimcheck's writers do
    with open(path, "wb") as out:
        for start in range(0, total, 65536):
            block = range(start, min(total, start + 65536))
            text = "".join(line(i, total) if i in needles else f"{i:09d}{rests[i % _PERIOD]}" for i in block)
            data = text.encode()
            index.feed(data)
            out.write(data)
    path.with_name(path.name + INDEX_SUFFIX).write_bytes(index.finish())


def _status(field: str, pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status", encoding="utf-8") as status:
        match = re.search(rf"^{field}:\s+(\d+) kB", status.read(), re.MULTILINE)
    assert match is not None
    return int(match.group(1))


def _children() -> list[int]:
    """This process's children (the grep workers): their peak is their own, counted from their exec."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as stat:
                if int(stat.read().rpartition(")")[2].split()[1]) == os.getpid():
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="utf-8") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


class _FakeLLM:
    """Answers every chunk, and the reduce, with a quote of the last needle line (checked against the file)."""

    model = "probe-llm"
    context_window = 8000
    max_output_tokens = 500
    supports_tools = False

    def __init__(self, quote: str) -> None:
        self.quote = quote

    async def complete(self, messages: Sequence[Any], *, max_tokens: int, tools: Sequence[Any] = ()) -> Any:
        from extraction import Completion

        nonce = re.search(r"claimcheck-([0-9a-f]+)-FINAL", messages[0].content)
        assert nonce is not None
        tag = f"claimcheck-{nonce.group(1)}-FINAL"
        return Completion(f'<{tag} format="text">the needle\nEVIDENCE:\n> "{self.quote}"\n</{tag}>')


async def main(big: Path, total: int, workdir: Path, probes: list[str]) -> dict[str, Any]:
    from extraction import Document, Usage, estimate_source_tokens, source_exceeds
    from fs_sandbox import Sandbox
    from server.config import parse_config
    from server.errors import ClaimcheckError
    from server.handles.calls import Call, Description
    from server.handles.files import run_file_tool
    from server.handles.outcome import Inline, Output
    from server.handles.own_tools import run_own_tool
    from server.handles.retrieval import Opener
    from server.proxy import Proxy

    small = workdir / "small"
    write(small, 3000)
    config = parse_config({"mcpServers": {}, "settings": {"root": str(workdir), "asyncTokenThreshold": 10000}})
    report: dict[str, Any] = {"reset": True, "probes": {}}
    async with Proxy.start(config) as proxy:
        session = proxy.sessions.open()
        sandbox = Sandbox(proxy.sessions.store.run_root, timeout=300)

        def stored(source: Path, lines: int) -> Call:
            handle = f"{session.id}/{uuid.uuid4().hex}"
            os.link(source, session.store.path / handle.partition("/")[2])
            index = source.with_name(source.name + INDEX_SUFFIX)
            if index.exists():
                os.link(index, session.store.path / (handle.partition("/")[2] + INDEX_SUFFIX))
            call = Call(Description(handle, "probe__big", "probe", "big", {"n": lines}))
            call.hand_out(None)
            size, sha256 = source.stat().st_size, uuid.uuid4().hex
            output = Output(
                size,
                lines=lines,
                tokens=lines * 20,
                tokens_exact=False,
                tokens_counted=True,
                sha256=sha256,
                stored=True,
            )
            call.settle(Inline(), "ready", output)
            session.calls[handle] = call
            return call

        async def extract(call: Call, output: Opener, request: str, mode: Any) -> Any:
            document = Document(call.public_name, "{}", call.handle, call.bytes, call.lines, call.tokens)
            quote = line(needle_lines(call.lines)[-1], call.lines)[10:60].strip()
            async with output() as source:
                return await proxy.extractor.extract(
                    document, source, call.sha256, request, mode,
                    llm=_FakeLLM(quote), usage=Usage(), tools={}, threshold=10000,
                )  # fmt: skip

        async def own(call: Call, arguments: dict[str, Any]) -> str:
            async def quiet(*_: Any) -> None:
                pass

            try:
                result = await run_own_tool(
                    "tool_output", {"handle": call.handle, **arguments}, session=session, origin="",
                    sessions=proxy.sessions, settings=config.settings, threshold=10000, report=quiet, extract=extract,
                )  # fmt: skip
            except ClaimcheckError as exc:  # the error result a client would get
                return f"isError: {exc}"
            return _text(result)

        async def file_tool(name: str, call: Call, arguments: dict[str, Any]) -> str:
            result = await run_file_tool(
                name, {"file": call.handle, **arguments}, session=session, sessions=proxy.sessions,
                sandbox=sandbox, threshold=10000,
            )  # fmt: skip
            return _text(result)

        def tokens(call: Call) -> Awaitable[Any]:
            def blocking() -> Any:
                with session.store.open_output(call.handle) as opened:
                    return [source_exceeds(opened, 2_000_000), estimate_source_tokens(opened)[0]]

            return anyio.to_thread.run_sync(blocking)

        runs: dict[str, Callable[[Call], Awaitable[Any]]] = {
            "slice-offset": lambda c: own(c, {"mode": "slice", "slice": {"start": c.lines * LINE_CHARS - 100, "length": 50}}),  # noqa: E501
            "slice-anchor": lambda c: own(c, {"mode": "slice", "slice": {"anchor": "NEEDLE", "match_index": 2}}),
            "raw": lambda c: own(c, {"mode": "raw"}),
            "truncate": lambda c: own(c, {"mode": "truncate"}),
            "full-chunked": lambda c: own(c, {"mode": "full-chunked", "extract": "the needle"}),
            "tokens": tokens,
            "read-tail": lambda c: file_tool("Read", c, {"lines": 3, "headOrTail": "tail"}),
            "read-middle": lambda c: file_tool("Read", c, {"start": 1_000_000, "lines": 2}),
            "grep-literal": lambda c: file_tool("Grep", c, {"regex": "NEEDLE", "before": 1, "after": 1}),
            "grep-regex": lambda c: file_tool("Grep", c, {"regex": r"NEEDLE-\d marks", "before": 0, "after": 0}),
            "grep-insensitive": lambda c: file_tool("Grep", c, {"regex": "needle-2", "before": 0, "after": 0}),
        }  # fmt: skip
        warm, cold = stored(small, 3000), stored(big, total)
        for name in probes:
            await runs[name](warm)
            report["reset"] = _reset_peak() and report["reset"]
            before = _status("VmRSS")
            answer = await runs[name](cold)
            report["probes"][name] = {"answer": answer, "peak_kib": _status("VmHWM") - before}
        report["workers_peak_kib"] = max((_status("VmHWM", pid) for pid in _children()), default=0)
        await sandbox.aclose()
    return report


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:])))
