"""RunSpec: the validated configuration of one evaluation run.

Sections follow BALROG's ``config.yaml`` (agent, client, eval, envs, tasks) so BALROG command
lines carry over (``eval.num_episodes.babyai=2``, ``envs.names=babyai``,
``tasks.babyai_tasks=[...]``). Moria adds ``eval.seed`` (every episode seed is derived from it),
``eval.max_concurrent_model_calls`` and ``endpoints`` (use running servers instead of the local
stack).

Loading: YAML/JSON file, then dotted ``key=value`` overrides in Hydra's syntax (see
``orchestrator.plan.overrides``). Any unknown key or bad value raises ``SpecError`` naming the
key and what is allowed.
"""

from __future__ import annotations

import functools
import types
import typing
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from moria.backends import BY_NAME as BACKENDS_BY_NAME
from moria.config import NON_MODEL_AGENT_TYPES, AgentConfig, ClientConfig
from moria.cores import available_cores
from moria.families import FamilyManifest, default_tasks, families
from moria.family_options import OptionError, check_options
from moria.grpc_defaults import DEFAULT_MAX_MESSAGE_MB
from moria.quoting import quote, quote_names
from moria.security import TlsConfig
from moria.server_files import INSTALLED, names_a_model_file
from orchestrator.plan.overrides import apply_overrides
from orchestrator.plan.worker_config import (
    WorkerConfigError,
    is_worker_config,
    worker_spec_data,
)
from orchestrator.suites import balrog, mosaic

#: Env families the orchestrator knows how to evaluate, with their episodes per task (BALROG's
#: for its six envs).
DEFAULT_NUM_EPISODES: dict[str, int] = {**balrog.EPISODES_PER_TASK, **mosaic.EPISODES_PER_TASK}

#: The most episodes one run may plan (all envs together). A larger spec is refused before
#: anything is planned; split it into several runs.
MAX_EPISODES: Final[int] = 1_000_000
#: The most values (mapping entries, list items and scalars, counted over every level) and the
#: deepest nesting a run spec may have before it is validated: the largest real spec has a few
#: hundred values, and a bound keeps one request from costing the validator seconds.
MAX_SPEC_VALUES: Final[int] = 20_000
MAX_SPEC_DEPTH: Final[int] = 32
#: How many validation problems one error message lists (the rest are counted), and about how
#: many characters the listed ones may take together.
MAX_LISTED_ERRORS: Final[int] = 20
MAX_ERROR_MESSAGE_CHARS: Final[int] = 2000


