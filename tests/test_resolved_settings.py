"""The command line is merged into the config once, at start: what is read from settings afterwards is final."""

from __future__ import annotations

from server.config import CliOverrides, Policy, parse_config, resolve_policy, resolved


def _config() -> dict[str, object]:
    return {
        "mcpServers": {
            "own": {"command": "x", "asyncTimeoutSecs": 2, "asyncTokenThreshold": 50, "async": True},
            "plain": {"command": "x"},
        },
        "settings": {"asyncTimeoutSecs": 7, "api": {"port": 6000}, "state": {"url": "redis://file"}},
    }


def test_flags_land_in_settings_and_beat_each_servers_own_value() -> None:
    cli = CliOverrides(
        no_async=True, async_timeout_secs=1, async_token_threshold=500, no_api=True, state_url="redis://flag"
    )
    config = resolved(parse_config(_config(), {}), cli)
    settings = config.settings
    assert (settings.async_, settings.async_timeout_secs, settings.async_token_threshold) == (False, 1, 500)
    assert (settings.api.enabled, settings.api.port, settings.state.url) == (False, 6000, "redis://flag")
    for name in ("own", "plain"):
        assert resolve_policy(settings, config.mcp_servers[name]) == Policy(False, 1, 500, 3600)


def test_without_flags_the_file_stands_and_a_server_keeps_its_own_values() -> None:
    config = parse_config(_config(), {})
    assert resolved(config, CliOverrides()) == config
    assert resolve_policy(config.settings, config.mcp_servers["own"]) == Policy(True, 2, 50, 3600)
    assert resolve_policy(config.settings, config.mcp_servers["plain"]) == Policy(True, 7, 10_000, 3600)


def test_a_flag_leaves_the_settings_it_does_not_name() -> None:
    config = resolved(parse_config(_config(), {}), CliOverrides(async_token_threshold=500))
    assert (config.settings.async_timeout_secs, config.settings.api.enabled) == (7, True)
    assert resolve_policy(config.settings, config.mcp_servers["own"]) == Policy(True, 2, 500, 3600)
