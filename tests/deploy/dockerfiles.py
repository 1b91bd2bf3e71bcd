"""Reading deploy/docker/*/Dockerfile the way the tests need: the final (runtime) stage's
ENV, ENTRYPOINT, CMD, HEALTHCHECK, USER, WORKDIR and EXPOSE, plus every FROM line."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKER_DIR = REPO / "deploy" / "docker"
#: image name (compose/k8s) -> Dockerfile folder under deploy/docker
ENV_IMAGES = ("babyai", "nethack", "crafter", "textworld", "babaisai", "multigrid", "pettingzoo")
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
    runs: list[str] = field(default_factory=list)  # RUN lines of every stage

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
        if word == "FROM":
            result.froms.append(rest)
            result.env, result.entrypoint, result.cmd = {}, [], []
            result.healthcheck, result.user, result.workdir, result.expose = [], "", "", []
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
        elif word == "RUN":
            result.runs.append(rest)
    return result


def load(image: str) -> Dockerfile:
    """The parsed Dockerfile of ``image`` (a name of ALL_IMAGES)."""
    return parse(DOCKER_DIR / image / "Dockerfile")


def flag(argv: list[str], name: str) -> str:
    """The value after ``name`` in ``argv``; raises ValueError when absent."""
    return argv[argv.index(name) + 1]
