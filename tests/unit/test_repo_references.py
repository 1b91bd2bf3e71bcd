"""Every Markdown document a file of the repo cites is part of the repo.

Someone who clones Moria has only what is tracked here, so a comment, docstring or page that
points to a ``*.md`` file must point to one of ours. The scan covers every tracked text file
except the generated protobuf modules and the test fixtures (third-party stand-ins).
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: Files not scanned: generated protobuf code and third-party stand-ins under the fixtures.
SKIPPED = ("moria/*/v1/*_pb2*", "tests/fixtures/*")

#: A path or bare name ending in ``.md`` (a name character must come right before ``.md``).
MD_MENTION = re.compile(r"(?<![A-Za-z0-9_./-])([A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md)(?![A-Za-z0-9_])")

#: Web addresses name documents elsewhere on purpose; they are dropped before the scan.
URL = re.compile(r"https?://\S+")

#: Mentions allowed although no such file is here. ``README.md`` as a bare name is also the
#: package readme the Dockerfiles copy and pyproject names; it exists at the root, so it needs
#: no entry. Keep this empty unless a third-party document must be named without a URL.
EXTERNAL: frozenset[str] = frozenset()

#: Names of documents from outside the repo that must never come back, in any form. Built from
#: parts so that this file does not itself mention them.
FORBIDDEN = ("DESIGN" + ".md", "../" + "shared", "shared" + "/spec")


def _git_files(*args: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", *args], cwd=REPO, check=True,
                         capture_output=True).stdout
    return [name for name in out.decode().split("\0") if name]


@pytest.fixture(scope="module")
def scanned() -> dict[str, str]:
    """Tracked text files (path relative to the repo root -> text)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout of the repo")
    texts: dict[str, str] = {}
    for name in _git_files():
        if any(fnmatch.fnmatch(name, pattern) for pattern in SKIPPED):
            continue
        path = REPO / name
        if not path.is_file():  # deleted in the work tree, not yet committed
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            texts[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    assert texts, "no files scanned"
    return texts


@pytest.fixture(scope="module")
def present() -> set[str]:
    """Files of the repo: tracked, plus new ones not ignored (work in progress counts)."""
    return set(_git_files("--cached", "--others", "--exclude-standard"))


def _resolves(mention: str, mentioned_in: str, present: set[str]) -> bool:
    bases = ("", posixpath.dirname(mentioned_in), "docs")
    for base in bases:
        candidate = posixpath.normpath(posixpath.join(base, mention.lstrip("/")))
        if candidate in present:
            return True
    return False


def test_every_cited_markdown_file_exists(scanned: dict[str, str], present: set[str]) -> None:
    missing = []
    for name, text in sorted(scanned.items()):
        for number, line in enumerate(text.splitlines(), start=1):
            for mention in MD_MENTION.findall(URL.sub("", line)):
                if mention in EXTERNAL or _resolves(mention, name, present):
                    continue
                missing.append(f"{name}:{number}: {mention}")
    assert not missing, "cited Markdown files not in the repo:\n" + "\n".join(missing)


def _forbidden_in(line: str) -> list[str]:
    return [word for word in FORBIDDEN if word in line]


def test_no_file_cites_documents_from_outside(scanned: dict[str, str]) -> None:
    found = [f"{name}:{number}: {word}"
             for name, text in sorted(scanned.items())
             for number, line in enumerate(text.splitlines(), start=1)
             for word in _forbidden_in(line)]
    assert not found, "citations of documents outside the repo:\n" + "\n".join(found)


def test_the_checks_themselves() -> None:
    # Names that must not resolve are built from parts, so that this file passes its own scan.
    md = ".md"
    line = f"see docs/families/nle.md, (worker.md 2.1), gone{md} and https://x.org/spec.md; x.mdx"
    mentions = MD_MENTION.findall(URL.sub("", line))
    assert mentions == ["docs/families/nle.md", "worker.md", "gone" + md]
    assert _resolves("../players" + md, "docs/families/nle.md", {"docs/players.md"})
    assert _resolves("players.md", "moria/x.py", {"docs/players.md"})
    assert not _resolves("players.md", "moria/x.py", {"docs/other" + md})
    outside = "see " + "DESIGN" + md + " and ../" + "shared" + "/spec"
    assert _forbidden_in(outside) == list(FORBIDDEN)
    assert _forbidden_in("see docs/architecture.md") == []
