"""``moria plan`` (and ``moria eval --dry-run``): what a run will cost, before it runs.

For a run spec it prints the episodes per env and task, their step caps, and for model calls,
prompt tokens and completion tokens an estimate and an upper bound; the wall time at the run's
concurrency and a latency per call; and the cost from the price table; then the assumptions
behind every number (the model is ``orchestrator.plan.estimate``'s; docs/plan.md explains it
and its documented error).

The prompts are real: for every planned task, the task's first episode (its first seed) is
opened on an env server (the local stack's, or the spec's ``endpoints.env``) and played for a
few steps by a policy server started here, running the spec's strategy code (Moria's own or
BALROG's, ``agent.protocol``) with the spec's agent settings. Only the model endpoint is
swapped: every seat's client points at :class:`StandInModel`, a loopback endpoint in OpenAI's
chat-completions format that answers each call with the task's default action. So nothing
is sent to any provider, no API key is read, and no result directory is written (the local
servers' logs go to a temporary folder, removed afterwards). Earlier runs of the same setup,
when found (``--runs``; default: ``eval.output_dir`` and the folder it is in), replace the
assumptions by their recorded usage, and the output says which tasks rest on them.

Exit status: 0 the estimate was printed; 2 a bad spec or setup (an unknown task, an option an
env rejects, a player that cannot start, missing few_shot demos, a bad price table), with one
``error:`` line; 1 a local server failed; 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

from rich.console import Console
from rich.table import Table

from orchestrator.apps.say import error_line, literal, warning

if TYPE_CHECKING:  # the rest is imported when a plan is made: `moria --help` stays quick
    from moria.config import ClientConfig
    from orchestrator.plan.estimate import PlanEstimate, SeatProbe, TaskProbe, Usage
    from orchestrator.plan.spec import RunSpec
    from orchestrator.report.accounting import PriceTable

#: Env steps each task's probe plays (its first prompts and how they grow).
PROBE_STEPS: Final = 4
#: Tasks probed at once.
PROBE_CONCURRENCY: Final = 8
#: The run id the probes' episodes carry (they are never saved).
PROBE_RUN_ID: Final = "moria-plan"


class PlanError(RuntimeError):
    """The plan cannot be made (a task the env rejects, a player that cannot start, a missing
    demo file): a setup problem, exit 2. The message names the task."""


# -- the stand-in model endpoint -------------------------------------------------------------

class StandInModel:
    """A loopback HTTP endpoint in OpenAI's chat-completions wire format that answers for the
    model while ``moria plan`` has prompts built: every ``POST .../chat/completions`` gets the
    reply registered for the request's ``model`` (``reply_for``; else ``default_reply``) with
    zero usage; ``GET .../models`` lists nothing. Requests are counted (``calls``), never
    forwarded. Use as a context manager; ``base_url`` is ``http://127.0.0.1:<port>/v1``."""

    def __init__(self, default_reply: str = "wait") -> None:
        self.default_reply = default_reply
        self.calls = 0
        self._replies: dict[str, str] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._models = 0

    @property
    def base_url(self) -> str:
        """The endpoint's base URL (after ``start``)."""
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def new_model(self) -> str:
        """A model name of its own for one probe (its reply is set with ``reply_for``)."""
        with self._lock:
            self._models += 1
            return f"moria-plan-stand-in-{self._models}"

    def reply_for(self, model: str, text: str) -> None:
        """Answer the requests naming ``model`` with ``text``."""
        with self._lock:
            self._replies[model] = text

    def answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The ``chat.completion`` object for one request (counted)."""
        model = str(request.get("model") or "")
        with self._lock:
            self.calls += 1
            text = self._replies.get(model, self.default_reply)
        return {"id": f"moria-plan-{time.monotonic_ns()}", "object": "chat.completion",
                "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}

    def start(self) -> StandInModel:
        """Listen on a free loopback port, served from a daemon thread."""
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            handles: ClassVar[StandInModel] = outer

            def log_message(self, format: str, *args: Any) -> None:
                """No request log."""

            def _send(self, status: int, body: Mapping[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.split("?", 1)[0].rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": []})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    request = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    request = None
                if not self.path.split("?", 1)[0].rstrip("/").endswith("/chat/completions") \
                        or not isinstance(request, dict):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                self._send(200, self.handles.answer(request))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="moria-plan-stand-in", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> StandInModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stand_in_client(client: ClientConfig, base_url: str, model: str) -> ClientConfig:
    """``client`` pointed at the stand-in endpoint: an OpenAI-compatible server (``vllm`` with
    a ``base_url``: no API key) named ``model``, keeping what shapes the prompt
    (``alternate_roles``, ``generate_kwargs``, ``max_prompt_bytes``); no retries, no
    streaming."""
    from moria.config import ClientConfig

    return ClientConfig(client_name="vllm", base_url=base_url, model_id=model,
                        generate_kwargs=client.generate_kwargs.model_copy(deep=True),
                        alternate_roles=client.alternate_roles, stream=False,
                        max_prompt_bytes=client.max_prompt_bytes, timeout=60.0,
                        max_retries=0, delay=0.0)


def probe_spec(spec: RunSpec, base_url: str, model: str) -> RunSpec:
    """A copy of ``spec`` whose every seat calls the stand-in endpoint (``stand_in_client``)
    and whose players' prompts are recorded (``eval.save_prompts``)."""
    probe = spec.model_copy(deep=True)
    probe.client = stand_in_client(spec.client, base_url, model)
    for agent_id, player in spec.players.items():
        if player.client is not None:
            probe.players[agent_id].client = stand_in_client(player.client, base_url, model)
    probe.eval.save_prompts = True
    return probe


