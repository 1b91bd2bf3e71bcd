"""Reading deploy/docker/*/Dockerfile the way the tests need: the final (runtime) stage's
ENV, ENTRYPOINT, CMD, HEALTHCHECK, USER, WORKDIR, EXPOSE and STOPSIGNAL, plus every FROM line
(with the global ARG defaults substituted, as an engine does without --build-arg)."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
DOCKER_DIR = REPO / "deploy" / "docker"


def images_module() -> ModuleType:
    """deploy/images.py (the Dockerfiles' generator and builder; not a package)."""
    name = "moria_deploy_images"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "deploy" / "images.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


#: image name (compose/k8s) -> Dockerfile folder under deploy/docker: one per distinct ``image``
#: of the family manifests (moria/families.json), as deploy/images.py derives them
ENV_IMAGES = tuple(image.name for image in images_module().env_images())
ALL_IMAGES = (*ENV_IMAGES, "agent", "orchestrator")


@dataclass
class Dockerfile:
    """The parts of one Dockerfile the tests check (runtime = the last stage)."""

    path: Path
    froms: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    healthcheck: list[str] = field(default_factory=list)
    user: str = ""
    workdir: str = ""
    expose: list[int] = field(default_factory=list)
    stopsignal: str = ""
    runs: list[str] = field(default_factory=list)  # RUN lines of every stage
    args: dict[str, str] = field(default_factory=dict)  # ARG defaults declared before FROM

    @property
    def command(self) -> list[str]:
        """ENTRYPOINT + CMD: what the container runs."""
        return [*self.entrypoint, *self.cmd]


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current:
        lines.append(current)
    return lines


def parse(path: Path) -> Dockerfile:
    """Parse ``path``; exec-form (JSON) ENTRYPOINT/CMD/HEALTHCHECK only (shell form is an error,
    since a shell would sit between the signal and the server)."""
    result = Dockerfile(path)
    for line in _logical_lines(path.read_text()):
        word, _, rest = line.partition(" ")
        word, rest = word.upper(), rest.strip()
        if word == "ARG" and not result.froms:
            name, _, default = rest.partition("=")
            result.args[name] = default
        elif word == "FROM":
            result.froms.append(re.sub(r"\$\{(\w+)\}|\$(\w+)",
                                       lambda m: result.args[m[1] or m[2]], rest))
            result.env, result.entrypoint, result.cmd = {}, [], []
            result.healthcheck, result.user, result.workdir, result.expose = [], "", "", []
            result.stopsignal = ""
        elif word == "ENV":
            for item in shlex.split(rest):
                key, _, value = item.partition("=")
                result.env[key] = value
        elif word in ("ENTRYPOINT", "CMD"):
            value = json.loads(rest)
            setattr(result, word.lower(), value)
        elif word == "HEALTHCHECK":
            _, _, form = rest.partition("CMD ")
            result.healthcheck = json.loads(form)
        elif word == "USER":
            result.user = rest
        elif word == "WORKDIR":
            result.workdir = rest
        elif word == "EXPOSE":
            result.expose = [int(p.split("/")[0]) for p in rest.split()]
        elif word == "STOPSIGNAL":
            result.stopsignal = rest
        elif word == "RUN":
            result.runs.append(rest)
    return result


def load(image: str) -> Dockerfile:
    """The parsed Dockerfile of ``image`` (a name of ALL_IMAGES)."""
    return parse(DOCKER_DIR / image / "Dockerfile")


def flag(argv: list[str], name: str) -> str:
    """The value after ``name`` in ``argv``; raises ValueError when absent."""
    return argv[argv.index(name) + 1]
