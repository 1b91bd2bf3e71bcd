"""``moria protocol-check`` and ``agent.protocol=balrog`` runs, over real servers.

The BALROG side is tests/fixtures/balrog_standin (our stand-in with BALROG's module layout);
the env and agent servers are real children (``LocalStack``) or real loopback servers, the model
is a local server speaking OpenAI's wire format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moria.server_files import ServerFiles
from orchestrator.apps.protocol_check import run_check
from orchestrator.store.protocol_record import saved_check
from tests.integration.test_run_outcomes import moria, servers
from tests.support.fake_openai import FakeOpenAI
from tests.support.servers import env_server, policy_server

STANDIN = Path(__file__).resolve().parents[1] / "fixtures" / "balrog_standin"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MORIA_CACHE_DIR", str(tmp_path / "cache"))


async def test_protocol_check_finds_requests_and_actions_equal(tmp_path: Path) -> None:
    lines: list[str] = []
    result = await run_check(str(STANDIN), ["babyai", "crafter"], ["naive", "robust_cot"],
                             max_steps=6, log_dir=tmp_path / "logs", progress=lines.append)
    assert result["status"] == "passed", json.dumps(result, indent=1)
    for env in ("babyai", "crafter"):
        row = result["envs"][env]
        # 2 strategies x 6 steps, each one model call and one applied action
        assert (row["requests"], row["requests_equal"]) == (12, 12)
        assert (row["actions"], row["actions_equal"]) == (12, 12)
    assert len(lines) == 4
    # saved per (commit, env, strategy) covered (the stand-in is no checkout: "unknown")
    assert result["balrog_commit"] == "unknown"
    for env in ("babyai", "crafter"):
        for strategy in ("naive", "robust_cot"):
            record = saved_check("unknown", env, strategy)
            assert (record["status"], record["env"], record["strategy"]) == (
                "passed", env, strategy)
            assert (record["requests"], record["requests_equal"]) == (6, 6)
    # what the check did not cover is not checked, whatever it found for the rest
    assert saved_check("unknown", "babaisai", "naive")["status"] == "not checked"
    assert saved_check("unknown", "babyai", "cot")["status"] == "not checked"

    # a later check of one case replaces that record only
    later = await run_check(str(STANDIN), ["babyai"], ["naive"], max_steps=2,
                            log_dir=tmp_path / "logs2", progress=lines.append)
    assert later["status"] == "passed"
    assert saved_check("unknown", "babyai", "naive")["max_steps"] == 2
    assert saved_check("unknown", "crafter", "robust_cot")["max_steps"] == 6


async def test_protocol_check_cli_refuses_a_path_that_is_not_balrog(tmp_path: Path) -> None:
    code, out, err = await moria("protocol-check", "--balrog", str(tmp_path), cwd=tmp_path)
    assert code == 2 and out == ""  # errors go to stderr, as every moria command's do
    assert "is not a BALROG checkout" in err


async def test_eval_with_balrog_protocol_and_no_source_stops_before_any_episode(
        tmp_path: Path) -> None:
    code, _, err = await moria("eval", "agent.protocol=balrog", "--no-progress",
                               f"eval.output_dir={tmp_path / 'out'}", cwd=tmp_path)
    assert code == 2, err[-2000:]
    assert "agent.balrog_source=<path of a BALROG checkout>" in err
    assert not list((tmp_path / "out").glob("babyai/**/*.json"))


async def _balrog_run(tmp_path: Path, model: FakeOpenAI, steps: int) -> tuple[int, str]:
    """A one-episode BabyAI run under the stand-in's protocol, on servers that offer the
    stand-in's folder (--balrog-sources) by name; returns (exit code, stderr)."""
    offered = ServerFiles({"balrog_source": STANDIN.parent})
    async with env_server() as env, policy_server(files=offered) as pol:
        code, _, err = await moria(
            "eval", "agent.protocol=balrog", f"agent.balrog_source={STANDIN.name}",
            "client.client_name=vllm", f"client.base_url={model.base_url}",
            "client.model_id=m", "envs.names=babyai",
            "tasks.babyai_tasks=[BabyAI-MixedTrainLocal-v0/goto]",
            "eval.num_episodes.babyai=1", f"eval.max_steps_per_episode={steps}",
            "--no-progress", f"eval.output_dir={tmp_path / 'out'}", *servers(env, pol),
            cwd=tmp_path)
    return code, err