# -- planned tasks ---------------------------------------------------------------------------

def planned_tasks(spec: RunSpec) -> dict[tuple[str, str], tuple[int, int]]:
    """(env, task) -> (planned episodes, index of its first episode), in plan order."""
    found: dict[tuple[str, str], tuple[int, int]] = {}
    for env, task, index in spec.episodes():
        count, first = found.get((env, task), (0, index))
        found[(env, task)] = (count + 1, min(first, index))
    return found


def model_name(client: ClientConfig) -> str:
    """``"<client_name>/<model_id>"`` of a configured client (``model_id`` "" for the client's
    default model), the key the price table is searched with."""
    return f"{client.client_name}/{client.model_id or ''}"


def _reply(opened: Any) -> str:
    """The stand-in's answer for a task: its first agent's default action (else its first
    action name, else a short command)."""
    for start in opened.agents.values():
        space = start.action_space
        if space.default_action:
            return str(space.default_action)
        if space.actions:
            return str(space.actions[0].name)
    return "look"


# -- probing ---------------------------------------------------------------------------------

@dataclass
class _Targets:
    env: dict[str, str]
    policy: str


async def _probe_task(spec: RunSpec, env: str, task: str, episodes: int, index: int,
                      targets: _Targets, stand_in: StandInModel,
                      demos: Mapping[tuple[str, str], Any]) -> TaskProbe:
    """Open the task's first episode, play ``PROBE_STEPS`` steps against the stand-in model
    and measure every seat's prompts. Raises PlanError (the env or a player refuses) or
    InfrastructureFault (a server was lost)."""
    from orchestrator.core.episode import EpisodeDriver, EpisodePlan, EpisodeSetupError
    from orchestrator.core.episode_config import episode_config
    from orchestrator.plan.estimate import TaskProbe
    from orchestrator.plan.seeds import derive_seed

    model = stand_in.new_model()
    probe = probe_spec(spec, stand_in.base_url, model)
    plan = EpisodePlan(run_id=PROBE_RUN_ID, env=env, task=task, episode_index=index,
                       seed=derive_seed(spec.eval.seed, env, task, index),
                       env_target=targets.env[env], policy_target=targets.policy)
    try:
        config = await asyncio.to_thread(  # may read the demo file: off the event loop
            episode_config, probe, env, task, plan.seed, demonstrations=demos.get((env, task)))
    except EpisodeSetupError as exc:
        raise PlanError(f"{env} task {task!r} cannot start: {exc}") from None
    driver = EpisodeDriver(plan, config)
    prompts: dict[str, list[list[dict[str, Any]]]] = {}
    calls: Counter[str] = Counter()
    steps = 0
    try:
        try:
            opened = await driver.start()
        except EpisodeSetupError as exc:
            raise PlanError(f"{env} task {task!r} cannot start: {exc}") from None
        if opened.max_steps <= 0:
            raise PlanError(f"{env} task {task!r} reports no step cap: set "
                            "eval.max_steps_per_episode to plan it")
        answer = _reply(opened)
        stand_in.reply_for(model, answer)
        while not driver.done and steps < PROBE_STEPS:
            turns = await driver.step()
            if driver.end_reason == "agent_error":
                raise PlanError(f"{env} task {task!r}: the player failed while its first "
                                f"prompts were built: {driver.error}")
            steps += 1
            for turn in turns:
                if turn.act.prompt_json:
                    prompts.setdefault(turn.seat.agent_id, []).append(
                        json.loads(turn.act.prompt_json))
                    calls[turn.seat.agent_id] += max(1, int(turn.act.usage.calls))
    finally:
        await driver.finish("cancelled")
    return TaskProbe(env=env, task=task, episodes=episodes, step_cap=int(opened.max_steps),
                     seats=tuple(_seat_probe(spec, agent_id, start, prompts.get(agent_id, []),
                                             calls[agent_id], max(1, steps), answer)
                                 for agent_id, start in sorted(opened.agents.items())),
                     probe_steps=steps)


