"""Worker settings: command-line flags and the ``--config FILE.json`` keys, mapped onto Moria's
``AgentConfig`` / ``ClientConfig``.

Precedence: built-in defaults (MOSAIC's: temperature 0.7, max_steps 100, timeout 60 s, text
history 10, 3 retries, 1 s delay) < the JSON file < flags given on the command line. Values are
validated once, by pydantic (``WorkerSettings`` here, then ``AgentConfig``/``ClientConfig``);
every problem becomes a ``WorkerConfigError`` naming the flag (and its JSON key) and what is
allowed. The API key is never a setting: ``--api-key`` goes to the key's environment variable
(``moria.config.API_KEY_ENV``) of this process and its children, and nowhere else.
"""

from __future__ import annotations

import argparse
import json
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from moria.backends import ALIASES, BACKEND_NAMES
from moria.config import INT32_MAX, AgentConfig, AgentType, ClientConfig
from moria.families import UnknownEnvironmentError, resolve_environment, resolve_task

if TYPE_CHECKING:
    ClientChoice = str
else:
    #: ``--client`` values: every backend's name and alias (``moria.backends``; ``google`` is
    #: an alias of ``gemini``).
    ClientChoice = Literal[(*BACKEND_NAMES, *ALIASES)]

#: JSON key -> the flag that sets it (the JSON key is the flag's name with ``_``, except where
#: MOSAIC's config file uses another name: env_name, client_name, model_id).
FLAG_OF: dict[str, str] = {
    "run_id": "--run-id", "interactive": "--interactive", "env_name": "--env", "task": "--task",
    "client_name": "--client", "model_id": "--model", "base_url": "--base-url",
    "agent_type": "--agent-type", "num_episodes": "--num-episodes", "max_steps": "--max-steps",
    "seed": "--seed", "temperature": "--temperature", "timeout": "--timeout",
    "telemetry_dir": "--telemetry-dir", "no_jsonl": "--no-jsonl", "verbose": "--verbose",
    "agent_id": "--agent-id", "coordination_level": "--coordination-level",
    "observation_mode": "--observation-mode", "role": "--role", "opponent": "--opponent",
    "checkpoint": "--checkpoint", "max_image_history": "--max-image-history",
    "max_text_history": "--max-text-history", "render_mode": "--render-mode",
    "env_endpoint": "--env-endpoint", "policy_endpoint": "--policy-endpoint",
    "stdout_events": "--stdout-events", "heartbeat_s": "--heartbeat-s",
    "constrain_actions": "--constrain-actions", "max_tokens": "--max-tokens",
}


class WorkerConfigError(ValueError):
    """A bad flag or config key/value; the message names it and what is allowed (exit 2)."""


