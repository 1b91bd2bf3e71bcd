"""``moria view --service``: a run of a real orchestrator service (on real env and policy
servers), followed through ``StreamEvents`` into a mirror the viewer's pages read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from moria.results import load_run
from orchestrator.apps.remote import OrchestratorClient
from orchestrator.apps.viewer.follow import ServiceMirror
from orchestrator.apps.viewer.site import Site
from orchestrator.plan.spec import load_spec
from tests.support.servers import env_server, policy_server, start_orchestrator

TASK = "BabyAI-MixedTrainLocal-v0/goto"


async def test_a_service_run_is_mirrored_as_it_plays(tmp_path: Path) -> None:
    async with env_server() as env, policy_server() as pol:
        server, servicer = await start_orchestrator(
            tmp_path / "state", allowed_endpoints=[env.target, pol.target])
        try:
            spec = load_spec(None, [
                "agent.type=oracle", "envs.names=babyai", f"tasks.babyai_tasks=[{TASK}]",
                "eval.num_episodes.babyai=3", "eval.num_workers=1",
                f"endpoints.env.babyai=[{env.target}]", f"endpoints.policy=[{pol.target}]"])
            mirror = ServiceMirror(server.bound_address, tmp_path / "mirror", ["followed"])
            async with OrchestratorClient(server.bound_address) as client:
                await client.submit_run(spec.model_dump(mode="json"), run_id="followed")
                await asyncio.to_thread(mirror.start)  # returns once run.json is written
                assert mirror.error is None
                assert await asyncio.to_thread(mirror.join, 240)  # the run ended
        finally:
            await server.shutdown()
            await servicer.aclose()

    assert mirror.error is None
    run_dir = tmp_path / "mirror" / "followed"
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["source"].startswith(f"orchestrator service {server.bound_address}")
    assert meta["spec"]["eval"]["num_episodes"]["babyai"] == 3
    run = load_run(run_dir)
    assert [(e.episode_index, e.end_reason, e.progression) for e in run.episodes] == [
        (0, "terminated", 1.0), (1, "terminated", 1.0), (2, "terminated", 1.0)]
    served = load_run(tmp_path / "state" / "runs" / "followed")  # the service's own files
    assert [e.seed for e in run.episodes] == [e.seed for e in served.episodes]
    page = Site([run_dir]).run_page(0).html
    assert "Followed live from orchestrator service" in page
