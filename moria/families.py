"""What every game family declares about itself: its manifest, and the generated table of them.

Each family folder under ``env_server/families/`` has a ``manifest.py`` whose ``MANIFESTS`` list
holds one :class:`FamilyManifest` per family it hosts: where its ``Family`` class lives, the
suites it belongs to (with their default tasks and episodes per task), the oracle player that
records demonstrations, the seed cycle, the data ``moria prepare`` builds, the report kind, the
pyproject extra and the container image. The env server discovers families from those files.

Everything outside ``env_server`` (the orchestrator, the workers, the CLI) reads the same facts
from ``moria/families.json``, generated from the manifests by
``python -m env_server.families`` (``--check`` in ``make test`` keeps it current), so
it never imports ``env_server`` to learn a family fact. :func:`families` loads that table.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from moria.family_options import OptionSpec, schema_from_json, schema_json

#: The generated table (package data of ``moria``).
TABLE_PATH = Path(__file__).with_name("families.json")

ReportKind = Literal["single_agent", "team", "two_player"]


@dataclass(frozen=True)
class SuiteEntry:
    """A family's place in a named suite (``balrog``, ``mosaic``): its position in the suite's
    env order, its default tasks and how many episodes each task gets by default."""

    position: int
    default_tasks: tuple[str, ...]
    episodes_per_task: int


@dataclass(frozen=True)
class BalrogReference:
    """How BALROG's own code names a family, for ``agent.protocol=balrog`` and ``moria
    protocol-check``: ``env`` is BALROG's env name (its ``config.envs.names`` entry), ``package``
    the module under BALROG's ``environments/`` that holds its instructions, ``check_task`` the
    task ``moria protocol-check`` plays by default."""

    env: str
    package: str
    check_task: str


@dataclass(frozen=True)
class FamilyManifest:
    """One family's facts.

    ``name``: the env name used everywhere (run specs, task ids ``<name>:<task>``, results).
    ``entry_point``: ``module:Class`` of its ``Family`` (imported only by the env server).
    ``suites``: suite name -> :class:`SuiteEntry`. ``oracle_source``: the name demonstrations
    recorded by its oracle player carry (None: no oracle). ``seed_cycle``: n when an episode's
    seed picks one of n fixed games by ``seed mod n`` (TextWorld's 25), else None.
    ``prepare``: the names of its data sources, which ``moria prepare`` builds (``moria prepare
    --env SOURCE``); each is defined in the family folder's ``prepare.py`` (``SOURCES``).
    ``report_kind``: how its results are summarised. ``extra``: the pyproject extra that
    installs it. ``image``: its container image name (``deploy/docker/<image>``).
    ``balrog_text``: its observation text changed between BALROG commits, so under
    ``agent.protocol=balrog`` it is given the checkout (option ``balrog_source``) and writes the
    text with that checkout's code. ``default_options``: the run spec's default
    ``envs.<name>_kwargs`` (BALROG's, where it sets some); ``options_help``: one line on the
    options worth knowing (the family itself rejects an unknown key with the allowed list).
    ``id_prefixes``: how an environment id names this family (an id starting with one of
    them; every id ``moria tasks`` lists for it starts with one, so a BALROG worker config's
    ``environment`` and ``llm-worker --env`` accept them: :func:`resolve_environment`).
    ``aliases``: other names that stand for the whole family.
    ``balrog``: how BALROG's code names it (:class:`BalrogReference`; None: not a BALROG env).
    ``server_env``: family option -> environment variable of the env server that sets the same
    thing server-wide, for options a server must know before any open (``ListTasks`` takes no
    options): when a run gives such an option and ``moria`` starts the env server itself, the
    server gets the variable (:func:`server_environment`). ``replay_refusal``: why its
    episodes cannot be replayed from their seed and actions (``moria replay``); "" when they
    can (the game is deterministic given the seed and the actions).
    """

    name: str
    entry_point: str
    suites: dict[str, SuiteEntry] = field(default_factory=dict)
    oracle_source: str | None = None
    seed_cycle: int | None = None
    prepare: tuple[str, ...] = ()
    report_kind: ReportKind = "single_agent"
    extra: str = ""
    image: str = ""
    balrog_text: bool = False
    default_options: dict[str, Any] = field(default_factory=dict)
    options_help: str = ""
    id_prefixes: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    balrog: BalrogReference | None = None
    server_env: dict[str, str] = field(default_factory=dict)
    options: dict[str, OptionSpec] = field(default_factory=dict)
    player_options: dict[str, OptionSpec] = field(default_factory=dict)
    replay_refusal: str = ""

    def as_json(self) -> dict[str, Any]:
        """The JSON form stored in ``families.json``."""
        data = asdict(self)
        data["options"] = schema_json(self.options)
        data["player_options"] = schema_json(self.player_options)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FamilyManifest:
        """Parse :meth:`as_json`'s form. Raises KeyError/TypeError on a malformed entry."""
        suites = {name: SuiteEntry(int(s["position"]), tuple(s["default_tasks"]),
                                   int(s["episodes_per_task"]))
                  for name, s in data.get("suites", {}).items()}
        return cls(name=data["name"], entry_point=data["entry_point"], suites=suites,
                   oracle_source=data.get("oracle_source"), seed_cycle=data.get("seed_cycle"),
                   prepare=tuple(data.get("prepare", ())), report_kind=data["report_kind"],
                   extra=data.get("extra", ""), image=data.get("image", ""),
                   balrog_text=bool(data.get("balrog_text", False)),
                   default_options=dict(data.get("default_options", {})),
                   options_help=str(data.get("options_help", "")),
                   id_prefixes=tuple(data.get("id_prefixes", ())),
                   aliases=tuple(data.get("aliases", ())),
                   balrog=BalrogReference(**data["balrog"]) if data.get("balrog") else None,
                   server_env={str(k): str(v)
                               for k, v in dict(data.get("server_env", {})).items()},
                   options=schema_from_json(data.get("options", {})),
                   player_options=schema_from_json(data.get("player_options", {})),
                   replay_refusal=str(data.get("replay_refusal", "")))


def table_text(manifests: list[FamilyManifest]) -> str:
    """The ``families.json`` text for ``manifests`` (sorted by name, stable formatting)."""
    rows = [m.as_json() for m in sorted(manifests, key=lambda m: m.name)]
    return json.dumps({"families": rows}, indent=1, sort_keys=True) + "\n"


@functools.cache
def families() -> dict[str, FamilyManifest]:
    """Every family's manifest, by name, from the generated table.

    Raises FileNotFoundError / ValueError when the table is missing or malformed (regenerate
    it with ``python -m env_server.families``)."""
    data = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
    return {row["name"]: FamilyManifest.from_json(row) for row in data["families"]}


def server_environment(options_by_env: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The environment variables an env server started for a run needs: for each env's options
    (``envs.<env>_kwargs``) that its manifest lists in ``server_env``, the variable set to the
    option's value (as text). Unknown envs and options not listed give nothing."""
    table = families()
    found = {}
    for env, options in options_by_env.items():
        manifest = table.get(env)
        for option, variable in (manifest.server_env.items() if manifest else ()):
            value = options.get(option)
            if value is not None and value != "":
                found[variable] = str(value)
    return found


def suite_envs(suite: str) -> tuple[str, ...]:
    """The envs of ``suite``, in the suite's order (empty for an unknown suite)."""
    members = [(m.suites[suite].position, m.name) for m in families().values()
               if suite in m.suites]
    return tuple(name for _, name in sorted(members))


def suite_entry(env: str) -> SuiteEntry | None:
    """The first suite entry of ``env`` (an env belongs to at most one suite today), or None."""
    manifest = families().get(env)
    if manifest is None or not manifest.suites:
        return None
    return next(iter(manifest.suites.values()))


def default_tasks(env: str) -> list[str]:
    """The default tasks of ``env`` (its suite's), or [] for an env in no suite."""
    entry = suite_entry(env)
    return list(entry.default_tasks) if entry else []


def episodes_per_task(env: str) -> int | None:
    """Default episodes per task of ``env``, or None for an env in no suite."""
    entry = suite_entry(env)
    return entry.episodes_per_task if entry else None


def seed_cycles() -> dict[str, int]:
    """env -> n for the envs whose seed picks one of n fixed games."""
    return {name: m.seed_cycle for name, m in families().items() if m.seed_cycle}


def family_of_id(environment: str) -> str | None:
    """The family an environment id (``MiniHack-River-v0``, ``env/goto_win``) belongs to, by the
    manifests' ``id_prefixes`` (the longest matching prefix wins), or None."""
    matches = [(len(prefix), name) for name, m in families().items() for prefix in m.id_prefixes
               if environment.startswith(prefix)]
    return max(matches)[1] if matches else None


def id_prefixes() -> list[str]:
    """Every id prefix the manifests declare, sorted (for error messages)."""
    return sorted(p for m in families().values() for p in m.id_prefixes)


def env_aliases() -> dict[str, str]:
    """alias -> family name, from the manifests' ``aliases``."""
    return {alias: name for name, m in families().items() for alias in m.aliases}


def family_names() -> dict[str, str]:
    """Every name that stands for a whole family -> the family: its own name, its ``aliases``
    and the name BALROG's code gives it (``balrog.env``)."""
    names = {name: name for name in families()}
    for name, m in families().items():
        for other in (*m.aliases, *((m.balrog.env,) if m.balrog else ())):
            names.setdefault(other, name)
    return names


def suite_tasks(env: str) -> tuple[str, ...]:
    """Every task ``env``'s suites name (the tasks this table knows; the env server knows
    more, e.g. every BabyAI and MiniGrid level)."""
    manifest = families().get(env)
    if manifest is None:
        return ()
    return tuple(dict.fromkeys(t for s in manifest.suites.values() for t in s.default_tasks))


class UnknownEnvironmentError(ValueError):
    """A name that names no family or task; the message says which forms are accepted."""


@dataclass(frozen=True)
class EnvironmentRef:
    """What an environment name stands for: a family and one task of it (``task`` None: the
    whole family, that is its default tasks)."""

    family: str
    task: str | None


def resolve_environment(name: str) -> EnvironmentRef:
    """The family (and task) an environment name stands for, wherever a user names one (a
    BALROG worker config's ``environment``, ``llm-worker --env``). Accepted, tried in order:

    1. a family name, an alias or BALROG's env name (``crafter``, ``minigrid``, ``nle``): the
       whole family;
    2. ``<family>/<task>`` or ``<family>:<task>`` (``crafter/default``): that task, read by
       :func:`resolve_task`;
    3. a task a suite names (``default``, ``env/goto_win``), when one family has it;
    4. an id starting with a family's ``id_prefixes`` (``MiniGrid-DoorKey-5x5-v0``,
       ``MiniHack-River-v0``; the longest prefix wins): that id, as the env server lists it;
    5. a suite task without its family's id prefix (BabaIsAI's bare ``goto_win``).

    Raises UnknownEnvironmentError naming the accepted forms.
    """
    text = name.strip()
    names = family_names()
    if text in names:
        return EnvironmentRef(names[text], None)
    for sep in (":", "/"):
        head, found, rest = text.partition(sep)
        if found and rest and head in names:
            return EnvironmentRef(names[head], resolve_task(names[head], rest))
    listed = [env for env in families() if text in suite_tasks(env)]
    if len(listed) == 1:
        return EnvironmentRef(listed[0], text)
    prefixed = family_of_id(text)
    if prefixed is not None:
        return EnvironmentRef(prefixed, text)
    bare = _unprefixed(text)
    if len(bare) == 1:
        return bare[0]
    forms = ", ".join(f"{prefix}..." for prefix in id_prefixes())
    raise UnknownEnvironmentError(
        f"{name!r} names no env family or task Moria hosts; accepted: a family "
        f"({', '.join(sorted(names))}), <family>/<task>, or a task id as `moria tasks` "
        f"lists it (ids start with: {forms})")


def resolve_task(family: str, task: str) -> str | None:
    """``task`` as ``family``'s env server lists it: a leading ``<family>/`` or ``<family>:``
    (any of its names) is dropped, a suite task may omit the family's id prefix (``goto_win``
    for ``env/goto_win``), and a name of the family itself means its default tasks (None).
    Anything else is returned as given, for the env server to check (it knows every task).

    Raises UnknownEnvironmentError when ``task`` is prefixed with another family's name."""
    text = task.strip()
    names = family_names()
    for sep in (":", "/"):
        head, found, rest = text.partition(sep)
        if found and rest and head in names:
            if names[head] != family:
                raise UnknownEnvironmentError(
                    f"task {task!r} belongs to env {names[head]!r}, not {family!r}")
            text = rest
            break
    if names.get(text) == family:
        return None
    if text in suite_tasks(family):
        return text
    completed = [ref.task for ref in _unprefixed(text) if ref.family == family]
    return completed[0] if completed else text


def _unprefixed(text: str) -> list[EnvironmentRef]:
    """The suite tasks that are ``text`` behind one of their family's path-like id prefixes
    (ending in ``/``: BabaIsAI's ``env/``); a prefix that is the start of a word, such as
    ``commons_harvest__``, is not dropped (``open`` is no task name)."""
    return [EnvironmentRef(env, prefix + text) for env, m in families().items()
            for prefix in m.id_prefixes
            if prefix.endswith("/") and prefix + text in suite_tasks(env)]


def balrog_text_envs() -> frozenset[str]:
    """The envs whose text follows the BALROG checkout under ``agent.protocol=balrog``."""
    return frozenset(name for name, m in families().items() if m.balrog_text)


def oracle_sources() -> dict[str, str]:
    """env -> the source name of its oracle's demonstrations, for envs with an oracle."""
    return {name: m.oracle_source for name, m in families().items() if m.oracle_source}


def balrog_references() -> dict[str, BalrogReference]:
    """env name -> how BALROG's code names it, for every BALROG env, in BALROG's suite order."""
    table = families()
    return {env: ref for env in suite_envs("balrog")
            if (ref := table[env].balrog) is not None}
