"""Adding a family (docs/adding-a-family.md): what it touches, and the steps a test enforces.

A family with its own container image touches its folder under ``env_server/families/`` and
files that are generated from the manifests: ``moria/families.json``
(``python -m env_server.families``), the image's Dockerfile, its Kubernetes Deployment and
Service, its Compose service and the lists that name every env image (``deploy/images.py
generate``, ``make dockerfiles``). ``test_a_throwaway_family_touches_its_folder_and_generated_
files_only`` adds one in a temporary copy of the repository and checks exactly that, then checks
that the guide's last step (a docs page and a test module) is enforced: ``guide_problems`` names
what is missing, here and for every family of the real repository.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.deploy.dockerfiles import REPO

#: what the temporary copy holds: the family folders and the code that discovers them, the
#: generators and their outputs, the docs, the family test modules, and what the deploy tests
#: (tests/deploy/test_manifests.py, run in the copy) import
COPIED = ("pyproject.toml", "README.md", "moria", "env_server", "agent_server", "orchestrator",
          "worker", "deploy", "docs", "tests/__init__.py", "tests/conftest.py", "tests/support",
          "tests/deploy", "tests/unit")
FAMILY = "throwaway"

MANIFEST = f'''"""A throwaway family for tests/deploy/test_adding_a_family.py."""

from moria.families import FamilyManifest

MANIFESTS = [FamilyManifest(name="{FAMILY}", entry_point="env_server.families.{FAMILY}:Family",
                            report_kind="single_agent", image="{FAMILY}",
                            id_prefixes=("{FAMILY}_",))]
'''


def guide_problems(root: Path) -> list[str]:
    """What step 9 of docs/adding-a-family.md asks of every family of ``root`` (from its
    ``moria/families.json``) that is missing: the page ``docs/families/<name>.md`` naming the
    family, and the test module ``tests/unit/test_<name>_family.py`` (the conformance suite,
    ``tests/conformance``, enrols every discovered family by itself)."""
    table = json.loads((root / "moria" / "families.json").read_text())
    problems = []
    for row in table["families"]:
        name = row["name"]
        page = root / "docs" / "families" / f"{name}.md"
        if not page.is_file():
            problems.append(f"{name}: no docs page docs/families/{name}.md")
        elif f"`{name}`" not in page.read_text():
            problems.append(f"{name}: docs/families/{name}.md never names `{name}`")
        if not (root / "tests" / "unit" / f"test_{name}_family.py").is_file():
            problems.append(f"{name}: no test module tests/unit/test_{name}_family.py")
    return problems


def test_every_family_has_its_docs_page_and_test_module() -> None:
    assert guide_problems(REPO) == []


def _run(root: Path, *argv: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(argv, cwd=root, env=env, text=True, capture_output=True, check=False)
    assert proc.returncode == 0, f"{' '.join(argv)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _generate(root: Path) -> None:
    """Both generators of the copy, with its own code."""
    _run(root, sys.executable, "-m", "env_server.families")
    _run(root, sys.executable, "deploy/images.py", "generate")


def _git(root: Path, *args: str) -> str:
    return _run(root, "git", "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                "-c", "commit.gpgsign=false", *args)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A git repository holding the tracked and untracked (not ignored) files of ``COPIED`` as
    this working tree has them, generated files regenerated (no change when the tree is
    current), committed."""
    root = tmp_path / "repo"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard", *COPIED], cwd=REPO, text=True,
                            capture_output=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():  # a file deleted in the working tree is left out
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name)
    _git(root, "init", "-q")
    _generate(root)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "copy")
    return root


