"""The collector's one settings object: defaults < environment < flags, every setting documented."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
from turnlens.collector import settings as cs

from turnlens import cli


def parse(*argv: str) -> object:
    return cli.build_parser().parse_args(["collect", *argv])


def test_flags_beat_the_environment_which_beats_the_defaults() -> None:
    environ = {
        "TURNLENS_HTTP": "0.0.0.0:5318", "TURNLENS_TOKEN": "from-env", "TURNLENS_MAX_REQUEST_BYTES": "1000",
    }
    resolved = cs.resolve(parse("--token", "from-flag"), environ)
    assert resolved.http == "0.0.0.0:5318"  # environment over default
    assert resolved.token == "from-flag"  # flag over environment
    assert resolved.max_request_bytes == 1000
    assert resolved.grpc == "127.0.0.1:4317" and resolved.store == Path("turnlens-data")  # defaults


def test_defaults_follow_the_otlp_conventions() -> None:
    defaults = cs.resolve(parse(), {})
    assert (defaults.http, defaults.grpc) == ("127.0.0.1:4318", "127.0.0.1:4317")
    assert defaults.max_request_bytes == 64 * 1024 * 1024 and defaults.token is None


def test_a_malformed_duration_fails_at_start_up() -> None:
    with pytest.raises(ValueError):
        cs.resolve(parse("--retention", "thirty days"), {})
    assert cs.resolve(parse("--retention", "30d"), {}).retention_s == 30 * 86_400


def test_addresses_parse_and_off_disables_a_receiver() -> None:
    assert cs.parse_address("127.0.0.1:4318") == ("127.0.0.1", 4318)
    assert cs.parse_address("[::1]:4317") == ("::1", 4317)
    assert cs.parse_address("off") is None
    with pytest.raises(ValueError):
        cs.parse_address("localhost")


def test_every_setting_has_a_flag_an_environment_variable_and_help(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        cli.main(["collect", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for f in fields(cs.CollectorSettings):
        assert cs.HELP.get(f.name), f.name
        flag = "--" + f.name.replace("_", "-")
        assert flag in help_text and cs.env_name(f.name) in help_text, flag


@pytest.mark.parametrize("token", ["tökén", "two words", "tab\there"])
def test_a_token_no_header_can_carry_is_refused_at_start_up(token: str) -> None:
    with pytest.raises(ValueError, match="visible ASCII"):
        cs.resolve(parse("--token", token), {})


def test_the_materialisers_threads_and_memory_limit_are_checked_at_start_up() -> None:
    defaults = cs.resolve(parse(), {})
    assert defaults.materialize_thread_count is None  # auto
    assert defaults.materialize_memory_bytes == 1000**3
    given = cs.resolve(parse("--materialize-threads", "2"), {"TURNLENS_MATERIALIZE_MEMORY_LIMIT": "1.5GiB"})
    assert (given.materialize_thread_count, given.materialize_memory_bytes) == (2, int(1.5 * 1024**3))
    for flag, value in (("--materialize-threads", "two"), ("--materialize-threads", "0"),
                        ("--materialize-memory-limit", "lots"), ("--materialize-memory-limit", "3 parsecs")):
        with pytest.raises(ValueError, match=flag):
            cs.resolve(parse(flag, value), {})
