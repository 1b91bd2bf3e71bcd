"""Every container entry point, run as a plain process (no Docker engine here).

For every env-family image, the agent image and the orchestrator image, the command line and
environment come from the image's own Dockerfile (runtime stage: ENTRYPOINT + CMD, ENV,
HEALTHCHECK), so the test fails as soon as they drift. Only what a container would provide
differently is mapped:

- ``/opt/moria/venv/bin`` (the image's venv) -> this checkout's ``.venv/bin``;
- ``/tmp`` (the only writable place, HOME and TMPDIR) -> a fresh temporary folder;
- ``/opt/moria/data`` (baked-in game data) -> an empty folder without write permission;
- ``/opt/moria/bin/grpc_health_probe.py`` -> ``deploy/docker/grpc_health_probe.py``;
- the working directory ``/opt/moria`` -> a folder without write permission;
- ``--address 0.0.0.0:PORT`` -> ``127.0.0.1:0``, the bound port read from the server's
  ``READY 127.0.0.1:<port>`` line;
- ``--metrics-address 0.0.0.0:9100`` -> ``127.0.0.1:0``, the bound port read from its
  ``METRICS 127.0.0.1:<port>`` line.

Any other ``/opt/moria`` path in ENV fails the test (an unmapped path would mean the image
depends on something this test does not model). Each server must answer the image's own
HEALTHCHECK command with SERVING, serve Prometheus ``/metrics`` over HTTP on the metrics address
of its CMD, then exit 0 on SIGTERM, with nothing written outside its temporary folder. All
servers start at once (nethack's import is slow) in one fixture.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.deploy import dockerfiles
from tests.deploy.dockerfiles import REPO, Dockerfile
from tests.support.waiting import wait_until

#: every image: the env families, the agent server and the orchestrator service
SERVER_IMAGES = (*dockerfiles.ENV_IMAGES, "agent", "orchestrator")
VENV_BIN = Path(sys.executable).parent
START_TIMEOUT_S = 180.0  # 10 servers importing at once on 2 shared cores
STOP_TIMEOUT_S = 40.0
#: the port every image serves /metrics on (EXPOSE's second port, the manifests' "metrics" port)
METRICS_PORT = 9100
#: a series each kind of server always exposes (its HELP/TYPE lines appear before any sample)
METRIC_OF = {**{image: "moria_active_sessions" for image in dockerfiles.ENV_IMAGES},
             "agent": "moria_active_streams", "orchestrator": "moria_orchestrator_runs"}


def _map_path(value: str, mapping: dict[str, str]) -> str:
    for src in sorted(mapping, key=len, reverse=True):
        value = value.replace(src, mapping[src])
    return value


def _readonly_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    path.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    return path


@dataclass
class Server:
    """One entry point started as a process (``port`` and ``metrics_port``: 0 until
    ``_wait_serving`` has read them from the server's output)."""

    image: str
    dockerfile: Dockerfile
    process: subprocess.Popen[bytes]
    env: dict[str, str]
    cwd: Path
    tmp: Path
    data: Path
    log: Path
    port: int = 0
    metrics_port: int = 0

    def health_argv(self) -> list[str]:
        """The image's HEALTHCHECK command, aimed at this process's port."""
        argv = [_map_path(arg, {"/opt/moria/bin/grpc_health_probe.py":
                                str(REPO / "deploy" / "docker" / "grpc_health_probe.py")})
                for arg in self.dockerfile.healthcheck]
        return [arg.replace(f"127.0.0.1:{self.dockerfile.expose[0]}", f"127.0.0.1:{self.port}")
                for arg in argv]

    def output(self) -> str:
        """What the server wrote to stdout/stderr so far."""
        return self.log.read_text(errors="replace")

    def announced(self, word: str) -> str | None:
        """The address of the server's first ``<word> host:port`` line (None: not yet). Fails
        the test when the process has exited."""
        for line in self.output().splitlines():
            if line.startswith(f"{word} "):
                return line.split()[1]
        assert self.process.poll() is None, (
            f"{self.image} exited with {self.process.returncode}:\n{self.output()}")
        return None


def _start(image: str, root: Path) -> Server:
    df = dockerfiles.load(image)
    tmp = root / image / "tmp"
    tmp.mkdir(parents=True)
    data = _readonly_dir(root / image / "data")
    cwd = _readonly_dir(root / image / "workdir")
    mapping = {"/opt/moria/venv/bin": str(VENV_BIN), "/opt/moria/data": str(data),
               "/opt/moria/bin/grpc_health_probe.py":
                   str(REPO / "deploy" / "docker" / "grpc_health_probe.py")}
    env: dict[str, str] = {}
    for key, value in df.env.items():
        # the image's /tmp is this server's temp dir (decided on the image's own value: this
        # checkout may itself live under /tmp)
        if value == "/tmp" or value.startswith("/tmp/"):
            value = str(tmp) + value[len("/tmp"):]
        mapped = _map_path(value, mapping)
        mapped = mapped.replace("$PATH", "/usr/local/bin:/usr/bin:/bin")
        assert "/opt/moria" not in mapped, f"{image}: ENV {key}={value} has an unmapped path"
        env[key] = mapped
    assert env.get("HOME") == str(tmp) and env.get("TMPDIR") == str(tmp), (
        f"{image}: HOME and TMPDIR must be /tmp, the only writable place")
    assert df.workdir == "/opt/moria", f"{image}: WORKDIR {df.workdir}"
    argv = list(df.command)
    address = dockerfiles.flag(argv, "--address")
    assert address == f"0.0.0.0:{df.expose[0]}", f"{image}: --address {address} vs EXPOSE"
    argv[argv.index("--address") + 1] = "127.0.0.1:0"
    metrics = dockerfiles.flag(argv, "--metrics-address")
    assert metrics == f"0.0.0.0:{METRICS_PORT}", f"{image}: --metrics-address {metrics}"
    assert df.expose == [df.expose[0], METRICS_PORT], f"{image}: EXPOSE {df.expose}"
    argv[argv.index("--metrics-address") + 1] = "127.0.0.1:0"
    log = root / image / "server.log"
    with open(log, "wb") as out:
        # the executable ("moria") is found on the image's PATH, mapped to this venv
        process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    return Server(image, df, process, env, cwd, tmp, data, log)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Server]]:
    root = tmp_path_factory.mktemp("entrypoints")
    started: dict[str, Server] = {}
    try:
        for image in SERVER_IMAGES:
            started[image] = _start(image, root)
        yield started
    finally:
        for server in started.values():
            if server.process.poll() is None:
                os.killpg(server.process.pid, signal.SIGKILL)
                server.process.wait()
            for path in (server.cwd, server.data):
                path.chmod(0o755)


