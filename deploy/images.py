#!/usr/bin/env python3
"""Moria's container images: their Dockerfiles and deploy files, generated from templates and the
family manifests (``moria/families.json``), and their builds with podman or docker.

    python3 deploy/images.py generate [--check]  write (or only check) deploy/docker/*/Dockerfile
                                                 and the deploy files (below)
    python3 deploy/images.py list                name, tag, Dockerfile and families of each image
    python3 deploy/images.py build [NAME ...]    build them (default all): each one's time and size

``make dockerfiles``, ``make images`` (``IMAGES="babyai orchestrator"`` for some) and
``make deploy-check`` (which fails on a stale Dockerfile) call it. Standard library only: it runs
with the system ``python3``, without the project's venv.

One Dockerfile per image rather than one Dockerfile with build arguments: the image's command
(``moria serve env --families ...``) is an exec-form CMD, which Docker does not expand variables
in, and Compose, Kubernetes and tests/deploy run that CMD as written. So the families an image
serves are written into its Dockerfile, from the manifests: a family added to
``moria/families.json`` with an ``image`` (and ``extra``, ``prepare``) reaches its Dockerfile by
``make dockerfiles``; only what no manifest says (``ENV_IMAGE_NEEDS`` below: a compiler, git, a
``--no-deps`` package, the CPU, memory and /tmp sizes) is written here.

The same command writes everything else that names the env images (``deploy_files``): each
image's Kubernetes Deployment and Service (``deploy/k8s/base/env-<image>.yaml``, whole files),
and, between ``BEGIN GENERATED`` / ``END GENERATED`` marker lines of hand-written files
(``REGIONS``), its Compose service, the orchestrator's ``depends_on`` and allowed endpoints, the
run specs' ``endpoints.env``, the kustomize resource and image lists, the tls component's server
arguments and the image table of docs/deploy.md. So a family with a new image touches its folder
and generated files only (tests/deploy/test_adding_a_family.py); ``--check`` (tests/deploy,
``make deploy-check``) fails on a stale or stray one.

The base: ``ARG BASE_IMAGE`` (default the official ``python:3.11.13-slim-bookworm``). ``build``
uses ``$MORIA_BASE_IMAGE`` when set, else the official image when the engine has it or can pull
it (a 30 s try), else the local one that ``deploy/engine/base-image.sh`` makes with debootstrap
(``localhost/moria/python:3.11-bookworm``; built first when missing, which needs root).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCKER_DIR = ROOT / "deploy" / "docker"
MANIFESTS = ROOT / "moria" / "families.json"
PYPROJECT = ROOT / "pyproject.toml"
LOG_DIR = ROOT / "build" / "images"
#: where ``make llama-wheel`` keeps the wheels it builds once on the host (the Makefile's
#: ``WHEELS``, passed as ``--wheels-dir``): ``wheels`` under Moria's cache
WHEELS_DIR = Path(os.environ.get("MORIA_CACHE_DIR") or Path.home() / ".cache" / "moria") / "wheels"
#: the folder of the build context the Dockerfiles copy wheels from (tracked, holding a README;
#: its wheels are git-ignored): ``build`` copies the host's wheels there when they fit the base
CONTEXT_WHEELS = ROOT / "deploy" / "wheels"
#: the Debian release of both bases (the official image and the debootstrap one): a wheel
#: built on a host of another release may need a newer glibc or libstdc++ than the image has
BASE_RELEASE = "bookworm"
OFFICIAL_BASE = "python:3.11.13-slim-bookworm"
#: the fully qualified name pulled (podman's short names depend on the host's registries.conf)
OFFICIAL_BASE_REF = f"docker.io/library/{OFFICIAL_BASE}"
LOCAL_BASE = "localhost/moria/python:3.11-bookworm"
BASE_SCRIPT = ROOT / "deploy" / "engine" / "base-image.sh"
PULL_TIMEOUT_S = 30
# Every layer a Moria build makes carries this label (both stages; one value, so the images still
# share their common layers), so that `build` can remove the ones it superseded without touching
# anyone else's images.
BUILD_LABEL = "io.moria.build"
# Below this much free space where the engine keeps images, `build` warns before starting: ten
# images, their build stages and the engine's staging copies need about this much.
FREE_SPACE_WANTED = 12 * 10**9
#: every server drains this long on SIGTERM (--grace); engines must wait longer before SIGKILL
GRACE_S = 25
ENV_PORT, AGENT_PORT, ORCHESTRATOR_PORT, METRICS_PORT = 50051, 50052, 50070, 9100
NUMBA_CACHE = {"NUMBA_CACHE_DIR": "/tmp/numba"}


@dataclass(frozen=True)
class Resources:
    """What an env server of an image may use, written into its Compose service and its
    Kubernetes Deployment. The defaults fit a light family (one Python process a game)."""

    cpus: int = 2  # CPU limit (Compose ``cpus``, k8s ``limits.cpu``); at most 2 (Compose hosts)
    memory_gib: int = 2  # memory limit; Compose also allows 256 pids per GiB
    tmp_mib: int = 256  # the /tmp tmpfs (Compose) / emptyDir and ephemeral-storage limit (k8s)
    cpu_request_m: int = 250  # k8s ``requests.cpu`` in millicores
    memory_request_mib: int = 512  # k8s ``requests.memory``


#: an image whose games run in worker processes or need more room than the default
HEAVIER = Resources(cpu_request_m=500, memory_request_mib=1024)


@dataclass(frozen=True)
class Needs:
    """What an image needs that its families' manifests do not say."""

    build_packages: tuple[str, ...] = ()  # apt packages of the build stage (thrown away)
    runtime_packages: tuple[str, ...] = ()  # apt packages of the runtime stage
    no_deps: tuple[str, ...] = ()  # pip requirements installed afterwards with --no-deps
    env: dict[str, str] = field(default_factory=dict)  # extra runtime ENV
    pip_env: str = ""  # VAR=value prefix of the pip install (e.g. CMAKE_ARGS)
    why: tuple[str, ...] = ()  # comment lines above the build stage's packages
    no_deps_why: tuple[str, ...] = ()  # comment lines above the --no-deps installs
    runtime_why: tuple[str, ...] = ()  # comment lines above the runtime stage's packages
    #: commands run with the build stage's venv python after the project's source is copied
    #: (before the project is installed), and the comment lines above them
    source_scripts: tuple[str, ...] = ()
    source_scripts_why: tuple[str, ...] = ()
    #: project extras whose packages are uninstalled once the data is prepared (their files were
    #: only the source of the baked data: the image keeps one copy)
    drop_after_prepare: tuple[str, ...] = ()
    #: requirements (names) that compile for minutes: their extras' install looks in
    #: ``deploy/wheels/`` first, where ``build`` puts the host's prebuilt wheels (``WHEELS_DIR``)
    wheels: tuple[str, ...] = ()
    #: an env image's limits and requests in Compose and Kubernetes
    resources: Resources = Resources()


