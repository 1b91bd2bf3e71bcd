"""Real gRPC servers on loopback for tests: started in-process on 127.0.0.1:<ephemeral>."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from env_server.service import MAX_ACTION_CHARS, REQUEST_LIMITS, EnvServicer
from moria.clients import close_channels
from moria.env.v1 import env_service_pb2, env_service_pb2_grpc
from moria.grpc_defaults import MAX_MESSAGE_BYTES
from moria.policy.v1 import policy_service_pb2, policy_service_pb2_grpc
from moria.security import ServerSecurity
from moria.server import DEFAULT_IDLE_TIMEOUT_S, Drain, MoriaServer
from moria.server_files import ServerFiles

#: What the local stack's servers take (``moria eval`` starts them with ``--client-paths`` on a
#: private unix socket): the run's paths as given. For tests that play runs naming files (RL
#: checkpoints, BALROG checkouts) through in-process servers, as a local run does.
LOCAL_STACK_FILES = ServerFiles(client_paths=True)


@dataclass
class Running:
    """A started server: its dial target, server object and servicer."""

    target: str
    server: MoriaServer
    servicer: object


@asynccontextmanager
async def env_server(families: tuple[str, ...] = ("babyai",), *, capacity: int = 8,
                     idle_timeout_s: float = 60.0, grace_s: float = 5.0,
                     process_families: tuple[str, ...] | None = None,
                     security: ServerSecurity | None = None,
                     max_message_bytes: int = MAX_MESSAGE_BYTES,
                     max_action_chars: int = MAX_ACTION_CHARS,
                     files: ServerFiles | None = None,
                     ) -> AsyncIterator[Running]:
    """An EnvService on loopback hosting ``families`` (``process_families``: run those games
    in worker processes; None: as the families ask). ``security``: TLS/mTLS/bearer token
    (None: plaintext); ``max_message_bytes`` and ``max_action_chars``: the server's limits;
    ``files``: the server files clients may name (None: none, as ``moria serve env``)."""
    drain = Drain()
    servicer = EnvServicer(list(families), drain=drain, capacity=capacity,
                           idle_timeout_s=idle_timeout_s, workers=4,
                           process_families=process_families, max_action_chars=max_action_chars,
                           files=files)
    server = MoriaServer(
        [lambda s: env_service_pb2_grpc.add_EnvServiceServicer_to_server(servicer, s)],
        [env_service_pb2.DESCRIPTOR.services_by_name["EnvService"].full_name],
        address="127.0.0.1:0", drain=drain, grace_s=grace_s, security=security,
        max_message_bytes=max_message_bytes, request_limits=REQUEST_LIMITS)
    await server.start()
    try:
        yield Running(server.bound_address, server, servicer)
    finally:
        await close_channels()
        await server.shutdown()
        servicer.shutdown()


@asynccontextmanager
async def policy_server(*, capacity: int = 64, security: ServerSecurity | None = None,
                        files: ServerFiles | None = None,
                        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
                        ) -> AsyncIterator[Running]:
    """A PolicyService on loopback (``security``: TLS/mTLS/bearer token; None: plaintext;
    ``files``: the server files a config may name, None: none, as ``moria serve agent``;
    ``idle_timeout_s``: its idle timeout, the server's default unless given)."""
    from agent_server.service import REQUEST_LIMITS as POLICY_LIMITS
    from agent_server.service import PolicyServicer

    drain = Drain()
    servicer = PolicyServicer(drain=drain, capacity=capacity, files=files,
                              idle_timeout_s=idle_timeout_s)
    server = MoriaServer(
        [lambda s: policy_service_pb2_grpc.add_PolicyServiceServicer_to_server(servicer, s)],
        [policy_service_pb2.DESCRIPTOR.services_by_name["PolicyService"].full_name],
        address="127.0.0.1:0", drain=drain, grace_s=2.0, security=security,
        request_limits=POLICY_LIMITS)
    await server.start()
    try:
        yield Running(server.bound_address, server, servicer)
    finally:
        await close_channels()
        await server.shutdown()
        await servicer.aclose()


async def start_orchestrator(state_dir: Any, **kwargs: Any) -> tuple[MoriaServer, Any]:
    """An OrchestratorService started on loopback over ``state_dir`` (``kwargs`` go to
    ``OrchestratorServicer``; runs' telemetry is tailed every 0.05 s). Returns the started
    server and the servicer; stop with ``server.shutdown()`` then ``servicer.aclose()``."""
    from moria.orchestrator.v1 import orchestrator_service_pb2 as orch_pb
    from moria.orchestrator.v1 import orchestrator_service_pb2_grpc as orch_grpc
    from orchestrator.apps.service import REQUEST_LIMITS as ORCHESTRATOR_LIMITS
    from orchestrator.apps.service import OrchestratorServicer

    drain = Drain()
    servicer = OrchestratorServicer(state_dir, drain=drain, **kwargs)
    await servicer.start()
    server = MoriaServer(
        [lambda s: orch_grpc.add_OrchestratorServiceServicer_to_server(servicer, s)],
        [orch_pb.DESCRIPTOR.services_by_name["OrchestratorService"].full_name],
        address="127.0.0.1:0", drain=drain, grace_s=1.0, request_limits=ORCHESTRATOR_LIMITS)
    await server.start()
    return server, servicer


async def play_one_episode(spec: Any, env: str, task: str, seed: int, *,
                           run_id: str = "test") -> Any:
    """One episode of ``env``'s ``task`` at ``seed`` under ``spec`` (a ``RunSpec``), played by
    ``run_episode`` against an Env server and a Policy server started here for it; returns
    its ``EpisodeRecord``."""
    from orchestrator.core.episode import EpisodePlan, run_episode
    from orchestrator.core.episode_config import episode_config

    async with env_server((env,)) as env_srv, policy_server() as pol:
        plan = EpisodePlan(run_id=run_id, env=env, task=task, episode_index=0, seed=seed,
                           env_target=env_srv.target, policy_target=pol.target)
        return await run_episode(plan, episode_config(spec, env, task, seed))
