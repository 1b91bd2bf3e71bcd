"""The ``moria`` command line.

    moria eval [--config FILE.yaml] [--suite balrog] [KEY=VALUE ...]
                                                      run (or resume) an evaluation
    moria plan [--config FILE.yaml] [--suite balrog] [KEY=VALUE ...]
                                                      estimate its calls, tokens, time and cost
                                                      (also moria eval --dry-run); sends nothing
    moria harness --domain balrog_<env> --run_id ID [--num_samples N] [KEY=VALUE ...]
                                                      the MOSAIC domain-harness form of eval
    moria report DIR | --dname DIR [--domain D]       print the table, write report.json and
                                                      progress.png
    moria prepare [--env NAME ...]                    build game data and model weights once
    moria tasks [--env NAME]                          list env families and their tasks
    moria tournament FILE.yaml [KEY=VALUE ...]        round-robin of players on a two-player
                                                      game: win rates, CIs and ratings
    moria record-demos --env NAME [--tasks T ...]     record oracle demos for few_shot
    moria serve env|agent|orchestrator [flags]        run one server alone
    moria eval --remote ADDR [KEY=VALUE ...]          submit the run to an orchestrator service
                                                      and follow it

Exit codes (``orchestrator.report.outcome``; docs/outcomes.md): 0 every planned episode was scored;
1 some episode failed (agent_error, env_error, cancelled; the count and the first distinct
errors are printed last and kept in summary.json) or a local server exited mid-run; 2 bad usage
or configuration, found before any episode (one ``error:`` line names what was wrong and what
is allowed); 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console

from moria import aio
from orchestrator.apps.say import (
    error_line,
    invocation,
    labelled,
    literal,
    stderr_console,
    warning,
)

T = TypeVar("T")


def full_protocol_hint(moria: str) -> str:
    """What ``moria eval --hint`` prints: how to run BALROG's full BabyAI plan, with ``moria``
    the command as the user can run it from where they are (``say.invocation``)."""
    return (
        "BALROG's full BabyAI plan (its five tasks, 10 episodes each) with the local model, "
        "Moria's own prompts and BALROG's 16-step history window (hours on 2 cores: once the "
        "window is full each step re-evaluates about 550 prompt tokens, about 4 s):\n"
        f"  {moria} eval envs.names=babyai eval.num_episodes.babyai=10 "
        "eval.num_workers=1 eval.output_dir=results/babyai-full\n"
        "Under BALROG's own prompts, comparable with its leaderboard (a BALROG checkout; a "
        "hosted model needs OPENAI_API_KEY):\n"
        "  git clone https://github.com/balrog-ai/BALROG ~/BALROG\n"
        f"  {moria} protocol-check --balrog ~/BALROG --env babyai\n"
        f"  {moria} eval envs.names=babyai agent.protocol=balrog agent.balrog_source=~/BALROG "
        "client.client_name=openai client.model_id=gpt-4o eval.output_dir=results/babyai-gpt-4o"
    )


#: The commands installed next to ``moria`` (pyproject ``[project.scripts]``), for
#: ``moria --help``.
COMPANION_COMMANDS: tuple[tuple[str, str], ...] = (
    ("llm-worker", "the MOSAIC worker: one player (LLM, scripted, rl, human, ...) on one env, "
                   "autonomous or driven by JSON lines on stdin (--interactive); see "
                   "`llm-worker --help` and docs/worker.md"),
    ("vlm-worker", "llm-worker with the env's frames in the prompt (--max-image-history)"),
    ("moria-env", "the env server alone (as `moria serve env`)"),
    ("moria-agent", "the agent (policy) server alone (as `moria serve agent`)"),
)


class _NamesWholeFormatter(argparse.HelpFormatter):
    """argparse's help layout, but a line never breaks inside a hyphenated name
    (``local-model``, ``llm-worker``)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _epilog() -> str:
    """``moria --help``'s closing lines: the companion commands, each wrapped at 79 columns
    under its name (words are never split)."""
    width = max(len(name) for name, _ in COMPANION_COMMANDS)
    indent = " " * (width + 4)
    lines = [textwrap.fill(text, 79, initial_indent=f"  {name:<{width}}  ",
                           subsequent_indent=indent, break_on_hyphens=False,
                           break_long_words=False)
             for name, text in COMPANION_COMMANDS]
    return ("also installed with moria:\n" + "\n".join(lines)
            + "\n\n`moria COMMAND --help` shows a command's flags.")


