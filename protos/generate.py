"""Regenerate the committed Python stubs under moria/ from protos/moria/**/*.proto.

Usage: python protos/generate.py [--check]

--check generates into a temporary directory and exits 1 if anything differs from the
committed files (the contract test runs this). Uses grpcio-tools' bundled protoc and its
well-known types (the only imports from outside protos/).
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def _include_dirs() -> list[str]:
    import grpc_tools

    return [str(PROTO_ROOT), str(Path(grpc_tools.__file__).parent / "_proto")]


def proto_files() -> list[Path]:
    """All contract .proto files, sorted."""
    return sorted((PROTO_ROOT / "moria").rglob("*.proto"))


def generate(out_dir: Path) -> None:
    """Run protoc for every proto file, writing *_pb2.py, *_pb2.pyi and *_pb2_grpc.py."""
    from grpc_tools import protoc

    files = [str(p.relative_to(PROTO_ROOT)) for p in proto_files()]
    args = ["protoc", *[f"-I{d}" for d in _include_dirs()], f"--python_out={out_dir}",
            f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}", *files]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for pkg_dir in {p.parent for p in (out_dir / "moria").rglob("*_pb2.py")}:
        d = pkg_dir
        while d != out_dir:
            (d / "__init__.py").touch(exist_ok=True)
            d = d.parent


def generated_files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in (root / "moria").rglob("*")
                  if p.name.endswith(GENERATED_SUFFIXES))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if committed stubs differ")
    args = parser.parse_args()
    if not args.check:
        generate(ROOT)
        print(f"generated {len(generated_files(ROOT))} files")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp_root = Path(tmp)
        generate(tmp_root)
        fresh, committed = generated_files(tmp_root), generated_files(ROOT)
        problems = [f"missing: {p}" for p in fresh if p not in committed]
        problems += [f"stale: {p}" for p in committed if p not in fresh]
        problems += [f"differs: {p}" for p in fresh
                     if p in committed and not filecmp.cmp(tmp_root / p, ROOT / p, shallow=False)]
    if problems:
        print("generated code is out of date; run `make protos`:\n  " + "\n  ".join(problems))
        return 1
    print("generated code is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
