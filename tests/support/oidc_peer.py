"""A real OpenID provider for the OAuth tests: `oidc-provider` from npm on node, on 127.0.0.1 and a free port.

The package is installed on first use into the git-ignored `.cache/oidc-provider`; `tests/support/oidc_provider.mjs`
configures it. Missing `node`/`npm` skips the tests that need it on a developer's machine and fails them in CI
(env `CI` set), where a silent skip would hide that OAuth was never tested against a real provider.

The provider's signing key is made here and handed to it, so a test can also sign tokens of its own with the key
claimcheck trusts (expired ones, for another audience, from another issuer) beside the ones the provider issues.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import secrets
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey

from tests.support.processes import announcing, stop

__all__ = ["OIDC_PACKAGE", "OIDC_VERSION", "SCOPES", "Provider", "oidc_provider"]

OIDC_PACKAGE = "oidc-provider"
OIDC_VERSION = "9.13.3"  # warns that it wants Node 22 but runs on the Node 20 CI has; tests say if it stops
OIDC_DIR = Path(__file__).resolve().parents[2] / ".cache" / "oidc-provider"
SCRIPT = Path(__file__).resolve().parent / "oidc_provider.mjs"
SCOPES = ("mcp:tools", "mcp:read")
CLIENTS = {
    "alice": "mcp:tools mcp:read",
    "bob": "mcp:tools mcp:read",
    "carol": "mcp:read",  # never gets mcp:tools
    "dana": "mcp:tools",  # opaque tokens when the provider is started with opaque=("dana",)
    "claimcheck": "",  # claimcheck's own client, for introspection
}

_INSTALL_TIMEOUT_S = 600
_LISTENING = r"oidc-provider at (http://127\.0\.0\.1:\d+)"


@dataclass(frozen=True, slots=True)
class Provider:
    """A running provider: its issuer, its clients' secrets and its signing key."""

    issuer: str
    secrets: dict[str, str]
    key: RSAKey
    process: anyio.abc.Process

    async def stop(self) -> None:
        """Stop the provider before its context ends: its metadata, keys and tokens are gone."""
        await stop(self.process)

    async def token(self, client: str, resource: str, scope: str = "mcp:tools") -> str:
        """An access token for `resource` by the client credentials grant."""
        form = {"grant_type": "client_credentials", "scope": scope, "resource": resource}
        async with httpx2.AsyncClient(timeout=30) as http:
            answer = await http.post(f"{self.issuer}/token", data=form, auth=(client, self.secrets[client]))
        assert answer.status_code == 200, answer.text
        token: str = answer.json()["access_token"]
        return token

    def sign(self, claims: dict[str, Any], *, key: RSAKey | None = None, header: dict[str, Any] | None = None) -> str:
        """A JWT of `claims` signed with the provider's key (or `key`), as the provider signs its own."""
        signing = key or self.key
        return jwt.encode({"alg": "RS256", "typ": "at+jwt", "kid": signing.kid, **(header or {})}, claims, signing)


@asynccontextmanager
async def oidc_provider(directory: Path, *, opaque: Iterable[str] = ()) -> AsyncIterator[Provider]:
    """A provider for as long as this lasts; its setup file is written into `directory`."""
    node, entry = provider_command()
    key = RSAKey.generate_key(2048, auto_kid=True)
    client_secrets = {client: secrets.token_urlsafe(32) for client in CLIENTS}
    setup = {
        "jwks": {"keys": [key.as_dict(private=True)]},
        "scopes": list(SCOPES),
        "clients": [{"id": c, "secret": client_secrets[c], "scope": s} for c, s in CLIENTS.items()],
        "opaqueClients": list(opaque),
    }
    path = directory / "oidc-setup.json"
    path.write_text(json.dumps(setup), encoding="utf-8")
    path.chmod(0o600)
    command = [node, str(SCRIPT), entry.as_uri(), str(path)]
    async with announcing(command, _LISTENING, stream="stdout", within=60) as started:  # stopped: stdin closed
        yield Provider(started.url, client_secrets, key, started.process)


@functools.cache
def provider_command() -> tuple[str, Path]:
    """node and the installed package's entry module, installing the package first if needed."""
    node = _require("node")
    if (entry := _installed_entry()) is not None:
        return node, entry
    OIDC_DIR.mkdir(parents=True, exist_ok=True)
    with open(OIDC_DIR / ".install.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test session may be installing right now
        if (entry := _installed_entry()) is None:
            npm = _require("npm")
            command = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(OIDC_DIR)]
            command.append(f"{OIDC_PACKAGE}@{OIDC_VERSION}")
            done = subprocess.run(command, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT_S, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
            entry = _installed_entry()
    if entry is None:
        raise RuntimeError(f"npm installed {OIDC_PACKAGE}@{OIDC_VERSION} but {OIDC_DIR} has no entry module for it")
    return node, entry


def _installed_entry() -> Path | None:
    package = OIDC_DIR / "node_modules" / OIDC_PACKAGE
    try:
        manifest = json.loads((package / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entry = package / str(manifest.get("main", "lib/index.js"))
    return entry if manifest.get("version") == OIDC_VERSION and entry.is_file() else None


def _require(program: str) -> str:
    path = shutil.which(program)
    if path is not None:
        return path
    reason = f"{program!r} is not on PATH; the OAuth tests run a real OpenID provider (oidc-provider) from npm"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        raise RuntimeError(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)