async def test_a_balrog_protocol_run_records_its_protocol(tmp_path: Path) -> None:
    with FakeOpenAI(reply="turn left") as model:
        code, err = await _balrog_run(tmp_path, model, 3)
        requests = [r.json for r in model.requests if r.path.endswith("/chat/completions")]
    assert code == 0, err[-3000:]
    episode = json.loads(next((tmp_path / "out").glob("babyai/*/*_run_00.json")).read_text())
    protocol = episode["protocol"]
    assert protocol["name"] == "balrog" and protocol["balrog_commit"] == "unknown"
    assert protocol["generation"] == {"temperature": 0.5, "max_tokens": 321}
    assert len(protocol["instruction_sha256"]) == 64
    assert protocol["protocol_check"]["status"] == "not checked"
    # the run said so before its first episode, naming the command that checks its case
    assert "BALROG commit unknown is not checked for this env and strategy (naive)" in err
    assert (f"moria protocol-check --balrog {STANDIN} --env babyai --strategy naive` before "
            "comparing") in err
    # BALROG's request: the instruction as a user message, the checkout's settings, no seed
    first = requests[0]
    assert first["messages"][0]["role"] == "user"
    # every content as BALROG's client sends it: a list of parts, the text part first
    content = first["messages"][0]["content"]
    assert [part["type"] for part in content] == ["text"]
    assert "STANDIN" in content[0]["text"]
    assert (first["temperature"], first["max_tokens"]) == (0.5, 321)
    assert "seed" not in first
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["protocol"]["name"] == "balrog"


def test_json_output_is_the_json_document_alone(tmp_path: Path) -> None:
    """``--json``: stdout parses as one JSON document; the progress lines are on stderr."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "MORIA_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run(
        [str(Path(sys.executable).parent / "moria"), "protocol-check", "--balrog", str(STANDIN),
         "--env", "babyai", "--strategy", "naive", "--max-steps", "2", "--json"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout)["status"] == "passed"
    assert "episode 0" in run.stderr  # the progress line


async def test_failed_candidates_keep_the_extracted_answer_as_balrog_does(
        tmp_path: Path) -> None:
    with FakeOpenAI(reply="dance, 42!") as model:
        code, err = await _balrog_run(tmp_path, model, 2)
    assert code == 0, err[-3000:]
    episode = json.loads(next((tmp_path / "out").glob("babyai/*/*_run_00.json")).read_text())
    assert [s["raw_completion"] for s in episode["steps"]] == ["dance, 42!"] * 2
    # the stand-in's naive agent keeps the letters and spaces of the answer (its extraction)
    assert episode["failed_candidates"] == ["dance "] * 2


def _strict_standin(tmp_path: Path) -> Path:
    """A copy of the stand-in whose OpenAI client raises on an empty answer (as BALROG's
    feat/robust_retry branch does, after its retries)."""
    import shutil

    root = tmp_path / "strict"
    shutil.copytree(STANDIN, root / STANDIN.name,
                    ignore=shutil.ignore_patterns("__pycache__"))
    client = root / STANDIN.name / "balrog" / "client.py"
    text = client.read_text()
    marker = "        choice = response.choices[0]\n"
    assert marker in text
    client.write_text(text.replace(marker, marker + (
        "        if not choice.message.content:\n"
        "            raise RuntimeError('Empty content in response')\n")))
    return root / STANDIN.name


async def test_a_client_that_gives_up_is_reported_never_a_traceback(tmp_path: Path) -> None:
    strict = _strict_standin(tmp_path)
    # protocol-check (its own process: one BALROG source per process): the adversarial
    # answers include an empty one
    code, out, err = await moria("protocol-check", "--balrog", str(strict), "--env", "babyai",
                                 "--strategy", "naive", "--max-steps", "14", "--json",
                                 cwd=tmp_path)
    assert code == 1 and "Traceback" not in err, err[-3000:]
    result = json.loads(out)
    assert result["status"] == "failed"
    error = result["envs"]["babyai"]["error"]
    # Moria's player runs the checkout's client too, which gives up on the empty answer
    assert error == ("naive: the player failed: BALROG's client gave up: RuntimeError: Empty "
                     "content in response"), error
    # a run (its own local stack, which takes the checkout's path): BALROG's client makes the
    # call and gives up, so the episode is an agent error
    with FakeOpenAI(reply="") as model:
        code, _, err = await moria(
            "eval", "agent.protocol=balrog", f"agent.balrog_source={strict}",
            "client.client_name=vllm", f"client.base_url={model.base_url}",
            "client.model_id=m", "envs.names=babyai",
            "tasks.babyai_tasks=[BabyAI-MixedTrainLocal-v0/goto]",
            "eval.num_episodes.babyai=1", "eval.max_steps_per_episode=2", "--no-progress",
            f"eval.output_dir={tmp_path / 'out'}", cwd=tmp_path)
    assert code == 1, err[-3000:]
    episode = json.loads(next((tmp_path / "out").glob("babyai/*/*_run_00.json")).read_text())
    assert episode["end_reason"] == "agent_error"
    assert "BALROG's client gave up: RuntimeError: Empty content in response" in episode["error"]
    assert "Traceback" not in err