#: the env images' needs beyond their manifests, by image name (an image not listed gets the
#: defaults: no system package, ``Resources()``)
ENV_IMAGE_NEEDS: dict[str, Needs] = {
    "nethack": Needs(build_packages=("git",),
                     why=("git: minihack 1.0.2 is an sdist whose setup.py runs git",),
                     resources=Resources(memory_gib=4, tmp_mib=2048, cpu_request_m=500,
                                         memory_request_mib=1024)),
    "textworld": Needs(build_packages=("build-essential",),
                       why=("build-essential: TextWorld's jericho compiles with gcc",),
                       resources=Resources(memory_gib=4, tmp_mib=1024, cpu_request_m=500,
                                           memory_request_mib=1024)),
    "crafter": Needs(env=NUMBA_CACHE, resources=HEAVIER),
    "multigrid": Needs(no_deps=("mosaic-multigrid==7.0.0",), env=NUMBA_CACHE,
                       no_deps_why=("mosaic-multigrid asks for pygame, which would overwrite "
                                    "pygame-ce: --no-deps",),
                       resources=Resources(tmp_mib=512, cpu_request_m=500,
                                           memory_request_mib=1024)),
    "meltingpot": Needs(
        source_scripts=("env_server/families/meltingpot/install_package.py",),
        source_scripts_why=("dm-meltingpot 2.4.1: an sdist whose build downloads its bots' "
                            "assets and whose requirements pull tensorflow; the script builds it "
                            "with a placeholder assets tarball, --no-deps",),
        resources=HEAVIER),
    "babaisai": Needs(resources=Resources(cpus=1, memory_gib=1, tmp_mib=128)),
    "pettingzoo": Needs(resources=Resources(cpus=1, memory_gib=1, tmp_mib=128)),
}


@dataclass(frozen=True)
class Image:
    """One image: its Dockerfile folder, tag, what it installs and what it runs."""

    name: str
    tag: str
    title: str
    extras: tuple[str, ...]  # pip extras of the project ("" none: `pip install "."`)
    prepare: tuple[str, ...]  # `moria prepare --env X` steps baked into /opt/moria/data
    port: int
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    needs: Needs = Needs()
    families: tuple[str, ...] = ()
    data_dir: bool = False  # /data owned by 10001 (the orchestrator's working directory)

    @property
    def dockerfile(self) -> Path:
        return DOCKER_DIR / self.name / "Dockerfile"

    @property
    def build_stage_tag(self) -> str:
        """The tag of the image's build stage (``<tag>-build-stage``): tagged so that its layers
        stay in the engine's cache when superseded images are pruned."""
        return f"{self.tag}-build-stage"



# ---------------------------------------------------------------------------------- requirements

def _pyproject() -> dict[str, Any]:
    with PYPROJECT.open("rb") as f:
        project = tomllib.load(f)["project"]
    assert isinstance(project, dict)
    return project


def _name_of(requirement: str) -> str:
    """The distribution name of a PEP 508 requirement (``"llama-cpp-python[server]==1"`` ->
    ``"llama-cpp-python"``)."""
    for i, char in enumerate(requirement):
        if not (char.isalnum() or char in "-_."):
            return requirement[:i]
    return requirement


def core_requirements() -> list[str]:
    """``[project].dependencies`` of pyproject.toml, as written."""
    return [str(r) for r in _pyproject()["dependencies"]]


def extra_requirements(extras: tuple[str, ...]) -> list[str]:
    """The requirements of the project's ``extras``, self-references (``moria[a,b]``) expanded,
    in first-seen order, without duplicates. Raises ``SystemExit`` for an unknown extra."""
    project = _pyproject()
    table = project["optional-dependencies"]
    assert isinstance(table, dict)
    name = str(project["name"])
    out: list[str] = []
    seen: set[str] = set()

    def walk(extra: str) -> None:
        if extra in seen:
            return
        seen.add(extra)
        if extra not in table:
            raise SystemExit(f"pyproject.toml has no extra {extra!r}")
        for requirement in table[extra]:
            if _name_of(requirement) == name:
                inner = requirement[requirement.index("[") + 1:requirement.index("]")]
                for sub in inner.split(","):
                    walk(sub.strip())
            elif requirement not in out:
                out.append(requirement)

    for extra in extras:
        walk(extra)
    return out


def _server_flags(port: int) -> tuple[str, ...]:
    return ("--address", f"0.0.0.0:{port}", "--grace", str(GRACE_S),
            "--metrics-address", f"0.0.0.0:{METRICS_PORT}")


def manifests() -> list[dict[str, object]]:
    """The family manifests, in file order."""
    data = json.loads(MANIFESTS.read_text())
    return list(data["families"])


def env_images() -> list[Image]:
    """One image per distinct ``image`` of the manifests (families without one run only on env
    servers started by hand), in order of first appearance."""
    by_image: dict[str, list[dict[str, object]]] = {}
    for manifest in manifests():
        if manifest.get("image"):
            by_image.setdefault(str(manifest["image"]), []).append(manifest)
    images = []
    for name, members in by_image.items():
        families = tuple(str(m["name"]) for m in members)
        extras = tuple(sorted({str(m["extra"]) for m in members if m.get("extra")}))
        prepare: list[str] = []
        for m in members:
            steps = m.get("prepare") or []
            assert isinstance(steps, list), f"{m['name']}: prepare must be a list"
            prepare += [str(p) for p in steps if str(p) not in prepare]
        served = " and ".join(families)
        images.append(Image(
            name=name, tag=f"moria/env-{name}:local",
            title=f"Moria env server of the {served} famil{'ies' if len(families) > 1 else 'y'}",
            extras=extras, prepare=tuple(prepare), port=ENV_PORT,
            entrypoint=("moria", "serve", "env"),
            cmd=("--families", ",".join(families), *_server_flags(ENV_PORT)),
            needs=ENV_IMAGE_NEEDS.get(name, Needs()), families=families))
    return images