def _seat_probe(spec: RunSpec, agent_id: str, start: Any,
                chats: Sequence[Sequence[Mapping[str, Any]]], calls: int, steps: int,
                probe_answer: str) -> SeatProbe:
    """One seat's measurements, counted with its own client's tokenizer (``probe_answer``:
    what the stand-in answered)."""
    from moria.config import NON_MODEL_AGENT_TYPES
    from orchestrator.plan.estimate import (
        FREE_TEXT_ANSWER_TOKENS,
        SeatProbe,
        chat_tokens,
        step_tokens,
        tokenizer_for,
    )

    agent, client = spec.seat(agent_id)
    tokenizer = tokenizer_for(client.client_name, client.model_id)
    names = [a.name for a in start.action_space.actions]
    answer = (sum(tokenizer.count(n) for n in names) / len(names) if names
              else float(FREE_TEXT_ANSWER_TOKENS))
    calls_model = agent.type not in NON_MODEL_AGENT_TYPES and bool(chats)
    first, images = chat_tokens(chats[0], tokenizer) if chats else (0, 0)
    return SeatProbe(
        agent_id=agent_id, agent_type=agent.type, model=model_name(client),
        calls_model=calls_model, first_prompt=first, images=images,
        step_tokens=(step_tokens(chats[0], chats[1] if len(chats) > 1 else None, tokenizer,
                                 probe_answer, answer) if chats else 0.0),
        calls_per_step=calls / steps if calls_model else 0.0, answer_tokens=answer,
        window=agent.max_text_history,
        cot_window=agent.max_cot_history if agent.remember_cot else 0,
        max_tokens=client.generate_kwargs.max_tokens)


