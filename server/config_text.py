"""A config file's text, read as its client wrote it: UTF-8 (with or without a byte order mark) or UTF-16, and JSON
with comments and trailing commas (VS Code, Cursor, Zed), TOML (Codex) or YAML (goose, Continue:
`server.config_yaml`). Each way it can be wrong is one line that names the fix: another encoding, single quotes, an
entry pasted without its braces, where the JSON broke."""

from __future__ import annotations

import codecs
import json
import tomllib
from pathlib import Path
from typing import Any

from server.client_configs import SERVER_TABLES
from server.config_yaml import loads_yaml
from server.errors import ConfigError, clip

__all__ = ["loads_jsonc", "parse_config_text", "read_config_data", "read_config_text", "strip_jsonc"]


def read_config_data(path: Path) -> Any:
    """The parsed content of a config file: TOML for `*.toml` (Codex), else JSON, comments and trailing commas
    allowed as VS Code and Cursor write them. `ConfigError` (one line, no path) when it cannot be parsed."""
    return parse_config_text(path, read_config_text(path)[0])


def read_config_text(path: Path) -> tuple[str, str]:
    """A config file's text, and the encoding to write it back in: UTF-8, with its byte order mark where it had one
    (`utf-8-sig`: Notepad writes one; it is not the config's), or UTF-16 with one (`utf-16-le`/`-be`: Windows
    PowerShell's `>` and `Out-File` write it). `ConfigError` (one line) when it cannot be read."""
    try:
        data = path.read_bytes()
        for bom, encoding in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
            if data.startswith(bom):
                return data[len(bom) :].decode(encoding), encoding
        if data.startswith(codecs.BOM_UTF8):
            return data.decode("utf-8-sig"), "utf-8-sig"
        return data.decode("utf-8"), "utf-8"
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise ConfigError("is a directory: give the config file's path") from None
    except UnicodeDecodeError as exc:
        kind = "UTF-16" if exc.encoding.startswith("utf-16") else "UTF-8"
        raise ConfigError(
            f"not valid {kind} text (byte {exc.start}: {exc.reason}); save the file as UTF-8 in an editor"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc}") from None


def parse_config_text(path: Path, text: str) -> Any:
    """The parsed `text` of the config file at `path` (TOML for `*.toml`, YAML for `*.yaml` and `*.yml`, else JSON
    with comments)."""
    suffix = path.suffix.lower()
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"not valid TOML: {exc}") from None
        except RecursionError:
            raise ConfigError("not readable TOML: it is nested too deeply (a config nests a few levels)") from None
    if suffix in (".yaml", ".yml"):
        return loads_yaml(text)
    return loads_jsonc(text)


def loads_jsonc(text: str) -> Any:
    """JSON, or JSON with `//` and `/* */` comments and trailing commas; the error names the first problem."""
    try:
        return _loads_jsonc(text)
    except RecursionError:
        raise ConfigError("not readable JSON: it is nested too deeply (a config nests a few levels)") from None


def _loads_jsonc(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        first = exc
    try:
        return json.loads(strip_jsonc(text))
    except json.JSONDecodeError:
        pass
    fragment = _fragment_name(text)
    if fragment is not None:  # `"github": {…}` copied out of a README's block
        name = clip(fragment, 40)
        whole = f'{{"{name}": {{…}}}}'
        if fragment not in (*SERVER_TABLES, "settings"):  # a server's entry: inside the table
            whole = f'{{"mcpServers": {whole}}}'
        raise ConfigError(
            f'not valid JSON: the file holds "{name}": {{…}} without the braces around it; write it as {whole}'
        )
    where = f"at line {first.lineno} column {first.colno}"
    if text[first.pos : first.pos + 1] == "'":  # a Python dict, or JavaScript, pasted
        raise ConfigError(f"not valid JSON: a string in single quotes {where}; JSON's strings take double quotes")
    raise ConfigError(f"not valid JSON: {first.msg} {where}") from None


def _fragment_name(text: str) -> str | None:
    """The first key of `text` when it is an object's members without the object's braces, else None."""
    if not text.lstrip().startswith('"'):
        return None
    try:
        data = json.loads(strip_jsonc("{" + text + "}"))
    except json.JSONDecodeError:
        return None
    return next(iter(data), None) if isinstance(data, dict) else None


def strip_jsonc(text: str) -> str:
    """`text` without comments and trailing commas, strings left as they are (line numbers kept)."""
    out: list[str] = []
    comma = -1  # where in `out` the last comma is, while only whitespace and comments follow it
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            out.append(text[i : end + 1])
            i, comma = end + 1, -1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            out.append("\n" * text.count("\n", i, n if end < 0 else end))
            i = n if end < 0 else end + 2
        else:
            if char in "}]" and comma >= 0:
                out[comma] = ""  # a trailing comma
            if char == ",":
                comma = len(out)
            elif not char.isspace():
                comma = -1
            out.append(char)
            i += 1
    return "".join(out)