def _stdout_console() -> Console:
    """A console for tables on stdout; wide when stdout is not a terminal (logs, pipes)."""
    return Console() if sys.stdout.isatty() else Console(width=160)


async def _terminable(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` so that SIGTERM cancels it like Ctrl-C does: the local servers are stopped
    and finished episodes stay saved."""
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    return await work


def _command_spec(args: argparse.Namespace, console: Console) -> Any:
    """The run spec of ``moria eval`` / ``moria plan``'s arguments (``--config``, ``--suite``,
    ``--vlm`` and the overrides), or None after printing why it is bad (exit 2)."""
    from orchestrator.plan.spec import SpecError, load_spec

    try:
        return load_spec(args.config, [*_suite_overrides(args.suite), *_vlm_overrides(args),
                                        *args.overrides])
    except (SpecError, ValueError) as exc:
        console.print(error_line(exc))
        return None


def _cmd_eval(args: argparse.Namespace) -> int:
    console = stderr_console()
    spec = _command_spec(args, console)
    if spec is None:
        return 2
    if getattr(args, "dry_run", False):
        from orchestrator.apps.plan import plan_command

        return plan_command(spec, args, console)
    if getattr(args, "remote", None):
        from orchestrator.apps.remote import eval_remote

        return eval_remote(spec, args, console)
    return _evaluate(spec, args, console)


#: What ``--vlm`` stands for: the MOSAIC vlm-worker's default of one image of history.
VLM_OVERRIDES: tuple[str, ...] = ("agent.max_image_history=1",)


def _vlm_overrides(args: argparse.Namespace) -> list[str]:
    """``VLM_OVERRIDES`` when ``--vlm`` is given (the user's own overrides still win)."""
    return list(VLM_OVERRIDES) if getattr(args, "vlm", False) else []


def _suite_overrides(suite: str | None) -> list[str]:
    """The overrides a named suite stands for (applied before the user's own)."""
    if suite is None:
        return []
    from orchestrator.suites.balrog import SUITES

    return ["envs.names=" + "-".join(SUITES[suite])]


def _prepare_for(spec: Any, console: Console, show_progress: bool) -> bool:
    """Build the game data and weights the run needs; False (after printing why) on failure."""
    from orchestrator.apps.prepare import PrepareError, build_items, items_for_spec

    try:
        report = build_items(items_for_spec(spec), console=console, show_progress=show_progress)
    except PrepareError as exc:
        console.print(error_line(exc))
        return False
    for source, count in report.built.items():
        console.print(f"prepared {count} {source} item(s)")
    return True


def _play(work: Coroutine[Any, Any, T], console: Console, unit: str) -> tuple[T | None, int]:
    """Run ``work`` (an evaluation or a tournament) to its end: (its result, 0), or (None, the
    exit code) after printing why it stopped: 2 for a preflight error, 1 for a local server
    that failed, 130 when interrupted (``unit``, e.g. "episodes", names what is kept)."""
    from moria import gc_tuning
    from orchestrator.core.runner import PreflightError
    from orchestrator.core.stack import StackError

    # the run's modules are imported by now: keep the collector off them (moria.gc_tuning)
    gc_tuning.tune()
    gc_tuning.freeze()
    try:
        return aio.run(_terminable(work)), 0
    except PreflightError as exc:
        console.print(error_line(exc))
        return None, 2
    except StackError as exc:
        console.print(error_line(f"a local server failed: {exc}\nfinished {unit} are saved; "
                                 "rerun the same command to resume"))
        return None, 1
    except (KeyboardInterrupt, asyncio.CancelledError):
        console.print(f"interrupted; finished {unit} are saved and the next run resumes")
        return None, 130


def _evaluate(spec: Any, args: argparse.Namespace, console: Console) -> int:
    """Prepare data, run the evaluation, print the report; returns the exit code."""
    from orchestrator.core.runner import run_evaluation
    from orchestrator.report.plots import PlotWarmup
    from orchestrator.report.tables import print_report

    if not _prepare_for(spec, console, not args.no_progress):
        return 2
    warmup = PlotWarmup()  # matplotlib and its fonts load while the episodes play
    outcome, code = _play(run_evaluation(spec, console=console,
                                         show_progress=not args.no_progress, sinks=[warmup]),
                          console, "episodes")
    if outcome is None:
        return code
    console.print(literal(f"run {outcome.run_id}: ran {outcome.ran} episode(s), "
                        f"{outcome.skipped} already done; results in {outcome.output_dir}"))
    print_report(outcome.output_dir, _stdout_console())
    warmup.wait()
    _draw_progress(outcome.summary, Path(outcome.output_dir), console)
    if getattr(args, "hint", False):
        console.print(full_protocol_hint(invocation()), highlight=False)
    return report_verdict(outcome.verdict, console)


def report_verdict(verdict: Any, console: Console) -> int:
    """Print the run's verdict (``orchestrator.report.outcome.RunVerdict``) as the last lines of a
    run and return its exit code: 0 when every planned episode was scored, 1 otherwise (with
    the count and the first distinct errors, and how to retry)."""
    if verdict is None or verdict.succeeded:
        if verdict is not None:
            console.print(labelled("green", "succeeded:", verdict.headline()))
        return 0
    console.print(labelled("red", "failed:", verdict.describe()))
    console.print("failed episodes are not scored; rerun the same command to play them again",
                  highlight=False)
    return verdict.exit_code


def _draw_progress(summary: dict[str, Any], out_dir: Path, console: Console) -> None:
    """Write ``<out_dir>/progress.png``; a plotting failure is reported, never fatal."""
    from orchestrator.report.plots import plot_progress

    try:
        path = plot_progress(summary, out_dir / "progress.png")
    except (ValueError, OSError) as exc:
        console.print(warning(f"no progress.png: {exc}"))
        return
    console.print(literal(f"progress plot: {path}"))


def _domain_envs(domain: str) -> list[str]:
    """``balrog`` -> the six envs; ``balrog_<env>`` -> [env]. Raises ValueError otherwise."""
    from orchestrator.suites.balrog import SUITE_ENVS

    domains = {"balrog": list(SUITE_ENVS), **{f"balrog_{e}": [e] for e in SUITE_ENVS}}
    if domain not in domains:
        raise ValueError(f"unknown domain {domain!r}; allowed: {', '.join(domains)}")
    return domains[domain]


def _cmd_plan(args: argparse.Namespace) -> int:
    """``moria plan``: the spec as ``moria eval`` reads it, estimated
    (``orchestrator.apps.plan``)."""
    from orchestrator.apps.plan import plan_command

    console = stderr_console()
    spec = _command_spec(args, console)
    return 2 if spec is None else plan_command(spec, args, console)


def _cmd_report(args: argparse.Namespace) -> int:
    from orchestrator.report.accounting import load_prices
    from orchestrator.report.summary import previous_extra, summarize
    from orchestrator.report.tables import print_report

    console = stderr_console()
    directory = args.dname or args.dir
    try:
        if directory is None:
            raise ValueError("give the results directory: moria report DIR (or --dname DIR)")
        envs = _domain_envs(args.domain) if args.domain else None
        prices = load_prices(str(args.prices) if args.prices else None)
        summary = summarize(directory, envs=envs, extra=previous_extra(directory),
                            prices=prices)
        print_report(directory, _stdout_console(), prices)
    except (FileNotFoundError, ValueError) as exc:
        console.print(error_line(exc))
        return 2
    console.print(literal(f"wrote {Path(directory) / 'report.json'}"))
    _draw_progress(summary, Path(directory), console)
    from orchestrator.report.outcome import verdict_from_summary

    verdict = verdict_from_summary(summary)
    colour = "green" if verdict.succeeded else "yellow"
    console.print(labelled(colour, f"{verdict.state}:", verdict.describe()))
    return 0


def _cmd_harness(args: argparse.Namespace) -> int:
    """The MOSAIC domain-harness form: ``--domain balrog_<env> --run_id ID --num_samples N``."""
    from orchestrator.plan.spec import SpecError, load_spec

    console = stderr_console()
    try:
        envs = _domain_envs(args.domain)
        if "/" in args.run_id or args.run_id in ("", ".", ".."):
            raise ValueError(f"--run_id {args.run_id!r} must be a plain name (no '/')")
        overrides = ["envs.names=" + "-".join(envs), f"eval.run_id={args.run_id}",
                     f"eval.output_dir={Path(args.outputs) / args.run_id}"]
        if args.num_samples is not None:
            overrides.append(f"eval.num_samples={args.num_samples}")
        spec = load_spec(args.config, [*overrides, *_vlm_overrides(args), *args.overrides])
    except (SpecError, ValueError) as exc:
        console.print(error_line(exc))
        return 2
    return _evaluate(spec, args, console)


def _cmd_prepare(args: argparse.Namespace) -> int:
    from orchestrator.apps.prepare import SOURCES, PrepareError, prepare_sources, sources_for

    console = stderr_console()
    try:
        sources = sources_for(args.env) if args.env else list(SOURCES.values())
    except ValueError as exc:
        console.print(error_line(exc))
        return 2
    if not sources:
        console.print(literal("nothing to prepare for " + ", ".join(args.env)))
        return 0
    try:
        prepare_sources(sources, console=console, show_progress=not args.no_progress)
    except PrepareError as exc:
        console.print(error_line(exc))
        return 1
    return 0


def _cmd_tasks(args: argparse.Namespace) -> int:
    from orchestrator.apps.tasks import list_tasks

    return list_tasks(args.env, args.endpoint)


def _cmd_record_demos(args: argparse.Namespace) -> int:
    from orchestrator.apps.record_demos import run_command

    return run_command(args)


def _cmd_tournament(args: argparse.Namespace) -> int:
    """Run (or resume) a round-robin tournament; print and write its tables. Exit 0 when
    every game was scored, 1 when any failed (the count and the first distinct errors are
    printed; failed games count for nobody), 2 for a bad spec or setup."""
    from orchestrator.apps.prepare import PrepareError, build_items, items_for_specs
    from orchestrator.apps.tournament import (
        TournamentSpecError,
        load_tournament,
        render_tables,
        run_spec_for,
        run_tournament,
        schedule,
    )

    console = stderr_console()
    try:
        spec = load_tournament(args.config, args.overrides)
    except (TournamentSpecError, ValueError) as exc:
        console.print(error_line(exc))
        return 2
    try:
        items = items_for_specs(run_spec_for(spec, match) for match in schedule(spec))
        build_items(items, console=console, show_progress=not args.no_progress)
    except PrepareError as exc:
        console.print(error_line(exc))
        return 2
    result, code = _play(run_tournament(spec, console=console,
                                        show_progress=not args.no_progress), console, "games")
    if result is None:
        return code
    _stdout_console().print(render_tables(result))
    console.print(literal(f"played {result.ran} game(s) now; results in "
                        f"{spec.output_dir / 'tournament.json'} and tournament.md"))
    if result.succeeded:
        console.print(literal(f"done: {result.verdict.headline()}"))
        return 0
    # the verdict over every match's episode records: counts and the first distinct errors
    console.print(result.describe_failures(), style="red", markup=False, highlight=False)
    console.print(warning(f"{len(result.unscored)} game(s) did not end normally and count "
                          "for nobody; rerun the same command to retry them"))
    return result.exit_code


#: ``moria serve COMPONENT`` -> the module that serves it (run as ``python -m MODULE serve``:
#: the orchestrator never imports the other services).
SERVER_MODULES: dict[str, str] = {"env": "env_server", "agent": "agent_server",
                                  "orchestrator": "orchestrator.apps.service"}


def _cmd_serve(args: argparse.Namespace) -> int:
    module = SERVER_MODULES[args.component]
    os.execv(sys.executable, [sys.executable, "-m", module, "serve", *args.rest])
    return 0  # not reached


class _ServeHelp(argparse.Action):
    """``moria serve --help``: the dispatcher's usage, then every server's own ``--help`` (each
    asked of its module in a subprocess, so the flags shown are the ones it takes)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        parser.print_help()
        for component, module in SERVER_MODULES.items():
            print(f"\n--- moria serve {component} --help ---", flush=True)
            subprocess.run([sys.executable, "-m", module, "serve", "--help"], check=False)
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``moria``."""
    from orchestrator.suites.balrog import SUITES

    parser = argparse.ArgumentParser(
        prog="moria", description="Evaluate LLM and VLM players on games over gRPC "
        "(BALROG's benchmarks, MOSAIC's multi-agent games).", epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log-level", default="WARNING", help="stderr log level")
    sub = parser.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("eval", help="run or resume an evaluation")
    ev.add_argument("--config", type=Path, help="YAML or JSON run spec")
    ev.add_argument("--no-progress", action="store_true", help="no progress bars or progress lines")
    ev.add_argument("--hint", action="store_true", help="print how to run the full protocol")
    ev.add_argument("--vlm", action="store_true",
                    help="vision mode: send the env's frames (agent.max_image_history=1)")
    ev.add_argument("--suite", choices=sorted(SUITES),
                    help="a named suite: balrog = all six BALROG envs, 255 episodes")
    ev.add_argument("--remote", metavar="ADDR",
                    help="submit the run to the orchestrator service at ADDR (host:port) and "
                         "follow its events instead of running it here")
    ev.add_argument("--cancel-on-interrupt", action="store_true",
                    help="with --remote: cancel the run on Ctrl-C (default: it goes on)")
    ev.add_argument("--remote-ca", metavar="PEM",
                    help="with --remote: TLS, trusting this CA for the orchestrator")
    ev.add_argument("--remote-token-env", metavar="NAME",
                    help="with --remote: send the bearer token held by variable NAME")
    ev.add_argument("--dry-run", action="store_true",
                    help="print what the run would cost (as `moria plan`) and run nothing: no "
                         "request to a provider, no result directory")
    ev.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                    help="BALROG-style overrides, e.g. eval.num_episodes.babyai=2")
    ev.set_defaults(func=_cmd_eval)

    from orchestrator.apps.plan import add_plan_flags

    pl = sub.add_parser("plan", help="estimate a run's model calls, tokens, wall time and cost "
                        "from its real first prompts; sends nothing to a provider")
    pl.add_argument("--config", type=Path, help="YAML or JSON run spec")
    pl.add_argument("--suite", choices=sorted(SUITES),
                    help="a named suite: balrog = all six BALROG envs, 255 episodes")
    pl.add_argument("--vlm", action="store_true",
                    help="vision mode: send the env's frames (agent.max_image_history=1)")
    pl.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_plan_flags(pl)
    pl.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                    help="the run's overrides, as for moria eval")
    pl.set_defaults(func=_cmd_plan)

    hv = sub.add_parser("harness", help="MOSAIC domain-harness form of eval (./outputs/ID)")
    hv.add_argument("--domain", required=True,
                    help="balrog (all six envs) or balrog_<env>, e.g. balrog_babaisai")
    hv.add_argument("--run_id", "--run-id", dest="run_id", required=True,
                    help="run name; results go to <outputs>/<run_id>/")
    hv.add_argument("--num_samples", "--num-samples", dest="num_samples", type=int,
                    help="at most N episodes per env (round-robin over its tasks)")
    hv.add_argument("--outputs", default="outputs", help="parent folder (default ./outputs)")
    hv.add_argument("--config", type=Path, help="YAML or JSON run spec")
    hv.add_argument("--no-progress", action="store_true", help="no progress bars or progress lines")
    hv.add_argument("--vlm", action="store_true",
                    help="vision mode: send the env's frames (agent.max_image_history=1)")
    hv.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                    help="run-spec overrides, e.g. client.client_name=openai")
    hv.set_defaults(func=_cmd_harness)

    rp = sub.add_parser("report", help="print the table of a results directory, write "
                        "report.json and progress.png")
    rp.add_argument("dir", type=Path, nargs="?")
    rp.add_argument("--dname", type=Path, help="the results directory (harness spelling)")
    rp.add_argument("--domain", help="restrict to balrog_<env> (or balrog: all six)")
    rp.add_argument("--prices", type=Path,
                    help="price table YAML for the cost estimate (default: the shipped one)")
    rp.add_argument("--recompute", action="store_true",
                    help="accepted for compatibility; summaries are always recomputed")
    rp.set_defaults(func=_cmd_report)

    from orchestrator.apps.prepare import env_help

    pp = sub.add_parser("prepare", help="build game data and model weights once (offline)",
                        description="Build game data and model weights once (offline), for "
                        "every family that reads any, or only those named with --env.",
                        formatter_class=_NamesWholeFormatter)
    pp.add_argument("--env", action="append", metavar="NAME", help=env_help())
    pp.add_argument("--no-progress", action="store_true", help="no progress bar")
    pp.set_defaults(func=_cmd_prepare)

    ts = sub.add_parser("tasks", help="list env families and tasks")
    ts.add_argument("--env", default="", help="only this family")
    ts.add_argument("--endpoint", default="", help="ask a running env server instead")
    ts.set_defaults(func=_cmd_tasks)

    from orchestrator.apps.protocol_check import add_arguments as add_protocol_check_arguments

    add_protocol_check_arguments(sub)
    from orchestrator.apps.compare import add_arguments as add_compare_arguments
    from orchestrator.apps.export import add_arguments as add_export_arguments
    from orchestrator.apps.record_demos import add_arguments as add_record_demos_arguments
    from orchestrator.apps.replay import add_arguments as add_replay_arguments
    from orchestrator.apps.viewer import add_arguments as add_view_arguments

    add_replay_arguments(sub)
    add_compare_arguments(sub)
    add_view_arguments(sub)
    add_export_arguments(sub)

    rd = sub.add_parser("record-demos", help="record oracle demonstrations for few_shot")
    add_record_demos_arguments(rd)
    rd.set_defaults(func=_cmd_record_demos)

    tn = sub.add_parser("tournament", help="round-robin of players on a two-player game, with "
                        "win rates, confidence intervals and openskill ratings")
    tn.add_argument("config", type=Path, help="YAML or JSON tournament spec")
    tn.add_argument("--no-progress", action="store_true", help="no progress bars or progress lines")
    tn.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                    help="tournament-spec overrides, e.g. seeds=4 eval.num_workers=2")
    tn.set_defaults(func=_cmd_tournament)

    sv = sub.add_parser("serve", help="run one server (env, agent or orchestrator)",
                        add_help=False)
    sv.add_argument("-h", "--help", action=_ServeHelp,
                    help="show this help and every server's flags, then exit")
    sv.add_argument("component", choices=list(SERVER_MODULES))
    sv.add_argument("rest", nargs=argparse.REMAINDER, help="server flags (see --help)")
    sv.set_defaults(func=_cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``moria`` script.

    Flags may come after ``KEY=VALUE`` overrides (``moria eval a=1 --vlm b=2``): argparse stops
    collecting a positional list at the first flag, so overrides found after it are appended to
    the command's own. Anything else unrecognised is a usage error (exit 2)."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest:
        if not hasattr(args, "overrides") or any(r.startswith("-") or "=" not in r for r in rest):
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        args.overrides = [*args.overrides, *rest]
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