async def probe_tasks(spec: RunSpec, stand_in: StandInModel, console: Console,
                      ) -> list[TaskProbe]:
    """Probe every planned task (``_probe_task``), ``PROBE_CONCURRENCY`` at a time, on the
    local stack's env server or the spec's ``endpoints.env``, with a policy server started
    here. Returns the probes in plan order.

    Raises PlanError (setup), SpecError (endpoints), StackError (a local server failed)."""
    from moria.clients import close_channels
    from moria.families import server_environment
    from orchestrator.core.episode import InfrastructureFault
    from orchestrator.core.stack import LocalStack
    from orchestrator.plan.seeds import derive_seed
    from orchestrator.store.demos import MissingDemonstrationsError, check_demonstrations

    tasks = planned_tasks(spec)
    try:
        demos = check_demonstrations(spec, ((env, task, derive_seed(spec.eval.seed, env, task, i))
                                            for (env, task), (_, i) in tasks.items()))
    except MissingDemonstrationsError as exc:
        raise PlanError(str(exc)) from None
    endpoints = spec.endpoints
    if endpoints.env:
        missing = [env for env in spec.envs.env_list if not endpoints.env.get(env)]
        if missing:
            raise PlanError(f"endpoints are partly configured: no endpoints.env.{missing[0]} "
                            "(give one for every env of envs.names)")
        endpoints.configure_clients()
        families: list[str] = []
    else:
        families = spec.envs.env_list
    console.print(literal(f"building the first prompts of {len(tasks)} task(s) (nothing is "
                          "sent to a provider)"))
    with tempfile.TemporaryDirectory(prefix="moria-plan-") as scratch:
        stack = LocalStack(families, Path(scratch) / "logs",
                           env_capacity=max(64, 2 * PROBE_CONCURRENCY),
                           env_vars=server_environment({env: spec.envs.kwargs_for(env)
                                                        for env in families}))
        try:
            async with stack:
                env_targets = ({env: endpoints.env[env][0] for env in spec.envs.env_list}
                               if endpoints.env else
                               dict.fromkeys(spec.envs.env_list, stack.env_target))
                targets = _Targets(env_targets, stack.policy_target)
                limit = asyncio.Semaphore(PROBE_CONCURRENCY)

                async def one(key: tuple[str, str], count: int, index: int) -> TaskProbe:
                    async with limit:
                        stack.check_alive()
                        try:
                            return await _probe_task(spec, key[0], key[1], count, index,
                                                     targets, stand_in, demos)
                        except InfrastructureFault as exc:
                            stack.check_alive()  # a dead local server says so first
                            raise PlanError(f"{key[0]} task {key[1]!r}: a server failed: "
                                            f"{exc}") from None

                return list(await asyncio.gather(*(one(key, count, index) for key, (count, index)
                                                   in tasks.items())))
        finally:
            await close_channels()


def prepare_probe_data(spec: RunSpec, console: Console, show_progress: bool) -> None:
    """Build the game data the probed first episodes read (TextWorld's games, ...), locally,
    as ``moria eval`` does; the model weights are not needed. Raises PrepareError."""
    from orchestrator.apps.prepare import build_items, items_for_spec

    if spec.endpoints.env:
        return
    first = spec.model_copy(deep=True)
    first.client = stand_in_client(spec.client, "http://127.0.0.1:1/v1", "none")
    first.players = {}
    tasks = planned_tasks(spec)
    first.eval.num_samples = None
    first.eval.num_episodes = dict.fromkeys(spec.envs.env_list, 1)
    for env in spec.envs.env_list:
        setattr(first.tasks, f"{env}_tasks", [t for e, t in tasks if e == env])
    items = [item for item in items_for_spec(first) if item.server == "env"]
    report = build_items(items, console=console, show_progress=show_progress)
    for source, count in report.built.items():
        console.print(literal(f"prepared {count} {source} item(s)"))


# -- the estimate ----------------------------------------------------------------------------

