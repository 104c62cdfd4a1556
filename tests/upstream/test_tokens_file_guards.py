"""What `--auth-tokens-file` refuses or warns about before any request: a byte order mark, a name claimcheck gives
other owners, a path that is no regular file (a FIFO would hang `serve`), a file other users can read; and how a
request's header is read against the tokens."""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

import pytest

from server.errors import ConfigError
from server.upstream.bearer import RESERVED_NAMES, Tokens, accepted_name, read_tokens_file

TOKEN = secrets.token_hex(32)


def tokens_file(tmp_path: Path, data: bytes, mode: int = 0o600) -> Path:
    path = tmp_path / "tokens"
    path.write_bytes(data)
    path.chmod(mode)
    return path


def test_a_file_saved_with_a_byte_order_mark_is_refused_naming_it(tmp_path: Path) -> None:
    path = tokens_file(tmp_path, b"\xef\xbb\xbfalice " + TOKEN.encode() + b"\n")
    with pytest.raises(ConfigError, match="byte order mark"):
        read_tokens_file(path)


@pytest.mark.parametrize("name", sorted(RESERVED_NAMES))
def test_a_name_claimcheck_gives_other_owners_is_refused(tmp_path: Path, name: str) -> None:
    path = tokens_file(tmp_path, f"{name} {TOKEN}\n".encode())
    with pytest.raises(ConfigError, match=f"line 1: {name} is a name claimcheck gives other owners"):
        read_tokens_file(path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_at_once_instead_of_blocking_the_read(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    os.mkfifo(path)  # nobody writes to it: a read would wait for ever
    with pytest.raises(ConfigError, match="not a regular file"):
        read_tokens_file(path)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_file_others_can_read_is_served_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tokens_file(tmp_path, f"alice {TOKEN}\n".encode(), mode=0o644)
    with caplog.at_level(logging.WARNING, logger="server.upstream.bearer"):
        assert read_tokens_file(path) == {TOKEN: "alice"}
    (record,) = caplog.records
    assert "mode 644" in record.getMessage() and f"chmod 600 {path}" in record.getMessage()


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_private_file_is_served_without_a_word(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tokens_file(tmp_path, f"alice {TOKEN}\n".encode())
    with caplog.at_level(logging.WARNING, logger="server.upstream.bearer"):
        assert read_tokens_file(path) == {TOKEN: "alice"}
    assert caplog.records == []


@pytest.mark.parametrize(
    "header",
    [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER  {TOKEN} ", f" Bearer {TOKEN}"],
    ids=["as-written", "lower-case", "upper-case-spaces", "leading-space"],
)
def test_the_scheme_is_read_in_any_case_and_the_header_is_then_written_as_claimcheck_writes_it(header: str) -> None:
    """The principal below is keyed by the header: `bearer X` and `Bearer X` must be one principal."""
    scope = {"type": "http", "headers": [(b"host", b"x"), (b"authorization", header.encode())]}
    assert accepted_name(scope, Tokens.of(named={TOKEN: "alice"})) == "alice"
    assert scope["headers"] == [(b"host", b"x"), (b"authorization", f"Bearer {TOKEN}".encode())]


@pytest.mark.parametrize(
    "header",
    ["", "Bearer", f"Basic {TOKEN}", TOKEN, f"Bearer {TOKEN[:-1]}"],
    ids=["none", "scheme-alone", "basic", "no-scheme", "a-prefix"],
)
def test_anything_else_names_no_principal_and_leaves_the_header_as_it_came(header: str) -> None:
    headers = [(b"authorization", header.encode())] if header else []
    scope = {"type": "http", "headers": list(headers)}
    assert accepted_name(scope, Tokens.of(named={TOKEN: "alice"})) is None
    assert scope["headers"] == headers
