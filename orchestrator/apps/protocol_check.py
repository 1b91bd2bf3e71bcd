"""``moria protocol-check``: prove that ``agent.protocol=balrog`` sends what BALROG would send.

For each env and strategy, a few seeded episodes are played by Moria's real env and agent servers
(``LocalStack``) under ``agent.protocol=balrog``, against a scripted model on loopback
(:class:`ScriptedModel`, OpenAI's chat-completions wire format) that answers from a fixed,
adversarial list of completions: valid action names, the wrong case, sentences, markdown, the
chain-of-thought and tagged answer forms, and garbage. Every request body the agent server sends
is captured, with every answer it submitted and every action the env applied.

Then BALROG's own code replays each episode on the same observations and completions: its agent
class and prompt builder, its ``OpenAIWrapper`` (whose SDK client is replaced by a recorder
returning the same completion), its ``check_action_validity`` and its evaluation loop's feedback
statement, in the order of BALROG's ``Evaluator.run_episode``. Per env, the check counts
requests equal (same model, ``max_tokens``, ``temperature``, and messages: role, text and images)
and actions equal (same answer submitted and same action applied), and shows the first
difference as a unified diff. Any difference: exit 1.

The result is saved under the Moria cache (``protocol-check/<commit>.json``) and recorded in
every later run made with ``protocol=balrog`` on that commit (``summary.json`` ``protocol``).
"""

from __future__ import annotations

import asyncio
import base64
import difflib
import hashlib
import json
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from moria import aio
from moria.balrog_source import (
    BalrogSource,
    BalrogSourceError,
    PngFrame,
    build_agent,
    effective_config,
    load_balrog_source,
)
from moria.config import BALROG_AGENT_TYPES, AgentConfig, ClientConfig
from moria.families import balrog_references
from moria.observations import text_channels
from orchestrator.core.episode import (
    EpisodeDriver,
    EpisodePlan,
    EpisodeSetupError,
    InfrastructureFault,
    Turn,
)
from orchestrator.core.episode_config import episode_config
from orchestrator.core.stack import LocalStack
from orchestrator.plan.spec import RunSpec
from orchestrator.store.protocol_record import save_check

#: The env -> task each check plays by default (its manifest's ``balrog.check_task``).
DEFAULT_TASKS: dict[str, str] = {env: reference.check_task
                                 for env, reference in balrog_references().items()}
#: Strategies checked by default (few_shot also needs recorded demonstrations).
DEFAULT_STRATEGIES: tuple[str, ...] = ("naive", "cot", "robust_naive", "robust_cot")
#: Model name the scripted model answers as.
MODEL_ID = "protocol-check"


def adversarial_completions(action_names: Sequence[str]) -> list[str]:
    """The scripted model's answers for an episode with these action names, in order (cycled):
    every answer form BALROG's agents read, and forms they must refuse. A free-text game
    (no names) gets commands in the same forms."""
    names = list(action_names) or ["look", "go north", "take coin", "inventory"]
    a, b, c = names[0], names[min(1, len(names) - 1)], names[min(2, len(names) - 1)]
    return [
        a,                                      # valid
        b.upper() if b.upper() != b else b.title(),  # wrong case
        f"I will {c}.",                         # a sentence holding an action
        "fly to the moon",                      # garbage
        f"  {a}\n",                             # surrounding whitespace
        f"**{b}**",                             # markdown
        f"The best move now is clear.\nACTION: {c}",  # chain-of-thought form
        f"<|ACTION|>{a}<|END|>",                # tagged form
        f"Let me think.\n<|ACTION|>{b}<|END|>",  # reasoning, then tagged
        f"{a}!!! 42",                           # punctuation and digits
        "",                                     # empty
        b,                                      # valid again
    ]