def build_estimate(spec: RunSpec, probes: Sequence[TaskProbe], *,
                   runs: Sequence[str | Path] | None = None, latency_s: float | None = None,
                   ) -> tuple[PlanEstimate, list[str]]:
    """The plan's estimate from the probes and the earlier runs under ``runs`` (None: the
    spec's ``eval.output_dir`` and its parent; empty: none). Returns (estimate, warnings about
    unreadable earlier files)."""
    from orchestrator.plan.estimate import (
        PlanEstimate,
        Recorded,
        TaskEstimate,
        Tokenizer,
        assumptions_for,
        concurrency_of,
        estimate_task,
        latency_for,
        recorded_usage,
        tokenizer_for,
    )

    roots = ([Path(spec.eval.output_dir), Path(spec.eval.output_dir).expanduser().resolve().parent]
             if runs is None else [Path(r) for r in runs])
    by_task, by_env, warnings = recorded_usage(spec, roots)
    tasks: list[TaskEstimate] = []
    for probe in probes:
        recorded: Recorded | None = by_task.get((probe.env, probe.task))
        basis = "earlier runs of this task"
        if recorded is None:
            recorded, basis = by_env.get(probe.env), "earlier runs of this env"
        tasks.append(estimate_task(probe, recorded, basis))
    latency, latency_basis = latency_for(latency_s, by_env.values())
    tokenizer: Tokenizer = tokenizer_for(spec.client.client_name, spec.client.model_id)
    return PlanEstimate(tasks=tasks, concurrency=concurrency_of(spec), latency_s=latency,
                        latency_basis=latency_basis, tokenizer=tokenizer.name,
                        assumptions=assumptions_for(spec, tokenizer, tasks, latency_basis,
                                                    latency)), warnings


def _cost(usage: Mapping[str, Usage], prices: PriceTable) -> tuple[float | None, list[str]]:
    """(dollars, unpriced models): None when a model that is called has no price (never 0)."""
    total = 0.0
    unpriced: list[str] = []
    for model, part in sorted(usage.items()):
        if part.calls <= 0:
            continue
        cost = prices.cost(model, part.as_dict())
        if cost is None:
            unpriced.append(model)
        else:
            total += cost
    return (None if unpriced else total), unpriced


def _part_json(estimate: Mapping[str, Usage], at_cap: Mapping[str, Usage],
               prices: PriceTable) -> dict[str, Any]:
    """The JSON of one part of the plan (a task, an env, the total): calls, prompt,
    cached-prompt and completion tokens (estimate and bound) and the cost of both."""
    from orchestrator.plan.estimate import Usage, ceil_int

    est, cap = Usage(), Usage()
    for usage in estimate.values():
        est.add(usage)
    for usage in at_cap.values():
        cap.add(usage)
    est_cost, unpriced = _cost(estimate, prices)
    cap_cost, unpriced_cap = _cost(at_cap, prices)
    return {
        "calls": {"estimate": ceil_int(est.calls), "max": ceil_int(cap.calls)},
        "prompt_tokens": {"estimate": ceil_int(est.input_tokens),
                          "at_cap": ceil_int(cap.input_tokens)},
        "cached_prompt_tokens": {"estimate": ceil_int(est.cached_input_tokens)},
        "completion_tokens": {"estimate": ceil_int(est.output_tokens),
                              "max": ceil_int(cap.output_tokens)},
        "cost_usd": {"estimate": est_cost, "at_cap": cap_cost},
        "unpriced_models": sorted(set(unpriced) | set(unpriced_cap)),
    }