def all_images() -> list[Image]:
    """The env images, then the agent (Policy) server and the orchestrator."""
    agent = Image(
        name="agent", tag="moria/agent:local",
        title="Moria agent (Policy) server: hosted-model backends and the embedded local model",
        extras=("agent",), prepare=("local-model",), port=AGENT_PORT,
        entrypoint=("moria", "serve", "agent"), cmd=_server_flags(AGENT_PORT),
        needs=Needs(build_packages=("build-essential",), runtime_packages=("libgomp1",),
                    pip_env='CMAKE_ARGS="-DGGML_NATIVE=OFF"', drop_after_prepare=("qwen",),
                    wheels=("llama-cpp-python",),
                    why=("build-essential: llama-cpp-python compiles llama.cpp (unless "
                         "deploy/wheels/ holds its wheel); its",
                         "native CPU build uses instructions (AMX) that crash on some hosts, "
                         "hence GGML_NATIVE=OFF",),
                    runtime_why=("libgomp1: llama.cpp's OpenMP runtime; without it every "
                                 "local-model call fails",)))
    orchestrator = Image(
        name="orchestrator", tag="moria/orchestrator:local",
        title="Moria orchestrator: the run service (default) or one run (`moria eval`)",
        extras=(), prepare=(), port=ORCHESTRATOR_PORT, entrypoint=("moria",),
        cmd=("serve", "orchestrator", *_server_flags(ORCHESTRATOR_PORT)), data_dir=True)
    return [*env_images(), agent, orchestrator]


# ---------------------------------------------------------------------------------- generate

def _json(values: tuple[str, ...]) -> str:
    return json.dumps(list(values))


def _apt(packages: tuple[str, ...]) -> list[str]:
    return ["RUN apt-get update \\",
            f" && apt-get install -y --no-install-recommends {' '.join(packages)} \\",
            " && rm -rf /var/lib/apt/lists/*"]


def _pip_run(pip: str, requirements: list[str], prefix: str = "") -> str:
    """One ``RUN pip install`` of ``requirements``, one per line."""
    head = f"RUN {prefix + ' ' if prefix else ''}{pip}"
    return " \\\n      ".join([head, *(f'"{r}"' for r in requirements)])


HEADER = """\
# GENERATED by deploy/images.py from moria/families.json: edit that script or the manifests,
# then `make dockerfiles` (make deploy-check and tests/deploy fail on a stale copy).
# Build from the repository root (`make images` builds every image; docs/deploy.md):
#   podman build --format docker -f deploy/docker/{name}/Dockerfile -t {tag} .
#   docker build -f deploy/docker/{name}/Dockerfile -t {tag} .
# No registry? --build-arg BASE_IMAGE={local_base} (make base-image).
# Runtime contract (deploy/compose.yaml and deploy/k8s rely on it; tests/deploy checks it):
#   - runs as UID/GID 10001, never root; every file it needs is owned by root and read-only;
#   - the root filesystem can be mounted read-only: only /tmp (HOME and TMPDIR) is written;
#   - game data and weights are baked in under /opt/moria/data (MORIA_CACHE_DIR);
#   - HEALTHCHECK asks grpc.health.v1 on the served port (SERVING, or NOT_SERVING while draining);
#   - Prometheus /metrics on port 9100 (--metrics-address in CMD, the one place it is set);
#   - on SIGTERM it drains for {grace} s (--grace): stop it with a longer timeout (podman/docker
#     run --stop-timeout {timeout}, Compose stop_grace_period, k8s terminationGracePeriodSeconds).
"""


