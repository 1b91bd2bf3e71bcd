"""``make stack-test``: the whole Compose stack, built from this checkout, brought up, used,
faulted and torn down, with the real images (``make images`` first).

What it runs, in order (each stage timed; any failure stops it and tears the stack down):

0. **cpu quota**: the orchestrator image run alone with ``--cpus 1.5``: ``moria.cores`` must
   see the container's CPU quota (1.5 cores), which ``eval.local_servers=auto`` counts.
1. **up**: ``deploy/compose.yaml`` under the project name ``moria-stack-test`` with
   podman-compose (``.cache/compose-venv``, ``make compose-tools``) or ``docker compose``
   (``MORIA_ENGINE=docker``);
   the orchestrator published on a free loopback port, the one-run ``eval`` service's results in a
   temporary folder. Waits until every container is healthy. Without systemd podman runs no health
   checks by itself, so this script runs them (``podman healthcheck run``) every few seconds for
   the whole test, as a systemd timer would.
2. **oracle eval**: ``compose run --rm eval`` (the one-run container) with the BabyAI oracle: every
   episode must reach progression 100 %.
3. **local-model eval**: the same service with ``deploy/run.yaml`` as written (the naive agent on
   the embedded local model, in the agent containers), a few steps per episode: every episode
   must be scored.
4. **faulted service run**: a run submitted to the orchestrator service (SubmitRun) and followed
   (StreamEvents) while the script kills the env-babyai container's server after the first
   finished episode and one agent container's server after the next (SIGKILL to every process
   but the container's init, as a crash or the OOM killer would; the restart policy brings the
   container back). The run must succeed, and every planned episode must be recorded exactly
   once: one scored result file each, one ``episode_finished`` event each, no other file.
5. **read-only**: ``diff`` of every container is empty (nothing written outside the volumes and
   tmpfs mounts).
6. **teardown**: ``compose stop`` (SIGTERM, then the 30 s stop grace period): every container
   must exit 0 (the servers drain and exit cleanly); then ``compose down`` removes containers,
   networks and volumes. The teardown also runs when a stage fails or on Ctrl-C.

Exit status 0 when every check passed, 1 otherwise. ``--keep`` leaves the stack up on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from moria.codecs import dict_from_struct
from moria.records import EpisodeRecord
from moria.results import scan_episodes
from orchestrator.apps.remote import OrchestratorClient

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "deploy" / "compose.yaml"
RUN_FILE = ROOT / "deploy" / "run.yaml"
COMPOSE_VENV = ROOT / ".cache" / "compose-venv"
PROJECT = "moria-stack-test"
#: the UID the images run as (deploy/images.py); the eval service's results folder is theirs
IMAGE_UID = 10001
HEALTH_TIMEOUT_S = 300
HEALTH_PERIOD_S = 15  # the compose file's healthcheck interval
EVAL_TIMEOUT_S = 600
RUN_TIMEOUT_S = 900
STOP_TIMEOUT_S = 180


class StackTestError(Exception):
    """A check failed; the message says which and what was seen."""


# ---------------------------------------------------------------------------------- the engine

@dataclass
class Engine:
    """The container engine and its Compose, driving one project."""

    tool: str  # podman or docker (a path)
    compose: list[str]  # the Compose command (without -p/-f)
    env: dict[str, str] = field(default_factory=dict)  # variables the compose file reads

    @property
    def is_podman(self) -> bool:
        return Path(self.tool).name == "podman"

    #: labels both Docker Compose and podman-compose put on a project's containers
    project_label = "com.docker.compose.project"
    service_label = "com.docker.compose.service"

    def run(self, argv: list[str], timeout: float, check: bool = True,
            capture: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` with the Compose variables set; raise ``StackTestError`` on a non-zero
        exit (``check``) or a timeout, with the command's last output lines."""
        try:
            done = subprocess.run(argv, cwd=ROOT / "deploy", env={**os.environ, **self.env},
                                  text=True, capture_output=capture, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired as exc:
            raise StackTestError(f"timed out after {timeout:.0f} s: {' '.join(argv)}") from exc
        if check and done.returncode != 0:
            tail = "\n  ".join(((done.stdout or "") + (done.stderr or "")).splitlines()[-25:])
            raise StackTestError(f"exit {done.returncode}: {' '.join(argv)}\n  {tail}")
        return done

    def compose_argv(self, *args: str, profile: str | None = None) -> list[str]:
        argv = [*self.compose]
        if profile:
            argv += ["--profile", profile]
        return [*argv, "-p", PROJECT, "-f", str(COMPOSE_FILE), *args]

    def containers(self, all_states: bool = True, service: str | None = None) -> list[str]:
        """Names of the project's containers (of one ``service``), sorted."""
        argv = [self.tool, "ps", "--filter", f"label={self.project_label}={PROJECT}",
                "--format", "{{.Names}}"]
        if service:
            argv[2:2] = ["--filter", f"label={self.service_label}={service}"]
        if all_states:
            argv.insert(2, "-a")
        out = self.run(argv, timeout=60).stdout
        return sorted(line.strip() for line in out.splitlines() if line.strip())

    def inspect(self, container: str, template: str) -> str:
        return self.run([self.tool, "inspect", "--format", template, container],
                        timeout=60).stdout.strip()

    def logs_tail(self, container: str, lines: int = 20) -> str:
        done = self.run([self.tool, "logs", "--tail", str(lines), container], timeout=60,
                        check=False)
        return ((done.stdout or "") + (done.stderr or "")).strip()


def find_engine() -> Engine:
    """``$MORIA_ENGINE`` (podman or docker), else podman, else docker, with its Compose.
    Raises ``StackTestError`` naming what to install when one is missing."""
    wanted = os.environ.get("MORIA_ENGINE", "")
    tool = shutil.which(wanted) if wanted else (shutil.which("podman") or shutil.which("docker"))
    if not tool:
        raise StackTestError("no container engine: `make engine-setup` (podman), or install "
                             "Docker with its compose plugin")
    if Path(tool).name == "podman":
        compose = COMPOSE_VENV / "bin" / "podman-compose"
        if not compose.exists():
            raise StackTestError(f"{compose.relative_to(ROOT)} is missing: `make compose-tools`")
        return Engine(tool, [str(compose)])
    if subprocess.run([tool, "compose", "version"], capture_output=True,
                      check=False).returncode != 0:
        raise StackTestError("`docker compose` (the Compose v2 plugin) is missing")
    return Engine(tool, [tool, "compose"])


def compose_images() -> list[str]:
    """The image of every service in ``deploy/compose.yaml`` (the eval service included)."""
    services = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    return sorted({str(s["image"]) for s in services.values()})


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---------------------------------------------------------------------------------- health

class HealthPump:
    """Runs every running container's health check every ``period`` seconds in a thread, for
    podman without systemd (which otherwise never runs them; Docker's daemon does)."""

    def __init__(self, engine: Engine, period: float = HEALTH_PERIOD_S):
        self.engine, self.period = engine, period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="health", daemon=True)

    def __enter__(self) -> HealthPump:
        if self.engine.is_podman:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(StackTestError):
                for name in self.engine.containers(all_states=False):
                    self.engine.run([self.engine.tool, "healthcheck", "run", name], timeout=30,
                                    check=False)
            self._stop.wait(self.period)