def estimate_json(spec: RunSpec, estimate: PlanEstimate, prices: PriceTable,
                  stand_in_calls: int) -> dict[str, Any]:
    """The estimate as JSON (what ``--json`` prints): the setup, one entry per task and per
    env, the totals with wall time, the price table, the assumptions and the documented
    error. Token and call counts are whole numbers (rounded up); a cost is null when a model
    called is unpriced (``unpriced_models`` names it)."""
    from orchestrator.plan.estimate import DOCUMENTED_ERROR, Usage, ceil_int

    tasks = []
    envs: dict[str, dict[str, Any]] = {}
    for task in estimate.tasks:
        entry = {"env": task.env, "task": task.task, "episodes": task.episodes,
                 "step_cap": task.step_cap,
                 "steps_per_episode": round(task.steps_per_episode, 2),
                 "basis": task.basis, "recorded_episodes": task.recorded_episodes,
                 "first_prompt_tokens": task.first_prompt_tokens,
                 "prompt_growth_per_step": round(task.growth_per_step, 1),
                 **_part_json(task.estimate, task.at_cap, prices)}
        tasks.append(entry)
        env = envs.setdefault(task.env, {"episodes": 0, "tasks": 0, "_est": {}, "_cap": {}})
        env["episodes"] += task.episodes
        env["tasks"] += 1
        for key, part in (("_est", task.estimate), ("_cap", task.at_cap)):
            for model, usage in part.items():
                env[key].setdefault(model, Usage()).add(usage)
    env_json = {name: {"episodes": e["episodes"], "tasks": e["tasks"],
                       **_part_json(e["_est"], e["_cap"], prices)} for name, e in envs.items()}
    total = {"episodes": sum(t.episodes for t in estimate.tasks),
             **_part_json(estimate.by_model("estimate"), estimate.by_model("at_cap"), prices),
             "wall_time_s": {"estimate": round(estimate.wall_time_s("estimate"), 1),
                             "at_cap": round(estimate.wall_time_s("at_cap"), 1)}}
    models = {model: {"calls": ceil_int(u.calls), "prompt_tokens": ceil_int(u.input_tokens),
                      "completion_tokens": ceil_int(u.output_tokens)}
              for model, u in sorted(estimate.by_model("estimate").items())}
    return {
        "setup": {"envs": spec.envs.env_list, "agent_type": spec.agent.type,
                  "protocol": spec.agent.protocol, "model": model_name(spec.client),
                  "max_text_history": spec.agent.max_text_history,
                  "max_steps_per_episode": spec.eval.max_steps_per_episode,
                  "concurrency": estimate.concurrency},
        "tokenizer": estimate.tokenizer,
        "latency_s": round(estimate.latency_s, 3), "latency_basis": estimate.latency_basis,
        "tasks": tasks, "envs": env_json, "models": models, "total": total,
        "prices": prices.describe(),
        "assumptions": estimate.assumptions,
        "documented_error": {
            "prompt_tokens": DOCUMENTED_ERROR,
            "applies_to": "the estimate without earlier runs, for episodes that run to their "
                          "step cap (docs/plan.md)"},
        "limits": limits_json(spec, total),
        "requests_sent_to_providers": 0,
        "stand_in_calls": stand_in_calls,
    }


def limits_json(spec: RunSpec, total: Mapping[str, Any]) -> dict[str, Any]:
    """What the run's cost cap and rate limits mean for the estimate: ``max_cost_usd`` and
    whether the estimate's cost fits it (``estimate_fits_cap``: None without a cap or a price);
    and, per limit set, the shortest wall time it allows, seconds (every call counted as the
    limiter counts it: its prompt tokens plus ``max_tokens``; docs/budget.md)."""
    cap = spec.eval.max_cost_usd
    cost = total.get("cost_usd", {}).get("estimate")
    calls = float(total.get("calls", {}).get("estimate") or 0)
    prompt = float(total.get("prompt_tokens", {}).get("estimate") or 0)
    client = spec.client
    floors: dict[str, float] = {}
    if client.max_requests_per_minute:
        floors["max_requests_per_minute"] = round(60 * calls / client.max_requests_per_minute, 1)
    if client.max_tokens_per_minute:
        rate_tokens = prompt + calls * client.generate_kwargs.max_tokens
        floors["max_tokens_per_minute"] = round(60 * rate_tokens / client.max_tokens_per_minute,
                                                1)
    return {"max_cost_usd": cap,
            "estimate_fits_cap": None if cap is None or cost is None else cost <= cap,
            "wall_time_floor_s": floors}


# -- printing --------------------------------------------------------------------------------

def _count(value: float) -> str:
    """A count as printed: 1,234 / 56.7k / 1.23M / 4.56B."""
    if value < 10_000:
        return f"{value:,.0f}"
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:.3g}{unit}" if value < 100 * size else \
                f"{value / size:,.0f}{unit}"
    return f"{value:,.0f}"


