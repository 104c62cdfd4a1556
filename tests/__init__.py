"""Tests of claimcheck, mirroring its packages; shared helpers in `tests.support`."""