class ScriptedModel:
    """An OpenAI-compatible chat-completions server on loopback that answers from ``script``
    (cycled) and records every request body (``requests``). ``GET /v1/models`` lists one model.
    Not streaming. Use ``with ScriptedModel() as model: model.base_url``."""

    def __init__(self) -> None:
        self.script: list[str] = ["ok"]
        self.requests: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self.answers: list[str] = []
        self._lock = threading.Lock()
        handler = self._handler()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="scripted-model")

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def reset(self, script: list[str]) -> None:
        """Answer from ``script`` from now on and forget the recorded requests."""
        with self._lock:
            self.script = list(script)
            self.requests.clear()
            self.raw.clear()
            self.answers.clear()

    def _next(self, body: dict[str, Any], raw: bytes) -> str:
        with self._lock:
            answer = self.script[len(self.requests) % len(self.script)]
            self.requests.append(body)
            self.raw.append(raw)
            self.answers.append(answer)
            return answer

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [
                    {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "moria"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._send(400, {"error": {"message": "body is not JSON"}})
                    return
                answer = model._next(body, raw)
                self._send(200, {
                    "id": f"chatcmpl-{len(model.requests)}", "object": "chat.completion",
                    "created": 0, "model": MODEL_ID,
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": answer}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

        return Handler

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


# -- one episode on Moria's side


@dataclass
class Captured:
    """One Moria episode: each turn (observation, act, env result), the request bodies the agent
    server sent and the completions it got, in order, and the episode's action space."""

    turns: list[Turn]
    requests: list[dict[str, Any]]
    completions: list[str]
    action_names: list[str]
    default_action: str
    progression: float = 0.0
    raw_requests: list[bytes] = field(default_factory=list)


def check_spec(env: str, task: str, strategy: str, balrog: str, base_url: str,
               max_steps: int) -> RunSpec:
    """The run spec of one checked episode (``protocol=balrog``, the scripted model)."""
    return RunSpec(
        agent=AgentConfig(type=strategy, protocol="balrog", balrog_source=balrog),  # type: ignore[arg-type]
        client=ClientConfig(client_name="vllm", model_id=MODEL_ID, base_url=base_url),
        eval={"max_steps_per_episode": max_steps, "save_prompts": False,  # type: ignore[arg-type]
              "max_episode_retries": 0},
        envs={"names": env},  # type: ignore[arg-type]
        tasks={f"{env}_tasks": [task]},  # type: ignore[arg-type]
    )


async def play_moria(stack: LocalStack, spec: RunSpec, env: str, task: str, seed: int,
                     model: ScriptedModel, completions: Sequence[str] = ()) -> Captured:
    """Play one episode through Moria's servers; the model answers ``completions`` in turn
    (default: ``adversarial_completions`` of the episode's action names)."""
    plan = EpisodePlan(run_id="protocol-check", env=env, task=task, episode_index=0, seed=seed,
                       env_target=stack.env_target, policy_target=stack.policy_target)
    # few_shot reads the demo file: off the event loop
    driver = EpisodeDriver(plan, await asyncio.to_thread(episode_config, spec, env, task, seed))
    turns: list[Turn] = []
    try:
        opened = await driver.start()
        start = next(iter(opened.agents.values()))
        names = [a.name for a in start.action_space.actions]
        model.reset(list(completions) or adversarial_completions(names))
        while not driver.done:
            turns.extend(await driver.step())
        if driver.end_reason == "agent_error":
            raise RuntimeError(f"the player failed: {driver.error}")
    finally:
        await driver.finish(None)
    return Captured(turns, list(model.requests), list(model.answers), names,
                    start.action_space.default_action,
                    driver.progression, list(model.raw))


# -- the same episode through BALROG's own code


@dataclass
class Replayed:
    """BALROG's side of one episode: the request bodies its client sent (decoded, and the
    bytes as sent), per turn the answer and the applied action, and ``error`` when BALROG's
    code stopped (its client raised, e.g. on an answer it will not take)."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    raw_requests: list[bytes] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    error: str = ""


def _balrog_observation(turn: Turn) -> dict[str, Any]:
    obs = turn.observation
    image = PngFrame(obs.image.data) if obs.HasField("image") and obs.image.data else None
    long_term, short_term = text_channels(obs)
    return {"text": {"long_term_context": long_term, "short_term_context": short_term},
            "image": image}


def replay_balrog(source: BalrogSource, spec: RunSpec, env: str, task: str,
                  captured: Captured, model: ScriptedModel) -> Replayed:
    """Run BALROG's agent, client, validity check and feedback statement over the captured
    observations and completions, in the order of BALROG's evaluation loop. BALROG's client
    sends its requests through the OpenAI SDK to ``model``, which answers the captured
    completions in order and keeps each body as sent. When BALROG's code raises (its client
    refusing an answer, a branch this check cannot drive), ``error`` says where and why."""
    config = effective_config(source, spec.agent, spec.client)
    model.reset(list(captured.completions) or ["ok"])
    client, _ = source.openai_client(config, [], base_url=model.base_url)
    agent = build_agent(source, config, spec.agent.type, client)
    agent.reset()
    first = captured.turns[0].observation if captured.turns else None
    mission = None
    if first is not None and "mission" in first.info.fields:
        mission = first.info.fields["mission"].string_value
    agent.prompt_builder.update_instruction_prompt(source.instruction(
        env, task, action_names=captured.action_names, default_action=captured.default_action,
        mission=mission))
    check = source.validity(env, task, action_names=captured.action_names,
                            default_action=captured.default_action)
    out = Replayed()
    action = None
    applied = None
    for step, turn in enumerate(captured.turns):
        obs = _balrog_observation(turn)
        try:
            if action is not None and applied is not None and source.feedback is not None:
                source.feedback.apply(obs, applied, action, config)
            response = agent.act(obs, prev_action=action)
            applied = check(response.completion)
        except Exception as exc:  # noqa: BLE001  (BALROG's code: reported, never a traceback)
            out.error = (f"BALROG's code stopped at step {step}: {type(exc).__name__}: "
                         f"{str(exc)[:300]}")
            break
        out.answers.append(str(response.completion))
        out.applied.append(str(applied))
        action = response.completion
    out.requests, out.raw_requests = list(model.requests), list(model.raw)
    return out


# -- comparing


def _content_parts(content: Any) -> tuple[list[str], list[str]]:
    if isinstance(content, str):
        return [content], []
    texts, images = [], []
    for part in content or []:
        if part.get("type") == "text":
            texts.append(part.get("text", ""))
        elif part.get("type") == "image_url":
            url = str(part.get("image_url", {}).get("url", ""))
            images.append(hashlib.sha256(base64.b64decode(url.split(",", 1)[-1])).hexdigest())
    return texts, images


def normalize_request(body: dict[str, Any]) -> dict[str, Any]:
    """A chat request as compared: model, max_tokens (or max_completion_tokens), temperature
    (None when not sent), any other key sent, and per message its role, text (text parts joined
    by "\\n") and images (SHA-256 of each PNG)."""
    out: dict[str, Any] = {k: v for k, v in body.items() if k != "messages"}
    if "max_completion_tokens" in out and "max_tokens" not in out:
        out["max_tokens"] = out.pop("max_completion_tokens")
    out.setdefault("temperature", None)
    messages = []
    for message in body.get("messages", []):
        texts, images = _content_parts(message.get("content"))
        messages.append({"role": message.get("role"), "text": "\n".join(texts), "images": images})
    out["messages"] = messages
    return out


def _request_difference(ours: dict[str, Any] | None, theirs: dict[str, Any] | None,
                        ours_raw: bytes | None, theirs_raw: bytes | None) -> str:
    """Why two request bodies are not the same bytes, with a unified diff."""
    if ours is None or theirs is None:
        missing = ("Moria sent no such request" if ours is None
                   else "BALROG's client sent no such request")
        return missing + "\n" + _diff(theirs, ours, "BALROG", "Moria")
    if normalize_request(ours) == normalize_request(theirs):
        return ("the bodies differ in form only (the same content: messages as a string or as "
                "parts, key order or spacing):\n"
                + _raw_diff(theirs_raw or b"", ours_raw or b""))
    return "the bodies differ in content:\n" + _diff(normalize_request(theirs),
                                                     normalize_request(ours), "BALROG", "Moria")


def _raw_diff(theirs: bytes, ours: bytes) -> str:
    """The first place two bodies part, with the bytes of each around it."""
    at = next((i for i, (a, b) in enumerate(zip(theirs, ours, strict=False)) if a != b),
              min(len(theirs), len(ours)))
    start = max(0, at - 20)
    return (f"  byte {at}: BALROG {theirs[start:at + 40]!r}\n"
            f"  byte {at}: Moria  {ours[start:at + 40]!r}")


def _diff(a: Any, b: Any, a_name: str, b_name: str) -> str:
    left = json.dumps(a, indent=1, sort_keys=True, ensure_ascii=False).splitlines()
    right = json.dumps(b, indent=1, sort_keys=True, ensure_ascii=False).splitlines()
    return "\n".join(difflib.unified_diff(left, right, a_name, b_name, lineterm="", n=2))


@dataclass
class EnvCheck:
    """The counts of one env (all its strategies and episodes; or, with ``strategy``, those of
    one strategy) and its first difference."""

    env: str
    task: str
    strategy: str = ""
    requests: int = 0
    requests_equal: int = 0
    actions: int = 0
    actions_equal: int = 0
    first_difference: str = ""
    error: str = ""

    @property
    def passed(self) -> bool:
        """Everything compared was equal, something was compared, and every episode played."""
        return (not self.error and self.requests > 0 and self.requests == self.requests_equal
                and self.actions == self.actions_equal)

    def as_json(self) -> dict[str, Any]:
        """The JSON form saved and recorded."""
        return {"task": self.task, "requests": self.requests,
                "requests_equal": self.requests_equal, "actions": self.actions,
                "actions_equal": self.actions_equal, "passed": self.passed,
                "first_difference": self.first_difference, "error": self.error}


def compare(check: EnvCheck, label: str, captured: Captured, replayed: Replayed) -> None:
    """Add one episode's comparison to ``check`` (the first difference is kept). A request
    is equal when the two bodies are the same bytes as sent; a difference says whether the
    bodies differ in content, or only in form (the same after ``normalize_request``: content
    as a string or as parts, key order, spacing)."""
    count = max(len(captured.raw_requests), len(replayed.raw_requests))
    check.requests += count
    for index in range(count):
        ours = captured.raw_requests[index] if index < len(captured.raw_requests) else None
        theirs = replayed.raw_requests[index] if index < len(replayed.raw_requests) else None
        if ours is not None and ours == theirs:
            check.requests_equal += 1
        elif not check.first_difference:
            check.first_difference = f"{label}, request {index}: " + _request_difference(
                captured.requests[index] if ours is not None else None,
                replayed.requests[index] if theirs is not None else None, ours, theirs)
    for index, turn in enumerate(captured.turns):
        check.actions += 1
        moria_move = (turn.act.action.text,
                      turn.result.action_result.applied_action.text if turn.result else None)
        balrog_move = ((replayed.answers[index], replayed.applied[index])
                       if index < len(replayed.answers) else None)
        if balrog_move is not None and moria_move == balrog_move:
            check.actions_equal += 1
        elif not check.first_difference:
            check.first_difference = (f"{label}, step {index}: completion "
                                      f"{captured.completions[index]!r}: BALROG submits/applies "
                                      f"{balrog_move}, Moria {moria_move}")


# -- the command


async def run_check(balrog: str, envs: Sequence[str], strategies: Sequence[str], *,
                    episodes: int = 1, max_steps: int = 12, seed: int = 0,
                    completions: Sequence[str] = (), log_dir: Path | None = None,
                    progress: Any = print) -> dict[str, Any]:
    """Run the check (see the module docstring) and return its result document:
    ``{"status": "passed"|"failed", "balrog_commit", "balrog_source", "checked_at",
    "strategies", "episodes", "max_steps", "envs": {env: EnvCheck.as_json()}, "cases":
    [{"env", "strategy", **EnvCheck.as_json()}]}`` (each case: one env and strategy, saved as
    its own record, ``orchestrator.store.protocol_record``).

    Raises BalrogSourceError (bad ``balrog``) or ValueError (unknown env or strategy)."""
    source_path = str(Path(balrog).expanduser().resolve()) if balrog != "installed" else balrog
    source = load_balrog_source(source_path)
    unknown = [e for e in envs if e not in DEFAULT_TASKS]
    if unknown:
        raise ValueError(f"unknown env(s) {', '.join(unknown)}; protocol-check covers "
                         f"{', '.join(DEFAULT_TASKS)}")
    bad = [s for s in strategies if s not in BALROG_AGENT_TYPES]
    if bad:
        raise ValueError(f"unknown strategy {', '.join(bad)}; BALROG's are "
                         f"{', '.join(BALROG_AGENT_TYPES)}")
    missing = {}
    for strategy in strategies:
        try:
            source.agent_class(strategy)
        except BalrogSourceError as exc:
            missing[strategy] = str(exc)
    strategies = [s for s in strategies if s not in missing]
    if not strategies:
        raise ValueError("none of the strategies asked for exists in this BALROG checkout: "
                         + "; ".join(missing.values()))
    checks = {env: EnvCheck(env, DEFAULT_TASKS[env]) for env in envs}
    cases = {(env, strategy): EnvCheck(env, DEFAULT_TASKS[env], strategy)
             for env in envs for strategy in strategies}
    logs = log_dir or Path(tempfile.mkdtemp(prefix="moria-protocol-check-"))
    with ScriptedModel() as model, ScriptedModel() as balrog_model:
        async with LocalStack(list(envs), logs) as stack:
            for env, strategy, episode in _cases(envs, strategies, episodes):
                task = DEFAULT_TASKS[env]
                spec = check_spec(env, task, strategy, source_path, model.base_url, max_steps)
                try:
                    captured = await play_moria(stack, spec, env, task,
                                                (seed + episode) % 2**64, model, completions)
                except (EpisodeSetupError, InfrastructureFault, RuntimeError) as exc:
                    checks[env].error = checks[env].error or f"{strategy}: {exc}"
                    cases[env, strategy].error = cases[env, strategy].error or str(exc)
                    progress(f"  {env:<10} {strategy:<13} episode {episode}: not played: {exc}")
                    continue
                replayed = await asyncio.to_thread(replay_balrog, source, spec, env, task,
                                                   captured, balrog_model)
                if replayed.error:
                    for check in (checks[env], cases[env, strategy]):
                        check.error = check.error or f"{strategy}: {replayed.error}"
                for check in (checks[env], cases[env, strategy]):
                    compare(check, f"{env} {strategy} episode {episode}", captured, replayed)
                progress(f"  {env:<10} {strategy:<13} episode {episode} (seed "
                         f"{(seed + episode) % 2**64}): progression {captured.progression:g}, "
                         f"{len(captured.turns)} steps")
    result = {
        "status": "passed" if all(c.passed for c in checks.values()) else "failed",
        "balrog_commit": source.commit, "balrog_source": str(source.package_dir.parent),
        "set_aside": dict(source.set_aside), "strategies_not_in_checkout": missing,
        "checked_at": datetime.now(UTC).isoformat(), "strategies": list(strategies),
        "episodes": episodes, "max_steps": max_steps, "seed": seed,
        "completions": list(completions) or "adversarial",
        "envs": {env: check.as_json() for env, check in checks.items()},
        "cases": [{"env": env, "strategy": strategy, **check.as_json()}
                  for (env, strategy), check in cases.items()],
    }
    if not completions:  # the standard check is what runs record; a scripted one is not saved
        save_check(result)
    return result


def _cases(envs: Sequence[str], strategies: Sequence[str], episodes: int,
           ) -> Iterator[tuple[str, str, int]]:
    for env in envs:
        for strategy in strategies:
            for episode in range(episodes):
                yield env, strategy, episode


def render(result: dict[str, Any]) -> str:
    """The check's result as printed: a header naming the commit, one line per env, and the
    first difference of each env that has one."""
    lines = [f"BALROG {result['balrog_commit']} at {result['balrog_source']}",
             f"strategies {', '.join(result['strategies'])}; {result['episodes']} episode(s) "
             f"each, at most {result['max_steps']} steps"]
    for strategy, why in result.get("strategies_not_in_checkout", {}).items():
        lines.append(f"not checked: {strategy}: {why}")
    for module, why in result.get("set_aside", {}).items():
        lines.append(f"set aside (failed at import, not used for text): {module}: {why}")
    for env, row in result["envs"].items():
        verdict = "equal" if row["passed"] else "DIFFERENT"
        lines.append(f"{env:<10} requests equal {row['requests_equal']}/{row['requests']}  "
                     f"actions equal {row['actions_equal']}/{row['actions']}  {verdict}")
        if row.get("error"):
            lines.append(f"{'':<10} not checked: {row['error']}")
    for env, row in result["envs"].items():
        if row["first_difference"]:
            lines += [f"--- first difference in {env} ---", row["first_difference"]]
    lines.append(f"protocol-check {result['status']}")
    return "\n".join(lines)


def add_arguments(sub: Any) -> None:
    """Register ``moria protocol-check`` on the CLI's subparsers."""
    pc = sub.add_parser("protocol-check",
                        help="prove agent.protocol=balrog sends what BALROG's own code sends")
    pc.add_argument("--balrog", required=True,
                    help="a BALROG checkout (or its balrog/ package dir, or 'installed')")
    pc.add_argument("--env", action="append", metavar="E",
                    help=f"env to check, repeatable (default: {', '.join(DEFAULT_TASKS)})")
    pc.add_argument("--strategy", action="append", metavar="S",
                    help="strategy to check, repeatable (default: "
                         f"{', '.join(DEFAULT_STRATEGIES)})")
    pc.add_argument("--episodes", type=int, default=1, help="seeded episodes per env and strategy")
    pc.add_argument("--max-steps", type=int, default=12, help="steps per episode")
    pc.add_argument("--seed", type=int, default=0,
                    help="seed of the first episode (episode i plays seed + i)")
    pc.add_argument("--completion", action="append", metavar="TEXT",
                    help="script the model with these answers, in turn, repeatable (default: a "
                         "fixed adversarial list built from the env's action names)")
    pc.add_argument("--json", action="store_true", help="print the result document as JSON")
    pc.set_defaults(func=main)


def main(args: Any) -> int:
    """``moria protocol-check``: 0 when every request and action is equal, 1 on any
    difference, 2 on bad input."""
    if args.episodes < 1 or args.max_steps < 1:
        print("error: --episodes and --max-steps must be at least 1", file=sys.stderr)
        return 2
    envs = args.env or list(DEFAULT_TASKS)
    strategies = args.strategy or list(DEFAULT_STRATEGIES)
    # progress lines go to stderr: with --json, stdout holds the JSON document alone
    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        result = aio.run(run_check(args.balrog, envs, strategies, episodes=args.episodes,
                                       max_steps=args.max_steps, seed=args.seed,
                                       completions=args.completion or (), progress=progress))
    except (BalrogSourceError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0 if result["status"] == "passed" else 1
