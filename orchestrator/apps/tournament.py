"""Round-robin tournaments of players on a two-player game, with win rates and ratings.

``moria tournament FILE.yaml [KEY=VALUE ...]`` reads a ``TournamentSpec``::

    env: pettingzoo
    task: connect_four_v3
    seeds: 10                  # games per pairing and seat order
    players:                   # name -> a run spec ``players`` entry (agent, client, ...)
      random: {agent: {type: random}}
      qwen: {agent: {type: naive}, client: {client_name: local}}
    eval: {num_workers: 4}     # optional: run spec ``eval`` keys (output_dir, seed, ...)
    envs: {}                   # optional: the env's options (``pettingzoo_kwargs``)
    seats: [player_0, player_1]  # optional: the two agent ids (default: the task's own)
    endpoints: {}              # optional: running servers, as in a run spec

Every pair of players meets in both seat orders. Each (pair, seat order) is one ordinary run
(``orchestrator.core.runner.run_evaluation``) into ``<out>/<first>_vs_<second>/``, with
``eval.num_episodes.<env> = seeds``. Episode seeds derive from the run seed, env, task and
index only, so every pairing plays the same seeds, and a rerun resumes: finished episodes are
kept. With no endpoints, one local stack (env and agent server) serves the whole tournament.

Results come from the episode files only (``stats.outcome`` per agent id). Games that did not
end normally (agent or env errors) are listed but count for nobody: they never enter the
standings, the matrix or the ratings. A game the step cap stopped before it ended is
``unfinished``: no result, so it counts for nobody either, but it is no failure; each
player's standing counts its unfinished games apart. Whether the tournament succeeded is decided by
``orchestrator.report.outcome`` over every match's episode records (``TournamentResult.verdict``):
``moria tournament`` exits 0 when every game was scored, 1 when any failed, naming how many
and the first distinct errors. The standings give games,
wins, draws, losses, the win rate (a draw counts half) with its 95% Wilson interval, and an
openskill Plackett-Luce rating (mu, sigma, ordinal = mu - 3 sigma) from the games fed in a
fixed order: by pairing, then seed, then seat order. ``tournament.json`` (every number and
every game) and ``tournament.md`` (the tables) go to the output directory.

Only two-player games are supported (env ``pettingzoo``); team games such as multigrid Soccer
are rejected with a message saying so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from rich.console import Console, Group
from rich.table import Table

from moria.config import ClientConfig
from moria.families import families
from moria.files import atomic_write_text
from orchestrator.apps.say import literal
from orchestrator.core.runner import PreflightError, run_evaluation
from orchestrator.core.stack import LocalStack
from orchestrator.plan.overrides import apply_overrides
from orchestrator.plan.spec import (
    EndpointsConfig,
    EnvsConfig,
    EvalConfig,
    PlayerConfig,
    RunSpec,
    TasksConfig,
    describe_errors,
)
from orchestrator.report.outcome import MAX_DISTINCT_ERRORS, RunVerdict, verdict
from orchestrator.report.ratings import (
    OUTCOME_SCORE,
    UNFINISHED,
    Rating,
    rate_games,
    wilson_interval,
)
from orchestrator.store.episodes import completed_keys, episode_paths, load_episodes
from orchestrator.suites import mosaic

#: Env families a tournament can run, with their tasks.
SUPPORTED_ENVS: Final[dict[str, list[str]]] = {
    env: tasks for env, tasks in mosaic.TASKS.items()
    if families()[env].report_kind == "two_player"}

#: The two agent ids of each task, first mover first (tasks not listed: player_0, player_1).
DEFAULT_SEATS: Final[dict[str, tuple[str, str]]] = {"tictactoe_v3": ("player_1", "player_2")}

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

#: ``eval`` keys the tournament sets itself.
_RESERVED_EVAL_KEYS: Final[frozenset[str]] = frozenset({"num_episodes", "num_samples"})


class TournamentSpecError(ValueError):
    """A tournament spec problem; the message names the key and what is allowed."""


class TournamentEval(EvalConfig):
    """The run spec ``eval`` section; ``output_dir`` defaults to
    ``results/tournament-<task>``, and ``num_episodes``/``num_samples`` are set by ``seeds``."""

    output_dir: str | None = None  # type: ignore[assignment]


class TournamentSpec(BaseModel):
    """A whole tournament (see the module docstring for the YAML form).

    Raises (on validation) pydantic ``ValidationError``; ``load_tournament`` turns it into a
    ``TournamentSpecError`` naming each key.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    env: str = "pettingzoo"
    task: str
    seeds: int = Field(default=10, ge=1, description="games per pairing and seat order")
    players: dict[str, PlayerConfig]
    eval: TournamentEval = Field(default_factory=TournamentEval)
    envs: dict[str, Any] = Field(default_factory=dict, description="the env's options")
    seats: list[str] | None = None
    endpoints: EndpointsConfig = Field(default_factory=EndpointsConfig)

    @field_validator("env")
    @classmethod
    def _supported_env(cls, value: str) -> str:
        if value not in SUPPORTED_ENVS:
            raise ValueError(
                f"env {value!r} is not supported by tournaments; supported: "
                + ", ".join(SUPPORTED_ENVS)
                + " (two-player games; team games such as multigrid Soccer are not supported)")
        return value

    @field_validator("players")
    @classmethod
    def _valid_players(cls, value: dict[str, PlayerConfig]) -> dict[str, PlayerConfig]:
        if len(value) < 2:
            raise ValueError(f"a tournament needs at least 2 players (got {len(value)})")
        for name, player in value.items():
            if not _NAME.match(name) or "_vs_" in name:
                raise ValueError(f"player name {name!r}: use letters, digits, '_', '-', '.' "
                                 "(not starting with a symbol, no '_vs_'); it names a folder")
            if player.agent is None:
                raise ValueError(f"player {name!r} has no agent section; give one, e.g. "
                                 "agent: {type: random}")
        return value

    @field_validator("seats")
    @classmethod
    def _two_seats(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (len(value) != 2 or value[0] == value[1] or not all(value)):
            raise ValueError(f"seats must be two different agent ids (got {value!r})")
        return value

    @field_validator("eval")
    @classmethod
    def _no_reserved_eval(cls, value: TournamentEval) -> TournamentEval:
        reserved = sorted(_RESERVED_EVAL_KEYS & value.model_fields_set)
        if reserved:
            raise ValueError(f"eval.{reserved[0]} is set by the tournament; use 'seeds' "
                             "(games per pairing and seat order) instead")
        return value

    @model_validator(mode="after")
    def _known_task(self) -> TournamentSpec:
        tasks = SUPPORTED_ENVS[self.env]
        if self.task not in tasks:
            raise ValueError(f"unknown task {self.task!r} for {self.env}; allowed: "
                             + ", ".join(tasks))
        return self

    @property
    def seat_ids(self) -> tuple[str, str]:
        """The two agent ids, first mover first."""
        if self.seats is not None:
            return (self.seats[0], self.seats[1])
        return DEFAULT_SEATS.get(self.task, ("player_0", "player_1"))

    @property
    def output_dir(self) -> Path:
        """Where the tournament writes (``eval.output_dir``, default
        ``results/tournament-<task>``)."""
        return Path(self.eval.output_dir or f"results/tournament-{self.task}")

    @property
    def player_names(self) -> list[str]:
        """The player names in spec order."""
        return list(self.players)


@dataclass(frozen=True)
class Match:
    """One (pairing, seat order): ``first`` plays the first seat, ``second`` the other.
    ``pairing`` is the pair in spec order."""

    pairing: tuple[str, str]
    first: str
    second: str

    @property
    def directory(self) -> str:
        """The run's folder name inside the tournament's output dir."""
        return f"{self.first}_vs_{self.second}"


@dataclass
class Game:
    """One game as read from its episode file. ``outcome`` maps player names to
    ``win``/``draw``/``loss`` (empty when the game did not end normally: then ``status`` says
    why and the game counts for nobody)."""

    pairing: tuple[str, str]
    seed_index: int
    seed: int | None
    seats: dict[str, str]
    status: str
    outcome: dict[str, str]
    steps: int
    episode_file: str
    error: str = ""

    @property
    def scored(self) -> bool:
        """True when the game counts (it ended normally with a result for both players)."""
        return bool(self.outcome)

    def as_json(self) -> dict[str, Any]:
        """The game as written in ``tournament.json``."""
        return {"pairing": list(self.pairing), "seed_index": self.seed_index, "seed": self.seed,
                "seats": self.seats, "status": self.status, "outcome": self.outcome,
                "steps": self.steps, "episode_file": self.episode_file, "error": self.error}


@dataclass
class Standing:
    """One player's line of the standings. ``win_rate`` and ``ci95`` are None without games."""

    name: str
    games: int
    wins: int
    draws: int
    losses: int
    unfinished: int
    win_rate: float | None
    ci95: tuple[float, float] | None
    rating: Rating
    rank: int = 0


@dataclass
class TournamentResult:
    """What ``run_tournament`` produced: standings (best first), the pairwise matrix
    (``matrix[a][b]``: games and win rate of ``a`` against ``b``), every game in rating order,
    the verdict over every match's episode records (``match_verdicts``: planned games, scored,
    failed by end reason, first distinct errors, each prefixed by ``<env>/<match
    folder>/<task>#<index>``), and how many episodes this invocation played (``ran``)."""

    spec: TournamentSpec
    standings: list[Standing]
    matrix: dict[str, dict[str, dict[str, Any]]]
    games: list[Game]
    ran: int = 0
    verdict: RunVerdict = field(default_factory=lambda: RunVerdict(planned=0, scored=0))

    @property
    def unscored(self) -> list[Game]:
        """Games without a result (they count for nobody): failed, or unfinished."""
        return [g for g in self.games if not g.scored]

    @property
    def succeeded(self) -> bool:
        """True when every game was played: the verdict succeeded and every game has a
        result for both players or was stopped unfinished by the step cap."""
        return self.verdict.succeeded and all(g.status == UNFINISHED for g in self.unscored)

    @property
    def exit_code(self) -> int:
        """``moria tournament``'s exit code: 0 when every game was scored, else 1."""
        return 0 if self.succeeded else 1

    def describe_failures(self) -> str:
        """The verdict's headline and first distinct errors, plus the games that ended
        normally but hold no result for both seats (``no_outcome``); empty when every game
        was scored."""
        if self.succeeded:
            return ""
        lines = [self.verdict.describe()]
        odd = [g for g in self.unscored if g.status == "no_outcome"]
        if odd:
            lines.append(f"{len(odd)} game(s) ended without a result for both seats:")
            lines += [f"  {g.episode_file}: {g.error}" for g in odd[:MAX_DISTINCT_ERRORS]]
        return "\n".join(lines)


# -- loading ----------------------------------------------------------------------------------
def load_tournament(path: str | Path, overrides: list[str] | None = None) -> TournamentSpec:
    """Load a TournamentSpec from a YAML/JSON file plus dotted ``key=value`` overrides.

    Raises TournamentSpecError naming the offending key and the allowed keys or values.
    """
    p = Path(path)
    if not p.is_file():
        raise TournamentSpecError(f"tournament file not found: {p}")
    try:
        loaded = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise TournamentSpecError(f"{p}: not valid YAML: {exc}") from None
    if not isinstance(loaded, dict):
        raise TournamentSpecError(f"{p}: the top level must be a mapping with keys "
                                  + ", ".join(TournamentSpec.model_fields))
    data = apply_overrides(loaded, overrides or [])
    try:
        spec = TournamentSpec.model_validate(data)
    except ValidationError as exc:
        raise TournamentSpecError(
            describe_errors(exc, TournamentSpec, "tournament spec")) from None
    return resolve_checkpoints(spec, p.parent)


#: What a checkpoint file is expected to be (the agent server checks its content at Begin).
CHECKPOINT_KIND = "a moria-mlp .npz policy file (docs/rl-checkpoints.md)"


def resolve_checkpoints(spec: TournamentSpec, spec_dir: Path | None = None) -> TournamentSpec:
    """Every player's ``agent.checkpoint`` made absolute and checked to be a file, before any
    game, so a wrong path stops the tournament before match 1 instead of at the first match
    that seats that player. A relative path is looked for from the current directory first,
    then from ``spec_dir`` (the tournament file's folder): the README's
    ``examples/checkpoints/...`` paths work from the repository root, or from a spec file
    kept there. With ``endpoints``, paths name files of those servers and are left as given.

    Returns ``spec``, changed in place. Raises TournamentSpecError naming each missing path
    (its dotted key, the path as given and every place looked).
    """
    if spec.endpoints.configured:
        return spec
    problems = []
    for name, player in spec.players.items():
        agent = player.agent
        if agent is None or not agent.checkpoint:
            continue
        given = Path(agent.checkpoint).expanduser()
        bases = [Path.cwd()] if given.is_absolute() else [
            Path.cwd(), *([spec_dir.resolve()] if spec_dir is not None else [])]
        looked = list(dict.fromkeys((base / given).resolve() for base in bases))
        found = next((path for path in looked if path.is_file()), None)
        if found is not None:
            agent.checkpoint = str(found)
            continue
        problems.append(
            f"players.{name}.agent.checkpoint: no file {agent.checkpoint!r}; looked for "
            + " and ".join(str(path) for path in looked) + f" (expected {CHECKPOINT_KIND}; "
            "a relative path is taken from the current directory, then from the tournament "
            "file's folder)")
    if problems:
        raise TournamentSpecError("\n".join(problems))
    return spec


# -- scheduling -------------------------------------------------------------------------------
def schedule(spec: TournamentSpec) -> list[Match]:
    """Every pairing (in spec order) in both seat orders: (a, b) then (b, a)."""
    names = spec.player_names
    matches = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            matches.append(Match((a, b), a, b))
            matches.append(Match((a, b), b, a))
    return matches


def run_spec_for(spec: TournamentSpec, match: Match,
                 endpoints: EndpointsConfig | None = None) -> RunSpec:
    """The RunSpec of one match: its two seats, ``seeds`` episodes, the tournament's eval and
    env options, output in ``<out>/<first>_vs_<second>``. ``endpoints`` replaces the spec's own
    (the tournament's shared local stack)."""
    seat_a, seat_b = spec.seat_ids
    first, second = spec.players[match.first], spec.players[match.second]
    assert first.agent is not None  # checked by the spec
    evaluation = spec.eval.model_dump(exclude={"output_dir", "num_episodes", "num_samples"})
    return RunSpec(
        agent=first.agent, client=first.client or ClientConfig(),
        eval=EvalConfig(**evaluation, output_dir=str(spec.output_dir / match.directory),
                        num_episodes={spec.env: spec.seeds}),
        envs=EnvsConfig(names=spec.env, **{f"{spec.env}_kwargs": dict(spec.envs)}),
        tasks=TasksConfig(**{f"{spec.env}_tasks": [spec.task]}),
        endpoints=endpoints or spec.endpoints,
        players={seat_a: first, seat_b: second})


def pending_matches(spec: TournamentSpec) -> list[Match]:
    """The matches with episodes still to play (no file, or one that did not end normally)."""
    out = []
    for match in schedule(spec):
        run = run_spec_for(spec, match)
        done = completed_keys(run.eval.output_dir)
        if any(key not in done for key in run.episodes()):
            out.append(match)
    return out


async def run_tournament(spec: TournamentSpec, *, console: Console | None = None,
                         show_progress: bool = True) -> TournamentResult:
    """Play (or resume) every match, then compute and write the results.

    Matches run one after another, each with ``eval.num_workers`` games in flight. With no
    endpoints one local stack serves every match; it is started only when a game is left to
    play. Returns the TournamentResult; ``tournament.json`` and ``tournament.md`` are written.

    Raises:
        orchestrator.core.runner.PreflightError: a player's checkpoint file does not exist
            (before any game), or a server rejects a player's config or the seats.
        orchestrator.core.stack.StackError: a local server failed.
    """
    console = console or Console(stderr=True, soft_wrap=True)
    try:  # every player's file, before match 1 (load_tournament checked them too)
        resolve_checkpoints(spec)
    except TournamentSpecError as exc:
        raise PreflightError(str(exc)) from None
    out = spec.output_dir
    out.mkdir(parents=True, exist_ok=True)
    todo = pending_matches(spec)
    ran = 0

    async def play(endpoints: EndpointsConfig | None, check: Callable[[], None]) -> None:
        nonlocal ran
        for n, match in enumerate(todo, 1):
            console.print(literal(f"match {n}/{len(todo)}: {match.first} ({spec.seat_ids[0]}) vs "
                                f"{match.second} ({spec.seat_ids[1]})"))
            outcome = await run_evaluation(run_spec_for(spec, match, endpoints),
                                           console=console, show_progress=show_progress)
            check()
            ran += outcome.ran

    if todo and not spec.endpoints.configured:
        async with LocalStack([spec.env], out / "logs",
                              env_capacity=max(64, spec.eval.num_workers * 2)) as stack:
            shared = EndpointsConfig(env={spec.env: [stack.env_target]},
                                     policy=[stack.policy_target])
            await play(shared, stack.check_alive)
    elif todo:
        await play(None, lambda: None)
    result = collect_results(spec)
    result.ran = ran
    write_results(result)
    return result


# -- results ----------------------------------------------------------------------------------
def collect_results(spec: TournamentSpec) -> TournamentResult:
    """Read every game's episode file and compute standings, matrix and ratings.

    Games are ordered by pairing, then seed index, then seat order, and fed to the ratings in
    that order. A missing or unreadable file, or a game that did not end normally, is kept
    with its ``status`` and counts for nobody. The result's ``verdict`` is
    ``tournament_verdict``.
    """
    matches = schedule(spec)
    by_pairing: dict[tuple[str, str], list[Match]] = {}
    for match in matches:
        by_pairing.setdefault(match.pairing, []).append(match)
    games: list[Game] = []
    for orders in by_pairing.values():
        for index in range(spec.seeds):
            for match in orders:
                run_dir = spec.output_dir / match.directory
                path = episode_paths(run_dir, spec.env, spec.task, index)[0]
                games.append(_read_game(spec, match, index, path))
    names = spec.player_names
    ratings = rate_games(names, ((g.pairing[0], g.pairing[1],
                                  OUTCOME_SCORE[g.outcome[g.pairing[0]]])
                                 for g in games if g.scored))
    standings = [_standing(name, games, ratings[name]) for name in names]
    standings.sort(key=lambda s: -s.rating.ordinal)  # stable: spec order breaks ties
    for rank, standing in enumerate(standings, 1):
        standing.rank = rank
    return TournamentResult(spec=spec, standings=standings, matrix=_matrix(names, games),
                            games=games, verdict=tournament_verdict(spec))


def tournament_verdict(spec: TournamentSpec) -> RunVerdict:
    """``orchestrator.report.outcome.verdict`` over every match's episode records, for every planned
    game of every match. Each game is named ``<env>/<match folder>/<task>#<index>`` (its
    match's records are relabelled so that the same seed index of two matches stays two
    games), so distinct errors are counted over the whole tournament."""
    records = []
    planned: list[tuple[str, str, int]] = []
    for match in schedule(spec):
        run = run_spec_for(spec, match)
        prefix = f"{match.directory}/"
        records += [r.model_copy(update={"task": prefix + r.task})
                    for r in load_episodes(run.eval.output_dir)]
        planned += [(env, prefix + task, index) for env, task, index in run.episodes()]
    return verdict(records, planned)


def _read_game(spec: TournamentSpec, match: Match, index: int, path: Path) -> Game:
    seat_a, seat_b = spec.seat_ids
    seats = {seat_a: match.first, seat_b: match.second}

    def game(status: str, seed: int | None = None, steps: int = 0, error: str = "",
             outcome: dict[str, str] | None = None) -> Game:
        return Game(pairing=match.pairing, seed_index=index, seed=seed, seats=seats,
                    status=status, outcome=outcome or {}, steps=steps,
                    episode_file=str(path.relative_to(spec.output_dir)), error=error)

    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return game("missing")
    except (OSError, ValueError) as exc:
        return game("unreadable", error=f"{type(exc).__name__}: {exc}")
    seed, steps = data.get("seed"), int(data.get("num_steps", 0))
    reason = str(data.get("end_reason", ""))
    if reason not in ("terminated", "truncated"):
        return game(reason or "unknown", seed, steps, str(data.get("error", "")))
    raw = (data.get("stats") or {}).get("outcome") or {}
    outcome = {player: str(raw.get(agent_id)) for agent_id, player in seats.items()}
    if set(outcome.values()) == {UNFINISHED}:
        return game(UNFINISHED, seed, steps, "the step cap stopped the game before it ended")
    if any(value not in OUTCOME_SCORE for value in outcome.values()):
        return game("no_outcome", seed, steps,
                    f"stats.outcome {raw!r} has no result for seats {seat_a}, {seat_b}")
    return game(reason, seed, steps, outcome=outcome)


def _standing(name: str, games: list[Game], rating: Rating) -> Standing:
    results = [g.outcome[name] for g in games if g.scored and name in g.outcome]
    wins, draws, losses = (results.count(r) for r in ("win", "draw", "loss"))
    played = len(results)
    score = wins + 0.5 * draws
    unfinished = sum(1 for g in games if g.status == UNFINISHED and name in g.seats.values())
    return Standing(name=name, games=played, wins=wins, draws=draws, losses=losses,
                    unfinished=unfinished,
                    win_rate=score / played if played else None,
                    ci95=wilson_interval(score, played) if played else None, rating=rating)


def _matrix(names: list[str], games: list[Game]) -> dict[str, dict[str, dict[str, Any]]]:
    matrix: dict[str, dict[str, dict[str, Any]]] = {}
    for a in names:
        row: dict[str, dict[str, Any]] = {}
        for b in names:
            if a == b:
                continue
            results = [g.outcome[a] for g in games if g.scored and set(g.outcome) == {a, b}]
            score = sum(OUTCOME_SCORE[r] for r in results)
            row[b] = {"games": len(results), "wins": results.count("win"),
                      "draws": results.count("draw"), "losses": results.count("loss"),
                      "win_rate": score / len(results) if results else None}
        matrix[a] = row
    return matrix


def result_document(result: TournamentResult) -> dict[str, Any]:
    """``tournament.json``'s content: the setup, standings, matrix and every game. It holds no
    time or count of this invocation, so a rerun that plays nothing writes the same bytes."""
    spec = result.spec
    try:
        version = metadata.version("openskill")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {
        "env": spec.env, "task": spec.task, "seeds": spec.seeds, "run_seed": spec.eval.seed,
        "seats": list(spec.seat_ids), "players": spec.player_names,
        "rating_model": {"name": "openskill.models.PlackettLuce", "version": version,
                         "ordinal": "mu - 3 * sigma",
                         "order": "pairing, then seed index, then seat order"},
        "standings": [{"rank": s.rank, "player": s.name, "games": s.games, "wins": s.wins,
                       "draws": s.draws, "losses": s.losses, "unfinished": s.unfinished,
                       "win_rate": s.win_rate,
                       "ci95": list(s.ci95) if s.ci95 else None, "mu": s.rating.mu,
                       "sigma": s.rating.sigma, "ordinal": s.rating.ordinal}
                      for s in result.standings],
        "matrix": result.matrix,
        "games": [g.as_json() for g in result.games],
        "unscored_games": len(result.unscored),
        "outcome": {**result.verdict.as_json(), "state": "succeeded" if result.succeeded
                    else "failed", "exit_code": result.exit_code},
    }


def write_results(result: TournamentResult) -> tuple[Path, Path]:
    """Write ``tournament.json`` and ``tournament.md`` atomically; return both paths."""
    out = result.spec.output_dir
    json_path = atomic_write_text(out / "tournament.json",
                                  json.dumps(result_document(result), indent=2) + "\n")
    md_path = atomic_write_text(out / "tournament.md", render_markdown(result))
    return json_path, md_path


# -- rendering --------------------------------------------------------------------------------
def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ci(value: tuple[float, float] | None) -> str:
    return "-" if value is None else f"[{value[0]:.3f}, {value[1]:.3f}]"


def _standing_cells(s: Standing) -> list[str]:
    return [str(s.rank), s.name, str(s.games), str(s.wins), str(s.draws), str(s.losses),
            str(s.unfinished), _rate(s.win_rate), _ci(s.ci95), f"{s.rating.mu:.2f}",
            f"{s.rating.sigma:.2f}", f"{s.rating.ordinal:.2f}"]


_STANDING_HEADERS = ["#", "player", "games", "W", "D", "L", "unfinished", "win rate", "95% CI",
                     "mu", "sigma", "ordinal"]


def _matrix_cell(cell: dict[str, Any]) -> str:
    return "-" if cell["win_rate"] is None else f"{cell['win_rate']:.3f} ({cell['games']})"


def render_tables(result: TournamentResult) -> Group:
    """The standings and the pairwise win-rate matrix as rich tables."""
    spec = result.spec
    standings = Table(title=f"{spec.env}:{spec.task}: {len(spec.players)} players, "
                            f"{spec.seeds} seed(s) per pairing and seat order")
    for header in _STANDING_HEADERS:
        standings.add_column(header, justify="left" if header == "player" else "right")
    for s in result.standings:
        standings.add_row(*_standing_cells(s))
    names = [s.name for s in result.standings]
    matrix = Table(title="win rate of the row player against the column player (games)")
    matrix.add_column("")
    for name in names:
        matrix.add_column(name, justify="right")
    for a in names:
        matrix.add_row(a, *("" if a == b else _matrix_cell(result.matrix[a][b]) for b in names))
    return Group(standings, matrix)


def render_markdown(result: TournamentResult) -> str:
    """``tournament.md``: the setup, the standings and the matrix as Markdown tables."""
    spec = result.spec
    names = [s.name for s in result.standings]
    lines = [f"# Tournament: {spec.env}:{spec.task}", "",
             f"{len(spec.players)} players, {spec.seeds} seed(s) per pairing and seat order "
             f"(seats {spec.seat_ids[0]}, {spec.seat_ids[1]}), run seed {spec.eval.seed}. "
             "Win rate counts a draw as half; 95% Wilson interval; openskill Plackett-Luce "
             "rating, ordinal = mu - 3 sigma.", "",
             "## Standings", "",
             "| " + " | ".join(_STANDING_HEADERS) + " |",
             "|" + "|".join("---" for _ in _STANDING_HEADERS) + "|"]
    lines += ["| " + " | ".join(_standing_cells(s)) + " |" for s in result.standings]
    lines += ["", "## Win rate of the row player against the column player (games)", "",
              "| | " + " | ".join(names) + " |", "|---|" + "|".join("---" for _ in names) + "|"]
    for a in names:
        cells = ["" if a == b else _matrix_cell(result.matrix[a][b]) for b in names]
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    if result.unscored:
        lines += ["", f"{len(result.unscored)} game(s) did not end normally and count for "
                  "nobody (see tournament.json; rerun to retry them)."]
        if result.verdict.errors:
            lines += ["", "First distinct errors:", ""]
            lines += [f"- {error}" for error in result.verdict.errors]
    return "\n".join(lines) + "\n"
