"""The commands the README and ``docs/`` show work, and their prose carries no dated figures.

Every command of a ```bash or ```sh block of ``README.md`` and ``docs/**/*.md`` is taken
(continuation lines joined, comments dropped) and checked from a temporary directory, never
the repository root, so a command that only works from the root is caught unless it says so:

- **Run for real** (cheap): ``moria --help``, ``moria <subcommand> --help`` for every
  subcommand the documents use, and ``moria tasks ...`` as written.
- **Parsed, not run**, every other ``moria`` command: ``moria``'s own argument parser (flags
  after ``KEY=VALUE`` overrides, as ``main`` takes them) must accept it; for ``eval``, ``plan``
  and ``harness`` the run spec it names (``--suite``, ``--vlm``, ``--config`` read from the
  repository, the overrides) is built and validated by ``moria``'s own loader, so an unknown
  key or a bad value fails here. No episode is played, no server started, no provider called,
  nothing prepared: ``make run``, hosted models (they need keys) and ``--remote`` runs against
  the Compose stack are checked this way only.
- ``llm-worker`` / ``vlm-worker``: parsed by the worker's own argument parser.
- ``make <target>``: the target exists in the Makefile (``make run``, ``make test``,
  ``make images`` take minutes; ``make test`` itself runs this file).
- ``python -m <module>``: the module exists.
- Anything else (podman, git, export, shell loops, grpcurl, ...): ``bash -n``, syntax only.

Commands with placeholders (``<...>``, ``[...]`` option lists, ``...``) are syntax-checked
only. The second test greps the prose (outside code blocks and generated tables) for dates,
commit hashes, load-average figures and "measured on": measured figures live in
``benchmarks/results/*.json`` and reach the documents as generated tables
(``benchmarks/tables.py``).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent

#: Documents whose prose is exempt from the dated-figure grep: they are kept as they are.
PROSE_EXEMPT = {"docs/budget.md", "docs/plan.md"}

FENCE = re.compile(r"^```(\w*)\s*$")
PLACEHOLDER = re.compile(r"<[A-Za-z_][^>]*>|\[--|\.\.\.|\bFILE\b|\bDIR\b|\bADDR\b|\bCHECKOUT\b")


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def shell_commands(text: str) -> list[str]:
    """The commands of the ```bash / ```sh blocks of a Markdown text, continuation lines
    joined, comment lines dropped (a trailing comment stays: shlex drops it)."""
    commands: list[str] = []
    lang: str | None = None
    pending = ""
    for line in text.splitlines():
        fence = FENCE.match(line.strip())
        if fence:
            lang = None if lang is not None else fence.group(1)
            pending = ""
            continue
        if lang not in ("bash", "sh"):
            continue
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        pending += stripped
        if _open_blocks(pending) > 0:  # a loop or an if continues on the next lines
            pending += "\n"
            continue
        commands.append(pending)
        pending = ""
    return commands


def _open_blocks(command: str) -> int:
    """Shell loops and ifs opened but not closed in ``command`` (comments ignored)."""
    code = re.sub(r"(^|\s)#.*", "", command)
    return (len(re.findall(r"\b(?:do|then)\b", code))
            - len(re.findall(r"\b(?:done|fi)\b", code)))


def all_commands() -> list[tuple[str, str]]:
    found = []
    for path in documents():
        for command in shell_commands(path.read_text(encoding="utf-8")):
            found.append((str(path.relative_to(REPO)), command))
    return found


def _words(command: str) -> list[str] | None:
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return None


def _moria_argv(words: list[str]) -> list[str] | None:
    """The arguments after ``moria`` when the command is one ``moria`` call, else None."""
    if words and Path(words[0]).name == "moria" and not any(
            w in ("|", "&&", ";", "||", ">", "2>&1") for w in words):
        return words[1:]
    return None


def _help_commands(argvs: list[list[str]]) -> list[list[str]]:
    subs = sorted({argv[0] for argv in argvs if argv and not argv[0].startswith("-")})
    return [["--help"], *[[sub, "--help"] for sub in subs]]


def _run_moria(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(VENV_BIN / "moria"), *argv], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=120)


def _parse_moria(argv: list[str], cwd: Path) -> str | None:
    """None when ``moria``'s parser (and, for eval/plan/harness, its spec loader) accepts the
    arguments, else why not."""
    from orchestrator.apps import cli
    from orchestrator.plan.overrides import apply_overrides
    from orchestrator.plan.spec import SpecError, load_spec, validate_spec

    parser = cli.build_parser()
    err = StringIO()
    try:
        with redirect_stderr(err), redirect_stdout(StringIO()):
            args, rest = parser.parse_known_args(argv)
    except SystemExit:
        return f"argparse refused it: {err.getvalue().strip()}"
    if rest:
        if not hasattr(args, "overrides") or any(r.startswith("-") or "=" not in r for r in rest):
            return f"unrecognised arguments: {rest}"
        args.overrides = [*args.overrides, *rest]
    if argv[0] not in ("eval", "plan", "harness"):
        return None
    overrides = [*cli._suite_overrides(getattr(args, "suite", None)), *cli._vlm_overrides(args),
                 *args.overrides]
    if argv[0] == "harness":
        overrides = ["envs.names=" + "-".join(cli._domain_envs(args.domain)),
                     f"eval.run_id={args.run_id}", *overrides]
        if args.num_samples is not None:
            overrides.append(f"eval.num_samples={args.num_samples}")
    config = getattr(args, "config", None)
    try:
        if config is not None:
            path = config if config.is_absolute() else REPO / config
            load_spec(path, overrides)
        else:
            validate_spec(apply_overrides({}, overrides))
    except (SpecError, ValueError) as exc:
        return f"the run spec is refused: {exc}"
    return None


def _worker_parse(words: list[str]) -> str | None:
    """None when the worker's own settings loader accepts the flags, else why not."""
    from worker.config import WorkerConfigError, load_settings

    prog = Path(words[0]).name
    err = StringIO()
    try:
        with redirect_stderr(err), redirect_stdout(StringIO()):
            load_settings(words[1:], prog=prog, vlm=prog == "vlm-worker")
    except WorkerConfigError as exc:
        return f"the worker refused it: {exc}"
    except SystemExit as exc:
        if exc.code:
            return f"the worker's parser refused it: {err.getvalue().strip()}"
    return None


