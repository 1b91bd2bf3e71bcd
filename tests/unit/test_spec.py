"""RunSpec loading: BALROG keys, Hydra-style overrides, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.plan.overrides import OverrideError, apply_overrides, parse_value
from orchestrator.plan.seeds import derive_seed
from orchestrator.plan.spec import SpecError, load_spec
from orchestrator.suites.balrog import TASKS

BABYAI_TASKS = TASKS["babyai"]


def test_defaults_follow_balrog() -> None:
    spec = load_spec()
    assert spec.agent.type == "naive" and spec.agent.max_text_history == 16
    assert spec.client.client_name == "local" and spec.client.timeout == 60
    assert spec.client.max_retries == 5 and spec.client.generate_kwargs.temperature == 1.0
    assert spec.eval.num_episodes["babyai"] == 10 and spec.eval.feedback_on_invalid_action
    assert spec.tasks.babyai_tasks == BABYAI_TASKS
    assert len(list(spec.episodes())) == 50


def test_overrides_use_hydra_syntax() -> None:
    spec = load_spec(None, [
        "agent.type=cot", "agent.max_history=4", "client.generate_kwargs.temperature=0.2",
        "eval.num_episodes.babyai=2", "tasks.babyai_tasks=[BabyAI-MixedTrainLocal-v0/goto]",
        "envs.names=babyai", "client.base_url=http://127.0.0.1:9/v1", "+eval.seed=7"])
    assert spec.agent.type == "cot" and spec.agent.max_text_history == 4
    assert spec.client.generate_kwargs.temperature == 0.2
    assert list(spec.episodes()) == [("babyai", "BabyAI-MixedTrainLocal-v0/goto", 0),
                               ("babyai", "BabyAI-MixedTrainLocal-v0/goto", 1)]
    assert spec.client.base_url == "http://127.0.0.1:9/v1" and spec.eval.seed == 7


def test_yaml_file_then_overrides(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("agent:\n  type: robust_cot\neval:\n  num_workers: 3\n"
                      "hydra:\n  run:\n    dir: .\n")
    spec = load_spec(config, ["eval.num_workers=5"])
    assert spec.agent.type == "robust_cot" and spec.eval.num_workers == 5


@pytest.mark.parametrize("override, needle", [
    ("agent.typo=1", "unknown key 'agent.typo'"),
    ("agent.type=wizard", "'naive'"),
    ("client.client_name=skynet", "'openai'"),
    ("envs.names=babyai-tetris", "'tetris'"),
    ("eval.num_workers=0", "eval.num_workers"),
    ("eval.num_episodes.chess=3", "unknown env 'chess'"),
    ("nonsense.section=1",
     "allowed keys here: agent, client, endpoints, envs, eval, players, tasks"),
])
def test_errors_name_the_key_and_what_is_allowed(override: str, needle: str) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(None, [override])
    assert needle in str(err.value)


def test_malformed_overrides() -> None:
    with pytest.raises(OverrideError, match=r"key\.path=value"):
        apply_overrides({}, ["agent.type"])
    with pytest.raises(OverrideError, match="is a value"):
        apply_overrides({"agent": {"type": "naive"}}, ["agent.type.x=1"])
    assert parse_value("[a,b]") == ["a", "b"] and parse_value("null") is None
    assert parse_value("babyai-minihack") == "babyai-minihack"


def test_missing_config_file() -> None:
    with pytest.raises(SpecError, match="not found"):
        load_spec("/nonexistent/run.yaml")


def test_episode_seeds_are_derived_and_stable() -> None:
    a = derive_seed(0, "babyai", "t", 0)
    assert a == derive_seed(0, "babyai", "t", 0)
    assert len({a, derive_seed(1, "babyai", "t", 0), derive_seed(0, "babyai", "t", 1),
                derive_seed(0, "babyai", "u", 0)}) == 4
    assert 0 <= a < 2**64


def test_full_balrog_suite_is_255_episodes_with_balrog_counts() -> None:
    spec = load_spec(None, ["envs.names=babyai-babaisai-textworld-crafter-nle-minihack"])
    plan = list(spec.episodes())
    assert len(plan) == 255
    per_env = {env: sum(1 for e, _, _ in plan if e == env) for env in spec.envs.env_list}
    assert per_env == {"babyai": 50, "babaisai": 120, "textworld": 30, "crafter": 10,
                       "nle": 5, "minihack": 40}
    assert len({(e, t) for e, t, _ in plan if e == "babaisai"}) == 40
    assert len(set(plan)) == 255


def test_num_samples_caps_each_env_round_robin_over_tasks() -> None:
    full = list(load_spec(None, ["envs.names=babyai-textworld"]).episodes())
    capped = list(load_spec(None, ["envs.names=babyai-textworld",
                                   "eval.num_samples=7"]).episodes())
    babyai = [p for p in capped if p[0] == "babyai"]
    textworld = [p for p in capped if p[0] == "textworld"]
    assert len(babyai) == 7 and len(textworld) == 7
    # every task gets an episode before any task gets a second one
    assert {t for _, t, i in babyai if i == 0} == set(BABYAI_TASKS)
    assert sorted(i for _, _, i in babyai) == [0, 0, 0, 0, 0, 1, 1]
    assert set(capped) <= set(full)  # same keys, hence the same seeds, as the full run
    with pytest.raises(SpecError, match="num_samples"):
        load_spec(None, ["eval.num_samples=0"])


def test_textworld_episode_i_plays_game_i() -> None:
    seeds = [derive_seed(3, "textworld", "coin_collector", i) for i in range(30)]
    assert [s % 25 for s in seeds] == [i % 25 for i in range(30)]
    assert len(set(seeds)) == 30  # still distinct seeds, derived from the run seed
    assert derive_seed(4, "textworld", "coin_collector", 0) != seeds[0]


def test_players_give_each_seat_its_own_config() -> None:
    spec = load_spec(None, [
        "client.client_name=local",
        "players.agent_0.agent.type=dummy",
        "players.agent_1.client.client_name=openrouter",
        "players.agent_1.client.model_id=x/y:free",
        "players.agent_1.role=forward", "players.agent_1.coordination_level=3",
        "players.agent_1.observation_mode=visible_teammates"])
    agent0, client0 = spec.seat("agent_0")
    assert (agent0.type, client0.client_name) == ("dummy", "local")
    agent1, client1 = spec.seat("agent_1")
    assert (agent1.type, client1.client_name, client1.model_id) == (
        "naive", "openrouter", "x/y:free")
    assert spec.seat("agent_2") == (spec.agent, spec.client)
    assert spec.players["agent_1"].env_options() == {
        "coordination_level": 3, "observation_mode": "visible_teammates"}
    assert len(spec.seat_configs()) == 3


@pytest.mark.parametrize(("override", "needle"), [
    ("players.agent_0.coordination_level=4", "players.agent_0.coordination_level"),
    ("players.agent_0.observation_mode=godview", "players.agent_0.observation_mode"),
    ("players.agent_0.colour=red",
     "unknown key 'players.agent_0.colour'; allowed keys here: agent, client, coordination"),
])
def test_bad_player_settings_name_the_key(override: str, needle: str) -> None:
    with pytest.raises(SpecError, match=needle.replace(".", r"\.")):
        load_spec(None, [override])


def test_local_runs_take_file_paths_from_the_current_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    local = load_spec(None, ["agent.type=rl", "agent.checkpoint=ckpt/p.npz",
                             "eval.icl_dataset=demos", "eval.prices=prices.yaml"])
    assert local.agent.checkpoint == str(tmp_path / "ckpt" / "p.npz")
    assert local.eval.icl_dataset == str(tmp_path / "demos")
    assert local.eval.prices == str(tmp_path / "prices.yaml")
    # with endpoints the paths name files of those servers: left as given
    remote = load_spec(None, ["agent.type=rl", "agent.checkpoint=ckpt/p.npz",
                              "endpoints.policy=[127.0.0.1:1]",
                              "endpoints.env.babyai=[127.0.0.1:2]"])
    assert remote.agent.checkpoint == "ckpt/p.npz"


@pytest.mark.parametrize("overrides", [
    ["envs.names=babyai-textworld"],
    ["envs.names=babyai-textworld", "eval.num_samples=7"],
    ["envs.names=babyai", "eval.num_episodes.babyai=3"],
])
def test_plans_and_episode_count_agree_with_the_lazy_plan(overrides: list[str]) -> None:
    spec = load_spec(None, overrides)
    plan = list(spec.episodes())
    assert spec.episode_count() == len(plan) == len(set(plan))
    assert all(spec.plans(key) for key in plan)
    env, task, index = plan[-1]
    assert not spec.plans((env, task, index + 1000))
    assert not spec.plans((env, "no-such-task", 0)) and not spec.plans(("nle", task, 0))


def test_a_million_episode_plan_is_counted_not_built() -> None:
    spec = load_spec(None, ["envs.names=babyai", "eval.num_episodes.babyai=200000"])
    assert spec.episode_count() == 1_000_000
    with pytest.raises(SpecError, match="plans 1,000,005 episodes; at most 1,000,000"):
        load_spec(None, ["envs.names=babyai-crafter", "eval.num_episodes.babyai=200000",
                         "eval.num_episodes.crafter=5"])


def test_a_task_listed_twice_is_refused() -> None:
    with pytest.raises(SpecError, match="tasks listed more than once: 'BabyAI-MixedTrainLocal"):
        load_spec(None, ["tasks.babyai_tasks=[BabyAI-MixedTrainLocal-v0/goto,"
                         "BabyAI-MixedTrainLocal-v0/goto]"])


def test_local_servers_is_auto_or_a_count_of_at_least_one() -> None:
    from orchestrator.plan.spec import local_server_counts

    assert load_spec().eval.local_servers == "auto"
    assert load_spec(None, ["eval.local_servers=3"]).eval.local_servers == 3
    for bad, shown in (("0", "0"), ("-2", "-2"), ("many", "'many'"), ("1.5", "1.5"),
                       ("true", "True")):
        with pytest.raises(SpecError) as err:
            load_spec(None, [f"eval.local_servers={bad}"])
        message = str(err.value)
        assert "bad value for 'eval.local_servers': allowed: 'auto'" in message, message
        assert "or a whole number >= 1" in message and message.endswith(f"(got {shown})")
    # an explicit count: that many of each, never more than the episodes in flight
    three = load_spec(None, ["eval.local_servers=3", "agent.type=oracle"])
    assert local_server_counts(three, cores=2) == (3, 3)
    assert local_server_counts(
        load_spec(None, ["eval.local_servers=3", "eval.num_workers=2"]), cores=64) == (2, 2)


def test_local_servers_auto_takes_a_quarter_of_the_cores_each() -> None:
    from orchestrator.plan.spec import available_cores, local_server_counts

    hosted = load_spec(None, ["agent.type=naive", "client.client_name=openai"])
    assert [local_server_counts(hosted, cores=n) for n in (1, 2, 4, 7, 8, 16)] == [
        (1, 1), (1, 1), (1, 1), (1, 1), (2, 2), (4, 4)]
    assert local_server_counts(hosted) == local_server_counts(hosted, available_cores())
    # never more servers than episodes in flight
    few = load_spec(None, ["client.client_name=openai", "eval.num_workers=3"])
    assert local_server_counts(few, cores=64) == (3, 3)
    # a model loaded by the policy server itself keeps one policy server (one copy of it)
    for client in (["client.client_name=local"], ["client.client_name=vllm"],
                   ["client.client_name=llamacpp"]):
        assert local_server_counts(load_spec(None, client), cores=16) == (4, 1), client
    served = load_spec(None, ["client.client_name=vllm", "client.base_url=http://gpu:8000/v1"])
    assert local_server_counts(served, cores=16) == (4, 4)
    # ... unless no seat calls a model
    assert local_server_counts(load_spec(None, ["agent.type=oracle"]), cores=16) == (4, 4)


def test_an_explicit_local_servers_count_is_explained_when_it_exceeds_the_cores() -> None:
    from orchestrator.plan.spec import local_server_counts, local_server_notes

    three = load_spec(None, ["eval.local_servers=3", "agent.type=oracle"])
    counts = local_server_counts(three, cores=4)
    assert local_server_notes(three, counts, cores=4) == [
        "eval.local_servers=3 starts 3 env server(s) and 3 policy server(s) on 4 core(s): "
        "they take turns on the cores; eval.local_servers=auto would start 1 and 1 of them"]
    assert local_server_notes(three, counts, cores=6) == []
    # auto fits the cores by construction: nothing to say
    auto = load_spec(None, ["agent.type=oracle"])
    assert local_server_notes(auto, local_server_counts(auto, cores=1), cores=1) == []


def test_an_explicit_local_servers_count_names_the_copies_of_an_in_process_model() -> None:
    from orchestrator.plan.spec import local_server_counts, local_server_notes

    local = load_spec(None, ["eval.local_servers=2", "client.client_name=local"])
    notes = local_server_notes(local, local_server_counts(local, cores=64), cores=64)
    assert notes == [
        "eval.local_servers=2 starts 2 policy servers and each loads its own copy of the model "
        "(client.client_name=local runs it inside the policy server): memory for that many "
        "copies; eval.local_servers=auto keeps one"]
    # a served model is reached over HTTP: no copy per server
    served = load_spec(None, ["eval.local_servers=2", "client.client_name=vllm",
                              "client.base_url=http://gpu:8000/v1"])
    assert local_server_notes(served, local_server_counts(served, cores=64), cores=64) == []
    one = load_spec(None, ["eval.local_servers=1", "client.client_name=local"])
    assert local_server_notes(one, local_server_counts(one, cores=64), cores=64) == []