class WorkerSettings(BaseModel):
    """Everything one worker run needs (field names are the JSON config keys).

    Units: ``timeout`` and ``heartbeat_s`` in seconds; ``max_steps`` in env steps per episode;
    ``temperature`` 0..2. ``agent_id`` None means the env's first agent (sorted ids).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    run_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    interactive: bool = False
    env_name: str = Field(default="babyai", description="an env family, one of its aliases, "
                          "BALROG's env name or an env id / task name as `moria tasks` lists it "
                          "(moria.families.resolve_environment)")
    task: str | None = None
    client_name: ClientChoice = "local"
    model_id: str | None = None
    base_url: str | None = None
    agent_type: AgentType = "naive"
    num_episodes: int = Field(default=1, ge=1)
    max_steps: int = Field(default=100, ge=1)
    seed: int = Field(default=0, ge=0, le=2**64 - 1)
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    timeout: float = Field(default=60.0, gt=0)
    max_tokens: int | None = Field(default=None, ge=1, le=INT32_MAX, description=(
        "client.generate_kwargs.max_tokens: the most tokens one answer may take (None: "
        "Moria's client default); an answer cut there ends with stop reason 'length'"))
    constrain_actions: bool = Field(default=False, description=(
        "client.constrain_actions: limit the model's answer to the action names (a grammar "
        "for local and llamacpp, guided_choice for vllm; naive agent type only)"))
    telemetry_dir: str = "telemetry"
    no_jsonl: bool = False
    verbose: bool = False
    agent_id: str | None = None
    coordination_level: int | None = Field(default=None, ge=1, le=3)
    observation_mode: Literal["egocentric", "visible_teammates"] | None = None
    role: Literal["forward", "defender"] | None = None
    opponent: AgentType = "random"
    checkpoint: str | None = None
    max_image_history: int = Field(default=0, ge=0)
    max_text_history: int = Field(default=10, ge=0)
    render_mode: Literal["rgb_array", "human"] = "rgb_array"
    env_endpoint: str | None = None
    policy_endpoint: str | None = None
    stdout_events: bool = False
    heartbeat_s: float = Field(default=30.0, gt=0)

    @field_validator("env_name")
    @classmethod
    def _known_env(cls, value: str) -> str:
        try:
            resolve_environment(value)
        except UnknownEnvironmentError as exc:
            raise ValueError(f"unknown env: {exc}") from None
        return value

    @property
    def family(self) -> str:
        """The Moria env family ``env_name`` names (``moria.families.resolve_environment``:
        a family, an alias, BALROG's env name, or an env id / task name ``moria tasks``
        lists)."""
        return resolve_environment(self.env_name).family

    @property
    def game_task(self) -> str | None:
        """The task to play as the env server lists it: ``task`` (``<family>/`` dropped, a
        BabaIsAI name completed: ``moria.families.resolve_task``), else the task ``env_name``
        names (``--env MiniGrid-DoorKey-5x5-v0``); None: the family's first default task.

        Raises UnknownEnvironmentError when ``task`` names another family's task."""
        ref = resolve_environment(self.env_name)
        if self.task is not None:
            return resolve_task(ref.family, self.task)
        return ref.task

    @property
    def images(self) -> bool:
        """True when observations carry frames (vlm-worker with max_image_history > 0)."""
        return self.max_image_history > 0

    def client_config(self) -> ClientConfig:
        """The ``client`` section of every seat (the API key is not part of it)."""
        return _validated(ClientConfig, {
            "client_name": self.client_name, "model_id": self.model_id,
            "base_url": self.base_url, "timeout": self.timeout, "max_retries": 3, "delay": 1.0,
            "generate_kwargs": {"temperature": self.temperature,
                                **({} if self.max_tokens is None
                                   else {"max_tokens": self.max_tokens})},
            "constrain_actions": self.constrain_actions,
        }, {"client_name": "client_name", "model_id": "model_id", "base_url": "base_url",
            "timeout": "timeout", "generate_kwargs": "temperature",
            "constrain_actions": "constrain_actions"})

    def agent_config(self) -> AgentConfig:
        """The ``agent`` section of the worker's own player."""
        return _validated(AgentConfig, {
            "type": self.agent_type, "max_text_history": self.max_text_history,
            "max_image_history": self.max_image_history, "checkpoint": self.checkpoint,
        }, {"type": "agent_type", "max_text_history": "max_text_history",
            "max_image_history": "max_image_history", "checkpoint": "checkpoint"})

    def opponent_config(self) -> AgentConfig:
        """The ``agent`` section of the players on the other seats."""
        return _validated(AgentConfig, {
            "type": self.opponent, "max_text_history": self.max_text_history,
            "checkpoint": self.checkpoint,
        }, {"type": "opponent", "checkpoint": "checkpoint"})


def _validated(model: type[BaseModel], data: dict[str, Any], keys: dict[str, str]) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise WorkerConfigError(_describe(exc, keys)) from None


def _allowed(annotation: Any) -> str:
    """'a, b, c' for a Literal (possibly inside Optional), else ''."""
    for arg in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(arg) is Literal:
            return ", ".join(str(v) for v in typing.get_args(arg))
    return ""


def _describe(exc: ValidationError, keys: dict[str, str] | None = None) -> str:
    lines = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err["loc"] else "?"
        key = (keys or {}).get(field, field)
        flag = FLAG_OF.get(key, key)
        if err["type"] == "extra_forbidden":
            lines.append(f"unknown config key {field!r}; allowed keys: "
                         + ", ".join(sorted(WorkerSettings.model_fields)))
            continue
        allowed = ""
        info = WorkerSettings.model_fields.get(key)
        if info is not None:
            allowed = _allowed(info.annotation)
        text = f"{flag} (config key {key!r}): {err['msg']} (got {err.get('input')!r})"
        if allowed:
            text += f"; allowed: {allowed}"
        lines.append(text)
    return "\n".join(lines)


