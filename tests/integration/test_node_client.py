"""The Node example client (examples/node/) against real env, policy and orchestrator servers on
loopback: an Env Session episode, a Policy Play stream (built-in turns and real env turns), an
orchestrator run followed to its end, and one-line errors for a server that is not there.

Node.js 18+ and npm are required, not optional: a machine without them fails here, saying so.
The npm packages come from examples/node/package-lock.json through `npm ci`, installed once
into .cache/node-example/ (keyed by the lockfile's hash) and found through NODE_PATH."""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from env_server.families.babyai.instruction import ACTION_NAMES
from tests.support.servers import env_server, policy_server, start_orchestrator

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "node"
CACHE = ROOT / ".cache" / "node-example"
TASK = "BabyAI-MixedTrainLocal-v0/goto"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found on PATH: the Node example test needs Node.js 18+ and npm "
                    "(e.g. `apt-get install nodejs npm`); it does not skip without them")
    return path


@pytest.fixture(scope="session")
def node_path() -> str:
    """The node_modules folder holding the example's locked packages (npm ci, once per
    lockfile; a file lock keeps parallel test workers from installing at the same time)."""
    node, npm = _tool("node"), _tool("npm")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    major = int(version.stdout.strip().lstrip("v").split(".")[0])
    assert major >= 18, f"the Node example needs Node.js 18+, found {version.stdout.strip()}"
    files = [EXAMPLE / "package.json", EXAMPLE / "package-lock.json"]
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:16]
    target = CACHE / digest
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = target / ".installed"
        for old in CACHE.iterdir():  # installs of earlier lockfiles
            if old.is_dir() and old.name != digest:
                shutil.rmtree(old, ignore_errors=True)
        if not stamp.exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            for f in files:
                shutil.copy(f, target / f.name)
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
                cwd=target, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                pytest.fail(f"npm ci of examples/node failed (exit {done.returncode}; is the npm "
                            f"registry reachable?):\n{done.stdout}\n{done.stderr}")
            stamp.touch()
    return str(target / "node_modules")


@dataclass
class Ran:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


async def node(node_path: str, script: str, *args: str, timeout: float = 60.0) -> Ran:
    """Run ``examples/node/<script>`` with ``args`` (without blocking the servers that run on
    this event loop)."""
    env = {**os.environ, "NODE_PATH": node_path}
    process = await asyncio.create_subprocess_exec(
        _tool("node"), str(EXAMPLE / script), *args, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"node {script} {' '.join(args)} ran past {timeout} s") from None
    assert process.returncode is not None
    return Ran(process.returncode, out.decode(), err.decode())


def field(line: str, name: str) -> str:
    match = re.search(rf"\b{name}=(\S+)", line)
    assert match, f"no {name}= in {line!r}"
    return match.group(1)


async def test_env_episode(node_path: str) -> None:
    cap = 12
    async with env_server() as env:
        ran = await node(node_path, "env_episode.js", "--address", env.target,
                         "--task", f"babyai:{TASK}", "--seed", "3", "--max-steps", str(cap))
        assert ran.code == 0, ran.err
        opened = next(line for line in ran.lines if line.startswith("opened "))
        assert field(opened, "agents") == "agent_0" and field(opened, "max_steps") == str(cap)
        steps = [line for line in ran.lines if line.startswith("step ")]
        assert 1 <= len(steps) <= cap
        assert [int(s.split()[1].rstrip(":")) for s in steps] == list(range(1, len(steps) + 1))
        for step in steps:
            action = re.search(r'-> "([^"]+)"', step)
            assert action and action.group(1) in ACTION_NAMES, step
            assert field(step, "valid") == "true"
        (end,) = [line for line in ran.lines if line.startswith("episode_end: ")]
        assert int(field(end, "steps")) == len(steps)
        reason = field(end, "reason")
        assert reason in {"END_REASON_TERMINATED", "END_REASON_TRUNCATED"}
        # a truncated episode ran to the cap; a terminated one ended on its last step
        assert reason == "END_REASON_TERMINATED" or len(steps) == cap
        assert "terminated=true" in steps[-1] or "truncated=true" in steps[-1]
        assert '"agent_0":' in field(end, "returns") and ran.lines[-1] == "closed"

        # the same seed plays the same episode; the server's error comes back on one line
        again = await node(node_path, "env_episode.js", "--address", env.target,
                           "--task", f"babyai:{TASK}", "--seed", "3", "--max-steps", str(cap))
        assert [s for s in again.lines if s.startswith("step ")] == steps
        unknown = await node(node_path, "env_episode.js", "--address", env.target,
                             "--task", "babyai:NoSuchTask")
        assert unknown.code == 1
        assert unknown.err.startswith("error: Session failed: NOT_FOUND: unknown task")
        assert len(unknown.err.splitlines()) == 1


