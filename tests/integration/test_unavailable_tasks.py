"""Tasks a server lists but cannot open (``TaskInfo.unavailable``), over real gRPC on loopback:
``ListTasks`` carries the reason, ``open`` ends the session with FAILED_PRECONDITION and that
reason (an unknown task stays NOT_FOUND), ``moria eval`` stops at preflight (exit 2, the reason,
no episode), and ``moria tasks`` marks them. A test family (``tests/support/unavailable_family``)
checks the mechanism in-process and with process isolation; Melting Pot's scenarios (listed
unavailable while the server has no assets, or for good when their substrate is not served)
check the real case.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import grpc
import pytest

from env_server.families import FAMILIES
from moria.clients import EnvClient
from moria.env.v1 import env_service_pb2 as env_pb
from moria.server_files import ServerFiles
from tests.integration.test_run_bounds import _one_error
from tests.integration.test_run_outcomes import moria
from tests.support.servers import env_server, policy_server
from tests.support.unavailable_family import LOCKED_REASON

MORIA = str(Path(sys.executable).parent / "moria")



@pytest.fixture
def locked_family(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(FAMILIES, "locked", "tests.support.unavailable_family:LockedFamily")


async def _refused(client: EnvClient, request: env_pb.OpenRequest) -> grpc.aio.AioRpcError:
    session = client.session()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await session.open(request)
    return err.value


@pytest.mark.parametrize("isolated", [(), ("locked",)], ids=["in-process", "process"])
async def test_an_unavailable_task_is_listed_with_its_reason_and_refused_at_open(
        locked_family: None, isolated: tuple[str, ...]) -> None:
    async with env_server(("babyai", "locked"), process_families=isolated) as srv:
        client = EnvClient(srv.target)
        listed = {t.task: t.unavailable for t in await client.list_tasks("locked")}
        assert listed == {"open": "", "locked": LOCKED_REASON}
        assert not [t for t in await client.list_tasks("babyai") if t.unavailable]
        for name in ("locked:locked", "locked"):  # qualified, and bare (two families hosted)
            error = await _refused(client, env_pb.OpenRequest(task=name, seed=1))
            assert error.code() == grpc.StatusCode.FAILED_PRECONDITION, error
            assert error.details() == (
                f"task 'locked' is unavailable on this server: {LOCKED_REASON}")
        error = await _refused(client, env_pb.OpenRequest(task="locked:no-such-door"))
        assert error.code() == grpc.StatusCode.NOT_FOUND
        session = client.session()  # the family's available task opens
        opened = await session.open(env_pb.OpenRequest(task="locked:open", seed=1))
        assert list(opened.agents) == ["agent_0"]
        await session.close()
        assert (await client.get_info()).active_sessions == 0  # refusals freed their slots


async def test_meltingpot_lists_every_scenario_unavailable_and_refuses_it(
        tmp_path: Path) -> None:
    from env_server.families.meltingpot.package import NEEDS_ASSETS, scenario_unavailable
    from env_server.families.meltingpot.scenarios import NOT_SERVED
    from env_server.families.meltingpot.substrates import SUBSTRATES

    reason = scenario_unavailable()
    assert reason == NEEDS_ASSETS  # make install installs tensorflow; the server has no assets
    async with env_server(("meltingpot",), files=ServerFiles({"meltingpot_assets": tmp_path}),
                          ) as srv:
        client = EnvClient(srv.target)
        tasks = await client.list_tasks("meltingpot")
        substrates, scenarios = tasks[:len(SUBSTRATES)], tasks[len(SUBSTRATES):]
        assert [t.task for t in substrates] == list(SUBSTRATES)
        assert not [t for t in substrates if t.unavailable]
        assert len(scenarios) == 312
        reasons = Counter(t.unavailable for t in scenarios)
        assert reasons == {reason: 194, NOT_SERVED: 118}, reasons
        harvest = next(t for t in scenarios if t.task == "commons_harvest__open_0")
        assert harvest.num_agents >= 1 and "commons_harvest__open" in harvest.description

        error = await _refused(client, env_pb.OpenRequest(
            task="meltingpot:commons_harvest__open_0", seed=1))
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error.details() == ("task 'commons_harvest__open_0' is unavailable on this "
                                   f"server: {reason}")
        tarball = tmp_path / "meltingpot-assets-2.3.0.tar.gz"
        tarball.write_bytes(b"")
        request = env_pb.OpenRequest(task="clean_up_0", seed=1)
        request.options.update({"assets": tarball.name})  # offered by the server
        error = await _refused(client, request)
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "are not a tar archive" in error.details(), error.details()
        error = await _refused(client, env_pb.OpenRequest(task="clean_up_999", seed=1))
        assert error.code() == grpc.StatusCode.NOT_FOUND


async def test_eval_naming_a_scenario_exits_2_at_preflight_with_the_reason(
        tmp_path: Path) -> None:
    from env_server.families.meltingpot.package import scenario_unavailable

    async with env_server(("meltingpot",)) as env, policy_server() as pol:
        code, _, err = await moria(
            "eval", "agent.type=random", "envs.names=meltingpot",
            "eval.num_episodes.meltingpot=2",
            "tasks.meltingpot_tasks=[commons_harvest__open,clean_up_0]",
            "eval.max_steps_per_episode=2", "eval.output_dir=out",
            f"endpoints.env.meltingpot=[{env.target}]", f"endpoints.policy=[{pol.target}]",
            "--no-progress", cwd=tmp_path, timeout=180)
    assert code == 2, err[-3000:]
    line = _one_error(err)
    assert "1 task(s) in tasks.meltingpot_tasks cannot be opened" in line
    assert f"'clean_up_0': {scenario_unavailable()}" in line
    assert "unknown task" not in line and "commons_harvest__open'" not in line
    assert not list((tmp_path / "out").rglob("*_run_*.json"))


def test_moria_tasks_marks_the_scenarios_unavailable_with_the_reason(tmp_path: Path) -> None:
    from env_server.families.meltingpot.package import scenario_unavailable
    from env_server.families.meltingpot.scenarios import NOT_SERVED
    from env_server.families.meltingpot.substrates import SUBSTRATES

    run = subprocess.run([MORIA, "tasks", "--env", "meltingpot"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    rows = []
    for line in run.stdout.splitlines()[1:]:  # a pipe: a header, then one line per task
        cells = line.split("\t")
        if cells[0] == "meltingpot":
            rows.append((cells[1], cells[4]))
    assert len(rows) == len(SUBSTRATES) + 312
    assert [task for task, _ in rows[:len(SUBSTRATES)]] == list(SUBSTRATES)
    assert not [d for _, d in rows[:len(SUBSTRATES)] if "UNAVAILABLE" in d]
    marks = (f"UNAVAILABLE: {scenario_unavailable()}. scenario of ",
             f"UNAVAILABLE: {NOT_SERVED}. scenario of ")
    starts = Counter(next(m for m in marks if d.startswith(m)) for _, d in rows[len(SUBSTRATES):])
    assert starts == {marks[0]: 194, marks[1]: 118}
    assert "312 task(s) marked UNAVAILABLE" in run.stderr


def test_moria_tasks_in_a_terminal_gives_the_reason_once(tmp_path: Path) -> None:
    from env_server.families.meltingpot.package import scenario_unavailable
    from env_server.families.meltingpot.scenarios import NOT_SERVED
    from tests.integration.test_cli_output import in_terminal

    code, text = in_terminal("tasks", "--env", "meltingpot", cwd=tmp_path)
    assert code == 0, text[-2000:]
    assert "\u2026" not in text  # no id cut
    starts = [line for line in text.splitlines() if "\u2502 meltingpot \u2502" in line]
    assert len(starts) == 27 + 312
    notes = Counter(line.split("UNAVAILABLE (note ")[1][0] for line in starts
                    if "UNAVAILABLE (note " in line)
    assert notes == {"1": 118, "2": 194}, notes  # the first listed scenario is not served
    flat = " ".join(text.split())
    assert ("312 task(s) marked UNAVAILABLE are listed but cannot be opened on this server: "
            f"note 1: {NOT_SERVED}. note 2: {scenario_unavailable()}.") in flat, flat[-1500:]
    assert flat.count(scenario_unavailable()) == flat.count(NOT_SERVED) == 1


def test_llm_worker_naming_a_scenario_exits_2_with_the_reason(tmp_path: Path) -> None:
    from env_server.families.meltingpot.package import scenario_unavailable

    worker = str(Path(sys.executable).parent / "llm-worker")
    run = subprocess.run([worker, "--env", "clean_up_0", "--agent-type", "dummy", "--no-jsonl"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 2, run.stderr[-3000:]
    assert ("error: --task 'clean_up_0': task 'clean_up_0' is unavailable on this server: "
            f"{scenario_unavailable()}") in run.stderr