class SpecError(ValueError):
    """A run spec problem; the message names the key and the allowed values."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EvalConfig(_Strict):
    """How many episodes, how concurrently, where results go (BALROG ``eval`` section)."""

    output_dir: str = "results"
    num_workers: int = Field(default=16, ge=1, description="episodes in flight")
    num_episodes: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_NUM_EPISODES))
    max_steps_per_episode: int | None = Field(default=None, ge=1)
    feedback_on_invalid_action: bool = True
    save_trajectories: bool = True
    save_images: bool = False
    seed: int = Field(default=0, ge=0, description="run seed; episode seeds derive from it")
    run_id: str | None = None
    max_concurrent_model_calls: int | None = Field(
        default=None, ge=1,
        description="cap on the run's in-flight model calls (all policy replicas together); "
                    "unset: no cap beyond eval.num_workers episodes in flight (a default cap "
                    "would throttle a run silently; client.max_concurrency caps one backend)")
    max_episode_retries: int = Field(default=2, ge=0,
                                     description="re-queues after infrastructure faults")
    step_timeout_s: float = Field(
        default=900.0, gt=0,
        description="deadline of one env step, the players' decisions included (seconds); a "
                    "step past it is a fault: the episode is re-queued on a new session")
    episode_timeout_s: float | None = Field(
        default=21600.0, gt=0,
        description="deadline of a whole episode (seconds; null: none); an episode past it "
                    "ends as env_error and is played again on the next resume")
    oracle_hints: bool = Field(default=False,
                               description="open env sessions with the oracle option")
    icl_episodes: int = Field(
        default=1, ge=0,
        description="few_shot: demonstration episodes shown before each episode (taken from "
                    "the demos recorded by `moria record-demos` for the same env and task)")
    icl_dataset: str | None = Field(
        default=None,
        description="few_shot: folder of recorded demos (default: <cache>/demos)")
    save_prompts: bool = Field(
        default=False,
        description="save the exact prompt sent at every step next to the episode file "
                    "(<task>_run_<NN>.prompts.jsonl) so a result can be audited")
    prices: str | dict[str, Any] | None = Field(
        default=None,
        description="price table for the cost estimate: a YAML file path, or the table "
                    "inline ({as_of, currency, models: {name: {input, output, cached_input}}}); "
                    "default: the one shipped in orchestrator/suites/prices.yaml. A run submitted "
                     "to "
                    "the orchestrator service takes an inline table or a file name under the "
                    "service's --prices-dir")
    max_cost_usd: float | None = Field(
        default=None, gt=0,
        description="hard cap on the run's model spending, US dollars (priced with "
                    "eval.prices): each model call's worst case is reserved before it is sent "
                    "and a call that would pass the cap is not sent; its episode ends as "
                    "budget_exhausted (not scored; played by a resume with a higher cap). "
                    "Unset: no cap")
    num_samples: int | None = Field(
        default=None, ge=1,
        description="cap on episodes per env for development runs (the MOSAIC harness's "
                    "--num_samples); episodes are taken round-robin over the env's tasks")
    local_servers: int | Literal["auto"] = Field(
        default="auto",
        description="the local stack (no endpoints): how many env servers and how many policy "
                    "servers `moria eval` starts, episodes spread over them; 'auto': a quarter "
                    "of the cores (a container's CPU quota counted) each, at least 1, one "
                    "policy server for a model run in process (local_server_counts); a number "
                    ">= 1: that many of each. Never more of either than eval.num_workers")

    @field_validator("num_episodes")
    @classmethod
    def _known_envs(cls, value: dict[str, int]) -> dict[str, int]:
        unknown = [name for name in value if name not in DEFAULT_NUM_EPISODES]
        if unknown:
            raise ValueError(f"unknown env {quote_names(unknown, 1)}; allowed: "
                             + ", ".join(sorted(DEFAULT_NUM_EPISODES)))
        if any(n < 0 for n in value.values()):
            raise ValueError("episode counts must be >= 0")
        return {**DEFAULT_NUM_EPISODES, **value}

    @field_validator("local_servers", mode="before")
    @classmethod
    def _local_servers(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool)
                               and value >= 1):
            return value
        raise ValueError("allowed: 'auto' (as many as the cores warrant) or a whole number "
                         ">= 1 (env servers and policy servers of the local stack, each)")


class _EnvsSection(_Strict):
    """Which env families, and their options (BALROG ``envs`` section): ``names`` plus one
    ``<env>_kwargs`` mapping per family (fields made from the families' manifests, with each
    manifest's ``default_options``; see :data:`EnvsConfig`)."""

    names: str = Field(default="babyai", description="env names joined by '-'")

    @field_validator("names")
    @classmethod
    def _known_names(cls, value: str) -> str:
        names = [n for n in value.split("-") if n]
        if not names:
            raise ValueError("no env given; allowed: " + ", ".join(sorted(DEFAULT_NUM_EPISODES)))
        unknown = [n for n in names if n not in DEFAULT_NUM_EPISODES]
        if unknown:
            raise ValueError(f"unknown env {quote_names(unknown, 1)}; allowed: "
                             + ", ".join(sorted(DEFAULT_NUM_EPISODES))
                             + " (join several with '-')")
        return value

    @property
    def env_list(self) -> list[str]:
        """The env names in order."""
        return [n for n in self.names.split("-") if n]

    def kwargs_for(self, env: str) -> dict[str, Any]:
        """The ``<env>_kwargs`` options ({} for an env with no such field)."""
        return dict(getattr(self, f"{env}_kwargs", {}) or {})


class _TasksSection(_Strict):
    """Tasks per env (BALROG ``tasks`` section): one ``<env>_tasks`` list per family (fields
    made from the families' manifests, defaulting to each family's suite tasks; see
    :data:`TasksConfig`)."""

    @field_validator("*")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        counts = Counter(value)
        repeated = [task for task, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"tasks listed more than once: {quote_names(repeated)}"
                             "; list each task once (eval.num_episodes sets the episodes per "
                             "task)")
        return value

    def for_env(self, env: str) -> list[str]:
        """The tasks of ``env``. Raises AttributeError for an env with no tasks field."""
        return list(getattr(self, f"{env}_tasks"))


def _options_field(manifest: FamilyManifest) -> Any:
    checked = Annotated[dict[str, Any],
                        AfterValidator(functools.partial(_check_family_options, manifest))]
    return (checked, Field(default_factory=functools.partial(dict, manifest.default_options),
                           description=manifest.options_help or None))


def _check_family_options(manifest: FamilyManifest, value: dict[str, Any]) -> dict[str, Any]:
    """``envs.<env>_kwargs`` checked against the family's schema (``moria.family_options``;
    keys only some tasks take are the env server's call), so a bad option fails before any
    server starts. Returns ``value`` as given; raises ValueError naming the key, the value and
    what is allowed."""
    try:
        check_options(manifest.options, value, where="", fill_defaults=False)
    except OptionError as exc:
        raise ValueError(str(exc)) from None
    return value


def _tasks_field(env: str) -> Any:
    return (list[str], Field(default_factory=functools.partial(default_tasks, env)))


if TYPE_CHECKING:
    EnvsConfig = _EnvsSection
    TasksConfig = _TasksSection
else:
    #: The ``envs`` section: ``names`` and one ``<env>_kwargs`` per family.
    EnvsConfig = create_model(
        "EnvsConfig", __base__=_EnvsSection, __module__=__name__,
        **{f"{name}_kwargs": _options_field(m) for name, m in sorted(families().items())})
    #: The ``tasks`` section: one ``<env>_tasks`` per family.
    TasksConfig = create_model(
        "TasksConfig", __base__=_TasksSection, __module__=__name__,
        **{f"{name}_tasks": _tasks_field(name) for name in sorted(families())})


class EndpointsConfig(_Strict):
    """Running servers to use instead of the local stack. ``env`` maps an env family to its
    server target(s) (host:port, unix:///path, dns:///name); ``policy`` lists policy servers."""

    env: dict[str, list[str]] = Field(default_factory=dict)
    policy: list[str] = Field(default_factory=list)
    tls: TlsConfig | None = Field(
        default=None,
        description="TLS to the endpoints: ca_cert (PEM to trust; unset: system roots), "
                    "client_cert/client_key (mTLS), server_name (host name override)")
    token_env: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="name of the environment variable holding the bearer token sent to the "
                    "endpoints (the token itself never goes in a spec)")
    max_message_mb: int = Field(default=DEFAULT_MAX_MESSAGE_MB, ge=1, le=2047,
                                description="gRPC message limit towards the endpoints (MiB)")

    @property
    def configured(self) -> bool:
        """True when any endpoint is given."""
        return bool(self.env or self.policy)

    @property
    def targets(self) -> list[str]:
        """Every env and policy target, env targets first."""
        return [*(t for targets in self.env.values() for t in targets), *self.policy]

    def configure_clients(self) -> None:
        """Make this process's clients reach the endpoint targets with ``tls``, the
        ``token_env`` bearer token and ``max_message_mb`` (``moria.clients.configure_transport``).

        Raises SpecError when the token variable is unset or a token would go over plaintext
        to a target that is not loopback (the message names the variable, never the token).
        """
        from moria.clients import configure_transport
        from moria.security import SecurityConfigError

        try:
            configure_transport(self.tls, self.token_env, targets=self.targets,
                                max_message_mb=self.max_message_mb)
        except SecurityConfigError as exc:
            raise SpecError(f"endpoints: {exc}") from None


