"""``moria view``: a local web viewer of run directories (leaderboard, run pages with filters,
episodes step by step with their frames, paired comparisons, live runs, GIF and MP4 export) and
``--bundle``, the same pages as a static site. See docs/viewer.md."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

#: The address the viewer listens on unless told otherwise: this machine only.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def add_arguments(sub: Any) -> None:
    """Register ``moria view`` on the CLI's subparsers."""
    vw = sub.add_parser("view", help="a local web viewer of runs: leaderboard, episodes step "
                        "by step with frames, comparisons (or --bundle: a static site)")
    vw.add_argument("runs", nargs="*", type=Path, metavar="RUN_DIR",
                    help="results directories of moria eval, or folders holding several "
                         "(default: results)")
    vw.add_argument("--host", default=DEFAULT_HOST,
                    help=f"address to listen on (default {DEFAULT_HOST}: this machine only)")
    vw.add_argument("--port", type=int, default=DEFAULT_PORT,
                    help=f"port (default {DEFAULT_PORT})")
    vw.add_argument("--bundle", type=Path, metavar="OUT_DIR",
                    help="write the pages as a static site to OUT_DIR instead of serving them")
    vw.add_argument("--service", metavar="TARGET",
                    help="also follow the runs of the orchestrator service at TARGET live "
                         "(StreamEvents; each episode's outcome, not its steps)")
    vw.add_argument("--run", action="append", metavar="RUN_ID", dest="service_runs",
                    help="with --service: the run to follow, repeatable (default: the newest "
                         "20)")
    vw.add_argument("--mirror", type=Path, metavar="DIR",
                    help="with --service: where the followed runs are written (default: a "
                         "temporary folder)")
    vw.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """``moria view``: serve until interrupted (0), or write the bundle (0); 2 on bad input."""
    console = Console(highlight=False, soft_wrap=True)
    try:
        from orchestrator.apps.viewer.site import Site, find_runs
    except ImportError as exc:
        console.print(f"error: moria view needs the view extra ({exc.name} is missing): pip "
                      "install 'moria[view]'")
        return 2
    from moria.results import ResultsError

    mirrored: list[Path] = []
    if args.service:
        import tempfile

        from orchestrator.apps.viewer.follow import ServiceMirror, describe_error

        out = args.mirror or Path(tempfile.mkdtemp(prefix="moria-view-"))
        mirror = ServiceMirror(args.service, out, args.service_runs)
        mirror.start()
        if mirror.error is not None:
            console.print(f"error: cannot follow {escape(args.service)}: "
                          f"{escape(describe_error(mirror.error))}")
            return 2
        mirrored = sorted(p for p in out.iterdir() if (p / "run.json").is_file())
    try:
        run_dirs = find_runs(args.runs) if args.runs or mirrored else find_runs([Path("results")])
    except (ResultsError, OSError) as exc:
        console.print(f"error: {escape(str(exc))}")
        return 2
    run_dirs += mirrored
    if not run_dirs:
        console.print(f"error: {escape(args.service)} has no run to follow")
        return 2
    if args.bundle is not None:
        from orchestrator.apps.viewer.bundle import write_bundle

        count = write_bundle(Site(run_dirs, live=False), args.bundle)
        console.print(f"wrote {count} pages of {len(run_dirs)} run(s) to "
                      f"{escape(str(args.bundle))}; open {escape(str(args.bundle))}/index.html")
        return 0
    import uvicorn

    from orchestrator.apps.viewer.server import build_app

    app = build_app(Site(run_dirs))
    console.print(f"viewing {len(run_dirs)} run(s) at http://{args.host}:{args.port}/ "
                  "(Ctrl-C stops)")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
