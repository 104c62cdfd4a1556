"""The issuer's signing keys: kept for `jwksCacheSecs`, fetched again for an unknown key id at most every
`REFETCH_SECS`, and used until they expire when the JWKS cannot be reached."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from joserfc.jwk import ECKey, KeySet, OctKey, RSAKey

from server.errors import IssuerUnavailable
from server.upstream.jwks import REFETCH_SECS, KeyCache, Unavailable

pytestmark = pytest.mark.anyio

OLD = RSAKey.generate_key(2048, parameters={"kid": "old"})
NEW = ECKey.generate_key("P-256", parameters={"kid": "new"})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Jwks:
    """The issuer's JWKS endpoint: what it publishes, whether it answers, and how often it was asked."""

    def __init__(self, *keys: Any) -> None:
        self.keys = list(keys)
        self.down = False
        self.fetches = 0

    async def __call__(self) -> dict[str, Any]:
        self.fetches += 1
        await anyio.lowlevel.checkpoint()
        if self.down:
            raise IssuerUnavailable("http://issuer.test/jwks cannot be reached (ConnectError: refused)")
        return {"keys": [key.as_dict(private=False) for key in self.keys]}


def kids(found: KeySet | Unavailable | None) -> set[str | None]:
    assert isinstance(found, KeySet), found
    return {key.kid for key in found}


async def test_keys_are_fetched_once_and_kept_until_they_expire() -> None:
    jwks, clock = Jwks(OLD), Clock()
    cache = KeyCache(jwks, max_age=600, clock=clock)
    await cache.refresh()
    clock.now += 599
    assert kids(await cache.keys_for("old")) == {"old"} and kids(await cache.keys_for(None)) == {"old"}
    assert jwks.fetches == 1
    clock.now += 2
    assert kids(await cache.keys_for("old")) == {"old"}
    assert jwks.fetches == 2


async def test_an_unknown_key_id_fetches_again_at_most_every_refetch_secs_and_a_flood_of_them_costs_one_fetch() -> None:
    jwks, clock = Jwks(OLD), Clock()
    cache = KeyCache(jwks, max_age=3600, clock=clock)
    assert kids(await cache.keys_for("old")) == {"old"}
    jwks.keys.append(NEW)  # the issuer rotates
    clock.now += REFETCH_SECS - 1
    assert await cache.keys_for("new") is None  # too soon to ask again
    clock.now += 1
    assert kids(await cache.keys_for("new")) == {"old", "new"}
    clock.now += REFETCH_SECS
    found: list[object] = []

    async def ask(kid: str) -> None:
        found.append(await cache.keys_for(kid))

    async with anyio.create_task_group() as tg:
        for n in range(100):
            tg.start_soon(ask, f"made-up-{n}")
    assert found == [None] * 100
    assert jwks.fetches == 3


async def test_while_the_jwks_is_unreachable_the_kept_keys_serve_until_they_expire_and_the_failure_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    jwks, clock = Jwks(OLD), Clock()
    cache = KeyCache(jwks, max_age=600, clock=clock)
    await cache.refresh()
    jwks.down = True
    clock.now += 300
    with caplog.at_level(logging.WARNING, logger="server.upstream.jwks"):
        kept = await cache.keys_for("old")
        unknown = await cache.keys_for("new")  # might be a rotation: claimcheck cannot tell
        clock.now += 301
        expired = await cache.keys_for("old")
    assert kids(kept) == {"old"}
    reason = "cannot fetch the issuer's signing keys: http://issuer.test/jwks cannot be reached"
    assert isinstance(unknown, Unavailable) and unknown.reason.startswith(reason)
    assert isinstance(expired, Unavailable) and expired.reason.startswith(reason)
    assert [record.getMessage() for record in caplog.records] == [
        f"{reason} (ConnectError: refused) (the keys fetched before stay in use until they expire)",
        f"{reason} (ConnectError: refused) (no keys kept: no JWT passes until it answers)",
    ]
    jwks.down = False
    clock.now += REFETCH_SECS
    assert kids(await cache.keys_for("old")) == {"old"}


@pytest.mark.parametrize(
    ("document", "why"),
    [
        ({}, 'the JWKS has no "keys" list'),
        ({"keys": "none"}, 'the JWKS has no "keys" list'),
        ({"keys": []}, "the JWKS holds no usable signing key"),
        ({"keys": [{**OLD.as_dict(private=False), "use": "enc"}]}, "the JWKS holds no usable signing key"),
        ({"keys": [OctKey.generate_key(256).as_dict()]}, "the JWKS holds no usable signing key"),
        ({"keys": [{"kty": "RSA", "n": "x"}]}, "the JWKS holds no usable signing key"),
    ],
)
async def test_a_jwks_without_a_usable_public_signing_key_is_an_unavailable_issuer(
    document: dict[str, Any], why: str
) -> None:
    async def fetch() -> dict[str, Any]:
        return document

    found = await KeyCache(fetch, max_age=600).keys_for("old")
    assert isinstance(found, Unavailable) and why in found.reason


async def test_a_request_that_comes_while_the_keys_are_being_fetched_waits_for_them() -> None:
    started, release = anyio.Event(), anyio.Event()

    async def slow() -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"keys": [OLD.as_dict(private=False)]}

    cache = KeyCache(slow, max_age=600)
    found: list[object] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(cache.refresh)  # as at start
        await started.wait()

        async def ask() -> None:
            found.append(await cache.keys_for("elsewhere"))

        tg.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        assert found == []
        release.set()
    assert found == [None]  # fetched, and that key id is not the issuer's