def health(engine: Engine, container: str) -> str:
    """``healthy``, ``starting``, ``unhealthy`` or ``none`` (no health check), or the
    container's state when it is not running."""
    state = engine.inspect(container, "{{.State.Status}}")
    if state != "running":
        return state
    return engine.inspect(container, "{{if .State.Health}}{{.State.Health.Status}}"
                          "{{else}}none{{end}}") or "none"


def wait_healthy(engine: Engine, expected: int, timeout: float = HEALTH_TIMEOUT_S) -> None:
    """Wait until ``expected`` containers run and every one is healthy. Raises
    ``StackTestError`` naming the laggards and the last lines of their logs."""
    deadline = time.monotonic() + timeout
    seen: dict[str, str] = {}
    while time.monotonic() < deadline:
        names = engine.containers()
        seen = {name: health(engine, name) for name in names}
        if len(names) >= expected and all(s == "healthy" for s in seen.values()):
            return
        time.sleep(2)
    bad = {name: s for name, s in seen.items() if s != "healthy"}
    details = "\n".join(f"--- {name} ({s}):\n{engine.logs_tail(name)}" for name, s in bad.items())
    raise StackTestError(f"not healthy after {timeout:.0f} s ({len(seen)} of {expected} "
                         f"containers seen): {bad}\n{details}")