def render(image: Image) -> str:
    """The Dockerfile text of ``image``."""
    needs = image.needs
    lines = [
        f"# {image.title}.",
        *HEADER.format(name=image.name, tag=image.tag, local_base=LOCAL_BASE, grace=GRACE_S,
                       timeout=GRACE_S + 5).splitlines(),
        "",
        f"ARG BASE_IMAGE={OFFICIAL_BASE}",
        "",
        "# ---------------------------------------------------------------------- build: a venv "
        "with the wheels",
        "FROM ${BASE_IMAGE} AS build",
        f'LABEL {BUILD_LABEL}="moria"',
        "ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \\",
        "    PYTHONDONTWRITEBYTECODE=1",
    ]
    pip = "/opt/moria/venv/bin/pip install --no-cache-dir"
    # Layers from the most shared to the most changing, so an engine's layer cache reuses them:
    # the venv and the project's own dependencies (the same in every image, built once), the
    # image's packages and extras (changed only with pyproject.toml), then the source.
    lines += [
        "RUN python -m venv /opt/moria/venv \\",
        ' && /opt/moria/venv/bin/pip install --no-cache-dir "pip>=24,<26"',
        "# the project's dependencies (pyproject.toml [project].dependencies)",
        _pip_run(pip, core_requirements()),
    ]
    lines += [f"# {why}" for why in needs.why]
    if needs.build_packages:
        lines += _apt(needs.build_packages)
    extra = extra_requirements(image.extras)
    extra_pip = pip
    if needs.wheels:
        lines += [f"# prebuilt wheels of {', '.join(needs.wheels)} that `make images` copies "
                  "from the host's cache",
                  f"# (`make llama-wheel`; only on a {BASE_RELEASE} host), else pip builds "
                  "them here",
                  f"COPY {CONTEXT_WHEELS.relative_to(ROOT)}/ /tmp/wheels/"]
        extra_pip = f"{pip} --find-links /tmp/wheels"
    if extra:
        lines.append(f"# the extras {', '.join(image.extras)} (pyproject.toml)")
        lines.append(_pip_run(extra_pip, extra, prefix=needs.pip_env))
    lines += [f"# {why}" for why in needs.no_deps_why]
    for requirement in needs.no_deps:
        lines.append(f'RUN {pip} --no-deps "{requirement}"')
    lines += [
        "WORKDIR /src",
        "COPY pyproject.toml README.md ./",
        *(f"COPY {d}/ {d}/" for d in
          ("moria", "env_server", "agent_server", "orchestrator", "worker")),
    ]
    lines += [f"# {why}" for why in needs.source_scripts_why]
    lines += [f"RUN /opt/moria/venv/bin/python {script}" for script in needs.source_scripts]
    lines += [
        "# the project itself: its dependencies are all above",
        f"RUN {pip} --no-deps .",
    ]
    if image.prepare:
        lines.append("# bake the data in: the runtime filesystem is read-only")
    for name in image.prepare:
        lines.append("RUN MORIA_CACHE_DIR=/opt/moria/data /opt/moria/venv/bin/moria prepare "
                     f"--env {name} --no-progress")
    dropped = [_name_of(r) for r in extra_requirements(needs.drop_after_prepare)]
    if dropped:
        lines.append(f"# the {', '.join(needs.drop_after_prepare)} packages were only the source "
                     "of the baked data: one copy stays")
        lines.append(f"RUN /opt/moria/venv/bin/pip uninstall --yes {' '.join(dropped)}")
    lines += [
        "",
        "# ---------------------------------------------------------------------- runtime: the "
        "venv, no compiler",
        "FROM ${BASE_IMAGE} AS runtime",
        f'LABEL {BUILD_LABEL}="moria"',
    ]
    user = ["RUN groupadd --system --gid 10001 moria \\",
            " && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \\",
            "      --shell /usr/sbin/nologin moria"]
    if image.data_dir:
        user[-1] += " \\"
        # a named volume mounted on /data starts as a copy of this folder, owner included
        user.append(" && install -d -o 10001 -g 10001 -m 0750 /data")
        lines += ["# /data: the runs' working directory, owned by 10001 (Compose mounts its state",
                  "# volume there; a fresh named volume copies this folder's owner and mode)"]
    lines += user
    lines += [f"# {why}" for why in needs.runtime_why]
    if needs.runtime_packages:
        lines += _apt(needs.runtime_packages)
    env = {"PATH": "/opt/moria/venv/bin:$PATH", "HOME": "/tmp", "TMPDIR": "/tmp",
           "MORIA_CACHE_DIR": "/opt/moria/data", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONUNBUFFERED": "1", **needs.env}
    env_lines = [f"{key}={value}" for key, value in env.items()]
    lines += [
        "COPY --from=build /opt/moria /opt/moria",
        "COPY deploy/docker/grpc_health_probe.py /opt/moria/bin/grpc_health_probe.py",
        "ENV " + " \\\n    ".join(env_lines),
        "WORKDIR /opt/moria",
        "USER 10001:10001",
        f"EXPOSE {image.port} {METRICS_PORT}",
        "STOPSIGNAL SIGTERM",
        "HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \\",
        f'  CMD ["python", "/opt/moria/bin/grpc_health_probe.py", "127.0.0.1:{image.port}"]',
        f"ENTRYPOINT {_json(image.entrypoint)}",
        f"CMD {_json(image.cmd)}",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- deploy files
# Compose services, Kubernetes Deployments and Services, the kustomize lists, the run specs'
# endpoints and the orchestrator's allow-lists, for every env image of the manifests. Whole
# files (deploy/k8s/base/env-<image>.yaml) are written entire; in the hand-written files only
# the lines between a BEGIN and an END marker (REGIONS) are generated.

DEPLOY_DIR = ROOT / "deploy"
K8S_BASE = DEPLOY_DIR / "k8s" / "base"
SOURCE = "deploy/images.py from moria/families.json"
BEGIN_MARK = "BEGIN GENERATED by deploy/images.py (make dockerfiles):"
END_MARK = "END GENERATED:"
NAMESPACE = "moria"


def _gib(value: int, unit: str) -> str:
    """``value`` MiB as Compose (``unit`` "m": 256m, 2g) or Kubernetes ("Mi": 256Mi, 2Gi)
    writes it."""
    if value % 1024 == 0:
        return f"{value // 1024}{'g' if unit == 'm' else 'Gi'}"
    return f"{value}{unit}"


def containerised() -> list[tuple[str, Image]]:
    """(family, its image) for every family whose manifest names an image, by family name."""
    by_family = {family: image for image in env_images() for family in image.families}
    return sorted(by_family.items())


def k8s_host(image: Image) -> str:
    """The headless Service name clients dial for ``image``, fully qualified."""
    return f"moria-env-{image.name}.{NAMESPACE}.svc.cluster.local"


K8S_ENV = """\
# Env server for the {name} family ({families}): Deployment + headless Service.
# GENERATED by {source}: edit that script or the manifests,
# then `make dockerfiles` (make deploy-check and tests/deploy fail on a stale copy).
# The container runs the image's own command (moria serve env --families {families}
# --address 0.0.0.0:{port} --grace {grace}
# --metrics-address 0.0.0.0:{metrics}); terminationGracePeriodSeconds ({stop}) covers the
# {grace} s drain plus the stop. Clients dial dns:///{host}:{port}.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: moria-env-{name}
  labels:
    app.kubernetes.io/name: moria-env-{name}
    app.kubernetes.io/component: env
    app.kubernetes.io/part-of: moria
spec:
  replicas: 2
  selector:
    matchLabels:
      app.kubernetes.io/name: moria-env-{name}
  template:
    metadata:
      annotations:
        # scraped by a Prometheus using the usual kubernetes_sd pod-annotation relabelling
        prometheus.io/scrape: "true"
        prometheus.io/port: "{metrics}"
        prometheus.io/path: /metrics
      labels:
        app.kubernetes.io/name: moria-env-{name}
        app.kubernetes.io/component: env
        app.kubernetes.io/part-of: moria
    spec:
      terminationGracePeriodSeconds: {stop}
      automountServiceAccountToken: false
      enableServiceLinks: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 10001
        runAsGroup: 10001
        fsGroup: 10001
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: env
          image: moria/env-{name}:0.1.0
          imagePullPolicy: Always
          ports:
            - name: grpc
              containerPort: {port}
              protocol: TCP
            - name: metrics  # /metrics (--metrics-address 0.0.0.0:{metrics} in the image's CMD)
              containerPort: {metrics}
              protocol: TCP
          securityContext:
            allowPrivilegeEscalation: false
            privileged: false
            readOnlyRootFilesystem: true
            runAsNonRoot: true
            capabilities:
              drop: ["ALL"]
          resources:
            requests:
              cpu: "{cpu_request}m"
              memory: {memory_request}
              ephemeral-storage: 64Mi
            limits:
              cpu: "{cpus}"
              memory: {memory}Gi
              ephemeral-storage: {tmp}
          startupProbe:
            grpc:
              port: {port}
            periodSeconds: 2
            failureThreshold: 60
          readinessProbe:
            grpc:
              port: {port}
            periodSeconds: 5
            failureThreshold: 1
          livenessProbe:
            grpc:
              port: {port}
            periodSeconds: 10
            timeoutSeconds: 5
            failureThreshold: 6
          volumeMounts:
            - name: tmp
              mountPath: /tmp
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: {tmp}
---
apiVersion: v1
kind: Service
metadata:
  name: moria-env-{name}
  labels:
    app.kubernetes.io/name: moria-env-{name}
    app.kubernetes.io/component: env
    app.kubernetes.io/part-of: moria
spec:
  clusterIP: None
  selector:
    app.kubernetes.io/name: moria-env-{name}
  ports:
    - name: grpc
      port: {port}
      targetPort: grpc
      protocol: TCP
"""


def render_k8s_env(image: Image) -> str:
    """``deploy/k8s/base/env-<image>.yaml``: the image's Deployment and headless Service."""
    res = image.needs.resources
    return K8S_ENV.format(
        name=image.name, families=",".join(image.families), source=SOURCE, port=image.port,
        grace=GRACE_S, stop=GRACE_S + 5, metrics=METRICS_PORT, host=k8s_host(image),
        cpu_request=res.cpu_request_m, memory_request=_gib(res.memory_request_mib, "Mi"),
        cpus=res.cpus, memory=res.memory_gib, tmp=_gib(res.tmp_mib, "Mi"))


def _compose_services(images: list[Image]) -> list[str]:
    lines: list[str] = []
    for image in images:
        res = image.needs.resources
        lines += [
            f"env-{image.name}:",
            "  <<: *hardening",
            "  build:",
            "    context: ..",
            f"    dockerfile: {image.dockerfile.relative_to(ROOT)}",
            "    args: *build-args",
            f"  image: {image.tag}",
            "  networks: [envs]",
            f'  tmpfs: ["/tmp:size={_gib(res.tmp_mib, "m")},mode=1777"]',
            "  healthcheck: *env-healthcheck",
            "  deploy:",
            "    resources:",
            f'      limits: {{cpus: "{res.cpus}", memory: {res.memory_gib}g, '
            f"pids: {256 * res.memory_gib}}}",
            "      reservations: {memory: 256m}",
            "",
        ]
    return lines


def _wrapped_string(key: str, items: list[str], width: int = 92) -> list[str]:
    """``key: "a,b,..."`` as a double-quoted YAML scalar broken after commas (an escaped line
    break: the value has no space), each line at most about ``width`` characters."""
    lines = [f'{key}: "']
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else '"')
        if len(lines[-1]) + len(piece) > width and not lines[-1].endswith('"'):
            lines[-1] += "\\"
            lines.append("  " + piece)
        else:
            lines[-1] += piece
    return lines


def _compose_allowed(images: list[Image]) -> list[str]:
    targets = [f"env-{image.name}:{image.port}" for image in images]
    return _wrapped_string("MORIA_ALLOWED_ENDPOINTS", [*targets, f"dns:///agent:{AGENT_PORT}"])


def _compose_depends(images: list[Image]) -> list[str]:
    return [f"env-{image.name}: {{condition: service_healthy}}" for image in images]


def _compose_endpoints(_: list[Image]) -> list[str]:
    return [f'{family}: ["env-{image.name}:{image.port}"]' for family, image in containerised()]


def _k8s_endpoints(_: list[Image]) -> list[str]:
    return [f'{family}: ["dns:///{k8s_host(image)}:{image.port}"]'
            for family, image in containerised()]


def _k8s_allowed(images: list[Image]) -> list[str]:
    targets = [f"dns:///{k8s_host(image)}:{image.port}" for image in images]
    targets.append(f"dns:///moria-agent.{NAMESPACE}.svc.cluster.local:{AGENT_PORT}")
    return ["- name: MORIA_ALLOWED_ENDPOINTS", "  value: >-",
            *(f"    {t}{',' if i < len(targets) - 1 else ''}" for i, t in enumerate(targets))]


def _kustomize_resources(images: list[Image]) -> list[str]:
    return [f"- env-{image.name}.yaml" for image in images]


def _local_images(images: list[Image]) -> list[str]:
    return [line for image in images
            for line in (f"- name: {image.tag.split(':')[0]}", "  newTag: local")]


def _tls_args(images: list[Image]) -> list[str]:
    tls = ["--tls-cert", "/etc/moria-tls/tls.crt", "--tls-key", "/etc/moria-tls/tls.key"]

    def items(values: list[str] | tuple[str, ...]) -> str:
        return ", ".join(json.dumps(v) for v in values)

    lines: list[str] = []
    for image in images:
        metrics = image.cmd.index("--metrics-address")
        lines += [
            "- target:",
            "    group: apps",
            "    kind: Deployment",
            f"    name: moria-env-{image.name}",
            "  patch: |-",
            "    - op: add",
            "      path: /spec/template/spec/containers/0/args",
            f"      value: [{items(image.cmd[:metrics])},",
            f"              {items(image.cmd[metrics:])},",
            f"              {items(tls)}]",
        ]
    return lines


#: the docs table's rows of the images no manifest makes
DOCS_FIXED_ROWS = (
    "| `moria/agent` | `agent` (llama.cpp built with `-DGGML_NATIVE=OFF`) | Policy, port 50052 "
    "| the local Qwen2.5-Coder-0.5B GGUF (`moria prepare --env local-model`) |",
    "| `moria/orchestrator` | none | orchestrator, port 50070 | - |",
)


def _docs_table(images: list[Image]) -> list[str]:
    """The image table of docs/deploy.md (a whole table: a comment line would end it)."""
    rows = ["| image | extra (from `pyproject.toml`) | serves | data baked in (under "
            "`/opt/moria/data`) |", "|---|---|---|---|"]
    for image in images:
        extras = ", ".join(f"`{e}`" for e in image.extras) or "none"
        if image.needs.no_deps:
            extras += ", then " + ", ".join(f"`{r} --no-deps`" for r in image.needs.no_deps)
        if image.needs.source_scripts:
            extras += ", then " + ", ".join(f"`{s}`" for s in image.needs.source_scripts)
        data = ", ".join(f"`moria prepare --env {p}`" for p in image.prepare) or "-"
        rows.append(f"| `{image.tag.split(':')[0]}` | {extras} | `{','.join(image.families)}` "
                    f"| {data} |")
    return [*rows, *DOCS_FIXED_ROWS]


#: file -> (region name, the function giving its lines from the env images): the generated
#: parts of hand-written files, each between a BEGIN and an END marker line (whose indentation
#: every generated line takes)
REGIONS: dict[Path, list[tuple[str, Any]]] = {
    DEPLOY_DIR / "compose.yaml": [("env services", _compose_services),
                                  ("allowed endpoints", _compose_allowed),
                                  ("env servers healthy", _compose_depends)],
    DEPLOY_DIR / "run.yaml": [("env endpoints", _compose_endpoints)],
    K8S_BASE / "kustomization.yaml": [("env resources", _kustomize_resources)],
    K8S_BASE / "run-spec.yaml": [("env endpoints", _k8s_endpoints)],
    K8S_BASE / "orchestrator.yaml": [("allowed endpoints", _k8s_allowed)],
    DEPLOY_DIR / "k8s" / "overlays" / "local" / "kustomization.yaml": [
        ("env images", _local_images)],
    DEPLOY_DIR / "k8s" / "components" / "tls" / "kustomization.yaml": [
        ("env server args", _tls_args), ("env endpoints", _k8s_endpoints)],
    ROOT / "docs" / "deploy.md": [("env images", _docs_table)],
}


class RegionError(ValueError):
    """A file lacks a region's markers, or has them out of order."""


def fill_regions(path: Path, text: str, regions: list[tuple[str, list[str]]]) -> str:
    """``text`` with the lines between each region's markers replaced by its lines, indented as
    its BEGIN marker is. Markdown files mark regions with HTML comments, others with ``#``.
    Raises RegionError naming the file and the region when a marker is missing."""
    lines = text.split("\n")
    comment = ("<!-- ", " -->") if path.suffix == ".md" else ("# ", "")
    for name, generated in regions:
        begin = f"{comment[0]}{BEGIN_MARK} {name}{comment[1]}"
        end = f"{comment[0]}{END_MARK} {name}{comment[1]}"
        starts = [i for i, line in enumerate(lines) if line.strip() == begin]
        if len(starts) != 1:
            raise RegionError(f"{path.relative_to(ROOT)}: needs exactly one line {begin!r}")
        start = starts[0]
        stop = next((i for i in range(start + 1, len(lines)) if lines[i].strip() == end), None)
        if stop is None:
            raise RegionError(f"{path.relative_to(ROOT)}: no {end!r} after {begin!r}")
        indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
        lines[start + 1:stop] = [indent + line if line else "" for line in generated]
    return "\n".join(lines)


def deploy_files() -> dict[Path, str]:
    """Every generated deploy file (whole or with generated regions) -> its text."""
    images = env_images()
    out = {K8S_BASE / f"env-{image.name}.yaml": render_k8s_env(image) for image in images}
    for path, regions in REGIONS.items():
        out[path] = fill_regions(path, path.read_text(),
                                 [(name, make(images)) for name, make in regions])
    return out


def stray_deploy_files() -> list[Path]:
    """``deploy/k8s/base/env-*.yaml`` of no image of the manifests."""
    known = {K8S_BASE / f"env-{image.name}.yaml" for image in env_images()}
    return [p for p in sorted(K8S_BASE.glob("env-*.yaml")) if p not in known]


def generate(check: bool) -> int:
    """Write every image's Dockerfile and the deploy files generated from the manifests
    (``deploy_files``; ``check``: write nothing, report stale or stray ones). Returns the exit
    status."""
    images = all_images()
    wanted = {image.dockerfile: render(image) for image in images}
    try:
        wanted.update(deploy_files())
    except RegionError as exc:
        print(f"error: {exc}")
        return 1
    stale = []
    for path, text in wanted.items():
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        stale.append(str(path.relative_to(ROOT)))
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    known = {image.dockerfile for image in images}
    stray = [str(p.relative_to(ROOT)) for p in sorted(DOCKER_DIR.glob("*/Dockerfile"))
             if p not in known]
    stray += [str(p.relative_to(ROOT)) for p in stray_deploy_files()]
    if check:
        for name in stale:
            print(f"stale: {name} (run `make dockerfiles`)")
        for name in stray:
            print(f"stray: {name} (no image in deploy/images.py or moria/families.json)")
        return 1 if stale or stray else 0
    print(f"{len(wanted)} generated files, {len(stale)} rewritten"
          + (f": {', '.join(stale)}" if stale else ""))
    for name in stray:
        print(f"stray: {name} (no image in deploy/images.py or moria/families.json): remove it")
    return 1 if stray else 0


# ---------------------------------------------------------------------------------- build

def engine() -> str:
    """``$MORIA_ENGINE``, else podman, else docker."""
    found = os.environ.get("MORIA_ENGINE") or shutil.which("podman") or shutil.which("docker")
    if not found:
        raise SystemExit("no container engine: run deploy/engine/setup.sh (podman), or install "
                         "docker")
    return found


def _quiet(cmd: list[str], timeout: float | None = None) -> bool:
    try:
        return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=timeout, check=False).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def has_image(tool: str, ref: str) -> bool:
    return _quiet([tool, "image", "inspect", ref])


