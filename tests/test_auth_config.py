"""`settings.auth`: validated at load with errors naming the key, and refused at `serve` when it cannot work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from server.cli import EXIT_CONFIG, main
from server.config import parse_config
from server.errors import ConfigError

ISSUER = "https://id.example.com"


def auth_of(**fields: Any) -> Any:
    return parse_config({"settings": {"auth": {"issuer": ISSUER, **fields}}}).settings.auth


def test_an_issuer_alone_is_enough_and_the_rest_has_small_documented_defaults() -> None:
    auth = auth_of()
    assert (auth.resource, auth.audience, auth.jwks_uri, auth.introspection) == (None, None, None, None)
    assert auth.algorithms == ("RS256", "PS256", "ES256", "Ed25519")
    assert (auth.leeway_secs, auth.jwks_cache_secs, auth.required_scopes, auth.jwt) == (30, 3600, (), True)
    full = auth_of(
        resource="https://mcp.example.com/mcp",
        jwksUri="https://id.example.com/keys",
        requiredScopes=["mcp:tools"],
        introspection={"clientId": "claimcheck", "clientSecretEnv": "CC_SECRET"},
    )
    assert full.introspection.client_secret_env == "CC_SECRET" and full.jwt
    assert auth_of(issuer="http://127.0.0.1:9000").issuer == "http://127.0.0.1:9000"  # a provider on this machine


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"issuer": "http://id.example.com"}, "settings.auth.issuer: issuer must use https (http is only for"),
        ({"issuer": "id.example.com"}, "settings.auth.issuer: issuer must be an https:// URL"),
        ({"issuer": "https://id.example.com?tenant=1"}, "settings.auth.issuer: issuer must not have a ?query"),
        ({"resource": "https://mcp.example.com/mcp#x"}, "settings.auth.resource: resource must not have a #fragment"),
        ({"jwksUri": "http://keys.example.com"}, "settings.auth.jwksUri: jwksUri must use https"),
        ({"algorithms": ["none"]}, "settings.auth.algorithms: algorithms are one or more of RS256"),
        ({"algorithms": ["HS256"]}, "not ['HS256']"),
        ({"algorithms": []}, "settings.auth.algorithms: algorithms are one or more of"),
        ({"requiredScopes": ["mcp tools"]}, "a scope is visible ASCII without spaces, quotes or backslashes"),
        ({"requiredScopes": ['a"b']}, "a scope is visible ASCII without spaces"),
        ({"jwt": False}, 'with "jwt": false, give "introspection"'),
        (
            {"jwt": False, "jwksUri": "https://k.test", "introspection": {"clientId": "c", "clientSecretEnv": "S"}},
            '"jwksUri" is for checking JWTs',
        ),
        ({"introspection": {"clientId": "c", "clientSecretEnv": "my secret"}}, "clientSecretEnv names an environment"),
        ({"introspection": {"clientId": "c", "clientSecret": "hunter2"}}, "introspection.clientSecret: unknown key"),
        ({"leewaySecs": 3600}, "settings.auth.leewaySecs: Input should be less than or equal to 300"),
        ({"audiences": ["x"]}, "settings.auth.audiences: unknown key"),
    ],
)
def test_a_bad_auth_setting_is_an_error_naming_its_key(fields: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        auth_of(**fields)
    assert expected in str(caught.value)


def serve_with(tmp_path: Path, auth: dict[str, Any], *flags: str) -> list[str]:
    config = tmp_path / "claimcheck.json"
    config.write_text(json.dumps({"settings": {"auth": {"issuer": ISSUER, **auth}}}), encoding="utf-8")
    return ["serve", "--config", str(config), "--no-api", "--transport", "http", *flags]


@pytest.mark.parametrize(
    ("auth", "flags", "refusal"),
    [
        ({}, ["--host", "0.0.0.0"], "settings.auth.resource is needed: claimcheck serves at http://0.0.0.0:8765/"),
        (
            {"introspection": {"clientId": "cc", "clientSecretEnv": "CLAIMCHECK_TEST_UNSET"}},
            [],
            "settings.auth.introspection.clientSecretEnv names CLAIMCHECK_TEST_UNSET, which is not set",
        ),
    ],
)
def test_serve_refuses_at_start_an_auth_that_could_not_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], auth: dict[str, Any], flags: list[str], refusal: str
) -> None:
    assert main(serve_with(tmp_path, auth, *flags)) == EXIT_CONFIG
    assert refusal in capsys.readouterr().err