# ---------------------------------------------------------------------------------- checks

def episodes_of(out_dir: Path, label: str) -> list[EpisodeRecord]:
    """The episode records of a run's output folder, read by the project's own reader; an
    unreadable episode file is a failure here, not a warning."""
    episodes, warnings = scan_episodes(out_dir)
    if warnings:
        raise StackTestError(f"{label}: {'; '.join(warnings)}")
    return episodes


def check_results(out_dir: Path, label: str, min_progress: float | None = None) -> str:
    """Check a finished one-run eval's folder: a summary, every episode scored (and at least
    ``min_progress`` %, when given). Returns a one-line account."""
    summary_path = out_dir / "summary.json"
    if not summary_path.exists():
        raise StackTestError(f"{label}: no summary.json in {out_dir}")
    summary = json.loads(summary_path.read_text())
    episodes = episodes_of(out_dir, label)
    if not episodes:
        raise StackTestError(f"{label}: no episode files in {out_dir}")
    unscored = [(e.key, e.end_reason) for e in episodes if not e.scored]
    if unscored:
        raise StackTestError(f"{label}: episodes not scored: {unscored}")
    if min_progress is not None:
        low = [(e.key, e.progression) for e in episodes
               if 100.0 * e.progression < min_progress]
        if low:
            raise StackTestError(f"{label}: progression below {min_progress} %: {low}")
    return (f"{label}: {len(episodes)} episodes scored, average progress "
            f"{summary.get('average_progress')} ± {summary.get('standard_error')}")


# ---------------------------------------------------------------------------------- stages

@dataclass
class Context:
    engine: Engine
    results: Path  # the eval service's results folder (bind-mounted on /data/results)
    port: int  # the orchestrator service, on 127.0.0.1
    expected: int = 0  # containers of the stack (replicas counted)
    lines: list[str] = field(default_factory=list)  # the account printed at the end


def expected_containers(services: dict[str, Any]) -> int:
    """Containers ``compose up`` starts for ``services``: every replica of every service
    outside a profile (the one-run ``eval`` is in the ``run`` profile)."""
    return sum(int((s.get("deploy") or {}).get("replicas", 1))
               for s in services.values() if not s.get("profiles"))


def stage_up(ctx: Context) -> None:
    """Bring the stack up and wait for every container to be healthy."""
    ctx.expected = expected_containers(yaml.safe_load(COMPOSE_FILE.read_text())["services"])
    ctx.engine.run(ctx.engine.compose_argv("up", "-d"), timeout=600)
    wait_healthy(ctx.engine, ctx.expected)
    ctx.lines.append(f"up: {ctx.expected} containers healthy")


def one_run_eval(ctx: Context, name: str, overrides: list[str]) -> Path:
    """``compose run --rm eval`` with ``overrides``, into results/<name>; returns that folder."""
    argv = ctx.engine.compose_argv(
        "run", "--rm", "-T", "eval", "eval", "--config", "/etc/moria/run.yaml", "--no-progress",
        f"eval.output_dir=results/{name}", *overrides, profile="run")
    done = ctx.engine.run(argv, timeout=EVAL_TIMEOUT_S, check=False)
    out = ctx.results / name
    if done.returncode != 0:
        tail = "\n  ".join((done.stdout + done.stderr).splitlines()[-25:])
        raise StackTestError(f"{name}: the eval exited {done.returncode}\n  {tail}")
    return out


def stage_oracle(ctx: Context) -> None:
    """The BabyAI oracle through the one-run eval container: every episode at 100 %."""
    out = one_run_eval(ctx, "oracle", ["agent.type=oracle", "eval.num_episodes.babyai=2"])
    ctx.lines.append(check_results(out, "oracle eval", min_progress=100.0))


def stage_local_model(ctx: Context) -> None:
    """deploy/run.yaml as written (naive agent, embedded local model), a few steps each."""
    out = one_run_eval(ctx, "local-model", ["eval.num_episodes.babyai=1",
                                            "eval.max_steps_per_episode=3"])
    ctx.lines.append(check_results(out, "local-model eval"))


