"""The cost of checking one OAuth access token per call with the issuer's keys cached (goal: at most 0.1 ms).

In process, no network: the keys are fetched once from a stand-in JWKS before timing, as a running claimcheck
has them after its first fetch. Paths, alternated round by round so machine noise lands on each alike:
  static        `Tokens.name_of`: the constant-time compare of `--auth-tokens-file` (10 tokens), the baseline
  jwt RS256     `TokenChecker.check` of a 2048-bit RSA-signed JWT: parse, key lookup, signature, claims
  jwt ES256     the same with a P-256 key
  gate static   the whole ASGI gate (`ResourceGate`) letting a static token through to a no-op app
  gate RS256    the whole gate with an RS256 access token: header, check, scopes, identity in the scope
Each figure is wall time per call (median over rounds, and the best round), and the median CPU time per call.

Run from the repo root with the project's venv (needs the [oauth] extra):
  python bench/token_validation.py [--rounds 7] [--calls 5000] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey
from mcp.server.auth.provider import AccessToken

from server.auth_config import AuthSettings
from server.upstream.bearer import Tokens
from server.upstream.jwks import KeyCache
from server.upstream.oauth_tokens import JwtChecker, TokenChecker
from server.upstream.resource_server import ResourceGate

ISSUER = "https://id.example.com"
RESOURCE = "https://mcp.example.com/mcp"
GOAL_MS = 0.1


def _token(key: RSAKey | ECKey, alg: str) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": "alice", "aud": RESOURCE, "iat": now, "exp": now + 3600, "scope": "mcp:tools"}
    return jwt.encode({"alg": alg, "typ": "at+jwt", "kid": key.kid}, claims, key)


async def _paths() -> dict[str, Callable[[], Awaitable[Any]]]:
    rsa = RSAKey.generate_key(2048, parameters={"kid": "rsa"})
    ec = ECKey.generate_key("P-256", parameters={"kid": "ec"})

    async def jwks() -> dict[str, Any]:
        return {"keys": [rsa.as_dict(private=False), ec.as_dict(private=False)]}

    settings = AuthSettings.model_validate({"issuer": ISSUER, "resource": RESOURCE, "requiredScopes": ["mcp:tools"]})
    keys = KeyCache(jwks, max_age=86_400)
    await keys.refresh()
    checker = TokenChecker(JwtChecker(settings, RESOURCE, keys), None)
    named = {secrets.token_hex(32): f"user{n}" for n in range(10)}
    static = Tokens.of(None, named)
    static_header = f"Bearer {next(iter(named))}".encode()
    rs256, es256 = _token(rsa, "RS256"), _token(ec, "ES256")
    for token in (rs256, es256):
        verdict = await checker.check(token)
        assert isinstance(verdict, AccessToken) and verdict.subject == "alice", verdict

    async def app(scope: Any, receive: Any, send: Any) -> None:
        pass

    gate = ResourceGate(app, checker, tokens=static, settings=settings, resource=RESOURCE)

    async def receive() -> Any:
        return {"type": "http.request"}

    async def send(message: Any) -> None:
        raise AssertionError(f"the gate answered instead of letting the request in: {message}")

    def scope_of(header: bytes) -> dict[str, Any]:
        return {"type": "http", "path": "/mcp", "headers": [(b"authorization", header)]}

    async def static_check() -> Any:
        return static.name_of(static_header)

    return {
        "static": static_check,
        "jwt RS256": lambda: checker.check(rs256),
        "jwt ES256": lambda: checker.check(es256),
        "gate static": lambda: gate(scope_of(static_header), receive, send),
        "gate RS256": lambda: gate(scope_of(f"Bearer {rs256}".encode()), receive, send),
    }


async def _measure(rounds: int, calls: int) -> dict[str, dict[str, list[float]]]:
    paths = await _paths()
    figures: dict[str, dict[str, list[float]]] = {name: {"wall_us": [], "cpu_us": []} for name in paths}
    for round_ in range(rounds + 1):  # the first round warms up and is not counted
        order = list(paths) if round_ % 2 == 0 else list(reversed(paths))
        for name in order:
            call = paths[name]
            cpu, wall = time.process_time_ns(), time.perf_counter_ns()
            for _ in range(calls):
                await call()
            wall, cpu = time.perf_counter_ns() - wall, time.process_time_ns() - cpu
            if round_:
                figures[name]["wall_us"].append(wall / calls / 1000)
                figures[name]["cpu_us"].append(cpu / calls / 1000)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    figures = anyio.run(_measure, args.rounds, args.calls)
    base = statistics.median(figures["static"]["wall_us"])
    load = os.getloadavg()[0]
    print(f"{args.rounds} rounds x {args.calls} calls per path, Python {platform.python_version()}, load {load:.1f}")
    print(f"{'path':<12} {'median µs':>10} {'best µs':>9} {'CPU µs':>8} {'x static':>9}  goal ≤ {GOAL_MS} ms")
    for name, measured in figures.items():
        median = statistics.median(measured["wall_us"])
        cpu = statistics.median(measured["cpu_us"])
        best = min(measured["wall_us"])
        verdict = "" if name.endswith("static") else ("  ok" if median / 1000 <= GOAL_MS else "  over")
        print(f"{name:<12} {median:>10.1f} {best:>9.1f} {cpu:>8.1f} {median / base:>9.1f}{verdict}")
    if args.json is not None:
        args.json.write_text(json.dumps({"load": load, "figures": figures}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
