"""The images' health probe (deploy/docker/grpc_health_probe.py) over TLS, as the ``tls``
kustomize component runs it in exec probes: ``127.0.0.1:PORT --tls-ca ca.crt --server-name
localhost``. A real gRPC health server with TLS (and mTLS) listens on loopback; the probe runs
as a separate process, exactly as the kubelet would start it.

The certificates are made here with ``cryptography``, shaped like the ``moria-tls`` Secret that
docs/deploy.md asks for: a server certificate naming ``*.moria.svc.cluster.local`` and
``localhost``, signed by a CA."""

from __future__ import annotations

import datetime
import subprocess
import sys
from collections.abc import Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tests.deploy.dockerfiles import REPO

PROBE = REPO / "deploy" / "docker" / "grpc_health_probe.py"


@dataclass
class Pki:
    """PEM files: a CA, a server certificate/key signed by it, a client certificate/key signed
    by it, and an unrelated CA."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name | None,
          issuer_key: ec.EllipticCurvePrivateKey | None, *, ca: bool,
          names: Sequence[str] = (), usage: Sequence[x509.ObjectIdentifier] = (),
          ) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usage)), critical=False)
    return builder.sign(issuer_key or key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    pem = serialization.Encoding.PEM
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("moria test CA", ca_key, None, None, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _cert("moria servers", server_key, ca.subject, ca_key, ca=False,
                   names=["*.moria.svc.cluster.local", "localhost"],
                   usage=[ExtendedKeyUsageOID.SERVER_AUTH])
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert("moria probe", client_key, ca.subject, ca_key, ca=False,
                   usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    other_key = ec.generate_private_key(ec.SECP256R1())
    other = _cert("unrelated CA", other_key, None, None, ca=True)
    return Pki(ca=_write(root / "ca.crt", ca.public_bytes(pem)),
               server_cert=_write(root / "tls.crt", server.public_bytes(pem)),
               server_key=_write(root / "tls.key", _key_pem(server_key)),
               client_cert=_write(root / "client.crt", client.public_bytes(pem)),
               client_key=_write(root / "client.key", _key_pem(client_key)),
               other_ca=_write(root / "other-ca.crt", other.public_bytes(pem)))


@dataclass
class HealthServer:
    """A TLS gRPC server with only the health service; ``health`` sets its status."""

    port: int
    health: health.HealthServicer


def _serve(pki: Pki, *, mtls: bool) -> Iterator[HealthServer]:
    server = grpc.server(futures.ThreadPoolExecutor(2))
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    creds = grpc.ssl_server_credentials(
        [(pki.server_key.read_bytes(), pki.server_cert.read_bytes())],
        root_certificates=pki.ca.read_bytes() if mtls else None,
        require_client_auth=mtls)
    port = server.add_secure_port("127.0.0.1:0", creds)
    server.start()
    try:
        yield HealthServer(port, servicer)
    finally:
        server.stop(None)


@pytest.fixture
def tls_server(pki: Pki) -> Iterator[HealthServer]:
    yield from _serve(pki, mtls=False)


@pytest.fixture
def mtls_server(pki: Pki) -> Iterator[HealthServer]:
    yield from _serve(pki, mtls=True)


def _probe(port: int, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PROBE), f"127.0.0.1:{port}", "--timeout", "5",
                           *map(str, args)], text=True, capture_output=True, timeout=60,
                          check=False)


def test_tls_probe_as_the_overlay_runs_it_sees_serving_then_draining(
        pki: Pki, tls_server: HealthServer) -> None:
    ok = _probe(tls_server.port, "--tls-ca", pki.ca, "--server-name", "localhost")
    assert (ok.returncode, ok.stdout.strip()) == (0, f"127.0.0.1:{tls_server.port}: SERVING"), (
        ok.stderr)
    # a Service name is covered by the wildcard too (what the orchestrator dials)
    svc = _probe(tls_server.port, "--tls-ca", pki.ca,
                 "--server-name", "moria-env-babyai.moria.svc.cluster.local")
    assert svc.returncode == 0, svc.stdout + svc.stderr
    # the drain (NOT_SERVING) still fails readiness over TLS
    tls_server.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    draining = _probe(tls_server.port, "--tls-ca", pki.ca, "--server-name", "localhost")
    assert (draining.returncode, draining.stdout.strip()) == (
        1, f"127.0.0.1:{tls_server.port}: NOT_SERVING")


@pytest.mark.parametrize("args", [
    pytest.param([], id="plaintext-to-tls"),
    pytest.param(["--tls-ca", "OTHER", "--server-name", "localhost"], id="wrong-ca"),
    pytest.param(["--tls-ca", "CA", "--server-name", "evil.example.com"], id="wrong-name"),
])
def test_tls_probe_fails_without_the_right_ca_or_name(
        pki: Pki, tls_server: HealthServer, args: list[str]) -> None:
    mapped = [{"OTHER": str(pki.other_ca), "CA": str(pki.ca)}.get(a, a) for a in args]
    bad = _probe(tls_server.port, *mapped)
    assert bad.returncode == 1
    assert bad.stdout.strip() == f"127.0.0.1:{tls_server.port}: UNAVAILABLE"


def test_mtls_probe_needs_a_client_certificate(pki: Pki, mtls_server: HealthServer) -> None:
    without = _probe(mtls_server.port, "--tls-ca", pki.ca, "--server-name", "localhost")
    assert without.returncode == 1 and "UNAVAILABLE" in without.stdout
    with_cert = _probe(mtls_server.port, "--tls-ca", pki.ca, "--server-name", "localhost",
                       "--tls-cert", pki.client_cert, "--tls-key", pki.client_key)
    assert with_cert.returncode == 0, with_cert.stdout + with_cert.stderr


def test_probe_reports_unreadable_pem_and_bad_flag_combinations(tmp_path: Path) -> None:
    missing = _probe(1, "--tls-ca", tmp_path / "absent.crt")
    assert missing.returncode == 1
    assert missing.stdout.strip() == f"127.0.0.1:1: cannot read {tmp_path / 'absent.crt'}"
    half = _probe(1, "--tls-ca", tmp_path / "x", "--tls-cert", tmp_path / "c")
    assert half.returncode == 2 and "go together" in half.stderr