def _dollars(value: float | None) -> str:
    if value is None:
        return "unpriced"
    return f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:.4f}"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = seconds / 60
    if minutes < 60:
        return f"{minutes:.0f} min"
    hours = minutes / 60
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} days"


def _pair(part: Mapping[str, Any], key: str, high: str, fmt: Any = _count) -> str:
    return f"{fmt(part[key]['estimate'])} / {fmt(part[key][high])}"


#: The caption under both tables: what the two numbers of a cell are.
PAIR_CAPTION: Final = ("each cell: estimate / upper bound (every episode to its step cap; "
                       "completion at max_tokens per call)")


def render(data: Mapping[str, Any], console: Console) -> None:
    """Print the estimate (``estimate_json``'s form) as tables, then the assumptions."""
    setup = data["setup"]
    model = setup["model"] if not setup["model"].endswith("/") else \
        f"{setup['model']}(default model)"
    table = Table(title=f"moria plan: {setup['agent_type']} ({setup['protocol']}) with "
                        f"{model}, history window {setup['max_text_history']}",
                  title_justify="left", caption=PAIR_CAPTION, caption_justify="left")
    table.add_column("env", no_wrap=True)
    table.add_column("task", overflow="fold", min_width=12)
    for name in ("episodes", "step cap", "steps/episode", "1st prompt", "+/step", "calls",
                 "prompt tokens", "completion tokens", "cost"):
        table.add_column(name, justify="right", no_wrap=name not in ("steps/episode",))
    for task in data["tasks"]:
        basis = ("cap" if not task["recorded_episodes"]
                 else f"{task['recorded_episodes']} earlier ep.")
        table.add_row(task["env"], task["task"], str(task["episodes"]), str(task["step_cap"]),
                      f"{task['steps_per_episode']:g} ({basis})",
                      _count(task["first_prompt_tokens"]),
                      f"{task['prompt_growth_per_step']:g}",
                      _pair(task, "calls", "max"), _pair(task, "prompt_tokens", "at_cap"),
                      _pair(task, "completion_tokens", "max"),
                      _pair(task, "cost_usd", "at_cap", _dollars))
    console.print(table)
    totals = Table(title="per env and in total", title_justify="left", caption=PAIR_CAPTION,
                   caption_justify="left")
    totals.add_column("env", no_wrap=True)
    for name in ("tasks", "episodes", "calls", "prompt tokens", "completion tokens", "cost"):
        totals.add_column(name, justify="right", no_wrap=True)
    for env, part in data["envs"].items():
        totals.add_row(env, str(part["tasks"]), str(part["episodes"]),
                       _pair(part, "calls", "max"), _pair(part, "prompt_tokens", "at_cap"),
                       _pair(part, "completion_tokens", "max"),
                       _pair(part, "cost_usd", "at_cap", _dollars))
    total = data["total"]
    totals.add_row("total", str(len(data["tasks"])), str(total["episodes"]),
                   _pair(total, "calls", "max"), _pair(total, "prompt_tokens", "at_cap"),
                   _pair(total, "completion_tokens", "max"),
                   _pair(total, "cost_usd", "at_cap", _dollars), style="bold")
    console.print(totals)
    wall = total["wall_time_s"]
    lines = [
        f"wall time: about {_duration(wall['estimate'])} (at the cap: "
        f"{_duration(wall['at_cap'])}) at {setup['concurrency']} call(s) in flight and "
        f"{data['latency_s']:g} s per call ({data['latency_basis']})",
        f"prices: {data['prices']['source']} (as of {data['prices']['as_of']}, "
        f"{data['prices']['currency']})",
    ]
    if total["unpriced_models"]:
        lines.append("unpriced (no entry in the price table; give eval.prices=FILE): "
                     + ", ".join(total["unpriced_models"]))
    error = data["documented_error"]
    lines.append(f"documented error: prompt tokens within ±{error['prompt_tokens']:.0%} of a "
                 f"run's for {error['applies_to']}")
    lines += _limit_lines(data["limits"], total)
    lines.append("assumptions:")
    lines += [f"  - {line}" for line in data["assumptions"]]
    lines.append(f"nothing was sent to a provider ({data['stand_in_calls']} call(s) answered "
                 "by the local stand-in endpoint)")
    for line in lines:
        console.print(literal(line), soft_wrap=True)