def test_a_throwaway_family_touches_its_folder_and_generated_files_only(
        copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = copy / "env_server" / "families" / FAMILY
    folder.mkdir()
    (folder / "__init__.py").write_text(f'"""The {FAMILY} family (a test\'s)."""\n')
    (folder / "manifest.py").write_text(MANIFEST)
    _generate(copy)
    _git(copy, "add", "-A")
    changed = set(_git(copy, "diff", "--cached", "--name-only").split())
    stat = _git(copy, "diff", "--cached", "--stat")
    with capsys.disabled():
        print(f"\n{FAMILY} family, git diff --stat:\n{stat}")

    spec = importlib.util.spec_from_file_location("copy_images", copy / "deploy" / "images.py")
    assert spec and spec.loader
    images = importlib.util.module_from_spec(spec)
    sys.modules["copy_images"] = images  # dataclasses look their module up there
    try:
        spec.loader.exec_module(images)
        generated = {str(p.relative_to(copy)) for p in images.deploy_files()}
        generated |= {str(i.dockerfile.relative_to(copy)) for i in images.all_images()}
    finally:
        del sys.modules["copy_images"]
    generated.add("moria/families.json")
    in_folder = {p for p in changed if p.startswith(f"env_server/families/{FAMILY}/")}
    assert in_folder == {f"env_server/families/{FAMILY}/__init__.py",
                         f"env_server/families/{FAMILY}/manifest.py"}
    assert changed - in_folder <= generated, sorted(changed - in_folder - generated)
    # and every place that lists the env images has the new one
    assert changed - in_folder == {
        "moria/families.json", f"deploy/docker/{FAMILY}/Dockerfile",
        f"deploy/k8s/base/env-{FAMILY}.yaml", "deploy/compose.yaml", "deploy/run.yaml",
        "deploy/k8s/base/kustomization.yaml", "deploy/k8s/base/run-spec.yaml",
        "deploy/k8s/base/orchestrator.yaml", "deploy/k8s/overlays/local/kustomization.yaml",
        "deploy/k8s/components/tls/kustomization.yaml", "docs/deploy.md"}

    compose = yaml.safe_load((copy / "deploy" / "compose.yaml").read_text())
    service = compose["services"][f"env-{FAMILY}"]
    assert service["build"]["dockerfile"] == f"deploy/docker/{FAMILY}/Dockerfile"
    assert service["image"] == f"moria/env-{FAMILY}:local"
    assert f"env-{FAMILY}" in compose["services"]["orchestrator"]["depends_on"]
    assert f"env-{FAMILY}:50051" in compose["services"]["orchestrator"]["environment"][
        "MORIA_ALLOWED_ENDPOINTS"].split(",")
    run = yaml.safe_load((copy / "deploy" / "run.yaml").read_text())
    assert run["endpoints"]["env"][FAMILY] == [f"env-{FAMILY}:50051"]
    dockerfile = (copy / "deploy" / "docker" / FAMILY / "Dockerfile").read_text()
    assert f'CMD ["--families", "{FAMILY}", ' in dockerfile
    kubectl = Path(sys.executable).parent / "kubectl"
    if kubectl.exists() or shutil.which("kubectl"):
        for overlay in ("base", "overlays/tls"):
            out = _run(copy, str(kubectl) if kubectl.exists() else "kubectl", "kustomize",
                       f"deploy/k8s/{overlay}")
            docs = [d for d in yaml.safe_load_all(out) if d]
            names = {(d["kind"], d["metadata"]["name"]) for d in docs}
            assert {("Deployment", f"moria-env-{FAMILY}"),
                    ("Service", f"moria-env-{FAMILY}")} <= names, overlay
            spec_text = next(d for d in docs if d["metadata"]["name"] == "moria-run-spec")[
                "data"]["run.yaml"]
            assert f"dns:///moria-env-{FAMILY}.moria.svc.cluster.local:50051" in spec_text
    # the deploy tests pass in the copy, unchanged: they know the new image from the manifests
    _run(copy, sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         "tests/deploy/test_manifests.py")
    # the copy's own check passes on what was generated, and fails once a generated file is
    # edited by hand (make deploy-check runs the same --check)
    _run(copy, sys.executable, "deploy/images.py", "generate", "--check")
    run_yaml = copy / "deploy" / "run.yaml"
    run_yaml.write_text(run_yaml.read_text().replace(f"    {FAMILY}: ", f"    {FAMILY}x: "))
    stale = subprocess.run([sys.executable, "deploy/images.py", "generate", "--check"],
                           cwd=copy, text=True, capture_output=True, check=False)
    assert stale.returncode == 1 and "stale: deploy/run.yaml" in stale.stdout

    # the guide's last step: until the family has its docs page and its tests, a test fails
    assert guide_problems(copy) == [
        f"{FAMILY}: no docs page docs/families/{FAMILY}.md",
        f"{FAMILY}: no test module tests/unit/test_{FAMILY}_family.py"]
    (copy / "docs" / "families" / f"{FAMILY}.md").write_text(f"# Throwaway (`{FAMILY}`)\n")
    assert guide_problems(copy) == [
        f"{FAMILY}: no test module tests/unit/test_{FAMILY}_family.py"]
    (copy / "tests" / "unit" / f"test_{FAMILY}_family.py").write_text('"""Its tests."""\n')
    assert guide_problems(copy) == []