def choose_base(tool: str) -> tuple[str, str]:
    """(base image, why). Builds the local base when it is chosen and missing."""
    wanted = os.environ.get("MORIA_BASE_IMAGE")
    if wanted:
        if wanted == LOCAL_BASE and not has_image(tool, wanted):
            _build_local_base(tool)
        return wanted, "MORIA_BASE_IMAGE"
    for ref in (OFFICIAL_BASE_REF, OFFICIAL_BASE):
        if has_image(tool, ref):
            return ref, "the official image, already pulled"
    if _quiet([tool, "pull", "-q", OFFICIAL_BASE_REF], timeout=PULL_TIMEOUT_S):
        return OFFICIAL_BASE_REF, "the official image, pulled"
    if not has_image(tool, LOCAL_BASE):
        _build_local_base(tool)
    return LOCAL_BASE, "no registry answered: the local debootstrap base (make base-image)"


def _build_local_base(tool: str) -> None:
    print(f"base: {LOCAL_BASE} missing, building it ({BASE_SCRIPT.relative_to(ROOT)})",
          flush=True)
    env = {**os.environ, "MORIA_ENGINE": tool}  # import it where the images are built
    if subprocess.run([str(BASE_SCRIPT), LOCAL_BASE], env=env, check=False).returncode != 0:
        raise SystemExit(f"{BASE_SCRIPT.relative_to(ROOT)} failed (it needs root: "
                         "sudo make base-image)")


