"""The issuer's signing keys (its JWKS), kept for `jwksCacheSecs` and fetched again when they run out.

A token whose `kid` the kept keys do not know makes one fetch (keys rotate), at most one every `REFETCH_SECS`
whatever the tokens say, and concurrent requests share it: a flood of made-up key ids costs the issuer nothing.
When the JWKS cannot be reached the kept keys are used until they expire, the failure is logged, and a token
that needs keys claimcheck does not have is answered with the reason (`Unavailable`, a 503).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from server.errors import IssuerUnavailable

if TYPE_CHECKING:
    from joserfc.jwk import KeySet

__all__ = ["REFETCH_SECS", "KeyCache", "Unavailable"]

logger = logging.getLogger(__name__)

REFETCH_SECS = 10.0
"""The least time between two fetches of the JWKS (a failed one included)."""


@dataclass(frozen=True, slots=True)
class Unavailable:
    """The keys a token needs cannot be had now; `reason` says which URL failed and how."""

    reason: str


class KeyCache:
    """The issuer's public keys: `fetch` is called for the JWKS document (a JSON object), `clock` is monotonic."""

    def __init__(
        self,
        fetch: Callable[[], Awaitable[dict[str, Any]]],
        *,
        max_age: float,
        refetch_secs: float = REFETCH_SECS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._max_age = max_age
        self._refetch_secs = refetch_secs
        self._clock = clock
        self._keys: KeySet | None = None
        self._kids: frozenset[str | None] = frozenset()
        self._expires = 0.0
        self._attempted: float | None = None
        self._failure: str | None = None
        self._lock = anyio.Lock()

    async def keys_for(self, kid: str | None) -> KeySet | Unavailable | None:
        """Keys that hold `kid` (any keys when the token names none); None when the issuer has no such key,
        `Unavailable` when that cannot be known (the JWKS does not answer and the kept keys lack it)."""
        if self._fresh() and self._knows(kid):
            return self._keys
        if self._may_fetch():
            await self._refresh(self._attempted)
        elif self._lock.locked():
            async with self._lock:  # a fetch is under way (the one at start, say): its answer decides
                pass
        if self._fresh() and self._knows(kid):
            return self._keys
        if self._failure is not None:
            return Unavailable(self._failure)
        return None if self._fresh() else Unavailable("the issuer's keys have expired and are being fetched again")

    async def refresh(self) -> None:
        """Fetch the keys now (at start, so the first request does not wait for them); a failure is logged."""
        await self._refresh(self._attempted)

    def _fresh(self) -> bool:
        return self._keys is not None and self._clock() < self._expires

    def _knows(self, kid: str | None) -> bool:
        return kid is None or kid in self._kids

    def _may_fetch(self) -> bool:
        return self._attempted is None or self._clock() - self._attempted >= self._refetch_secs

    async def _refresh(self, seen: float | None) -> None:
        async with self._lock:
            if self._attempted != seen:
                return  # another request fetched while this one waited: use what it got
            self._attempted = self._clock()
            try:
                keys = _key_set(await self._fetch())
            except IssuerUnavailable as exc:
                self._failure = f"cannot fetch the issuer's signing keys: {exc}"
                kept = (
                    "the keys fetched before stay in use until they expire"
                    if self._fresh()
                    else "no keys kept: no JWT passes until it answers"
                )
                logger.warning("%s (%s)", self._failure, kept)
                return
            self._keys, self._failure = keys, None
            self._kids = frozenset(key.kid for key in keys)
            self._expires = self._attempted + self._max_age


def _key_set(document: dict[str, Any]) -> KeySet:
    """The public signing keys of a JWKS document; one that holds none is an `IssuerUnavailable`."""
    from joserfc.errors import JoseError
    from joserfc.jwk import KeySet

    found = document.get("keys")
    if not isinstance(found, list):
        raise IssuerUnavailable('the JWKS has no "keys" list')
    signing = [
        key
        for key in found
        if isinstance(key, dict) and key.get("use", "sig") == "sig" and key.get("kty") in ("RSA", "EC", "OKP")
    ]
    try:
        keys = KeySet.import_key_set({"keys": signing})
    except (JoseError, ValueError, TypeError) as exc:
        raise IssuerUnavailable(f"the JWKS holds no usable signing key ({type(exc).__name__}: {exc})") from None
    return keys