def build_parser(prog: str, *, vlm: bool) -> argparse.ArgumentParser:
    """The flags of ``llm-worker`` (``vlm=False``) or ``vlm-worker`` (adds image flags).

    Every flag defaults to None (argparse.SUPPRESS-like) so that only flags actually given
    override the JSON file; choices are checked by ``WorkerSettings``.
    """
    p = argparse.ArgumentParser(prog=prog, description=(
        "Play one player over one Moria env, autonomously or driven by JSON lines on stdin "
        "(--interactive). Flags override --config FILE.json keys."))
    arg = p.add_argument
    arg("--config", help="JSON file of settings (keys: see docs/worker.md)")
    arg("--run-id")
    arg("--interactive", action="store_true", default=None,
        help="answer JSON-line commands on stdin (answers on stdout, logs on stderr)")
    arg("--env", dest="env_name", metavar="ENV", help="env family (babyai, pettingzoo, ...) "
        "or an env id / task name as `moria tasks` lists it (MiniGrid-DoorKey-5x5-v0)")
    arg("--task", help="task / gym id inside the env family, as `moria tasks` lists it "
        "(default: the task --env names, else the family's first task)")
    arg("--client", dest="client_name", metavar="CLIENT",
        help="model backend (default local: the embedded model, no key needed)")
    arg("--model", dest="model_id", metavar="MODEL")
    arg("--base-url")
    arg("--api-key", help="API key (better: the provider's environment variable); never "
        "logged or written")
    arg("--agent-type", metavar="TYPE", help="player strategy (naive, cot, dummy, human, ...)")
    arg("--num-episodes", type=int)
    arg("--max-steps", type=int)
    arg("--seed", type=int)
    arg("--temperature", type=float)
    arg("--timeout", type=float, help="model request timeout (seconds)")
    arg("--max-tokens", type=int, help="the most tokens one model answer may take (default: "
        "Moria's client default, 4096)")
    arg("--constrain-actions", action=argparse.BooleanOptionalAction, default=None,
        help="limit the model's answers to the action names (client.constrain_actions: a "
        "grammar for local and llamacpp, guided_choice for vllm; naive agent type only)")
    arg("--telemetry-dir")
    arg("--no-jsonl", action="store_true", default=None, help="write no telemetry files")
    arg("--verbose", action="store_true", default=None)
    arg("--agent-id", help="the seat this worker plays (default: the env's first agent)")
    arg("--coordination-level", type=int, metavar="{1,2,3}")
    arg("--observation-mode", metavar="{egocentric,visible_teammates}")
    arg("--role", metavar="{forward,defender}")
    arg("--opponent", metavar="TYPE", help="who plays the other seats (default random)")
    arg("--checkpoint", help="rl: policy checkpoint file")
    arg("--max-text-history", type=int)
    arg("--env-endpoint", help="use this env server (host:port) instead of a local one")
    arg("--policy-endpoint", help="use this policy server instead of a local one")
    arg("--stdout-events", action="store_true", default=None,
        help="interactive: also write lifecycle events as JSON lines on stdout")
    arg("--heartbeat-s", type=float, help="seconds between heartbeat events")
    if vlm:
        arg("--max-image-history", type=int, help="frames kept in the prompt (0: text only)")
        arg("--render-mode", metavar="{rgb_array,human}")
    return p


def load_settings(argv: list[str], *, prog: str = "llm-worker", vlm: bool = False,
                  ) -> tuple[WorkerSettings, str | None]:
    """Parse ``argv`` (flags, optional ``--config``) into validated settings and the API key.

    Returns (settings, api_key or None). Raises WorkerConfigError naming the flag or key.
    argparse itself exits 2 on a malformed flag (unknown flag, non-integer for an int flag).
    """
    args = build_parser(prog, vlm=vlm).parse_args(argv)
    data: dict[str, Any] = {"max_image_history": 1} if vlm else {}
    if args.config:
        data.update(read_config_file(Path(args.config)))
    flags = {k: v for k, v in vars(args).items() if v is not None and k not in ("config",
                                                                               "api_key")}
    data.update(flags)
    if not vlm:  # llm-worker is text-only whatever a shared config file says
        data["max_image_history"] = 0
        data.pop("render_mode", None)
    try:
        settings = WorkerSettings.model_validate(data)
    except ValidationError as exc:
        raise WorkerConfigError(_describe(exc)) from None
    try:
        _ = settings.game_task  # resolved here, so a bad --task exits 2 before any server
    except UnknownEnvironmentError as exc:
        raise WorkerConfigError(f"--task (config key 'task'): {exc}") from None
    settings.agent_config()
    settings.client_config()
    if settings.opponent == "human":
        raise WorkerConfigError("--opponent (config key 'opponent'): 'human' cannot play the "
                                "other seats; the human is the worker's own player "
                                "(--agent-type human)")
    settings.opponent_config()
    return settings, args.api_key


def read_config_file(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``. Raises WorkerConfigError for a missing file, bad JSON, a
    non-object or an unknown key (named, with the allowed keys). The image keys are accepted by
    both workers so one file serves both; llm-worker ignores them (text only)."""
    try:
        loaded = json.loads(path.read_text())
    except OSError as exc:
        raise WorkerConfigError(f"--config: cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise WorkerConfigError(f"--config: {path} is not valid JSON: {exc}") from None
    if not isinstance(loaded, dict):
        raise WorkerConfigError(f"--config: {path} must hold a JSON object of settings")
    allowed = sorted(WorkerSettings.model_fields)
    unknown = [k for k in loaded if k not in allowed]
    if unknown:
        raise WorkerConfigError(f"--config: unknown key {unknown[0]!r} in {path}; allowed "
                                "keys: " + ", ".join(allowed))
    return loaded