def build_argv(tool: str, image: Image, base: str, target: str | None = None) -> list[str]:
    """The build command of ``image`` (from the repository root); with ``target="build"``, of
    its build stage alone, tagged ``image.build_stage_tag``."""
    argv = [tool, "build"]
    if Path(tool).name == "podman":
        # podman's default (OCI) format has no HEALTHCHECK or STOPSIGNAL
        argv += ["--format", "docker"]
    tag = image.tag if target is None else image.build_stage_tag
    argv += ["--build-arg", f"BASE_IMAGE={base}", "-f", str(image.dockerfile.relative_to(ROOT))]
    if target is not None:
        argv += ["--target", target]
    return [*argv, "-t", tag, "."]


def _size(tool: str, tag: str) -> int:
    out = subprocess.run([tool, "image", "inspect", "--format", "{{.Size}}", tag], text=True,
                         capture_output=True, check=False).stdout.strip()
    return int(out) if out.isdigit() else 0


def _build_one(tool: str, image: Image, base: str) -> tuple[float, int | None]:
    """Build ``image``, its output in build/images/<name>.log. Returns (seconds, size in bytes
    or None when the build failed, after printing the log's tail)."""
    log = LOG_DIR / f"{image.name}.log"
    argv = build_argv(tool, image, base)
    print(f"build {image.name}: {' '.join(argv)} (log {log.relative_to(ROOT)})", flush=True)
    start = time.monotonic()
    status = 0
    # podman: the build stage first, tagged, so that prune_superseded keeps its layers (podman's
    # cache is its images); the full build then finds every one of them in the cache. Docker
    # (BuildKit) keeps its cache apart from the images: one build
    steps = ([build_argv(tool, image, base, target="build"), argv] if _is_podman(tool)
             else [argv])
    with open(log, "w") as out:
        for step in steps:
            out.write(f"$ {' '.join(step)}\n")
            out.flush()
            status = subprocess.run(step, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                    check=False).returncode
            if status != 0:
                break
    seconds = time.monotonic() - start
    if status != 0:
        tail = log.read_text(errors="replace").splitlines()[-30:]
        print(f"FAILED {image.name} after {seconds:.0f} s (exit {status}):\n  "
              + "\n  ".join(tail), flush=True)
        return seconds, None
    size = _size(tool, image.tag)
    print(f"built {image.tag} in {seconds:.0f} s, {size / 1e6:.0f} MB", flush=True)
    return seconds, size


