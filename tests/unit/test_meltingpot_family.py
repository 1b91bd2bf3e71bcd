"""The meltingpot family: tasks, options, actions, metrics and its oracle (real dm-meltingpot)."""

from __future__ import annotations

import importlib.util

import pytest

from env_server.families import load_family
from env_server.families.meltingpot.substrates import HEADLINE
from env_server.game import (
    GameOptionError,
    GameOptions,
    PlayerSpec,
    TaskNotFoundError,
    TaskUnavailableError,
)


@pytest.fixture(scope="module")
def family():
    return load_family("meltingpot")


def test_tasks_list_the_social_dilemmas_first(family) -> None:
    tasks = family.list_tasks()
    assert [t.task for t in tasks[:len(HEADLINE)]] == list(HEADLINE)
    first = tasks[0]
    assert (first.num_agents, first.max_steps, first.default_action) == (7, 5000, "NOOP")
    assert first.unavailable == "" and "scenarios are listed after" in first.description
    pd = next(t for t in tasks if t.task == "prisoners_dilemma_in_the_matrix__repeated")
    assert pd.num_agents == 2


def test_scenarios_are_listed_after_the_substrates_as_unavailable(family) -> None:
    from env_server.families.meltingpot.package import scenario_configs, scenario_unavailable
    from env_server.families.meltingpot.scenarios import NOT_SERVED
    from env_server.families.meltingpot.substrates import SUBSTRATES

    tasks = family.list_tasks()
    configs = scenario_configs()
    assert len(configs) == 312
    assert [t.task for t in tasks] == [*SUBSTRATES, *configs]
    assert all(not t.unavailable for t in tasks[:len(SUBSTRATES)])
    scenarios = {t.task: t for t in tasks[len(SUBSTRATES):]}
    served = {name for name, config in configs.items() if config.substrate in SUBSTRATES}
    assert {scenarios[n].unavailable for n in served} == {scenario_unavailable()}
    assert {t.unavailable for n, t in scenarios.items() if n not in served} == {NOT_SERVED}
    for name, config in configs.items():
        info = scenarios[name]
        assert info.num_agents == sum(config.is_focal) >= 1, name
        assert config.substrate in info.description and config.description in info.description
        assert info.default_action == "NOOP" and info.max_steps > 0
    harvest = scenarios["commons_harvest__open_0"]
    assert harvest.max_steps == next(t.max_steps for t in tasks
                                     if t.task == "commons_harvest__open")


def test_the_scenarios_reason_names_what_is_missing(monkeypatch) -> None:
    """No tensorflow (the meltingpot extra installs none): the tarball and tensorflow, or
    tensorflow alone once the options name the tarball; with tensorflow (the
    meltingpot-scenarios extra), the tarball alone, and nothing once it is known."""

    from env_server.families.meltingpot import package

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorflow" else real(name, *a))
    assert package.scenario_unavailable() == (
        "needs the Melting Pot assets tarball (meltingpot_kwargs.assets=PATH) and tensorflow, "
        "which the meltingpot extra does not install")
    assert package.scenario_unavailable(assets=True).startswith("needs tensorflow")
    assert "tarball" not in package.scenario_unavailable(assets=True)
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "tensorflow" else real(name, *a))
    assert package.scenario_unavailable() == package.NEEDS_ASSETS
    assert "MORIA_MELTINGPOT_ASSETS=PATH" in package.NEEDS_ASSETS
    assert package.scenario_unavailable(assets=True) == ""


def test_opening_a_scenario_is_refused_with_the_reason(family, tmp_path) -> None:
    from env_server.families.meltingpot.package import scenario_unavailable

    listed = scenario_unavailable()
    with pytest.raises(TaskUnavailableError) as err:
        family.open("commons_harvest__open_0", GameOptions(seed=1))
    assert err.value.task == "commons_harvest__open_0"
    assert err.value.reason == listed
    assert str(err.value) == ("task 'commons_harvest__open_0' is unavailable on this server: "
                              + listed)
    tarball = tmp_path / "meltingpot-assets-2.3.0.tar.gz"
    tarball.write_bytes(b"")
    with pytest.raises(TaskUnavailableError) as err:  # a tarball that is none
        family.open("clean_up_3", GameOptions(seed=1, kwargs={"assets": str(tarball)}))
    assert err.value.reason.startswith(f"the assets {tarball.resolve()} are not a tar archive")
    with pytest.raises(GameOptionError, match="assets"):  # a path that does not exist
        family.open("clean_up_3", GameOptions(seed=1, kwargs={"assets": "/no/such/tarball"}))
    with pytest.raises(GameOptionError, match="allowed: assets"):
        family.open("clean_up_3", GameOptions(seed=1, kwargs={"bogus": 1}))
    with pytest.raises(TaskNotFoundError):
        family.open("clean_up_999", GameOptions(seed=1))
    # a substrate reads no assets: an existing path is accepted
    family.open("clean_up", GameOptions(seed=1, kwargs={"assets": str(tarball)})).close()


