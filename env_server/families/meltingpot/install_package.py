#!/usr/bin/env python3
"""Install dm-meltingpot 2.4.1 (the substrates) into the running Python, without its assets.

    python env_server/families/meltingpot/install_package.py [--check]

dm-meltingpot 2.4.1 is published only as an sdist whose ``build_py`` downloads a tarball of
assets (the scenarios' background-bot models, about 1 GB) from a storage bucket before building.
Its substrates need none of it: they are Lua files and Python configs inside the sdist, run by
dmlab2d. The build skips the download when the tarball already exists at
``assets/meltingpot-assets-<ASSETS_VERSION>.tar.gz`` in the source tree; it then extracts it into
``meltingpot/`` and copies ``meltingpot/assets`` into the wheel. So this script downloads the
sdist with pip, puts there a placeholder tarball holding only an empty ``assets/`` folder, and
installs the result with ``--no-deps``: the package lists tensorflow and chex (for the bots)
among its requirements, which the substrates do not import through this family (see
``env_server/families/meltingpot/package.py``). The substrates' real dependencies are the
``meltingpot`` extra of pyproject.toml, installed beforehand.

Standard library only (it runs in the Dockerfile's build stage too). Idempotent: nothing is done
when that version is already installed. ``--check`` only says whether it is (exit 0) or not (1).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

VERSION = "2.4.1"
ASSETS_VERSION = "2.3.0"  # setup.py's ASSETS_VERSION for dm-meltingpot 2.4.1
DISTRIBUTION = "dm-meltingpot"


def installed_version() -> str | None:
    """The installed dm-meltingpot version, or None."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def placeholder_tarball(path: Path) -> None:
    """Write a gzip tarball whose only member is the empty directory ``assets/``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("assets")
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        tar.addfile(info)
        readme = b"Placeholder: Moria builds dm-meltingpot without its bot assets.\n"
        member = tarfile.TarInfo("assets/README.moria")
        member.size = len(readme)
        member.mode = 0o644
        tar.addfile(member, io.BytesIO(readme))


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def install() -> None:
    """Download the sdist, add the placeholder tarball, install it with --no-deps."""
    with tempfile.TemporaryDirectory(prefix="moria-meltingpot-") as tmp:
        work = Path(tmp)
        _pip("download", "--quiet", "--no-deps", "--no-binary", ":all:", "--dest", str(work),
             f"{DISTRIBUTION}=={VERSION}")
        archives = sorted(work.glob("*.tar.gz"))
        if len(archives) != 1:
            raise SystemExit(f"expected one sdist in {work}, found {[a.name for a in archives]}")
        with tarfile.open(archives[0]) as tar:
            # the "data" filter exists from Python 3.11.4 (and in backports); Debian bookworm's
            # 3.11.2 (the local debootstrap base image) has none
            safe: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(work / "src", **safe)
        roots = [p for p in (work / "src").iterdir() if (p / "setup.py").is_file()]
        if len(roots) != 1:
            raise SystemExit(f"no single source tree with setup.py in {archives[0].name}")
        source = roots[0]
        placeholder_tarball(source / "assets" / f"meltingpot-assets-{ASSETS_VERSION}.tar.gz")
        _pip("install", "--quiet", "--no-deps", "--no-cache-dir", str(source))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help=f"exit 0 when {DISTRIBUTION}=={VERSION} is installed, else 1")
    args = parser.parse_args(argv)
    found = installed_version()
    if args.check:
        print(f"{DISTRIBUTION}: {found or 'not installed'}")
        return 0 if found == VERSION else 1
    if found == VERSION:
        return 0
    install()
    found = installed_version()
    if found != VERSION:
        raise SystemExit(f"{DISTRIBUTION} {VERSION} did not install (found {found})")
    print(f"installed {DISTRIBUTION} {VERSION} (substrates only; no bot assets)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