def _port(address: str) -> int:
    host, port = address.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0, address
    return int(port)


def _wait_serving(server: Server) -> subprocess.CompletedProcess[str]:
    """Wait for the server's READY line (it serves, health SERVING, from then on), note its
    ports, and return the image's HEALTHCHECK run against it."""
    try:
        ready = wait_until(lambda: server.announced("READY"), f"{server.image} to print READY",
                           timeout=START_TIMEOUT_S, interval=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}:\n{server.output()}") from None
    server.port = _port(ready)
    # /metrics starts before the gRPC server, so its line is there already
    metrics = server.announced("METRICS")
    assert metrics is not None, f"{server.image} announced no /metrics:\n{server.output()}"
    server.metrics_port = _port(metrics)
    probes: list[subprocess.CompletedProcess[str]] = []

    def healthy() -> bool:
        probes.append(subprocess.run(server.health_argv(), env=server.env, cwd=server.cwd,
                                     text=True, capture_output=True, timeout=30, check=False))
        return probes[-1].returncode == 0

    # the probe is a Python process with its own short deadline: on a loaded machine a try
    # may time out, hence a few
    try:
        wait_until(healthy, f"{server.image}'s HEALTHCHECK to pass", timeout=START_TIMEOUT_S,
                   interval=0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {probes[-1].stdout}{probes[-1].stderr}\n"
                             f"{server.output()}") from None
    return probes[-1]


@pytest.mark.parametrize("image", SERVER_IMAGES)
def test_entrypoint_serves_health_then_drains_on_sigterm(
        servers: dict[str, Server], image: str) -> None:
    server = servers[image]
    probe = _wait_serving(server)
    assert probe.stdout.strip() == f"127.0.0.1:{server.port}: SERVING"

    # /metrics on the CMD's metrics address (its port as announced on stderr)
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("text/plain")
        body = reply.read().decode()
    series = METRIC_OF[image]
    assert f"# TYPE {series} gauge" in body, body[:2000]

    server.process.send_signal(signal.SIGTERM)
    try:
        code = server.process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{image} did not stop within {STOP_TIMEOUT_S}s of SIGTERM:\n"
                    f"{server.output()}")
    output = server.output()
    assert code == 0, f"{image} exited {code} after SIGTERM:\n{output}"
    assert "Traceback" not in output, output
    assert "draining" in output, f"{image} did not drain:\n{output}"
    # read-only root: nothing was written outside the temporary folder
    assert list(server.cwd.iterdir()) == []
    assert list(server.data.iterdir()) == []

    # the health check itself reports a server that is gone as unhealthy
    gone = subprocess.run([*server.health_argv(), "--timeout", "1"], env=server.env,
                          cwd=server.cwd, text=True, capture_output=True, check=False)
    assert gone.returncode == 1, gone.stdout + gone.stderr
    assert "SERVING" not in gone.stdout.replace("NOT_SERVING", "")