class PlayerConfig(_Strict):
    """One seat of a multi-agent game (``players.<agent_id>``): who plays it and how.

    ``agent``/``client`` replace the run's ``agent``/``client`` sections for this seat (None:
    the run's own), so one spec can pit two models against each other, mix an LLM with scripted
    or random players, or give each teammate its own strategy. ``role`` (e.g. ``forward``,
    ``defender``), ``coordination_level`` (1 emergent, 2 basic hints, 3 role-based) and
    ``observation_mode`` (``egocentric`` or ``visible_teammates``) go to the env, which writes
    that seat's instruction and observations accordingly.
    """

    agent: AgentConfig | None = None
    client: ClientConfig | None = None
    role: str = ""
    coordination_level: int | None = Field(default=None, ge=1, le=3)
    observation_mode: Literal["egocentric", "visible_teammates"] | None = None

    def env_options(self) -> dict[str, Any]:
        """The seat options the env reads (only those set)."""
        options: dict[str, Any] = {}
        if self.coordination_level is not None:
            options["coordination_level"] = self.coordination_level
        if self.observation_mode is not None:
            options["observation_mode"] = self.observation_mode
        return options


class RunSpec(_Strict):
    """A whole run. ``players`` configures the seats of multi-agent games by agent id; a seat
    not listed is played with the run's ``agent`` and ``client``."""

    agent: AgentConfig = Field(default_factory=AgentConfig)
    client: ClientConfig = Field(default_factory=ClientConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    envs: EnvsConfig = Field(default_factory=EnvsConfig)
    tasks: TasksConfig = Field(default_factory=TasksConfig)
    endpoints: EndpointsConfig = Field(default_factory=EndpointsConfig)
    players: dict[str, PlayerConfig] = Field(default_factory=dict)

    def seat(self, agent_id: str) -> tuple[AgentConfig, ClientConfig]:
        """The agent and client sections that play ``agent_id`` (its ``players`` entry, else the
        run's own)."""
        player = self.players.get(agent_id)
        if player is None:
            return self.agent, self.client
        return player.agent or self.agent, player.client or self.client

    def seat_configs(self) -> list[tuple[AgentConfig, ClientConfig]]:
        """Every distinct (agent, client) pair the run uses, the run's own first."""
        pairs = [(self.agent, self.client)]
        for agent_id in self.players:
            pair = self.seat(agent_id)
            if pair not in pairs:
                pairs.append(pair)
        return pairs

    def episodes(self) -> Iterator[tuple[str, str, int]]:
        """Every planned episode as (env, task, episode_index), in a stable order, lazily.

        With ``eval.num_samples`` = N, each env keeps its first N episodes taken round-robin
        over its tasks (index 0 of every task, then index 1, ...). An episode keeps its
        (env, task, index) key, hence its seed, so a capped run is a subset of the full run and
        resuming into the same directory completes it. Nothing is materialised beyond one
        env's ``num_samples`` cap, so a plan of ``MAX_EPISODES`` costs no memory.
        """
        cap = self.eval.num_samples
        for env in self.envs.env_list:
            count = self.eval.num_episodes.get(env, DEFAULT_NUM_EPISODES[env])
            tasks = self.tasks.for_env(env)
            if cap is None:
                for task in tasks:
                    for index in range(count):
                        yield env, task, index
                continue
            round_robin = ((env, task, i) for i in range(count) for task in tasks)
            chosen = list(islice(round_robin, cap))
            order = {task: n for n, task in enumerate(tasks)}
            yield from sorted(chosen, key=lambda p: (order[p[1]], p[2]))

    def plans(self, key: tuple[str, str, int]) -> bool:
        """Whether ``episodes`` yields ``key`` = (env, task, episode_index), decided without
        planning the run (constant memory)."""
        env, task, index = key
        if env not in self.envs.env_list:
            return False
        count = self.eval.num_episodes.get(env, DEFAULT_NUM_EPISODES[env])
        tasks = self.tasks.for_env(env)
        if task not in tasks or not 0 <= index < count:
            return False
        cap = self.eval.num_samples
        return cap is None or index * len(tasks) + tasks.index(task) < cap

    def episode_count(self) -> int:
        """How many episodes ``episodes`` yields, computed without planning them."""
        total = 0
        for env in self.envs.env_list:
            count = self.eval.num_episodes.get(env, DEFAULT_NUM_EPISODES[env])
            planned = count * len(self.tasks.for_env(env))
            total += planned if self.eval.num_samples is None else min(planned,
                                                                        self.eval.num_samples)
        return total

    @model_validator(mode="after")
    def _bounded_plan(self) -> RunSpec:
        total = self.episode_count()
        if total == 0:
            raise ValueError(
                "the run plans no episode: every env of envs.names has eval.num_episodes 0 or "
                "no tasks; give at least one episode")
        if total > MAX_EPISODES:
            raise ValueError(
                f"the run plans {total:,} episodes; at most {MAX_EPISODES:,} per run are "
                "allowed: lower eval.num_episodes.<env>, list fewer tasks, set "
                "eval.num_samples, or split the work into several runs")
        return self


def _runs_model_in_process(agent: AgentConfig, client: ClientConfig) -> bool:
    """True when a policy server playing this seat loads the model itself (``local``, and
    ``vllm``/``llamacpp`` without a ``client.base_url``): each server would load its own
    copy."""
    if agent.type in NON_MODEL_AGENT_TYPES:
        return False
    record = BACKENDS_BY_NAME.get(client.client_name)
    if record is None:
        return False
    return record.endpoint == "in_process" or (record.endpoint == "remote_with_base_url"
                                               and not client.base_url)


def local_server_counts(spec: RunSpec, cores: int | None = None) -> tuple[int, int]:
    """(env servers, policy servers) the local stack of ``spec`` starts (``eval.local_servers``).

    A number n: n of each. ``auto``: ``cores // 4`` of each (``cores``: ``available_cores()``
    unless given: the CPU affinity capped by a cgroup CPU quota, ``moria.cores``), at least
    1; a quarter of the cores for the policy servers (one event loop each, so one core at most
    each) and a quarter for the env servers, leaving half for the orchestrator's own loop, the
    NetHack families' game worker processes and a model run on this machine. So 1 of each up
    to 7 cores, 2 at 8, 4 at 16. Under ``auto`` a seat whose model runs inside the policy
    server (``local``, or ``vllm``/``llamacpp`` without a ``client.base_url``) keeps one policy
    server: each would load its own copy of the model.
    Either way no more of either than ``eval.num_workers`` (episodes in flight): a server
    with no episode costs its start and its memory for nothing."""
    setting = spec.eval.local_servers
    if setting != "auto":
        count = min(int(setting), spec.eval.num_workers)
        return count, count
    return _auto_server_counts(spec, cores if cores is not None else available_cores())


def _auto_server_counts(spec: RunSpec, cores: int) -> tuple[int, int]:
    """``local_server_counts`` under ``auto`` on ``cores`` cores."""
    count = max(1, min(cores // 4, spec.eval.num_workers))
    in_process = any(_runs_model_in_process(agent, client)
                     for agent, client in spec.seat_configs())
    return count, 1 if in_process else count


def local_server_notes(spec: RunSpec, counts: tuple[int, int],
                       cores: int | None = None) -> list[str]:
    """What a user should know about an explicit ``eval.local_servers`` before the local stack
    starts ``counts`` (env servers, policy servers; ``local_server_counts``'s answer): one line
    each, empty under ``auto`` (which already fits the cores and loads one copy of a model).

    - more servers than cores (``cores``: ``available_cores()`` unless given): they take turns
      on the cores rather than run beside each other, and ``auto``'s counts are named;
    - a model loaded by the policy server itself (``local``, or ``vllm``/``llamacpp`` without
      ``client.base_url``) with more than one policy server: each loads its own copy."""
    setting = spec.eval.local_servers
    if setting == "auto":
        return []
    env_servers, policy_servers = counts
    notes = []
    cores = cores if cores is not None else available_cores()
    if env_servers + policy_servers > cores:
        auto_env, auto_policy = _auto_server_counts(spec, cores)
        notes.append(
            f"eval.local_servers={setting} starts {env_servers} env server(s) and "
            f"{policy_servers} policy server(s) on {cores} core(s): they take turns on the "
            f"cores; eval.local_servers=auto would start {auto_env} and {auto_policy} of them")
    if policy_servers > 1:
        loaded = [client.client_name for agent, client in spec.seat_configs()
                  if _runs_model_in_process(agent, client)]
        if loaded:
            notes.append(
                f"eval.local_servers={setting} starts {policy_servers} policy servers and each "
                f"loads its own copy of the model (client.client_name={loaded[0]} runs it "
                "inside the policy server): memory for that many copies; "
                "eval.local_servers=auto keeps one")
    return notes


def load_spec(path: str | Path | None = None, overrides: list[str] | None = None) -> RunSpec:
    """Load a RunSpec from an optional YAML/JSON file plus ``key=value`` overrides.

    A file holding a BALROG worker config (a flat object with a ``worker`` key) is mapped onto
    the run-spec sections first (``orchestrator.plan.worker_config``).

    Raises SpecError with the offending key and the allowed values/keys.
    """
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise SpecError(f"config file not found: {p}")
        try:
            loaded = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            where = getattr(exc, "problem_mark", None)
            at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
            problem = getattr(exc, "problem", None) or type(exc).__name__
            raise SpecError(f"{p}: not valid YAML/JSON{at}: {problem}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(f"{p}: cannot read the config file: {exc}") from None
        if not isinstance(loaded, dict):
            raise SpecError(f"{p}: the top level must be a mapping of sections "
                            "(agent, client, eval, envs, tasks, endpoints, players)")
        data = loaded
        if is_worker_config(data):
            try:
                data = worker_spec_data(data)
            except WorkerConfigError as exc:
                raise SpecError(f"{p}: {exc}") from None
    data.pop("hydra", None)  # BALROG configs carry a hydra section; it has no meaning here
    data = apply_overrides(data, overrides or [])
    return resolve_local_paths(validate_spec(data))


def resolve_local_paths(spec: RunSpec) -> RunSpec:
    """Make the spec's file paths absolute from the current directory, for a run whose servers
    are started here (no ``endpoints``): every field naming a server file
    (:func:`map_server_files`: BALROG checkouts, model files, RL checkpoints, the demo folder,
    the price table, family options such as Boxoban levels), so errors name the resolved path
    and the local servers (whatever their working directory) open the same files. With
    endpoints, paths name files of those servers and are left as given. Returns ``spec``,
    changed in place."""
    if spec.endpoints.configured:
        return spec
    return map_server_files(spec, lambda kind, value, name: str(Path(value).expanduser().resolve()))


#: What :func:`map_server_files` passes each field through: (kind of server file, the field's
#: value, its dotted name) -> the value to keep. Kinds are ``moria.server_files.FILE_KINDS``.
FileMapper = Callable[[str, str, str], str]


def map_server_files(spec: RunSpec, mapper: FileMapper,
                     kinds: Collection[str] | None = None) -> RunSpec:
    """Pass every field of ``spec`` that names a server file through ``mapper`` (only those of
    ``kinds``, when given) and keep what it returns: each seat's ``agent.balrog_source`` (but
    ``installed``) and ``agent.checkpoint``, each seat's ``client.model_id`` where it names a
    model file, ``eval.icl_dataset``, ``eval.prices`` (a file name), the files of
    ``endpoints.tls``, and every ``envs.<env>_kwargs`` option its family's schema marks
    ``server_path``. The one list of such fields: the CLI makes them absolute, the
    orchestrator service resolves them by the folders it offers. Returns ``spec``, changed in
    place; raises what ``mapper`` raises."""
    def apply(kind: str, value: str | None, name: str) -> str | None:
        if not value or (kinds is not None and kind not in kinds):
            return value
        return mapper(kind, value, name)

    seats: list[tuple[str, AgentConfig | None, ClientConfig | None]] = [
        ("", spec.agent, spec.client)]
    seats += [(f"players.{agent_id}.", p.agent, p.client) for agent_id, p in spec.players.items()]
    for prefix, agent, client in seats:
        if agent is not None:
            if agent.balrog_source != INSTALLED:
                agent.balrog_source = apply("balrog_source", agent.balrog_source,
                                            f"{prefix}agent.balrog_source")
            agent.checkpoint = apply("checkpoint", agent.checkpoint, f"{prefix}agent.checkpoint")
        if client is not None and names_a_model_file(client.client_name, client.model_id,
                                                     client.base_url):
            client.model_id = apply("model", client.model_id, f"{prefix}client.model_id")
    spec.eval.icl_dataset = apply("demos", spec.eval.icl_dataset, "eval.icl_dataset")
    if isinstance(spec.eval.prices, str):
        spec.eval.prices = apply("prices", spec.eval.prices, "eval.prices")
    tls = spec.endpoints.tls
    if tls is not None:  # frozen: replaced by a copy
        spec.endpoints.tls = tls.model_copy(update={
            key: apply("tls", getattr(tls, key), f"endpoints.tls.{key}")
            for key in ("ca_cert", "client_cert", "client_key")})
    manifests = families()
    for env in spec.envs.env_list:
        options = getattr(spec.envs, f"{env}_kwargs", None)
        manifest = manifests.get(env)
        if not options or manifest is None:
            continue
        for key, option in manifest.options.items():
            if option.kind == "server_path" and isinstance(options.get(key), str):
                options[key] = apply(option.path_kind, options[key], f"envs.{env}_kwargs.{key}")
    return spec


def describe_errors(exc: ValidationError, root: type[BaseModel] | None = None,
                    title: str = "run spec") -> str:
    """One line per problem of a validation of ``root`` (default RunSpec): the dotted key and
    what was wrong, with the keys allowed where unknown keys were given, e.g.
    ``unknown key 'eval.sed'; allowed keys here: ...``; headed ``invalid <title>:``.

    Bounded whatever the input (at most about ``MAX_ERROR_MESSAGE_CHARS``): unknown keys are
    grouped per section (the first 20 quoted, then a count), at most ``MAX_LISTED_ERRORS``
    lines are listed (then how many more), and every key and value quoted from the input is
    cut (``moria.quoting``).
    """
    errors = exc.errors(include_url=False, include_context=False)
    unknown: dict[tuple[Any, ...], list[str]] = {}
    others: list[str] = []  # one problem each
    unlisted = 0
    for err in errors:
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            unknown.setdefault(loc[:-1], []).append(".".join(str(p) for p in loc))
        elif len(others) >= MAX_LISTED_ERRORS:
            unlisted += 1
        else:
            others.append(_describe_error(err))
    entries: list[tuple[str, int]] = []  # (line, problems it stands for)
    for section_loc, keys in unknown.items():
        section = _model_at(root or RunSpec, section_loc)
        allowed = ", ".join(sorted(section.model_fields)) if section else "?"
        noun = "key" if len(keys) == 1 else f"{len(keys)} keys"
        entries.append((f"unknown {noun} {quote_names(keys, 20, 80)}; allowed keys here: "
                        f"{allowed}", len(keys)))
    entries.extend((line, 1) for line in others)
    listed: list[str] = []
    size = 0
    for line, count in entries:
        if listed and size + len(line) > MAX_ERROR_MESSAGE_CHARS:
            unlisted += count
            continue
        listed.append(line)
        size += len(line)
    if unlisted:
        listed.append(f"... and {unlisted} more problem(s)")
    return f"invalid {title}:\n  " + "\n  ".join(listed)


def _describe_error(err: Any) -> str:
    """One line for a pydantic error that is not an unknown key (input quoted bounded)."""
    key = ".".join(str(p) for p in err["loc"])
    message = str(err["msg"]).removeprefix("Value error, ")
    if not key:  # a check of the whole spec: its message says what is wrong
        return quote(message, 500)[1:-1]
    if err["type"] == "missing":
        return f"missing key {quote(key, 200)}"
    return (f"bad value for {quote(key, 200)}: {quote(message, 300)[1:-1]} "
            f"(got {quote(repr(err.get('input')), 100)[1:-1]})")


def check_spec_size(data: Any, *, max_values: int = MAX_SPEC_VALUES,
                    max_depth: int = MAX_SPEC_DEPTH) -> None:
    """Raise SpecError when ``data`` (a spec as parsed JSON/YAML: dicts, lists, scalars) holds
    more than ``max_values`` values or nests deeper than ``max_depth``; checked before
    validation so a hostile spec costs at most ``max_values`` steps. Strings are not measured
    here (the gRPC message size bounds them; messages quote them cut)."""
    seen = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > max_values:
            raise SpecError(f"the run spec holds more than {max_values:,} values; a real spec "
                            "has a few hundred: check for a runaway list or mapping")
        if depth > max_depth:
            raise SpecError(f"the run spec nests deeper than {max_depth} levels")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
            seen += len(value)  # the keys
        elif isinstance(value, list | tuple):
            stack.extend((v, depth + 1) for v in value)


def validate_spec(data: Any) -> RunSpec:
    """``check_spec_size`` then ``RunSpec.model_validate``; raises SpecError (bounded message,
    ``describe_errors``)."""
    check_spec_size(data)
    try:
        return RunSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(describe_errors(exc)) from None


def _model_at(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model a validation error location points into, from ``root`` (``dict[str, Model]``
    fields such as ``players`` step over their key; ``Model | None`` is the model); None when
    it is not a model."""
    model = root
    parts = list(loc)
    while parts:
        field = model.model_fields.get(str(parts.pop(0)))
        annotation = getattr(field, "annotation", None)
        if typing.get_origin(annotation) is dict and parts:
            parts.pop(0)  # the mapping's key (e.g. the agent id)
            annotation = typing.get_args(annotation)[1]
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            options = [a for a in typing.get_args(annotation) if a is not type(None)]
            annotation = options[0] if len(options) == 1 else annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model
