"""TLS, mTLS, bearer-token auth and size limits over real sockets on 127.0.0.1.

Certificates are made in the test with ``cryptography``: a CA, a server certificate for
127.0.0.1/localhost, a client certificate, and a second, unrelated CA (with its own client
certificate) that nothing trusts.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from pydantic import SecretStr

from moria.clients import (
    EnvClient,
    PolicyClient,
    channel_for,
    check_health,
    close_channels,
    reset_transport,
)
from moria.codecs import dict_from_struct, text_action
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from moria.security import ServerSecurity, TlsConfig, TransportSecurity
from tests.support.servers import env_server, policy_server

GOTO = "babyai:BabyAI-MixedTrainLocal-v0/goto"
TOKEN = "sk-test-SECRET-1234"
TOKEN_ENV = "MORIA_TEST_AUTH_TOKEN"


# --------------------------------------------------------------------------- certificates


@dataclass(frozen=True)
class Pki:
    """PEM paths: the trusted CA, the server and client certificates it signed, and an
    unrelated CA with a client certificate of its own."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path
    other_client_cert: Path
    other_client_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _make_ca(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(_name(common_name)).issuer_name(_name(common_name))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key


def _make_leaf(common_name: str, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey,
               *, server: bool) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(common_name)).issuer_name(ca.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage(
                   [ExtendedKeyUsageOID.SERVER_AUTH if server
                    else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(IPv4Address("127.0.0.1"))]),
            critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca, ca_key = _make_ca("moria test CA")
    other, other_key = _make_ca("unrelated CA")
    server, server_key = _make_leaf("moria server", ca, ca_key, server=True)
    client, client_key = _make_leaf("moria client", ca, ca_key, server=False)
    stranger, stranger_key = _make_leaf("stranger", other, other_key, server=False)
    paths = Pki(*(d / n for n in ("ca.pem", "server.pem", "server.key", "client.pem",
                                  "client.key", "other_ca.pem", "other_client.pem",
                                  "other_client.key")))
    _write_cert(ca, paths.ca)
    _write_cert(server, paths.server_cert)
    _write_key(server_key, paths.server_key)
    _write_cert(client, paths.client_cert)
    _write_key(client_key, paths.client_key)
    _write_cert(other, paths.other_ca)
    _write_cert(stranger, paths.other_client_cert)
    _write_key(stranger_key, paths.other_client_key)
    return paths


def _tls_server(pki: Pki, *, mtls: bool = False, token: str | None = None) -> ServerSecurity:
    return ServerSecurity(tls_cert=str(pki.server_cert), tls_key=str(pki.server_key),
                          tls_client_ca=str(pki.ca) if mtls else None,
                          token=SecretStr(token) if token else None)


def _client(ca: Path | None, *, cert: Path | None = None, key: Path | None = None,
            token: str | None = None) -> TransportSecurity:
    tls = None if ca is None else TlsConfig(
        ca_cert=str(ca), client_cert=str(cert) if cert else None,
        client_key=str(key) if key else None)
    return TransportSecurity(tls=tls, token=SecretStr(token) if token else None)


@pytest.fixture(autouse=True)
def _clean_transport() -> object:
    reset_transport()
    yield
    reset_transport()


def _open(seed: int = 7) -> env_pb.OpenRequest:
    return env_pb.OpenRequest(task=GOTO, seed=seed, oracle=True)


async def _oracle_episode(client: EnvClient) -> types_pb2.EpisodeEnd:
    """Play a whole BabyAI episode with the oracle's hints; returns its end."""
    session = client.session()
    opened = await session.open(_open())
    info = dict_from_struct(opened.agents["agent_0"].observation.info)
    for _ in range(64):
        step = await session.step({"agent_0": text_action(info["expert_action"])})
        assert step.agents["agent_0"].action_result.valid
        if step.HasField("episode_end"):
            await session.close()
            return step.episode_end
        info = dict_from_struct(step.agents["agent_0"].observation.info)
    raise AssertionError("the oracle did not finish in 64 steps")


async def _expect_code(coro: object, code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await coro  # type: ignore[misc]
    assert caught.value.code() == code, caught.value.details()
    return caught.value


# --------------------------------------------------------------------------- TLS / mTLS


async def test_tls_server_with_the_right_ca_serves_info_a_session_and_health(pki: Pki) -> None:
    async with env_server(security=_tls_server(pki)) as srv:
        security = _client(pki.ca)
        client = EnvClient(srv.target, security)
        info = await client.get_info()
        assert info.version.api_version == "moria.v1"
        end = await _oracle_episode(client)
        assert end.reason == types_pb2.END_REASON_TERMINATED
        assert dict_from_struct(end.metrics)["progression"] == 1.0
        # Health and reflection share the port and the TLS credentials.
        assert await check_health(srv.target, security=security)
        assert not await check_health(srv.target, timeout=2.0)  # plaintext client: no answer
        stub = reflection_pb2_grpc.ServerReflectionStub(channel_for(srv.target, security))
        replies = [r async for r in stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)]
        names = {s.name for s in replies[0].list_services_response.service}
        assert "moria.env.v1.EnvService" in names and "grpc.health.v1.Health" in names


async def test_client_trusting_the_wrong_ca_fails_the_handshake(pki: Pki) -> None:
    async with env_server(security=_tls_server(pki)) as srv:
        err = await _expect_code(EnvClient(srv.target, _client(pki.other_ca)).get_info(5.0),
                                 grpc.StatusCode.UNAVAILABLE)
        details = err.details() or ""
        assert "handshake failed" in details.lower(), details
        assert "CERTIFICATE_VERIFY_FAILED" in details, details


async def test_server_name_override_checks_the_certificate_against_that_name(pki: Pki) -> None:
    async with env_server(security=_tls_server(pki)) as srv:
        port = srv.target.rsplit(":", 1)[1]
        good = TransportSecurity(tls=TlsConfig(ca_cert=str(pki.ca), server_name="localhost"))
        assert (await EnvClient(f"127.0.0.1:{port}", good).get_info()).version.api_version
        bad = TransportSecurity(tls=TlsConfig(ca_cert=str(pki.ca),
                                              server_name="not-this-server.example"))
        await _expect_code(EnvClient(srv.target, bad).get_info(5.0),
                           grpc.StatusCode.UNAVAILABLE)


async def test_mtls_refuses_clients_without_a_cert_from_its_ca(pki: Pki) -> None:
    async with env_server(security=_tls_server(pki, mtls=True)) as srv:
        await _expect_code(EnvClient(srv.target, _client(pki.ca)).get_info(5.0),
                           grpc.StatusCode.UNAVAILABLE)
        stranger = _client(pki.ca, cert=pki.other_client_cert, key=pki.other_client_key)
        await _expect_code(EnvClient(srv.target, stranger).get_info(5.0),
                           grpc.StatusCode.UNAVAILABLE)
        member = _client(pki.ca, cert=pki.client_cert, key=pki.client_key)
        client = EnvClient(srv.target, member)
        assert (await client.get_info()).version.api_version == "moria.v1"
        assert (await _oracle_episode(client)).reason == types_pb2.END_REASON_TERMINATED


# --------------------------------------------------------------------------- bearer token


async def test_token_over_plaintext_loopback(pki: Pki) -> None:
    del pki
    async with env_server(security=ServerSecurity(token=SecretStr(TOKEN))) as srv:
        for security in (None, _client(None, token="sk-test-WRONG-0000")):
            err = await _expect_code(EnvClient(srv.target, security).get_info(5.0),
                                     grpc.StatusCode.UNAUTHENTICATED)
            assert TOKEN not in str(err) and "WRONG" not in str(err)
            # The stream is refused too, on its first message.
            session = EnvClient(srv.target, security).session()
            await _expect_code(session.open(_open()), grpc.StatusCode.UNAUTHENTICATED)
            await session.close()
        # Probes work without a token; reflection does not.
        assert await check_health(srv.target)
        stub = reflection_pb2_grpc.ServerReflectionStub(channel_for(srv.target))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in stub.ServerReflectionInfo(
                    iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5):
                pass
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        client = EnvClient(srv.target, _client(None, token=TOKEN))
        assert (await client.get_info()).version.api_version == "moria.v1"
        assert (await _oracle_episode(client)).reason == types_pb2.END_REASON_TERMINATED


async def test_token_over_tls_uses_call_credentials(pki: Pki) -> None:
    async with env_server(security=_tls_server(pki, token=TOKEN)) as srv:
        await _expect_code(EnvClient(srv.target, _client(pki.ca)).get_info(5.0),
                           grpc.StatusCode.UNAUTHENTICATED)
        await _expect_code(
            EnvClient(srv.target, _client(pki.ca, token="sk-test-WRONG-0000")).get_info(5.0),
            grpc.StatusCode.UNAUTHENTICATED)
        health = health_pb2_grpc.HealthStub(channel_for(srv.target, _client(pki.ca)))
        resp = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        assert resp.status == health_pb2.HealthCheckResponse.SERVING
        client = EnvClient(srv.target, _client(pki.ca, token=TOKEN))
        assert (await client.get_info()).version.api_version == "moria.v1"
        assert (await _oracle_episode(client)).reason == types_pb2.END_REASON_TERMINATED


async def test_policy_server_requires_the_token_too(pki: Pki) -> None:
    async with policy_server(security=_tls_server(pki, mtls=True, token=TOKEN)) as srv:
        member = dict(cert=pki.client_cert, key=pki.client_key)
        await _expect_code(PolicyClient(srv.target, _client(pki.ca, **member)).get_info(),
                           grpc.StatusCode.UNAUTHENTICATED)
        ok = PolicyClient(srv.target, _client(pki.ca, token=TOKEN, **member))
        assert (await ok.get_info()).version.api_version == "moria.v1"


async def test_configure_transport_applies_to_the_listed_targets(
        pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    from moria.clients import configure_transport

    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    async with env_server(security=_tls_server(pki, token=TOKEN)) as secured, \
            env_server() as plain:
        configure_transport(TlsConfig(ca_cert=str(pki.ca)), TOKEN_ENV, targets=[secured.target])
        assert (await EnvClient(secured.target).get_info()).version.api_version == "moria.v1"
        assert (await EnvClient(plain.target).get_info()).version.api_version == "moria.v1"


# --------------------------------------------------------------------------- limits


async def test_action_text_over_the_cap_is_an_invalid_action() -> None:
    async with env_server(max_action_chars=9) as srv:
        session = EnvClient(srv.target).session()
        await session.open(_open())
        step = await session.step({"agent_0": text_action("turn left")})  # 9 characters
        result = step.agents["agent_0"].action_result
        assert result.valid and result.applied_action.text == "turn left"
        step = await session.step({"agent_0": text_action("turn right")})  # 10 characters
        result = step.agents["agent_0"].action_result
        assert not result.valid
        assert result.applied_action.text == "go forward"  # BabyAI's default action
        assert "turn right" not in result.feedback
        # The session goes on.
        step = await session.step({"agent_0": text_action("toggle")})
        assert step.agents["agent_0"].action_result.valid
        assert step.step == 3
        await session.close()


async def test_default_cap_is_4096_characters(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="moria.env")
    async with env_server() as srv:
        session = EnvClient(srv.target).session()
        await session.open(_open())
        # both are invalid answers (not an action name); only the longer one is cut off by
        # the cap before the game judges it
        step = await session.step({"agent_0": text_action("x" * 4096)})
        assert not step.agents["agent_0"].action_result.valid
        assert "character action text" not in caplog.text
        step = await session.step({"agent_0": text_action("x" * 4097)})
        assert not step.agents["agent_0"].action_result.valid
        assert "sent a 4097-character action text (cap 4096)" in caplog.text
        await session.close()


async def test_message_over_the_server_limit_is_resource_exhausted() -> None:
    async with env_server(max_message_bytes=1024 * 1024) as srv:
        session = EnvClient(srv.target).session()
        await session.open(_open())
        await _expect_code(session.step({"agent_0": text_action("x" * (2 * 1024 * 1024))}),
                           grpc.StatusCode.RESOURCE_EXHAUSTED)
        await session.close()
        # Other calls are unaffected.
        assert (await EnvClient(srv.target).get_info()).version.api_version == "moria.v1"


# --------------------------------------------------------------------------- real process


async def test_server_process_with_tls_and_token_flags_never_logs_the_token(
        pki: Pki, tmp_path: Path) -> None:
    env = {**os.environ, TOKEN_ENV: TOKEN}
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "env_server", "serve", "--family", "babyai",
             "--address", "127.0.0.1:0", "--log-level", "DEBUG", "--grace", "2",
             "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key),
             "--auth-token-env", TOKEN_ENV, "--max-message-mb", "8"],
            stdout=log_file, stderr=subprocess.STDOUT, env=env)
    try:
        target = await _ready_address(proc, log_path)
        assert await check_health(target, security=_client(pki.ca), timeout=5.0)
        await _expect_code(
            EnvClient(target, _client(pki.ca, token="sk-test-WRONG-0000")).get_info(5.0),
            grpc.StatusCode.UNAUTHENTICATED)
        client = EnvClient(target, _client(pki.ca, token=TOKEN))
        assert (await _oracle_episode(client)).reason == types_pb2.END_REASON_TERMINATED
        await close_channels()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    log = log_path.read_text(errors="replace")
    assert "READY" in log and "TLS, bearer token" in log and "max message 8 MiB" in log
    assert TOKEN not in log and "SECRET" not in log