def _limit_lines(limits: Mapping[str, Any], total: Mapping[str, Any]) -> list[str]:
    """The cost cap and rate-limit lines of ``render`` (none when the spec sets neither)."""
    lines = []
    cap = limits["max_cost_usd"]
    if cap is not None:
        fits = limits["estimate_fits_cap"]
        verdict = ("cannot be compared: a model is unpriced" if fits is None
                   else "fits under it" if fits
                   else "passes it: the episodes past it will end budget_exhausted")
        lines.append(f"eval.max_cost_usd {_dollars(cap)}: the estimate "
                     f"({_dollars(total['cost_usd']['estimate'])}) {verdict}")
    for name, seconds in limits["wall_time_floor_s"].items():
        lines.append(f"client.{name} allows the calls no less than {_duration(seconds)}")
    return lines


# -- the command -----------------------------------------------------------------------------

def add_plan_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of ``moria plan`` beyond the spec's (``--config``, ``--suite``, ``--vlm``,
    overrides, which the CLI adds as for ``moria eval``)."""
    parser.add_argument("--json", action="store_true",
                        help="print the estimate as JSON on stdout (and nothing else there)")
    parser.add_argument("--latency", type=float, metavar="SECONDS",
                        help="seconds per model call for the wall time (default: the mean of "
                             "earlier runs, else 2)")
    parser.add_argument("--runs", action="append", metavar="DIR",
                        help="a run directory, or a folder of them, whose recorded usage "
                             "replaces the assumptions for the same setup (repeatable; "
                             "default: eval.output_dir and the folder it is in)")
    parser.add_argument("--no-runs", action="store_true",
                        help="ignore earlier runs: estimate from the first prompts alone")


def plan_command(spec: RunSpec, args: argparse.Namespace, console: Console) -> int:
    """Run ``moria plan`` for ``spec``: probe, estimate, print (a table, or JSON with
    ``--json``). Returns the exit status (see the module docstring)."""
    from moria import aio
    from orchestrator.apps.prepare import PrepareError
    from orchestrator.core.stack import StackError
    from orchestrator.plan.spec import SpecError
    from orchestrator.report.accounting import PriceError, prices_for

    latency = getattr(args, "latency", None)
    if latency is not None and (not math.isfinite(latency) or latency < 0):
        console.print(error_line(f"--latency must be a number of seconds >= 0, got {latency}"))
        return 2
    try:
        prices = prices_for(spec.eval.prices)
    except PriceError as exc:
        console.print(error_line(exc))
        return 2
    show_progress = not getattr(args, "no_progress", False)
    try:
        prepare_probe_data(spec, console, show_progress)
    except PrepareError as exc:
        console.print(error_line(exc))
        return 2
    with StandInModel() as stand_in:
        try:
            probes = aio.run(probe_tasks(spec, stand_in, console))
        except (PlanError, SpecError) as exc:
            console.print(error_line(exc))
            return 2
        except StackError as exc:
            console.print(error_line(f"a local server failed: {exc}"))
            return 1
        except (KeyboardInterrupt, asyncio.CancelledError):
            console.print("interrupted")
            return 130
        calls = stand_in.calls
    runs = [] if getattr(args, "no_runs", False) else getattr(args, "runs", None)
    estimate, notes = build_estimate(spec, probes, runs=runs, latency_s=latency)
    for note in notes:
        console.print(warning(note))
    data = estimate_json(spec, estimate, prices, calls)
    if getattr(args, "json", False):
        print(json.dumps(data, indent=1))
    else:
        out = Console(width=200) if not _is_tty() else Console()
        render(data, out)
    return 0


def _is_tty() -> bool:
    import sys

    return sys.stdout.isatty()
