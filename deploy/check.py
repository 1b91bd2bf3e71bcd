"""Static validation of everything under deploy/ (``make deploy-check``; no container engine).

Steps, each printed with its time; the first failing step makes the exit status 1:

0. the generated files are current: ``deploy/images.py generate --check`` (the Dockerfiles, the
   env images' k8s Deployments and Services, and the generated regions of the Compose file, the
   run specs, the kustomize lists and the orchestrator's allow-lists, all from
   ``moria/families.json``; ``make dockerfiles`` rewrites them);
1. hadolint on every ``deploy/docker/*/Dockerfile`` with ``deploy/.hadolint.yaml``;
2. ``kubectl kustomize`` of ``deploy/k8s/base``, ``deploy/k8s/overlays/local`` and
   ``deploy/k8s/overlays/tls`` into ``build/deploy-check/rendered/{base,local,tls}.yaml``;
3. kubernetes-validate ``--strict`` against Kubernetes ``K8S_VERSION`` on the renderings and on
   the Secret template;
4. ``deploy/compose.yaml`` parsed by the compose-spec bindings (the Compose Specification's
   types; unknown keys and wrong types are errors), YAML merge keys resolved first as Compose
   does; plus ``docker compose config -q`` when a docker CLI with the compose plugin exists;
5. checkov (kubernetes and dockerfile frameworks) on the renderings and the Dockerfiles; every
   failed check must be accepted, with a reason, in ``deploy/checkov-baseline.yaml``.

Run it with the tools' own virtual environment (``.cache/deploy-venv``, made by the Makefile from
the ``deploy`` extra of pyproject.toml): ``.cache/deploy-venv/bin/python deploy/check.py``.
``--requirements`` prints that extra's requirement strings, one per line, and exits.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
# not under a dot-folder: checkov skips paths with hidden components
OUT = ROOT / "build" / "deploy-check"
RENDERED = OUT / "rendered"
#: Kubernetes version the manifests are validated against (kubernetes-validate schemas).
K8S_VERSION = "1.33.0"
OVERLAYS = {"base": DEPLOY / "k8s" / "base", "local": DEPLOY / "k8s" / "overlays" / "local",
            "tls": DEPLOY / "k8s" / "overlays" / "tls"}


class CheckFailed(RuntimeError):
    """One validation step found a problem; the message says what."""


def tool(name: str) -> str:
    """Path of a command-line tool: next to this interpreter (the tools' venv) first, then PATH.
    Raises CheckFailed naming the missing tool."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise CheckFailed(f"{name} not found; run `make deploy-check` to install the tools")
    return found


def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` from the repository root, capturing text output (never raises on status)."""
    return subprocess.run(cmd, cwd=ROOT, text=True, capture_output=True, check=False,
                          **kwargs)  # type: ignore[call-overload]


def dockerfiles() -> list[Path]:
    """Every Dockerfile under deploy/docker, sorted."""
    return sorted((DEPLOY / "docker").glob("*/Dockerfile"))


def step_generated() -> str:
    proc = run([sys.executable, str(DEPLOY / "images.py"), "generate", "--check"])
    if proc.returncode != 0:
        raise CheckFailed(proc.stdout + proc.stderr)
    return (f"{len(dockerfiles())} Dockerfiles and the deploy files match deploy/images.py and "
            "moria/families.json")


def step_hadolint() -> str:
    files = [str(p.relative_to(ROOT)) for p in dockerfiles()]
    if not files:
        raise CheckFailed("no Dockerfile under deploy/docker")
    proc = run([tool("hadolint"), "--no-color", "--config", "deploy/.hadolint.yaml", *files])
    if proc.returncode != 0:
        raise CheckFailed(proc.stdout + proc.stderr)
    return f"{len(files)} Dockerfiles clean"


def step_kustomize() -> str:
    RENDERED.mkdir(parents=True, exist_ok=True)
    counts = []
    for name, folder in OVERLAYS.items():
        proc = run([tool("kubectl"), "kustomize", str(folder.relative_to(ROOT))])
        if proc.returncode != 0:
            raise CheckFailed(f"kubectl kustomize {folder}: {proc.stderr}")
        (RENDERED / f"{name}.yaml").write_text(proc.stdout)
        objects = sum(line.startswith("kind: ") for line in proc.stdout.splitlines())
        counts.append(f"{name}: {objects} objects")
    return ", ".join(counts)


def step_schema() -> str:
    files = [*(RENDERED / f"{name}.yaml" for name in OVERLAYS),
             DEPLOY / "k8s" / "secret-api-keys.template.yaml"]
    proc = run([tool("kubernetes-validate"), "--strict", "--quiet", "-k", K8S_VERSION,
                *map(str, files)])
    # kubernetes-validate exits 0 even on errors in some versions: read its report too
    if proc.returncode != 0 or "ERROR" in proc.stdout + proc.stderr:
        raise CheckFailed(proc.stdout + proc.stderr)
    return f"strict, Kubernetes {K8S_VERSION}, {len(files)} files"


def step_compose() -> str:
    import compose_spec
    import yaml

    path = DEPLOY / "compose.yaml"
    # Compose interpolates variables before it validates: the file as read with none of its
    # variables set (every ${VAR:-default} its default; a bare ${VAR} would be an error)
    text = path.read_text()
    bare = re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", text)
    if bare:
        raise CheckFailed(f"{path.relative_to(ROOT)}: give ${{{bare[0]}}} a default "
                          f"(${{{bare[0]}:-...}})")
    text = re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:-([^}]*)\}", r"\1", text)
    data = yaml.safe_load(text)  # resolves anchors and << merge keys
    try:
        compose = compose_spec.PyCompose.from_json(json.dumps(data))
    except ValueError as exc:
        raise CheckFailed(f"{path.relative_to(ROOT)}: {exc}") from None
    note = f"{len(compose.service_names())} services valid (compose-spec)"
    docker = shutil.which("docker")
    if docker and run([docker, "compose", "version"]).returncode == 0:
        proc = run([docker, "compose", "-f", str(path), "config", "-q"])
        if proc.returncode != 0:
            raise CheckFailed(proc.stderr)
        note += "; docker compose config ok"
    else:
        note += "; no docker compose plugin here, its own check skipped"
    return note


def load_baseline() -> list[dict[str, object]]:
    """The accepted checkov findings; raises CheckFailed on an entry lacking check/reason."""
    import yaml

    data = yaml.safe_load((DEPLOY / "checkov-baseline.yaml").read_text()) or {}
    entries: list[dict[str, object]] = list(data.get("accepted") or [])
    for entry in entries:
        if not entry.get("check") or not str(entry.get("reason", "")).strip():
            raise CheckFailed(f"checkov-baseline.yaml: entry {entry!r} needs check and reason")
    return entries


def _json_documents(text: str) -> list[dict[str, object]]:
    decoder, index, docs = json.JSONDecoder(), 0, []
    while index < len(text):
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            break
        obj, index = decoder.raw_decode(text, index)
        docs.extend(obj if isinstance(obj, list) else [obj])
    return docs


def step_checkov() -> str:
    baseline = load_baseline()
    cmd = [tool("checkov"), "--quiet", "--compact", "-o", "json", "--skip-download",
           "--framework", "kubernetes", "dockerfile", "-d", str(RENDERED)]
    for path in dockerfiles():
        cmd += ["-f", str(path)]
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}
    proc = run(cmd, env=env)
    try:
        docs = _json_documents(proc.stdout)
    except ValueError:
        raise CheckFailed(f"checkov output unreadable:\n{proc.stdout[-2000:]}"
                          f"\n{proc.stderr[-2000:]}") from None
    if not docs:
        raise CheckFailed(f"checkov produced no report:\n{proc.stderr[-2000:]}")
    used: set[int] = set()
    unaccepted: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    passed = 0
    for doc in docs:
        results = doc.get("results", {})
        summary = doc.get("summary", {})
        assert isinstance(results, dict) and isinstance(summary, dict)
        passed += int(summary.get("passed", 0))
        for finding in results.get("failed_checks", []):
            file = Path(str(finding.get("file_path", ""))).name
            key = (finding["check_id"], file, finding.get("resource", ""))
            if key in seen:
                continue
            seen.add(key)
            match = next((i for i, e in enumerate(baseline) if e["check"] == finding["check_id"]
                          and any(fnmatch.fnmatch(file, pattern)
                                  for pattern in e.get("files", ["*"]))), None)  # type: ignore[attr-defined]
            if match is None:
                unaccepted.append(f"{finding['check_id']} {finding.get('check_name')}: "
                                  f"{finding.get('resource')} in {finding.get('file_path')}")
            else:
                used.add(match)
    stale = [str(e["check"]) for i, e in enumerate(baseline) if i not in used]
    if unaccepted:
        raise CheckFailed("checkov findings not accepted in deploy/checkov-baseline.yaml:\n  "
                          + "\n  ".join(unaccepted))
    note = f"{passed} checks passed, {len(seen)} findings, all accepted in the baseline"
    if stale:
        note += f"; stale baseline entries (matched nothing): {', '.join(stale)}"
    return note


STEPS: list[tuple[str, Callable[[], str]]] = [
    ("generated", step_generated),
    ("hadolint", step_hadolint),
    ("kustomize", step_kustomize),
    ("schema", step_schema),
    ("compose", step_compose),
    ("checkov", step_checkov),
]


def requirements() -> list[str]:
    """The ``deploy`` extra of pyproject.toml: the tools this script needs."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(data["project"]["optional-dependencies"]["deploy"])


def main(argv: list[str] | None = None) -> int:
    """Run every step; returns 0 when all pass, 1 otherwise (each failure printed)."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--requirements"]:
        print("\n".join(requirements()))
        return 0
    failed = 0
    start = time.monotonic()
    for name, step in STEPS:
        t0 = time.monotonic()
        try:
            note = step()
        except CheckFailed as exc:
            failed += 1
            print(f"FAIL {name} ({time.monotonic() - t0:.1f}s)\n{exc}", flush=True)
            if name == "kustomize":
                break  # later steps read its output
            continue
        print(f"ok   {name} ({time.monotonic() - t0:.1f}s): {note}", flush=True)
    print(f"deploy-check: {'FAILED' if failed else 'passed'} in {time.monotonic() - start:.1f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
