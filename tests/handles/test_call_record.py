"""A call is a frozen description, one outcome set once by settlement, and a small lifecycle that is its only writer."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import mcp_types as types
import pytest

from server.handles.calls import Call, Description
from server.handles.outcome import Failed, Inline, Lost, Output, Stored
from server.handles.state import HandleState, mirror, snapshot, update
from server.handles.store import OutputStore

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).resolve().parents[2] / "server"


def a_call(handle: str = "session-a/1") -> Call:
    return Call(Description(handle, "down__echo", "down", "echo", {"n": 1}))


def result_of(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def test_settling_a_call_twice_is_refused_and_changes_nothing() -> None:
    call, told = a_call(), []
    call.then(lambda: told.append("finished"))
    first = Inline(result_of("the answer"))
    assert call.settle(first, "ready", Output(10, 10, 1)) is True
    finished_at = call.finished_at
    assert call.settle(Failed("too late"), "failed", Output(99, 99, 9)) is False
    assert (call.outcome, call.status, call.error, call.bytes, call.finished_at) == (
        first,
        "ready",
        None,
        10,
        finished_at,
    )
    assert call.result == result_of("the answer") and told == ["finished"]
    assert [kind for _, kind, _ in call.log] == ["finished"]


async def test_no_attribute_of_a_call_can_be_assigned_from_outside() -> None:
    call = a_call()
    public = [name for name in dir(Call) if not name.startswith("_") and not callable(getattr(call, name))]
    assert {"handle", "status", "result", "answer", "fallback", "error", "stored", "over_threshold"} <= set(public)
    for name in public:
        with pytest.raises(AttributeError):
            setattr(call, name, getattr(call, name))
    with pytest.raises(AttributeError):
        call.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.description.handle = "another"  # type: ignore[misc]


def test_no_module_outside_calls_writes_a_calls_private_state() -> None:
    """Only `server/handles/calls.py` sets what `Call.__slots__` holds; others go through its methods."""
    slots = set(Call.__slots__)
    found = []
    for path in sorted(SERVER.rglob("*.py")):
        if path == SERVER / "handles" / "calls.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = [
                    t for target in node.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])
                ]
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
                found.append(f"{path.relative_to(SERVER)}:{node.lineno} setattr")
            found += [
                f"{path.relative_to(SERVER)}:{t.lineno} {ast.unparse(t)}"
                for t in targets
                if isinstance(t, ast.Attribute) and t.attr in slots and ast.unparse(t.value) != "self"
            ]
    assert found == []


async def test_the_old_flags_are_views_of_the_outcome() -> None:
    lost, stored, raw = a_call("s/1"), a_call("s/2"), a_call("s/3")
    lost.settle(Lost("only its first part"), "failed", Output(5, 900, 1, over_threshold=True))
    assert (lost.fallback, lost.error, lost.result, lost.over_threshold, lost.produced) == (
        "only its first part",
        "only its first part",
        None,
        True,
        900,
    )
    stored.settle(
        Stored(False), "ready", Output(900, 900, 40, 300, tokens_counted=True, stored=True, over_threshold=True)
    )
    assert (stored.result, stored.fallback, stored.stored, stored.tokens_or_none()) == (None, None, True, 300)
    raw.settle(Inline(raw={"content": []}), "ready")
    assert (raw.answer, raw.result, raw.tokens_or_none()) == ({"content": []}, None, None)


async def test_a_mirror_is_a_description_and_an_outcome_set_once_its_state_is_final(tmp_path: Path) -> None:
    store = OutputStore.create(tmp_path)
    try:
        session = store.open_session()
        running = HandleState("s/9", "s", "other", "down__echo", "down", "running", started=1000.0, origin="o")
        call = mirror(running, session)
        assert (call.handle, call.session_id, call.origin, call.handed_out, call.outcome) == (
            "s/9",
            "s",
            "o",
            True,
            None,
        )
        assert call.settle(Failed("not here"), "failed") is False and not call.finished.is_set()
        done = dataclasses.replace(running, status="ready", finished=1002.0, bytes=5, lines=1, inline=True, stored=True)
        update(call, done)
        assert call.finished.is_set() and call.outcome == Inline() and call.finished_at == pytest.approx(1002.0)
        call.show(result_of("hello"))
        update(call, done)  # read again: what was known of its end stays
        shared = snapshot(call, "other")
        assert call.result == result_of("hello") and (shared.status, shared.inline, shared.stored) == (
            "ready",
            True,
            True,
        )
        local = a_call()
        update(local, done)  # a call of this replica is settled here, never from a shared state
        assert (local.status, local.outcome, local.finished.is_set()) == ("running", None, False)
    finally:
        store.close()