def _is_podman(tool: str) -> bool:
    return Path(tool).name == "podman"


def _storage_dirs(tool: str) -> list[Path]:
    """Where the engine writes while building, one folder per filesystem: its image store
    (``podman info``'s graph root; docker's root dir) and, for podman, the staging folder
    (``$TMPDIR``, else /var/tmp, where it copies layers before committing them). A folder that
    does not exist here (a remote engine) is left out."""
    fmt = "{{.Store.GraphRoot}}" if _is_podman(tool) else "{{.DockerRootDir}}"
    out = subprocess.run([tool, "info", "--format", fmt], text=True, capture_output=True,
                         check=False).stdout.strip()
    dirs = [Path(out)] if out else []
    if _is_podman(tool):
        dirs.append(Path(os.environ.get("TMPDIR") or "/var/tmp"))
    found: dict[int, Path] = {}
    for folder in dirs:
        if folder.exists():
            found.setdefault(folder.stat().st_dev, folder)
    return list(found.values())


def check_free_space(tool: str, wanted: int = FREE_SPACE_WANTED) -> list[str]:
    """One warning per build folder of the engine with less than ``wanted`` bytes free (none
    when all have enough), each naming the folder, its free space and how to free some."""
    warnings = []
    for folder in _storage_dirs(tool):
        free = shutil.disk_usage(folder).free
        if free < wanted:
            warnings.append(
                f"warning: {folder} has {free / 1e9:.1f} GB free; building every image needs "
                f"about {wanted / 1e9:.0f} GB there (a build that runs out stops with 'no "
                f"space left on device'). Free some: `{Path(tool).name} image prune` removes "
                "untagged images, `" + Path(tool).name + " system df` shows what is used")
    return warnings


def removed_count(prune_output: str) -> int:
    """The images an ``image prune`` removed, from its output: podman prints one image ID a
    line; docker prints ``deleted: sha256:<id>`` lines among ``untagged:`` and total lines."""
    return sum(1 for line in prune_output.splitlines()
               if re.fullmatch(r"(deleted: )?(sha256:)?[0-9a-f]{12,64}", line.strip()))


def prune_superseded(tool: str) -> str:
    """Remove the untagged images of earlier Moria builds (label ``BUILD_LABEL``): each rebuild
    moves an image's two tags (the image, its build stage) to new layers and leaves the old ones
    behind, a few GB a run. The layers under a tag stay, so the next build still finds them in
    the cache; other images are not touched. Returns a line saying what it removed."""
    argv = [tool, "image", "prune", "--force", "--filter", f"label={BUILD_LABEL}"]
    done = subprocess.run(argv, text=True, capture_output=True, check=False)
    if done.returncode != 0:
        return f"warning: prune: `{' '.join(argv)}` failed: {done.stderr.strip()[-300:]}"
    return (f"prune: removed {removed_count(done.stdout)} untagged image(s) left by earlier "
            "Moria builds "
            f"(`{' '.join(argv[1:])}`)")


