"""The plan side of one episode: what the run spec resolves to for one episode
(``orchestrator.core.episode.EpisodeConfig``), built once per episode before it is played.

``orchestrator.core.episode`` plays an episode from its plan and this record alone and never
sees the run spec (an import-linter contract keeps it so): every rule that reads the spec for
an episode (which sections play a seat, the env's options, what is saved, the deadlines, the
few_shot demonstrations) is applied here.
"""

from __future__ import annotations

from typing import Any

from moria.config import TENSOR_AGENT_TYPES
from moria.policy.v1 import policy_service_pb2 as pol_pb
from orchestrator.core.episode import EpisodeConfig, EpisodeSetupError, SeatConfig
from orchestrator.plan.spec import RunSpec
from orchestrator.store.demos import MissingDemonstrationsError, episode_demonstrations
from orchestrator.suites.balrog import BALROG_TEXT_ENVS


def episode_config(spec: RunSpec, env: str, task: str, seed: int, *,
                   demonstrations: list[pol_pb.Demonstration] | None = None,
                   ) -> EpisodeConfig:
    """The ``EpisodeConfig`` of one episode of (``env``, ``task``) played with ``seed`` under
    ``spec``.

    ``demonstrations``: what every seat's Begin carries, when chosen once for the whole run
    (the runner's ``check_demonstrations``; an episode that begins no player passes []);
    None: chosen for this episode alone (``episode_demonstrations``, which reads the demo file
    only when the run's player reads demonstrations: call this off the event loop then).

    Raises EpisodeSetupError when the episode's player reads demonstrations that are missing
    or too few (the message names the file and the ``moria record-demos`` command).
    """
    if demonstrations is None:
        try:
            demonstrations = episode_demonstrations(spec, env, task, seed)
        except MissingDemonstrationsError as exc:
            raise EpisodeSetupError(str(exc)) from None
    pairs = spec.seat_configs()
    return EpisodeConfig(
        agent=spec.agent, client=spec.client,
        players={agent_id: SeatConfig(*spec.seat(agent_id), role=player.role,
                                      env_options=player.env_options(),
                                      record=player.model_dump(mode="json", exclude_none=True))
                 for agent_id, player in spec.players.items()},
        env_options=env_options(spec, env),
        include_image=any(agent.max_image_history > 0 for agent, _ in pairs),
        include_tensors=any(agent.type in TENSOR_AGENT_TYPES for agent, _ in pairs),
        oracle=any(agent.type == "oracle" for agent, _ in pairs) or spec.eval.oracle_hints,
        max_steps=spec.eval.max_steps_per_episode or 0,
        step_timeout_s=spec.eval.step_timeout_s,
        episode_timeout_s=spec.eval.episode_timeout_s,
        feedback_on_invalid_action=spec.eval.feedback_on_invalid_action,
        save_trajectories=spec.eval.save_trajectories,
        save_prompts=spec.eval.save_prompts,
        demonstrations=list(demonstrations))


def env_options(spec: RunSpec, env: str) -> dict[str, Any]:
    """The family options an episode of ``env`` opens with: the spec's ``<env>_kwargs``, plus
    ``balrog_source`` for the families whose observation text follows the BALROG checkout under
    ``agent.protocol=balrog`` (``BALROG_TEXT_ENVS``)."""
    options = dict(spec.envs.kwargs_for(env))
    if spec.agent.protocol == "balrog" and env in BALROG_TEXT_ENVS:
        options["balrog_source"] = spec.agent.balrog_source
    return options