def _make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z0-9_.-]+):", text, flags=re.MULTILINE))


def _bash_syntax(command: str) -> str | None:
    done = subprocess.run(["bash", "-n", "-c", command], text=True, capture_output=True)
    return None if done.returncode == 0 else f"bash -n: {done.stderr.strip()}"


def check_command(command: str, cwd: Path, targets: set[str]) -> str | None:
    """None when the command passes its check (see the module docstring), else why not."""
    words = _words(command)
    if words is None:
        return _bash_syntax(command)
    if PLACEHOLDER.search(" ".join(words)):
        return _bash_syntax(command.replace("<", "'<").replace(">", ">'"))
    argv = _moria_argv(words)
    if argv is not None:
        if not argv:
            return None
        if argv[0] == "tasks":
            done = _run_moria(argv, cwd)
            return None if done.returncode == 0 else f"exit {done.returncode}: {done.stderr[-500:]}"
        return _parse_moria(argv, cwd)
    if words and Path(words[0]).name in ("llm-worker", "vlm-worker") and "|" not in words:
        return _worker_parse(words)
    if words and words[0] == "make" and "&&" not in words:
        names = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
        unknown = [n for n in names if n not in targets]
        return f"no make target {unknown}" if unknown else None
    if len(words) >= 3 and Path(words[0]).name.startswith("python") and words[1] == "-m":
        import importlib.util

        try:
            found = importlib.util.find_spec(words[2])
        except ModuleNotFoundError:
            found = None
        return None if found is not None else f"no module {words[2]}"
    return _bash_syntax(command)


def test_every_documented_command(tmp_path: Path) -> None:
    commands = all_commands()
    assert len(commands) > 50, "the scan found too few commands: is the fence pattern right?"
    targets = _make_targets()
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    old = Path.cwd()
    os.chdir(cwd)  # relative paths of the commands resolve here, not at the repository root
    try:
        failures = [f"{where}: {command}\n    {why}" for where, command in commands
                    if (why := check_command(command, cwd, targets))]
    finally:
        os.chdir(old)
    assert not failures, "documented commands that fail their check:\n" + "\n".join(failures)


def test_help_of_every_documented_subcommand(tmp_path: Path) -> None:
    argvs = [argv for _, command in all_commands()
             if (words := _words(command)) and (argv := _moria_argv(words))]
    failures = []
    for argv in _help_commands(argvs):
        done = _run_moria(argv, tmp_path)
        if done.returncode != 0 or "usage:" not in done.stdout:
            failures.append(f"moria {' '.join(argv)}: exit {done.returncode} {done.stderr[-300:]}")
    assert not failures, "\n".join(failures)


#: What a dated figure looks like in prose.
DATED = [
    ("a date", re.compile(r"\b20\d\d-\d\d-\d\d\b")),
    ("a commit hash", re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")),
    ("a load average", re.compile(r"load average[^.|]{0,30}\d\.\d", re.IGNORECASE)),
    ("'measured on'", re.compile(r"measured on (?:\d|20|the \d)", re.IGNORECASE)),
]
TABLE_BLOCK = re.compile(r"<!-- table:([a-z0-9_]+) -->.*?<!-- /table:\1 -->", re.DOTALL)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the prose: code blocks and generated tables left out."""
    text = TABLE_BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    lines, in_code = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line.strip()):
            in_code = not in_code
            continue
        if not in_code:
            lines.append((number, line))
    return lines


def test_no_dated_figures_in_prose() -> None:
    found = []
    for path in documents():
        name = str(path.relative_to(REPO))
        if name in PROSE_EXEMPT:
            continue
        for number, line in prose_lines(path.read_text(encoding="utf-8")):
            for what, pattern in DATED:
                if pattern.search(line):
                    found.append(f"{name}:{number}: {what}: {line.strip()[:120]}")
    assert not found, ("dates, commit hashes or load averages in prose (put the figure in "
                       "benchmarks/results/ and show it as a generated table):\n"
                       + "\n".join(found))


def test_the_docs_index_lists_every_page() -> None:
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([^)#]+\.md)", index))
    pages = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")
             if p.name != "README.md" or p.parent != REPO / "docs"}
    assert pages - linked == set(), "docs/README.md does not list: " + ", ".join(
        sorted(pages - linked))


def test_the_checks_themselves() -> None:
    text = "x\n```bash\n# c\nmoria eval a=1 \\\n  b=2   # note\n```\n```\nnot a command\n```\n"
    assert shell_commands(text) == ["moria eval a=1  b=2   # note"]
    assert _moria_argv(shlex.split("moria eval a=1 # note", comments=True)) == ["eval", "a=1"]
    assert [n for _, n in prose_lines("a\n<!-- table:x -->\nat 1a2b3c4\n<!-- /table:x -->\nb")] \
        == ["a", "", "", "", "b"]
    assert DATED[1][1].search("at 58b9d85 it") and not DATED[1][1].search("deadbeef? no: 1234567")