#: What the cpu-quota stage asks of the orchestrator image: ``moria.cores``'s view, as JSON.
_CORES_PROBE = ("import json; from moria import cores; print(json.dumps({'limit': "
                "cores.cgroup_cpu_limit(), 'affinity': cores.affinity_cores(), "
                "'available': cores.available_cores()}))")


def stage_cpu_quota(ctx: Context) -> None:
    """The eval service's image run with ``--cpus 1.5`` (a CPU limit, as ``docker run --cpus``
    or a Kubernetes limit sets one): ``moria.cores`` sees 1.5 cores, so ``auto`` counts 2 (or
    the affinity, when smaller), whatever the host has."""
    image = str(yaml.safe_load(COMPOSE_FILE.read_text())["services"]["eval"]["image"])
    done = ctx.engine.run([ctx.engine.tool, "run", "--rm", "--cpus", "1.5", "--entrypoint",
                           "/opt/moria/venv/bin/python", image, "-c", _CORES_PROBE],
                          timeout=120)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    if seen["limit"] != 1.5 or seen["available"] != min(seen["affinity"], 2):
        raise StackTestError(f"--cpus 1.5 was seen as {seen} (expected limit 1.5, available "
                             f"min(affinity, 2))")
    ctx.lines.append(f"cpu quota: --cpus 1.5 seen as {seen['limit']} cores, "
                     f"{seen['available']} available of {seen['affinity']} in the affinity")


def crash(engine: Engine, container: str) -> None:
    """SIGKILL every process of ``container`` but its init (a crash, as the OOM killer would
    do it): the init then exits with the server's status and the restart policy restarts it.
    (``podman kill`` / ``docker kill`` would count as a deliberate stop: no restart.)"""
    engine.run([engine.tool, "exec", container, "sh", "-c", "kill -KILL -1"], timeout=60,
               check=False)


def _container_of(engine: Engine, service: str) -> str:
    names = engine.containers(service=service)
    if not names:
        raise StackTestError(f"no container of service {service!r}")
    return names[0]


async def _faulted_run(ctx: Context, spec: dict[str, Any], run_id: str) -> dict[str, Any]:
    engine = ctx.engine
    env_ctr = _container_of(engine, "env-babyai")
    agent_ctr = _container_of(engine, "agent")
    restarts_before = {c: int(engine.inspect(c, "{{.RestartCount}}"))
                       for c in (env_ctr, agent_ctr)}
    finished: Counter[tuple[str, str, int]] = Counter()
    types: Counter[str] = Counter()
    kills: list[tuple[str, int]] = []
    final: dict[str, Any] = {}
    loop = asyncio.get_running_loop()

    def on_event(event: Any) -> None:
        types[event.type] += 1
        payload = dict_from_struct(event.payload)
        if event.type == "episode_finished":  # the episode's main fields (service.py)
            finished[(payload["env"], payload["task"], int(payload["episode_index"]))] += 1
            target = (env_ctr if not kills else agent_ctr if len(kills) == 1 else None)
            if target is not None:
                kills.append((target, sum(finished.values())))
                # off the event loop: the exec takes a moment
                loop.run_in_executor(None, crash, engine, target)
        if event.type in ("completed", "failed", "cancelled"):
            final.update(type=event.type, payload=payload)

    async with OrchestratorClient(f"127.0.0.1:{ctx.port}") as client:
        submitted = await client.submit_run(spec, run_id=run_id)
        await asyncio.wait_for(client.follow(submitted.run_id, on_event), RUN_TIMEOUT_S)
        run = await client.get_run(submitted.run_id)
    return {"run": run, "finished": finished, "types": types, "kills": kills, "final": final,
            "restarts_before": restarts_before}


