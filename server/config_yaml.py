"""YAML configs (goose's, Continue's): read with PyYAML, the `yaml` extra, imported only when a YAML file is read.

A document is composed first and refused if its aliases (`*name`) expand it past `YAML_NODES` values or make a value
contain itself: PyYAML shares an alias's value rather than copying it, but whatever walks the result (a server's
entry checked, its `${VAR}`s expanded) walks every copy, so an alias bomb in a pasted file would take all memory.
"""

from __future__ import annotations

from typing import Any

from server.distribution import install_command
from server.errors import ConfigError

__all__ = ["YAML_MISSING", "YAML_NODES", "loads_yaml"]

YAML_MISSING = f"reading a YAML config needs the [yaml] extra (PyYAML): {install_command('yaml')}"
YAML_NODES = 100_000
"""The most values a YAML config may hold with its aliases expanded (a goose config holds a few hundred)."""


def loads_yaml(text: str) -> Any:
    """The parsed YAML `text`; any mistake, or a document too large once its aliases are expanded, is one line."""
    try:
        import yaml  # the `yaml` extra: only a YAML config needs it
    except ImportError:
        raise ConfigError(YAML_MISSING) from None
    try:
        loader = yaml.SafeLoader(text)  # which refuses a character YAML does not allow, at once
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        code = f"#x{exc.character:04x}" if isinstance(exc.character, int) else repr(exc.character)
        raise ConfigError(
            f"not valid YAML: line {line}, column {column}: a character YAML does not allow ({code})"
        ) from None
    try:
        root = loader.get_single_node()  # composed once: checked, then built from the same nodes
        if root is None:
            return None
        _within_budget(root)
        return loader.construct_document(root)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ConfigError(f"not valid YAML: {where}{getattr(exc, 'problem', None) or exc}") from None
    except RecursionError:
        raise ConfigError("not valid YAML for a config: nested too deeply") from None
    finally:
        loader.dispose()


def _within_budget(root: Any) -> None:
    """Refuse a YAML document whose aliases (`*name`) make it larger than `YAML_NODES` nodes once expanded, or
    make it contain itself: an alias bomb in a pasted file would otherwise take all memory when read."""
    sizes: dict[int, int] = {}  # a node's size with its aliases expanded; -1 while it is being counted

    def size(node: Any) -> int:
        known = sizes.get(id(node))
        if known == -1:
            raise ConfigError(f"not valid YAML for a config: {_where(node)}an alias makes a value contain itself")
        if known is not None:
            return known
        sizes[id(node)] = -1
        children = node.value if isinstance(node.value, list) else []
        total = 1
        for child in children:
            total += sum(size(part) for part in child) if isinstance(child, tuple) else size(child)
            if total > YAML_NODES:
                raise ConfigError(
                    f"not valid YAML for a config: {_where(node)}its aliases expand it past {YAML_NODES} values "
                    "(an alias bomb?); write the values out"
                )
        sizes[id(node)] = total
        return total

    if root is not None:
        size(root)


def _where(node: Any) -> str:
    mark = node.start_mark
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