def test_actions_are_the_substrates_named_action_set(family) -> None:
    game = family.open("commons_harvest__open", GameOptions(seed=1))
    try:
        assert [a.name for a in game.actions("player_0")] == [
            "NOOP", "FORWARD", "BACKWARD", "STEP_LEFT", "STEP_RIGHT", "TURN_LEFT", "TURN_RIGHT",
            "FIRE_ZAP"]
        assert game.agents == [f"player_{i}" for i in range(7)]
    finally:
        game.close()
    game = family.open("clean_up", GameOptions(seed=1))
    try:
        assert "FIRE_CLEAN" in [a.name for a in game.actions("player_0")]
    finally:
        game.close()


def test_options_are_checked(family) -> None:
    with pytest.raises(TaskNotFoundError):
        family.open("no_such_substrate", GameOptions(seed=1))
    with pytest.raises(GameOptionError, match="allowed: assets"):
        family.open("clean_up", GameOptions(seed=1, kwargs={"bogus": 1}))
    with pytest.raises(GameOptionError, match="assets"):
        family.open("clean_up", GameOptions(seed=1, kwargs={"assets": "/no/such/tarball"}))
    with pytest.raises(GameOptionError, match="unknown agent id"):
        family.open("clean_up", GameOptions(seed=1, players=[PlayerSpec("agent_0")]))
    with pytest.raises(GameOptionError, match="role"):
        family.open("clean_up", GameOptions(seed=1, players=[PlayerSpec("player_0", "chef")]))
    with pytest.raises(GameOptionError, match="max_steps"):
        family.open("clean_up", GameOptions(seed=1, max_steps=0))


def test_invalid_answer_is_noop_and_metrics_report_every_player(family) -> None:
    game = family.open("prisoners_dilemma_in_the_matrix__repeated",
                       GameOptions(seed=2, max_steps=3))
    try:
        game.reset(2)
        result = game.step({"player_0": "jump over the moon", "player_1": 1})
        bad, good = result.transitions["player_0"], result.transitions["player_1"]
        assert (bad.valid, bad.applied_action) == (False, "NOOP") and bad.feedback
        assert (good.valid, good.applied_action) == (True, "FORWARD")
        assert bad.feedback not in bad.view.long_term_context
        for _ in range(2):
            result = game.step({"player_0": "NOOP", "player_1": "NOOP"})
        assert result.done and result.transitions["player_0"].truncated
        metrics = result.metrics
        assert set(metrics["returns"]) == {"player_0", "player_1"}
        assert metrics["end_reason"] == "step_limit" and metrics["steps"] == 3
        assert 0.0 <= metrics["progression"] <= 1.0
        with pytest.raises(RuntimeError):
            game.step({"player_0": "NOOP", "player_1": "NOOP"})
    finally:
        game.close()


@pytest.mark.parametrize(("task", "steps", "seeds"), [
    ("commons_harvest__open", 300, (4,)),
    # the matrix games pay only after both players collected a resource and one of them fired
    # the interaction beam at the other (and the result was shown for 16 frames); on some
    # seeds the greedy players never meet in 1,000 steps (6 of seeds 0-7 earn), and the
    # engine does not replay a seed exactly: two seeds that both earned are played
    ("prisoners_dilemma_in_the_matrix__repeated", 1000, (0, 4)),
    ("stag_hunt_in_the_matrix__repeated", 1000, (0, 4)),
])
@pytest.mark.slow
def test_oracle_earns_rewards(family, task: str, steps: int, seeds: tuple[int, ...]) -> None:
    """Every seat playing the expert: the substrate pays rewards (apples eaten, matrix-game
    interactions) within the given steps."""
    collective, events = 0.0, 0
    for seed in seeds:
        game = family.open(task, GameOptions(seed=seed, oracle=True, max_steps=steps))
        try:
            views = game.reset(seed)
            result = None
            while result is None or not result.done:
                result = game.step({a: v.info["expert_action"] for a, v in views.items()})
                views = {a: t.view for a, t in result.transitions.items()}
            collective += result.metrics["collective_return"]
            events += sum(result.metrics["events"].values())
        finally:
            game.close()
    assert collective > 0, f"{task}: no reward in {len(seeds)} episode(s) of {steps} steps"
    assert events > 0


def test_image_only_when_asked(family) -> None:
    game = family.open("clean_up", GameOptions(seed=1))
    try:
        views = game.reset(1)
        assert all(v.image is None for v in views.values())
        frame = game.render()
        assert frame.ndim == 3 and frame.shape[2] == 3
    finally:
        game.close()