def stage_faulted_run(ctx: Context) -> None:
    """A service run with an env and an agent container crashed mid-run: it succeeds and
    records every planned episode exactly once."""
    spec = yaml.safe_load(RUN_FILE.read_text())
    spec["eval"].update(num_episodes={"babyai": 2}, max_steps_per_episode=4, num_workers=4,
                        # the restarted container needs a few seconds: retries back off
                        # 0.5, 1, 2, 4, 5 s
                        max_episode_retries=5)
    spec["eval"].pop("output_dir", None)
    run_id = f"stack-test-{int(time.time())}"
    seen = asyncio.run(_faulted_run(ctx, spec, run_id))
    engine, run, finished = ctx.engine, seen["run"], seen["finished"]
    if len(seen["kills"]) < 2:
        raise StackTestError(f"the run ended before both crashes ({seen['kills']})")
    for container, before in seen["restarts_before"].items():
        after = int(engine.inspect(container, "{{.RestartCount}}"))
        if after <= before:
            raise StackTestError(f"{container} was not restarted after its crash "
                                 f"(restart count {before} -> {after})")
    if seen["final"].get("type") != "completed":
        raise StackTestError(f"faulted run {run_id} ended {seen['final']}")
    total = int(run.episodes_total)
    twice = {k: n for k, n in finished.items() if n != 1}
    if twice or len(finished) != total or int(run.episodes_done) != total:
        raise StackTestError(f"faulted run {run_id}: {len(finished)} distinct finished "
                             f"episodes, {run.episodes_done} done, {total} planned; counted "
                             f"more than once: {twice}")
    with tempfile.TemporaryDirectory(prefix="moria-stack-run-") as tmp:
        orchestrator = _container_of(engine, "orchestrator")
        engine.run([engine.tool, "cp", f"{orchestrator}:{run.output_dir}", tmp], timeout=120)
        episodes = episodes_of(Path(tmp) / Path(run.output_dir).name, f"faulted run {run_id}")
    keys = Counter(e.key for e in episodes)
    if set(keys) != set(finished) or any(n != 1 for n in keys.values()):
        raise StackTestError(f"faulted run {run_id}: result files {dict(keys)} do not match "
                             f"the finished episodes {dict(finished)}")
    unscored = [(e.key, e.end_reason) for e in episodes if not e.scored]
    if unscored:
        raise StackTestError(f"faulted run {run_id}: unscored episodes {unscored}")
    kills = ", ".join(f"{c} after {n} episode(s)" for c, n in seen["kills"])
    ctx.lines.append(
        f"faulted run {run_id}: crashed {kills}; {total} planned, {len(episodes)} result files, "
        f"{seen['types']['episode_finished']} episode_finished events, "
        f"{seen['types']['episode_retried']} retries; each episode recorded once")


#: files the engine itself puts into every container (name resolution, its own markers, and
#: Docker's init for ``init: true``, which it adds as /usr/sbin/docker-init)
ENGINE_FILES = ("/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/run/.containerenv",
                "/.dockerenv", "/usr/sbin/docker-init")


def unexpected_changes(diff: str, mounts: list[str]) -> list[str]:
    """The lines of ``podman/docker diff`` output (``A|C|D path``) that are not the engine's
    own: a mount point (a volume, a bind mount, a tmpfs), an engine file, or a directory
    the engine made or changed on the way to one of them. Whatever is left was written by the
    container itself."""
    allowed = {*mounts, *ENGINE_FILES}
    parents = {str(Path(p).parents[i]) for p in allowed for i in range(len(Path(p).parents))}
    bad = []
    for line in diff.splitlines():
        kind, _, path = line.strip().partition(" ")
        if path in allowed or any(path.startswith(m.rstrip("/") + "/") for m in mounts):
            continue
        if kind in ("A", "C") and path in parents:  # made by the engine on the way to a mount
            continue
        bad.append(line.strip())
    return bad


def stage_read_only(ctx: Context) -> None:
    """Nothing written in any container outside its volumes and tmpfs mounts."""
    changed = {}
    for name in ctx.engine.containers():
        out = ctx.engine.run([ctx.engine.tool, "diff", name], timeout=60).stdout
        mounts = ctx.engine.inspect(name, "{{range .Mounts}}{{.Destination}} {{end}}").split()
        bad = unexpected_changes(out, mounts)
        if bad:
            changed[name] = bad[:10]
    if changed:
        raise StackTestError(f"written outside the volumes: {changed}")
    ctx.lines.append("read-only: no container wrote outside its volumes and tmpfs mounts")


