"""Demo files (moria-demo/1): round trip, atomic append, seeds, loading for few_shot."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from agent_server.service import demos_from_proto
from agent_server.strategies.few_shot import demonstration_messages
from moria.records import StepRecord
from orchestrator.plan.seeds import derive_seed
from orchestrator.plan.spec import RunSpec, load_spec
from orchestrator.store import demos
from orchestrator.store.demos import (
    DEMO_FORMAT,
    DemoFormatError,
    DemoRecord,
    DemoStepRecord,
    MissingDemonstrationsError,
    append_demos,
    check_demonstrations,
    demo_file,
    demo_seed,
    episode_demonstrations,
    evaluation_seeds,
    load_demonstrations,
    read_demos,
    same_game,
)

GOTO = "BabyAI-MixedTrainLocal-v0/goto"


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    demos.clear_cache()


def _record(seed: int, *, env: str = "babyai", task: str = GOTO, steps: int = 3,
            goal: str = "go to the red ball") -> DemoRecord:
    return DemoRecord(
        env=env, task=task, seed=seed, source="babyai-bot",
        instruction=f"You are playing BabyAI.\nYour goal: {goal}.\nActions: ...",
        progression=1.0,
        steps=tuple(DemoStepRecord(f"seed {seed} view {i}", "go forward", 0.5 if i == steps - 1
                                   else 0.0) for i in range(steps)),
        versions={"api": "moria.v1"}, env_kwargs={"num_dists": 0})


def _spec(tmp_path: Path, *extra: str, agent: str = "few_shot") -> RunSpec:
    return load_spec(None, [f"agent.type={agent}", f"eval.icl_dataset={tmp_path}", *extra])


def test_round_trip_and_file_layout(tmp_path: Path) -> None:
    path = demo_file(tmp_path, "babyai", GOTO)
    assert path == tmp_path / "babyai" / "BabyAI-MixedTrainLocal-v0__goto.jsonl"
    written = [_record(11), _record(12, steps=1)]
    append_demos(path, written)

    assert read_demos(path) == written
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert set(first) == {"format", "env", "task", "seed", "source", "instruction",
                          "progression", "steps", "recorded_at", "versions", "env_kwargs"}
    assert first["format"] == DEMO_FORMAT
    assert first["steps"][2] == {"observation": "seed 11 view 2", "action": "go forward",
                                 "reward": 0.5}
    proto = written[0].to_proto()
    assert (proto.task, proto.seed, proto.source) == (GOTO, 11, "babyai-bot")
    assert [s.observation for s in proto.steps] == [f"seed 11 view {i}" for i in range(3)]


def test_append_keeps_the_file_valid_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = demo_file(tmp_path, "babaisai", "env/goto_win")
    append_demos(path, [_record(1, env="babaisai", task="env/goto_win")])
    append_demos(path, [_record(2, env="babaisai", task="env/goto_win")])
    assert [r.seed for r in read_demos(path)] == [1, 2]
    assert sorted(p.name for p in path.parent.iterdir()) == [
        ".env__goto_win.jsonl.lock", "env__goto_win.jsonl"]

    # A record that cannot be serialised fails before anything is written.
    bad = DemoRecord(**{**_record(3).__dict__, "env_kwargs": {"x": object()}})
    before = path.read_bytes()
    with pytest.raises(TypeError):
        append_demos(path, [bad])
    assert path.read_bytes() == before
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_concurrent_appends_lose_nothing(tmp_path: Path) -> None:
    path = demo_file(tmp_path, "babyai", GOTO)

    def writer(base: int) -> None:
        for i in range(15):
            append_demos(path, [_record(base + i, steps=1)])

    threads = [threading.Thread(target=writer, args=(base,)) for base in (0, 100, 200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.seed for r in read_demos(path)) == sorted(
        b + i for b in (0, 100, 200) for i in range(15))


def test_corrupt_file_is_reported_with_line_and_never_extended(tmp_path: Path) -> None:
    path = demo_file(tmp_path, "babyai", GOTO)
    path.parent.mkdir(parents=True)
    good = json.dumps(_record(5).to_json())
    path.write_text(good + "\n\n" + json.dumps({**_record(6).to_json(), "format": "other"})
                    + "\n")
    with pytest.raises(DemoFormatError, match=r"line 3: format must be 'moria-demo/1'") as err:
        read_demos(path)
    assert str(path) in str(err.value)
    before = path.read_bytes()
    with pytest.raises(DemoFormatError):
        append_demos(path, [_record(7)])
    assert path.read_bytes() == before

    path.write_text(json.dumps({**_record(6).to_json(), "seed": -1}) + "\n")
    with pytest.raises(DemoFormatError, match="line 1: key 'seed'"):
        read_demos(path)


def test_demo_seeds_are_their_own_namespace() -> None:
    assert demo_seed("babyai", GOTO, 0) == demo_seed("babyai", GOTO, 0)
    seeds = {demo_seed("babyai", GOTO, i) for i in range(20)}
    assert len(seeds) == 20
    for run_seed in (0, 1, 42):
        eval_seeds = {derive_seed(run_seed, "babyai", GOTO, i) for i in range(50)}
        assert not seeds & eval_seeds
    assert demo_seed("babyai", GOTO, 0) != demo_seed("babyai", GOTO + "x", 0)


def test_textworld_demo_seeds_use_the_games_an_evaluation_reaches_last() -> None:
    games = [demo_seed("textworld", "coin_collector", i) % 25 for i in range(26)]
    assert games[:3] == [24, 23, 22]
    assert games[25] == 24
    assert same_game("textworld", 24, 49) and not same_game("textworld", 24, 48)
    assert same_game("babyai", 7, 7) and not same_game("babyai", 24, 49)


def test_loader_takes_the_first_demos_and_excludes_evaluation_seeds(tmp_path: Path) -> None:
    append_demos(demo_file(tmp_path, "babyai", GOTO), [_record(s) for s in (10, 20, 30)])
    spec = _spec(tmp_path, "eval.icl_episodes=2")

    chosen = load_demonstrations(spec, "babyai", GOTO, set())
    assert [d.seed for d in chosen] == [10, 20]
    assert chosen[0].instruction.startswith("You are playing BabyAI.")
    assert [d.seed for d in load_demonstrations(spec, "babyai", GOTO, {10, 99})] == [20, 30]

    with pytest.raises(MissingDemonstrationsError,
                       match=r"has 1 usable \(2 excluded because they replay.*--episodes 4"):
        load_demonstrations(spec, "babyai", GOTO, {10, 30})

    # Other strategies get none, whatever exists on disk.
    assert load_demonstrations(_spec(tmp_path, agent="naive"), "babyai", "other", set()) == []


def test_an_episode_s_demos_skip_its_own_and_the_planned_games(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec(tmp_path, "eval.num_episodes.babyai=2", f"tasks.babyai_tasks=[{GOTO}]",
                 "eval.icl_episodes=3")
    planned = sorted(evaluation_seeds(spec, "babyai", GOTO))
    append_demos(demo_file(tmp_path, "babyai", GOTO),
                 [_record(s) for s in (*planned, 77, 88, 99, 111)])
    seeds = [d.seed for d in episode_demonstrations(spec, "babyai", GOTO, 77)]
    assert seeds == [88, 99, 111]  # eval.icl_episodes=3; the planned games and 77 left out

    # a player that reads no demos costs no walk over the plan, for any episode
    def walked(*_args: object) -> set[int]:
        raise AssertionError("evaluation seeds derived for a player without demos")

    monkeypatch.setattr(demos, "evaluation_seeds", walked)
    assert episode_demonstrations(_spec(tmp_path, agent="naive"), "babyai", GOTO, 77) == []


def test_loader_excludes_demos_of_the_same_textworld_game(tmp_path: Path) -> None:
    append_demos(demo_file(tmp_path, "textworld", "coin_collector"),
                 [_record(s, env="textworld", task="coin_collector") for s in (49, 48)])
    spec = _spec(tmp_path)
    # 74 plays game 24 like the demo seeded 49: that demo would give away the solution.
    assert [d.seed for d in load_demonstrations(spec, "textworld", "coin_collector",
                                                {74})] == [48]


def test_missing_file_error_names_the_file_and_the_command(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    with pytest.raises(MissingDemonstrationsError) as err:
        load_demonstrations(spec, "babyai", GOTO, {1})
    message = str(err.value)
    assert isinstance(err.value, ValueError)
    assert str(demo_file(tmp_path, "babyai", GOTO)) in message
    assert f"moria record-demos --env babyai --tasks {GOTO}" in message
    assert f"--out {tmp_path}" in message

    spec = _spec(tmp_path, "eval.icl_episodes=0")
    with pytest.raises(MissingDemonstrationsError, match=r"eval\.icl_episodes >= 1"):
        load_demonstrations(spec, "babyai", GOTO, set())


def test_too_few_demos_asks_for_enough(tmp_path: Path) -> None:
    append_demos(demo_file(tmp_path, "babyai", GOTO), [_record(1)])
    with pytest.raises(MissingDemonstrationsError,
                       match=r"has 1 usable; record more with: moria record-demos --env babyai "
                             rf"--tasks {GOTO} --episodes 3"):
        load_demonstrations(_spec(tmp_path, "eval.icl_episodes=3"), "babyai", GOTO, set())


def test_preflight_lists_every_missing_task_and_uses_all_run_seeds(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "tasks.babyai_tasks=[" + GOTO + ",BabyAI-MixedTrainLocal-v0/open]",
                 "eval.num_episodes.babyai=3")
    planned = [(e, t, derive_seed(spec.eval.seed, e, t, i)) for e, t, i in spec.episodes()]
    with pytest.raises(MissingDemonstrationsError) as err:
        check_demonstrations(spec, planned)
    assert "--tasks " + GOTO in str(err.value)
    assert "--tasks BabyAI-MixedTrainLocal-v0/open" in str(err.value)

    goto_seeds = evaluation_seeds(spec, "babyai", GOTO)
    assert goto_seeds == {s for e, t, s in planned if t == GOTO}
    clash = next(iter(goto_seeds))
    append_demos(demo_file(tmp_path, "babyai", GOTO), [_record(clash), _record(5)])
    append_demos(demo_file(tmp_path, "babyai", "BabyAI-MixedTrainLocal-v0/open"),
                 [_record(6, task="BabyAI-MixedTrainLocal-v0/open")])
    found = check_demonstrations(spec, planned)
    assert [d.seed for d in found[("babyai", GOTO)]] == [5]
    assert check_demonstrations(_spec(tmp_path, agent="cot"), planned) == {}


def test_files_are_parsed_once_per_process_until_they_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = demo_file(tmp_path, "babyai", GOTO)
    append_demos(path, [_record(1)])
    calls: list[Path] = []
    real = demos.read_demos

    def counting(p: Path) -> list[DemoRecord]:
        calls.append(p)
        return real(p)

    monkeypatch.setattr(demos, "read_demos", counting)
    spec = _spec(tmp_path)
    for _ in range(3):
        assert [d.seed for d in load_demonstrations(spec, "babyai", GOTO, set())] == [1]
    assert len(calls) == 1

    path.unlink()
    append_demos(path, [_record(2), _record(1)])  # rewritten: new size, read again
    assert [d.seed for d in load_demonstrations(spec, "babyai", GOTO, set())] == [2]
    assert len(calls) == 2


def test_loaded_demos_are_cut_by_max_icl_history(tmp_path: Path) -> None:
    append_demos(demo_file(tmp_path, "babyai", GOTO),
                 [_record(1, steps=3), _record(2, steps=3, goal="go to the blue key")])
    spec = _spec(tmp_path, "eval.icl_episodes=2")
    episodes = demos_from_proto(load_demonstrations(spec, "babyai", GOTO, set()))
    assert [len(e.steps) for e in episodes] == [3, 3]
    messages = demonstration_messages(episodes, _record(9).instruction, max_steps=4)
    assert [m.role for m in messages].count("assistant") == 4
    text = "\n".join(m.content for m in messages)
    assert "seed 1 view 2" in text  # the first demo whole
    assert "seed 2 view 0" in text and "seed 2 view 1" not in text  # the second cut after 1
    assert "only its first 1 of 3 steps are shown" in text
    assert "Your goal: go to the blue key." in text  # how demo 2's instruction differed


def _turn_record(step: int, **fields: object) -> StepRecord:
    values: dict[str, object] = {
        "step": step, "agent_id": "agent", "observation": f"view {step}",
        "raw_completion": "go forward", "action": "go forward",
        "reasoning": "oracle hint 'expert_action'", "reward": 0.25, "model": "oracle"}
    values.update(fields)
    return StepRecord(**values)  # type: ignore[arg-type]


def test_a_demo_step_is_built_from_the_episode_step_record() -> None:
    step = _turn_record(3, raw_completion="turn left", action="turn left", reward=0.5)
    assert DemoStepRecord.from_step(step) == DemoStepRecord("view 3", "turn left", 0.5)
    # the env named no applied action: the player's own answer stands
    assert DemoStepRecord.from_step(_turn_record(0, action="")).action == "go forward"


async def test_the_demo_sink_keeps_the_instruction_and_the_turns() -> None:
    from moria.env.v1 import env_service_pb2 as env_pb
    from orchestrator.apps.record_demos import DemoSink, RecordError
    from orchestrator.core.episode import EpisodePlan

    plan = EpisodePlan(run_id="record-demos", env="babyai", task=GOTO, episode_index=0,
                       seed=7, env_target="", policy_target="")
    sink = DemoSink()
    await sink.on_start(plan, env_pb.OpenResponse(
        agents={"agent": env_pb.AgentStart(instruction="go to the red ball")}))
    for index in range(2):
        await sink.on_step(plan, _turn_record(index))
    assert sink.instruction == "go to the red ball"
    assert sink.steps == [DemoStepRecord("view 0", "go forward", 0.25),
                          DemoStepRecord("view 1", "go forward", 0.25)]
    with pytest.raises(RecordError, match="2 players"):
        await DemoSink().on_start(plan, env_pb.OpenResponse(
            agents={"a": env_pb.AgentStart(), "b": env_pb.AgentStart()}))


async def test_the_demo_sink_drops_an_episode_the_oracle_could_not_play() -> None:
    """An invalid action, or a turn where the oracle player had no hint (it plays the default
    action and says so in its reasoning, which the sink reads), ends the candidate."""
    from agent_server.strategies import create_strategy
    from agent_server.turn import EpisodeContext, TurnInput
    from moria.config import AgentConfig, ClientConfig
    from orchestrator.apps.record_demos import DemoSink, DroppedEpisode
    from orchestrator.core.episode import EpisodePlan

    plan = EpisodePlan(run_id="record-demos", env="babyai", task=GOTO, episode_index=0,
                       seed=7, env_target="", policy_target="")
    sink = DemoSink()
    await sink.on_step(plan, _turn_record(0))
    with pytest.raises(DroppedEpisode, match="'jump' was invalid at step 1"):
        await sink.on_step(plan, _turn_record(1, raw_completion="jump", valid=False))

    oracle = create_strategy(EpisodeContext(
        instruction="", action_names=["go forward", "turn left"], default_action="go forward",
        agent=AgentConfig(type="oracle"), client=ClientConfig(), seed=1, env_name="babyai",
        task=GOTO, agent_id="agent"), None)
    hinted = await oracle.act(TurnInput(0, "view", "", None, [], {"expert_action": "turn left"}))
    no_hint = await oracle.act(TurnInput(1, "view", "", None, [], {}))
    sink = DemoSink()
    await sink.on_step(plan, _turn_record(0, reasoning=hinted.reasoning))
    with pytest.raises(DroppedEpisode, match="the oracle gave no action at step 1"):
        await sink.on_step(plan, _turn_record(1, reasoning=no_hint.reasoning))
    assert len(sink.steps) == 1
