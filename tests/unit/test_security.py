"""moria.security and the transport settings of moria.clients, without servers."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from moria import clients
from moria.security import (
    BearerTokenInterceptor,
    SecurityConfigError,
    ServerSecurity,
    TlsConfig,
    TransportSecurity,
    channel_credentials,
    is_local_target,
    open_channel,
    server_security_from_args,
    token_from_env,
    transport_security,
)
from moria.server import add_server_arguments, server_options_from_args

TOKEN = "sk-test-SECRET-1234"


@pytest.fixture(autouse=True)
def _clean_transport() -> object:
    clients.reset_transport()
    yield
    clients.reset_transport()


@pytest.mark.parametrize("target", [
    "127.0.0.1:50051", "localhost:1", "[::1]:9", "ipv4:127.0.0.1:5,127.0.0.2:6",
    "ipv6:[::1]:7", "dns:///localhost:50051", "unix:///tmp/x.sock", "unix-abstract:moria",
    "127.1.2.3:80",
])
def test_loopback_and_unix_targets_are_local(target: str) -> None:
    assert is_local_target(target)


@pytest.mark.parametrize("target", [
    "10.0.0.5:50051", "env-babyai:50051", "dns:///agent.moria.svc:50061",
    "127.evil.example:80", "ipv4:127.0.0.1:5,10.0.0.1:6", "[2001:db8::1]:9", "0.0.0.0:1",
])
def test_other_targets_are_not_local(target: str) -> None:
    assert not is_local_target(target)


def test_token_from_env_names_the_variable_never_the_value(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MORIA_T", raising=False)
    with pytest.raises(SecurityConfigError, match=r"'MORIA_T'.*unset or empty"):
        token_from_env("MORIA_T")
    monkeypatch.setenv("MORIA_T", "   ")
    with pytest.raises(SecurityConfigError):
        token_from_env("MORIA_T")
    monkeypatch.setenv("MORIA_T", f" {TOKEN}\n")
    secret = token_from_env("MORIA_T")
    assert secret.get_secret_value() == TOKEN
    settings = transport_security(None, "MORIA_T")
    for shown in (repr(settings), str(settings), settings.model_dump_json(), repr(secret)):
        assert TOKEN not in shown


def test_tls_config_needs_cert_and_key_together() -> None:
    with pytest.raises(ValidationError, match="client_cert and client_key go together"):
        TlsConfig(ca_cert="ca.pem", client_cert="c.pem")
    assert TlsConfig(client_cert="c.pem", client_key="k.pem").client_key == "k.pem"
    with pytest.raises(ValidationError):
        TlsConfig(ca="x")  # type: ignore[call-arg]  # unknown key


def test_unreadable_or_non_pem_files_are_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(SecurityConfigError, match=r"tls\.ca_cert .*nope\.pem"):
        channel_credentials(TlsConfig(ca_cert=str(missing)))
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(SecurityConfigError, match="is not a PEM file"):
        channel_credentials(TlsConfig(ca_cert=str(junk)))


async def test_token_over_plaintext_is_refused_for_remote_targets() -> None:
    security = TransportSecurity(token=SecretStr(TOKEN))
    with pytest.raises(SecurityConfigError, match="refusing to send the bearer token") as err:
        open_channel("10.1.2.3:50051", security)
    assert TOKEN not in str(err.value)
    with pytest.raises(SecurityConfigError):
        clients.EnvClient("env-babyai:50051", security)
    channel = open_channel("127.0.0.1:50051", security)  # loopback: allowed
    await channel.close()


async def test_configure_transport_per_target_and_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MORIA_T", TOKEN)
    assert clients.transport_for("a:1") is None
    scoped = clients.configure_transport(None, "MORIA_T", targets=["127.0.0.1:7"])
    assert clients.transport_for("127.0.0.1:7") is scoped
    assert clients.transport_for("127.0.0.1:8") is None
    # A plaintext token for a remote target is refused up front (a preflight error)...
    with pytest.raises(SecurityConfigError, match="'remote:1'"):
        clients.configure_transport(None, "MORIA_T", targets=["127.0.0.1:7", "remote:1"])
    # ... and when it comes as the default, on first use of that target.
    clients.configure_transport(None, "MORIA_T")
    with pytest.raises(SecurityConfigError):
        clients.channel_for("remote:1")
    assert clients.transport_for("127.0.0.1:7") is scoped
    clients.reset_transport()
    plain = clients.channel_for("remote:2")
    default = clients.configure_transport(max_message_mb=8)
    assert clients.transport_for("remote:3") is default
    assert default.max_message_mb == 8 and default.token is None
    # Channels are cached per settings: new settings, new channel.
    assert clients.channel_for("remote:2") is not plain
    assert clients.channel_for("remote:2") is clients.channel_for("remote:2")
    await clients.close_channels()


def _server_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_server_arguments(parser, default_address="127.0.0.1:0")
    return parser.parse_args(list(argv))


def test_server_flags_defaults_are_plaintext_without_token() -> None:
    args = _server_args()
    options = server_options_from_args(args)
    assert options["max_message_bytes"] == 64 * 1024 * 1024
    security = options["security"]
    assert not security.tls and security.token is None
    assert security.interceptors() == []
    assert security.describe() == "plaintext"


def test_server_flag_errors_are_clear(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(SecurityConfigError, match="--tls-cert and --tls-key go together"):
        server_security_from_args(_server_args("--tls-cert", "c.pem"))
    with pytest.raises(SecurityConfigError, match=r"--tls-client-ca .*needs --tls-cert"):
        server_security_from_args(_server_args("--tls-client-ca", "ca.pem"))
    monkeypatch.delenv("MORIA_T", raising=False)
    with pytest.raises(SecurityConfigError, match="MORIA_T"):
        server_security_from_args(_server_args("--auth-token-env", "MORIA_T"))
    with pytest.raises(SystemExit, match="between 1 and 2047"):
        server_options_from_args(_server_args("--max-message-mb", "0"))
    missing = str(tmp_path / "server.pem")
    with pytest.raises(SystemExit, match=r"server\.pem"):
        server_options_from_args(_server_args("--tls-cert", missing, "--tls-key", missing))
    with pytest.raises(ValidationError):
        ServerSecurity(tls_key="k.pem")


def test_server_token_flag_reads_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MORIA_T", TOKEN)
    options = server_options_from_args(_server_args("--auth-token-env", "MORIA_T",
                                                    "--max-message-mb", "16"))
    security = options["security"]
    assert options["max_message_bytes"] == 16 * 1024 * 1024
    assert security.token.get_secret_value() == TOKEN
    assert security.describe() == "plaintext, bearer token"
    assert TOKEN not in repr(security) and TOKEN not in repr(security.interceptors())


def test_interceptor_accepts_exactly_the_token() -> None:
    auth = BearerTokenInterceptor(SecretStr(TOKEN))
    assert auth.authorized((("authorization", f"Bearer {TOKEN}"),))
    assert auth.authorized((("user-agent", "x"), ("Authorization", f"Bearer {TOKEN}")))
    assert auth.authorized((("authorization", f"Bearer {TOKEN}".encode()),))
    assert auth.authorized((("authorization", "Bearer nope"),
                            ("authorization", f"Bearer {TOKEN}")))
    assert not auth.authorized(None)
    assert not auth.authorized(())
    assert not auth.authorized((("authorization", TOKEN),))  # no scheme
    assert not auth.authorized((("authorization", f"Basic {TOKEN}"),))
    assert not auth.authorized((("authorization", f"Bearer {TOKEN}x"),))
    assert not auth.authorized((("authorization", f"Bearer {TOKEN[:-1]}"),))
    assert not auth.authorized((("x-token", f"Bearer {TOKEN}"),))


def test_run_spec_endpoints_take_tls_and_a_token_variable_name() -> None:
    from orchestrator.plan.spec import SpecError, load_spec

    spec = load_spec(None, ["endpoints.tls.ca_cert=/pki/ca.pem", "endpoints.token_env=MY_TOKEN",
                            "endpoints.max_message_mb=16"])
    assert spec.endpoints.tls == TlsConfig(ca_cert="/pki/ca.pem")
    assert spec.endpoints.token_env == "MY_TOKEN"
    assert spec.endpoints.max_message_mb == 16
    assert load_spec().endpoints.tls is None and load_spec().endpoints.token_env is None
    with pytest.raises(SpecError, match=r"endpoints\.token_env"):
        load_spec(None, ["endpoints.token_env=sk-test SECRET"])
    with pytest.raises(SpecError, match="client_cert and client_key"):
        load_spec(None, ["endpoints.tls.client_cert=/pki/c.pem"])


def test_an_unreadable_huge_path_gives_a_bounded_error() -> None:
    # found by tests/fuzz/test_orchestrator_submit_fuzz.py: a 56 KB tls.ca_cert made a 56 KB
    # run error
    from moria.security import SecurityConfigError, read_pem

    with pytest.raises(SecurityConfigError) as caught:
        read_pem("a" * 60_000, "tls.ca_cert")
    assert len(str(caught.value)) < 400
    assert str(caught.value).startswith("cannot read tls.ca_cert 'aaaa")