async def test_policy_play(node_path: str) -> None:
    async with env_server() as env, policy_server() as pol:
        built_in = await node(node_path, "policy_play.js", "--address", pol.target,
                              "--agent-type", "random", "--turns", "4", "--seed", "11")
        assert built_in.code == 0, built_in.err
        ready = next(line for line in built_in.lines if line.startswith("ready "))
        assert field(ready, "strategy") == "random"
        acts = [line for line in built_in.lines if line.startswith("act ")]
        assert len(acts) == 4
        for act in acts:
            action = re.search(r': "([^"]+)"', act)
            assert action and action.group(1) in ACTION_NAMES, act
        assert built_in.lines[-1].startswith("ended turns=4 ")

        # turns from a real env session: the oracle player reaches the goal
        real = await node(node_path, "policy_play.js", "--address", pol.target,
                          "--env", env.target, "--agent-type", "oracle", "--turns", "40")
        assert real.code == 0, real.err
        acts = [line for line in real.lines if line.startswith("act ")]
        env_steps = [line for line in real.lines if line.startswith("env step ")]
        assert 1 <= len(acts) == len(env_steps) < 40
        assert all(field(s, "valid") == "true" for s in env_steps)
        assert field(env_steps[-1], "progression") == "1"
        assert field(real.lines[-1], "reason") == "END_REASON_TERMINATED"

        refused = await node(node_path, "policy_play.js", "--address", pol.target,
                             "--agent-type", "no_such_player")
        assert refused.code == 1 and len(refused.err.splitlines()) == 1
        assert refused.err.startswith("error: Play failed: INVALID_ARGUMENT")


async def test_orchestrator_run(node_path: str, tmp_path: Path) -> None:
    episodes, cap = 3, 8
    async with env_server() as env, policy_server() as pol:
        server, servicer = await start_orchestrator(tmp_path / "state",
                                                  allowed_endpoints=[env.target, pol.target])
        try:
            ran = await node(node_path, "orchestrator_run.js", "--address", server.bound_address,
                             "--env", env.target, "--policy", pol.target, "--task", TASK,
                             "--episodes", str(episodes), "--max-steps", str(cap),
                             "--agent-type", "random", "--run-id", "node-run", timeout=120)
        finally:
            await server.shutdown()
            await servicer.aclose()
    assert ran.code == 0, ran.out + ran.err
    events = [line for line in ran.lines if line.startswith("event ")]
    assert [int(e.split()[1]) for e in events] == list(range(1, len(events) + 1))
    types = [e.split()[2] for e in events]
    assert types[0] == "submitted" and types[-1] == "completed", types
    finished = [e for e in events if e.split()[2] == "episode_finished"]
    assert len(finished) == episodes
    assert sorted(int(field(e, "episode_index")) for e in finished) == list(range(episodes))
    assert all(1 <= int(field(e, "num_steps")) <= cap for e in finished)
    final = ran.lines[-1]
    assert final.startswith("finished run=node-run state=RUN_STATE_SUCCEEDED")
    assert field(final, "episodes") == f"{episodes}/{episodes}"
    assert (tmp_path / "state" / "runs" / "node-run" / "summary.json").is_file()


@pytest.mark.parametrize(("script", "what"), [
    ("env_episode.js", "env server"),
    ("policy_play.js", "policy server"),
    ("orchestrator_run.js", "orchestrator service"),
])
async def test_a_server_that_is_not_there_is_one_line_and_exit_1(
        node_path: str, tmp_path: Path, script: str, what: str) -> None:
    address = f"unix://{tmp_path}/nobody.sock"
    ran = await node(node_path, script, "--address", address, "--connect-timeout", "1",
                     timeout=30)
    assert ran.code == 1 and ran.out == ""
    assert ran.err.startswith(f"error: cannot reach the {what} at {address} within 1 s")
    assert len(ran.err.splitlines()) == 1


async def test_bad_flags_exit_2(node_path: str) -> None:
    ran = await node(node_path, "env_episode.js", "--no-such-flag")
    assert ran.code == 2 and ran.err.startswith("error: ") and "usage:" in ran.err