def host_release(os_release: Path = Path("/etc/os-release")) -> str:
    """The host's Debian codename (``VERSION_CODENAME`` of os-release); '' when unknown."""
    try:
        text = os_release.read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "VERSION_CODENAME":
            return value.strip().strip('"')
    return ""


def pinned_version(requirement_name: str, images: list[Image]) -> str | None:
    """The ``==`` version the extras of ``images`` pin for ``requirement_name``; None when
    none does."""
    for image in images:
        for requirement in extra_requirements(image.extras):
            if _name_of(requirement) == requirement_name and "==" in requirement:
                return requirement.split("==", 1)[1].split(";", 1)[0].strip()
    return None


def stage_wheels(images: list[Image], release: str | None = None,
                 wheels_dir: Path = WHEELS_DIR, context: Path = CONTEXT_WHEELS) -> list[str]:
    """Put into the build context (``context``) the host's prebuilt wheel (from ``wheels_dir``)
    of each requirement ``images`` list in ``Needs.wheels``, at the version their extras pin,
    when the host's Debian release (``release``, default the host's) is the bases'
    ``BASE_RELEASE``; earlier copies of that requirement's wheels are removed first, so a build
    never picks up a stale one. Returns one line per requirement saying which way its image
    gets it."""
    release = host_release() if release is None else release
    lines = []
    for name in sorted({n for image in images for n in image.needs.wheels}):
        stem = name.replace("-", "_")
        for old in context.glob(f"{stem}-*.whl"):
            old.unlink()
        version = pinned_version(name, images)
        found = sorted(wheels_dir.glob(f"{stem}-{version}-*.whl")) if version else []
        if not found:
            lines.append(f"wheels: no prebuilt {name} {version} wheel in {wheels_dir} "
                         "(`make llama-wheel` builds it once): its image compiles it")
        elif release != BASE_RELEASE:
            lines.append(f"wheels: the host is {release or 'not Debian'}, the bases "
                         f"{BASE_RELEASE}: its {name} wheel may not run there; the image "
                         "compiles its own")
        else:
            context.mkdir(parents=True, exist_ok=True)
            shutil.copy2(found[-1], context / found[-1].name)
            lines.append(f"wheels: {found[-1].name} from the host, not compiled again")
    return lines


def build(names: list[str], jobs: int = 1, wheels_dir: Path = WHEELS_DIR) -> int:
    """Build the images called ``names`` (all when empty): the one with the fewest extra
    requirements alone first (it makes the layers all share), then the others ``jobs`` at a
    time, those that compile (a build stage with packages: the long ones) first; print each
    one's time and size, then a table. Returns 1 when any failed (the others are still
    built)."""
    images = all_images()
    unknown = sorted(set(names) - {i.name for i in images})
    if unknown:
        raise SystemExit(f"unknown image {unknown[0]!r}; images: "
                         + ", ".join(i.name for i in images))
    if jobs < 1:
        raise SystemExit(f"--jobs must be 1 or more, not {jobs}")
    if generate(check=True) != 0:
        raise SystemExit("the Dockerfiles are stale: run `make dockerfiles` first")
    chosen = [i for i in images if not names or i.name in names]
    chosen.sort(key=lambda i: not i.needs.build_packages)  # stable: manifest order otherwise
    tool = engine()
    base, why = choose_base(tool)
    print(f"engine: {Path(tool).name}; base: {base} ({why}); {jobs} build(s) at a time",
          flush=True)
    for warning in check_free_space(tool):
        print(warning, flush=True)
    for line in stage_wheels(chosen, wheels_dir=wheels_dir):
        print(line, flush=True)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    # The layers every image shares (the base, the venv, the project's dependencies) are built
    # once, by the image that has nothing else (the fewest extra requirements) built alone
    # first: two builds making them at once would each commit their own copy, and a later
    # build reuses only one of the two chains, rebuilding the rest of the other image's layers.
    first = min(chosen, key=lambda image: len(extra_requirements(image.extras)))
    rest = [image for image in chosen if image is not first]
    results_by_name = {first.name: _build_one(tool, first, base)}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for image, result in zip(rest, pool.map(lambda i: _build_one(tool, i, base), rest),
                                 strict=True):
            results_by_name[image.name] = result
    results = [results_by_name[image.name] for image in chosen]
    wall = time.monotonic() - started
    print(f"\n{'image':<14}{'tag':<30}{'time':>8}{'size':>10}")
    for image, (seconds, size) in zip(chosen, results, strict=True):
        shown = "FAILED" if size is None else f"{size / 1e6:.0f} MB"
        print(f"{image.name:<14}{image.tag:<30}{seconds:>6.0f} s{shown:>10}")
    print(f"{len(chosen)} image(s) in {wall:.0f} s wall time, {jobs} at a time "
          f"(load average {' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    print(prune_superseded(tool), flush=True)
    return 1 if any(size is None for _, size in results) else 0


def list_images() -> int:
    for image in all_images():
        print(f"{image.name}\t{image.tag}\t{image.dockerfile.relative_to(ROOT)}\t"
              f"{','.join(image.families) or '-'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deploy/images.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="write deploy/docker/*/Dockerfile and the deploy files")
    gen.add_argument("--check", action="store_true", help="write nothing; exit 1 when stale")
    sub.add_parser("list", help="the images: name, tag, Dockerfile, families")
    bld = sub.add_parser("build", help="build images with podman (or docker)")
    bld.add_argument("names", nargs="*", help="image names (default: all)")
    bld.add_argument("--jobs", type=int, default=1,
                     help="builds at a time (default 1; 2 overlaps one build's downloads "
                          "with another's compiling)")
    bld.add_argument("--wheels-dir", type=Path, default=WHEELS_DIR,
                     help="the host's prebuilt wheels (default: $MORIA_CACHE_DIR/wheels, "
                          "else ~/.cache/moria/wheels; make llama-wheel)")
    args = parser.parse_args(argv)
    if args.command == "generate":
        return generate(args.check)
    if args.command == "list":
        return list_images()
    return build(args.names, args.jobs, args.wheels_dir)


if __name__ == "__main__":
    sys.exit(main())
