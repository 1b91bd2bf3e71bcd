"""orchestrator.core.episode_config: the run spec resolved for one episode (EpisodeConfig)."""

from __future__ import annotations

from pathlib import Path

import pytest

from moria.policy.v1 import policy_service_pb2 as pol_pb
from orchestrator.core.episode import EpisodeConfig, EpisodeSetupError, _seat_records
from orchestrator.core.episode_config import episode_config
from orchestrator.plan.spec import load_spec

BALROG = str(Path(__file__).resolve().parents[1] / "fixtures" / "balrog_standin")
CONNECT_FOUR = ["envs.names=pettingzoo", "tasks.pettingzoo_tasks=[connect_four_v3]"]


def test_the_eval_settings_are_copied_as_the_spec_sets_them() -> None:
    spec = load_spec(None, ["eval.step_timeout_s=7.5", "eval.episode_timeout_s=90",
                            "eval.feedback_on_invalid_action=false",
                            "eval.save_trajectories=false", "eval.save_prompts=true",
                            "eval.max_steps_per_episode=12", "envs.babyai_kwargs={}"])
    config = episode_config(spec, "babyai", "BabyAI-MixedTrainLocal-v0/goto", 3)
    assert (config.step_timeout_s, config.episode_timeout_s) == (7.5, 90.0)
    assert not config.feedback_on_invalid_action and not config.save_trajectories
    assert config.save_prompts and config.max_steps == 12
    assert (config.include_image, config.include_tensors, config.oracle) == (False, False, False)
    assert config.demonstrations == [] and config.players == {}
    assert config.agent is spec.agent and config.client is spec.client
    unset = episode_config(load_spec(None, ["eval.episode_timeout_s=null"]), "babyai", "t", 3)
    assert unset.max_steps == 0 and unset.episode_timeout_s is None  # the env's cap; no limit


def test_the_seats_resolve_to_their_players_entry_or_the_runs_own() -> None:
    spec = load_spec(None, [*CONNECT_FOUR, "agent.type=random", "agent.max_image_history=1",
                            "players.player_1.agent.type=oracle", "players.player_1.role=x"])
    config = episode_config(spec, "pettingzoo", "connect_four_v3", 3)
    assert config.seat("player_0") == (spec.agent, spec.client)
    assert config.seat("player_1") == spec.seat("player_1")
    assert config.seat("player_1")[0].type == "oracle"
    assert config.include_image and config.oracle and not config.include_tensors
    seat = config.players["player_1"]
    assert (seat.role, seat.env_options) == ("x", {})
    assert seat.record == spec.players["player_1"].model_dump(mode="json", exclude_none=True)


def test_the_seat_records_of_an_episode_never_change_its_config() -> None:
    spec = load_spec(None, [*CONNECT_FOUR, "players.player_1.agent.type=scripted"])
    config = episode_config(spec, "pettingzoo", "connect_four_v3", 3)
    first = _seat_records(config, [])
    first["player_1"]["player"] = "scripted"
    first["player_1"]["agent"]["type"] = "changed"
    assert "player" not in config.players["player_1"].record
    assert _seat_records(config, [])["player_1"]["agent"]["type"] == "scripted"


def test_the_env_options_add_balrog_source_only_for_balrog_text_envs() -> None:
    balrog = ["agent.protocol=balrog", f"agent.balrog_source={BALROG}"]
    crafter = episode_config(load_spec(None, [*balrog, "envs.names=crafter"]), "crafter",
                             "default", 1)
    assert crafter.env_options["balrog_source"] == BALROG
    babyai = episode_config(load_spec(None, balrog), "babyai", "t", 1)
    assert "balrog_source" not in babyai.env_options
    assert "balrog_source" not in episode_config(
        load_spec(None, ["envs.names=crafter"]), "crafter", "default", 1).env_options


def test_demonstrations_chosen_for_the_run_are_used_as_given(tmp_path: Path) -> None:
    spec = load_spec(None, ["agent.type=few_shot", f"eval.icl_dataset={tmp_path}"])
    demo = pol_pb.Demonstration(instruction="go")
    config = episode_config(spec, "babyai", "t", 1, demonstrations=[demo])
    assert config.demonstrations == [demo]
    assert isinstance(config, EpisodeConfig)


def test_missing_demonstrations_are_an_episode_setup_error(tmp_path: Path) -> None:
    spec = load_spec(None, ["agent.type=few_shot", f"eval.icl_dataset={tmp_path}"])
    with pytest.raises(EpisodeSetupError, match="record-demos"):
        episode_config(spec, "babyai", "BabyAI-MixedTrainLocal-v0/goto", 1)
