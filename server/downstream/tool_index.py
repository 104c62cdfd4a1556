"""The servers' tools as a search index: `find_tools` ranks them by a plain-language need.

SQLite FTS5, from the standard library: bm25 is built in, the porter stemmer folds "commits" into "commit",
there is no new dependency, nothing is downloaded and nothing runs outside this process. (bm25s and rank-bm25 would
be a new dependency each for the same ranking over a few hundred short documents, and bring numpy along.)

Each tool is one row: its public name and the words of it, its server, its description, its parameter names,
and its parameter descriptions, weighted in that order of trust. Names are split at `_`, `-`, `.` and camel case
("readTextFile", "git_log", "get-sum") into the words a need is written in. The index follows the pool: it is
rebuilt when the pool's routing table is a new one (a server started, restarted or changed its tools).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping
from typing import Any, Protocol

import mcp_types as types

from extraction import exceeds
from server.config import Settings

__all__ = ["MAX_QUERY_CHARS", "MAX_QUERY_WORDS", "Indexed", "ToolIndex", "ToolSearch", "words_of"]

MAX_QUERY_CHARS = 1000
"""The longest need `find_tools` reads; past it, the rest is ignored."""
MAX_QUERY_WORDS = 32
"""The most words of a need that are looked up."""
_WEIGHTS = (2.0, 1.0, 2.0, 1.0, 0.5)
"""bm25 weights of the columns: name words, server, description, parameter names, parameter descriptions."""
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+")
_STOP = frozenset(
    "a an the of to in on for from by with and or is are be it its this that these those i me my we our you your "
    "what which how can could should would do does did please want need some any all into at as about s t am was were "
    "has have had there then just".split()
)
_ALSO = {
    word: also.split()
    for word, also in {
        "folder": "directory",
        "dir": "directory",
        "picture": "image",
        "photo": "image",
        "remove": "delete",
        "erase": "delete",
        "forget": "delete",
        "make": "create",
        "new": "create",
        "rename": "move",
        "save": "write",
        "modify": "edit change",
        "modified": "change",
        "url": "fetch",
        "web": "url fetch",
        "website": "url fetch",
        "download": "fetch",
        "lookup": "search",
        "look": "search",
        "find": "search",
        "history": "log",
        "fact": "observation",
        "facts": "observation",
        "remember": "memory knowledge observation",
        "recall": "memory knowledge search",
        "memorize": "memory knowledge observation",
        "note": "memory knowledge observation",
        "mind": "memory knowledge observation",
        "record": "memory knowledge observation",
        "say": "memory knowledge search",
        "said": "memory knowledge search",
        "tell": "memory knowledge search",
        "told": "memory knowledge search",
        "know": "memory knowledge search",
        "who": "search",
        "everything": "entire",
        "now": "current",
        "today": "current date",
        "date": "time",
        "hour": "time",
        "clock": "time",
        "environment": "env",
    }.items()
}
"""Words a need is often written in, and the words tools tend to use for the same (a general table of software
verbs and nouns, not one server's vocabulary): each is searched beside the need's own word. What a person asks
to be remembered, or asks back ("who did I say…"), is a memory's: "memory", "observation" and "search" are the
words memory servers use."""
_PHRASES = {
    "what time is it": "current",
    "time is it": "current",
    "right now": "current",
    "keep track": "memory knowledge observation",
}
"""Phrases whose meaning is in no one word of them: "what time is it" asks for the current time."""
_UNDOING = frozenset("delete remove erase forget drop clear reset unstage undo revert discard".split())
"""Words of a need that asks to take something away: the tools that delete or reset rank before the others for
such a need, and after them for any other."""
_RERANKED = 20
"""How many of bm25's best are looked at again (tools that take something away moved after the others)."""
_SCHEMA_DEPTH = 3
"""How deep nested objects' parameter names are read (an argument's own fields; deeper ones rarely name a need)."""


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class Indexed(Protocol):
    """What the index reads of a route (`server.downstream.pool.Route`)."""

    @property
    def downstream(self) -> _Named: ...

    @property
    def tool(self) -> str: ...

    @property
    def definition(self) -> types.Tool: ...

    @property
    def background_param(self) -> str | None: ...


class ToolSearch:
    """Whether `tools/list` hides the catalog behind `find_tools` (`settings.catalog`), and the index it searches."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.index = ToolIndex()
        self._sized: tuple[object, bool] = (None, False)

    def searching(self, routes: Mapping[str, Indexed]) -> bool:
        """ "search"; "auto" once the forwarded definitions pass `catalogTokens` (counted once per routing table)."""
        mode = self.settings.catalog
        if mode != "auto":
            return mode == "search"
        if self._sized[0] is not routes:
            self._sized = (routes, over_tokens(routes, self.settings.catalog_tokens))
        return self._sized[1]

    def find(self, routes: Mapping[str, Indexed], need: str, limit: int) -> list[str]:
        self.index.follow(routes)
        return self.index.search(need, limit)


def over_tokens(routes: Mapping[str, Indexed], limit: int) -> bool:
    """Whether the definitions of `routes`, as `tools/list` sends them, are more than `limit` tokens."""
    text = json.dumps(
        [route.definition.model_dump(by_alias=True, mode="json", exclude_none=True) for route in routes.values()],
        separators=(",", ":"),
    )
    return exceeds(text, limit)


def words_of(text: str) -> list[str]:
    """The lowercase words of `text`, names split at `_`, `-`, `.` and camel case."""
    return [word.lower() for word in _WORD.findall(_CAMEL.sub(" ", text))]


class ToolIndex:
    """An in-memory FTS5 table over one routing table; `search` gives public names, best first."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE tools USING fts5(public UNINDEXED, name, server, description, params, details, "
            "tokenize='porter unicode61')"
        )
        self._indexed: object = None

    def follow(self, routes: Mapping[str, Indexed]) -> None:
        """Index `routes` unless it is the table indexed last (the pool makes a new one at each change)."""
        if routes is self._indexed:
            return
        rows = [_row(public, route) for public, route in routes.items()]
        with self._db:
            self._db.execute("DELETE FROM tools")
            self._db.executemany("INSERT INTO tools VALUES (?, ?, ?, ?, ?, ?)", rows)
        self._indexed = routes

    def search(self, need: str, limit: int) -> list[str]:
        """The public names of the tools that best match `need`, at most `limit`; none when no word matches."""
        terms = [word for word in dict.fromkeys(words_of(need[:MAX_QUERY_CHARS])) if word not in _STOP]
        if not terms:
            terms = list(dict.fromkeys(words_of(need[:MAX_QUERY_CHARS])))
        spoken = " ".join(words_of(need[:MAX_QUERY_CHARS]))
        phrased = [word for phrase, also in _PHRASES.items() if f" {phrase} " in f" {spoken} " for word in also.split()]
        terms = list(
            dict.fromkeys([*terms[:MAX_QUERY_WORDS], *(also for t in terms for also in _ALSO.get(t, ())), *phrased])
        )
        if not terms:
            return []
        match = " OR ".join(f'"{term}"' for term in terms)  # words only: no quote or operator gets through
        weights = ", ".join(str(weight) for weight in _WEIGHTS)
        rows = self._db.execute(
            f"SELECT public, name FROM tools WHERE tools MATCH ? ORDER BY bm25(tools, 0, {weights}) LIMIT ?",
            (match, max(limit, _RERANKED)),
        ).fetchall()
        undoing = bool(_UNDOING.intersection(terms))  # tools that take something away first for such a need only
        rows.sort(key=lambda row: bool(_UNDOING.intersection(row[1].split())) != undoing)
        return [public for public, _ in rows[:limit]]

    def close(self) -> None:
        self._db.close()


def _row(public: str, route: Indexed) -> tuple[str, str, str, str, str, str]:
    definition = route.definition
    names: list[str] = []
    details: list[str] = []
    _parameters(definition.input_schema, names, details, _SCHEMA_DEPTH)
    background = route.background_param
    names = [name for name in names if name != background]
    name_words = " ".join([*words_of(route.tool), definition.title or ""])
    return (
        public,
        name_words,
        " ".join(words_of(route.downstream.name)),
        definition.description or "",
        " ".join(" ".join(words_of(name)) for name in names),
        " ".join(details),
    )


def _parameters(schema: Any, names: list[str], details: list[str], depth: int) -> None:
    """The property names (and their descriptions) of a JSON schema, a few levels into nested objects."""
    if depth == 0 or not isinstance(schema, Mapping):
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in list(properties.items())[:200]:
            names.append(str(name))
            if isinstance(sub, Mapping):
                if isinstance(description := sub.get("description"), str):
                    details.append(description[:500])
                _parameters(sub, names, details, depth - 1)
                _parameters(sub.get("items"), names, details, depth - 1)