async def _ready_address(proc: subprocess.Popen[bytes], log_path: Path) -> str:
    for _ in range(600):
        for line in log_path.read_text(errors="replace").splitlines():
            if line.startswith("READY "):
                return line.split(" ", 1)[1].strip()
        if proc.poll() is not None:
            raise AssertionError("server exited:\n" + log_path.read_text(errors="replace"))
        await asyncio.sleep(0.05)
    raise AssertionError("server never became ready:\n" + log_path.read_text(errors="replace"))


def test_server_refuses_to_start_with_an_unset_token_variable(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    proc = subprocess.run(
        [sys.executable, "-m", "agent_server", "serve", "--address", "127.0.0.1:0",
         "--auth-token-env", TOKEN_ENV], env=env, capture_output=True, timeout=60, text=True)
    assert proc.returncode != 0
    assert TOKEN_ENV in proc.stderr and "unset or empty" in proc.stderr


# --------------------------------------------------------------------------- a whole run


async def test_run_evaluation_over_tls_and_token_endpoints(
        pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from orchestrator.core.runner import run_evaluation
    from orchestrator.plan.spec import load_spec

    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    security = _tls_server(pki, mtls=True, token=TOKEN)
    async with env_server(security=security) as env, policy_server(security=security) as pol:
        spec = load_spec(None, [
            "agent.type=dummy", "eval.num_episodes.babyai=1", "eval.num_samples=2",
            f"eval.output_dir={tmp_path / 'out'}",
            f"endpoints.env.babyai=[{env.target}]", f"endpoints.policy=[{pol.target}]",
            f"endpoints.tls.ca_cert={pki.ca}", f"endpoints.tls.client_cert={pki.client_cert}",
            f"endpoints.tls.client_key={pki.client_key}", f"endpoints.token_env={TOKEN_ENV}"])
        outcome = await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
    assert outcome.ran == 2 and outcome.verdict is not None and outcome.verdict.succeeded
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert any(p.name.endswith("_run_00.json") for p in files)
    for path in files:
        assert TOKEN.encode() not in path.read_bytes(), path
