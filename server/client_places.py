"""Which clients claimcheck knows, where each keeps its servers on this system, and a client's file found by its
name (`locate`) or told apart from a typo (`unknown_client`)."""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from server.client_files import ClientFile
from server.platform import app_config_dir

__all__ = ["CLIENTS", "EDITORS", "NAMES", "locate", "tool_name_room", "unknown_client", "usual_paths"]

CLIENTS = (
    "claude-desktop",
    "claude-code",
    "cursor",
    "vscode",
    "windsurf",
    "codex",
    "opencode",
    "zed",
    "goose",
    "continue",
    "gemini",
    "cline",
    "roo",
    "kiro",
    "lmstudio",
)


NAMES = {
    "claude-desktop": "Claude Desktop",
    "claude-code": "Claude Code",
    "cursor": "Cursor",
    "vscode": "VS Code",
    "windsurf": "Windsurf",
    "codex": "Codex CLI",
    "opencode": "opencode",
    "zed": "Zed",
    "goose": "goose",
    "continue": "Continue",
    "gemini": "Gemini CLI",
    "cline": "Cline",
    "roo": "Roo Code",
    "kiro": "Kiro",
    "lmstudio": "LM Studio",
}
"""Each client as its makers write its name."""


def usual_paths(
    client: str, environ: Mapping[str, str] = os.environ, cwd: Path | None = None, system: str = sys.platform
) -> list[Path]:
    """Where `client` keeps its servers on this system, the first that exists being the one it reads."""
    home = Path(environ.get("HOME") or Path.home())
    here = cwd or Path.cwd()
    apps = app_config_dir(environ, system)
    windows = system == "win32" and bool(environ.get("APPDATA"))  # goose and Zed keep theirs under %APPDATA% there
    if client == "claude-desktop":
        return [apps / "Claude" / "claude_desktop_config.json"]
    if client == "claude-code":
        return [here / ".mcp.json", home / ".claude.json"]
    if client == "cursor":
        return [here / ".cursor" / "mcp.json", home / ".cursor" / "mcp.json"]
    if client == "vscode":
        return [here / ".vscode" / "mcp.json", apps / "Code" / "User" / "mcp.json"]
    if client == "windsurf":
        return [home / ".codeium" / "windsurf" / "mcp_config.json"]
    if client == "codex":
        return [Path(environ.get("CODEX_HOME") or home / ".codex") / "config.toml"]
    config_home = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")  # both on macOS too
    if client == "opencode":
        project = [here / "opencode.json", here / "opencode.jsonc", here / ".opencode" / "opencode.json"]
        return [*project, config_home / "opencode" / "opencode.json"]
    if client == "zed":
        return [apps / "Zed" / "settings.json" if windows else config_home / "zed" / "settings.json"]
    if client == "goose":
        return [
            apps / "Block" / "goose" / "config" / "config.yaml" if windows else config_home / "goose" / "config.yaml"
        ]
    if client == "continue":  # a workspace's block files, else the user's config
        return [here / ".continue" / "mcpServers", home / ".continue" / "config.yaml"]
    if client == "gemini":
        return [here / ".gemini" / "settings.json", home / ".gemini" / "settings.json"]
    if client == "kiro":  # Kiro's IDE and CLI (Amazon Q Developer CLI's successor)
        return [here / ".kiro" / "settings" / "mcp.json", home / ".kiro" / "settings" / "mcp.json"]
    if client == "lmstudio":
        return [home / ".lmstudio" / "mcp.json"]
    if client == "cline":
        return _in_editors(apps, "saoudrizwan.claude-dev", "cline_mcp_settings.json")
    if client == "roo":
        return [here / ".roo" / "mcp.json", *_in_editors(apps, "rooveterinaryinc.roo-cline", "mcp_settings.json")]
    raise ValueError(client)


EDITORS = ("Code - Insiders", "VSCodium", "Cursor", "Windsurf", "Code")
"""The editors that run VS Code's extensions (Cline and Roo Code are extensions), by their folder's name; VS Code's
own last, the file named when none has one."""


def _in_editors(apps: Path, extension: str, name: str) -> list[Path]:
    """An extension's settings file in each editor's global storage."""
    return [apps / editor / "User" / "globalStorage" / extension / "settings" / name for editor in EDITORS]


def locate(spec: str, environ: Mapping[str, str] = os.environ, cwd: Path | None = None) -> ClientFile:
    """A client's file by name (its first usual path that exists, else its last) or by path."""
    if spec in CLIENTS:
        paths = usual_paths(spec, environ, cwd)
        found = next((path for path in paths if path.exists()), paths[-1])
        return ClientFile(found, spec)
    return ClientFile(Path(os.path.expanduser(spec)).absolute(), None)


def unknown_client(spec: str) -> tuple[str, str] | None:
    """What is wrong with a client named `spec` that is neither a client claimcheck knows nor a file (`vs-code`),
    and its fix; None when it is one of them or reads as a path."""
    if spec in CLIENTS or os.sep in spec or "/" in spec or Path(spec).suffix or Path(os.path.expanduser(spec)).exists():
        return None
    close = difflib.get_close_matches(spec.lower().replace("_", "-"), CLIENTS, n=1, cutoff=0.6)
    guess = f"did you mean {close[0]}? " if close else ""
    return (
        f"{spec} is neither a client claimcheck knows nor a file here",
        f"{guess}name one of {', '.join(CLIENTS)}, or the path of the client's config file",
    )


def tool_name_room(client: str | None, entry: str) -> int | None:
    """How long a tool name `client` takes from a server whose entry it calls `entry`, where it adds to the names:
    Claude Code calls a tool `mcp__<entry>__<tool>`, which the model API takes up to 64 characters; Cursor hides a
    tool whose entry and tool names together reach 60. None for a client that adds nothing claimcheck knows of."""
    if client == "claude-code":
        return 64 - len(f"mcp__{entry}__")
    if client == "cursor":
        return 59 - len(entry)
    return None