def stage_stop(ctx: Context) -> None:
    """Stop the stack (SIGTERM, drain): every container must exit 0."""
    names = ctx.engine.containers()
    started = time.monotonic()
    ctx.engine.run(ctx.engine.compose_argv("stop"), timeout=STOP_TIMEOUT_S)
    seconds = time.monotonic() - started
    codes = {name: ctx.engine.inspect(name, "{{.State.ExitCode}}") for name in names}
    bad = {name: code for name, code in codes.items() if code != "0"}
    if bad:
        raise StackTestError(f"containers did not exit 0 on SIGTERM: {bad}")
    ctx.lines.append(f"stop: {len(codes)} containers exited 0 on SIGTERM in {seconds:.0f} s")


def down(engine: Engine) -> None:
    """Remove the project's containers, networks and volumes (also after a failure)."""
    engine.run(engine.compose_argv("down", "-v", "-t", "30"), timeout=STOP_TIMEOUT_S,
               check=False)
    if engine.is_podman:  # podman-compose puts the project in a pod of its own
        engine.run([engine.tool, "pod", "rm", "-f", f"pod_{PROJECT}"], timeout=120, check=False)


@contextlib.contextmanager
def results_dir(keep: list[bool]) -> Iterator[Path]:
    """A temporary results folder the images' user can write (bind-mounted by the eval
    service through ``MORIA_RESULTS_DIR``); removed afterwards unless ``keep[0]`` was set."""
    path = Path(tempfile.mkdtemp(prefix="moria-stack-results-"))
    try:
        if os.geteuid() == 0:
            os.chown(path, IMAGE_UID, IMAGE_UID)
        else:
            path.chmod(0o777)
        yield path
    finally:
        if not keep[0]:
            shutil.rmtree(path, ignore_errors=True)


STAGES = [("cpu quota", stage_cpu_quota), ("up", stage_up), ("oracle eval", stage_oracle),
          ("local-model eval", stage_local_model), ("faulted service run", stage_faulted_run),
          ("read-only", stage_read_only), ("stop", stage_stop)]


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deploy/stack_test.py",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="leave the stack up on failure")
    args = parser.parse_args(argv)
    # SIGTERM (a CI timeout) and SIGINT (even where a shell started us ignoring it) stop the
    # stages and still tear the stack down
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _interrupted)
    try:
        engine = find_engine()
        missing = [image for image in compose_images()
                   if engine.run([engine.tool, "image", "inspect", image], timeout=60,
                                 check=False).returncode != 0]
        if missing:
            raise StackTestError(f"images missing: {', '.join(missing)} (run `make images`)")
    except StackTestError as exc:
        print(f"stack-test: {exc}", flush=True)
        return 1
    timings: list[tuple[str, float]] = []
    failed: str | None = None
    keep = [False]
    with results_dir(keep) as results:
        ctx = Context(engine, results, free_port())
        engine.env.update(MORIA_ORCHESTRATOR_PORT=str(ctx.port), MORIA_RESULTS_DIR=str(results))
        down(engine)  # a previous run's leftovers
        try:
            with HealthPump(engine):
                for name, stage in STAGES:
                    print(f"stack-test: {name} ...", flush=True)
                    started = time.monotonic()
                    try:
                        stage(ctx)
                    finally:
                        timings.append((name, time.monotonic() - started))
                    print(f"stack-test: {name} passed in {timings[-1][1]:.0f} s: "
                          f"{ctx.lines[-1] if ctx.lines else ''}", flush=True)
        except (StackTestError, KeyboardInterrupt) as exc:
            failed = f"{timings[-1][0] if timings else 'setup'}: {exc}"
        except Exception as exc:  # noqa: BLE001 (a defect here or in the stack: still tear down)
            failed = (f"{timings[-1][0] if timings else 'setup'}: "
                      + "".join(traceback.format_exception(exc)))
        finally:
            if failed and args.keep:
                keep[0] = True
                print(f"stack-test: left up (project {PROJECT}; the eval results in "
                      f"{results}); `{' '.join(engine.compose_argv('down', '-v'))}` removes it")
            else:
                started = time.monotonic()
                down(engine)
                timings.append(("down", time.monotonic() - started))
    print("\nstack-test stages:")
    for name, seconds in timings:
        print(f"  {name:<22}{seconds:>6.0f} s")
    for line in ctx.lines:
        print(f"  {line}")
    if failed:
        print(f"stack-test FAILED at {failed}", flush=True)
        return 1
    print("stack-test passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
