"""Conformance suite: the contract every registered game family must satisfy.

Every name in ``env_server.families.FAMILIES`` is checked here automatically, so a newly
registered family is enrolled without touching this file. Each check plays the family's *first*
available task (the first of ``list_tasks()`` whose ``TaskInfo.unavailable`` is empty, its BALROG
headline task) with a fixed seed and a deterministic player
(at step ``i`` each acting agent picks action ``i mod n`` of its legal moves, its action list, or,
in a free-text game, its default action). To be registered a family must satisfy:

1. Tasks: ``list_tasks()`` is non-empty and has at least one available task (a family whose
   every task is ``unavailable`` cannot be checked, and fails), task names are unique, each
   ``TaskInfo`` names the family, and the available tasks open (a deterministic sample of at
   most ``TASK_SAMPLE``: first, last and evenly spaced ones) with as many agents and the default
   action their ``TaskInfo`` states;
   an unknown task raises ``TaskNotFoundError``; without ``GameOptions.max_steps`` the step limit
   after reset is the ``TaskInfo.max_steps`` (when that is fixed, i.e. non-zero).
   A task listed with ``TaskInfo.unavailable`` (a sentence: what is missing, how to provide
   it) exists but is refused by ``open`` (default options) with ``TaskUnavailableError`` naming
   the task and giving exactly that reason (the env server turns it into
   FAILED_PRECONDITION), never ``TaskNotFoundError`` or another exception (a sample of at most
   ``TASK_SAMPLE``; most families list none).
2. Determinism: two games opened with the same task and seed and reset with that seed give
   identical views (texts, images, tensors, legal actions, info), transitions and metrics for
   the same actions, even when stepped in alternation; resetting a game again with the same
   seed replays the same episode.
3. Episode end: with ``GameOptions(max_steps=PLAY_STEPS)`` the episode ends within that many
   steps; before the end no transition is terminated or truncated; on the last step every
   transition has exactly one of ``terminated``/``truncated``, ``truncated`` only when the step
   cap was hit, and ``next_agents`` is empty; stepping again raises ``RuntimeError`` until
   ``reset`` starts a fresh episode. Stepping before the first ``reset`` raises too.
4. Answers: a legal action is applied as given (``valid=True``). An answer that is not an action
   (a text that names none, or an out-of-range integer index) never raises: ``valid=False``,
   ``applied_action`` is ``default_action(agent)`` (or, where that is ``""``, a legal move the
   game picked), and ``feedback`` says so. The feedback travels only there (it becomes
   ``ActionResult.feedback``): none of the agent's next observation texts (short-term,
   long-term, extra texts) carries it; the player decides whether to show it. Free-text games
   (empty action list, e.g. TextWorld) accept any text, so only the non-text answers apply.
5. ``metrics()["progression"]`` is a number in [0, 1] before and after reset and after every
   step (and in every ``StepResult.metrics``).
6. ``render()`` returns an (H, W, 3) uint8 frame; with ``GameOptions(render_image=True)`` each
   view carries such an image (families documented as text-only, ``TEXT_ONLY_VIEWS``, carry
   none), and without it no view carries an image.
7. ``close()`` may be called twice (also on a game never reset), and stepping a closed game
   raises ``RuntimeError``.
8. Unknown family options (``GameOptions.kwargs``) are rejected with ``GameOptionError`` naming
   the unknown key and listing the allowed ones, which are exactly the keys the family's
   manifest schema takes for the task (``Family.check_options``); every listed key is
   recognised: a nonsense value for it is accepted or refused with ``GameOptionError``
   (``Family.open``'s contract), never with another exception.

Known family defects are listed in ``KNOWN_DEFECTS`` and run as strict xfails.

Multi-agent games are driven through ``first_agents()`` and ``StepResult.next_agents``: each step
submits actions for exactly the agents asked.

Data: TextWorld games are generated from the cheap test recipes into the session's temporary
cache, exactly as ``tests/unit/test_textworld_family.py`` does (``PREPARE``); Boxoban levels
come from the generated pool in the default cache, as in ``tests/unit/test_minihack_family.py``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import pytest

from env_server.families import FAMILIES, load_family
from env_server.game import (
    AgentView,
    Family,
    Game,
    GameOptionError,
    GameOptions,
    StepResult,
    TaskInfo,
    TaskNotFoundError,
    TaskUnavailableError,
)

pytestmark = pytest.mark.filterwarnings("ignore:Game .* is not fully supported")

SEED = 7
#: step limit given through ``GameOptions.max_steps`` when a check plays to the end
PLAY_STEPS = 5
#: steps compared by the determinism check
DETERMINISM_STEPS = 6
#: at most this many tasks of a family are opened by the task check
TASK_SAMPLE = 5
#: an answer that is no family's action name
JUNK_ANSWER = "definitely not an action ###"
#: integer answers that index no action list (nor any env's action space)
BAD_INDICES = (10**6, -1)
UNKNOWN_OPTION = "definitely_not_an_option"

#: Families whose views are documented to carry no image even with ``render_image`` (their
#: ``render()`` still draws a frame); the image check asserts ``image is None`` for them.
TEXT_ONLY_VIEWS: dict[str, str] = {
    "textworld": "text-only: AgentView.image stays None even with render_image "
    "(env_server/families/textworld/game.py)",
}


#: Known family defects: (check, family) -> (the exception the defect raises, evidence). Each
#: such case runs as a strict xfail that must fail with that exception, so it turns into a
#: failure (remove the entry) once the family is fixed. Never add an entry to make a check pass:
#: fix the family or, if the contract itself is wrong, change the check.
KNOWN_DEFECTS: dict[tuple[str, str], tuple[type[BaseException], str]] = {
    ("test_same_seed_same_episode", "meltingpot"): (
        AssertionError,
        "dm-meltingpot 2.4.1 on dmlab2d 1.0.2 does not replay an episode from its seed: the "
        "package's own builder with one env_seed starts commons harvest with different spawn "
        "points in repeated builds, in one process and across processes, with address "
        "randomisation off (setarch -R) too (docs/families/meltingpot.md, 'Known limits')"),
}


# -- per-family data ----------------------------------------------------------------------------


def _small_textworld_games(monkeypatch: pytest.MonkeyPatch,
                           tmp_path_factory: pytest.TempPathFactory) -> None:
    """Play the cheap test variants of the TextWorld recipes, built once per session into a
    shared temporary cache (the fixture of ``tests/unit/test_textworld_family.py``)."""
    from env_server.families.textworld import games, recipes

    for name in games.GAME_FAMILIES:
        monkeypatch.setitem(recipes.RECIPES, name, recipes.small_recipe(name))
    monkeypatch.delenv(games.GAMES_ENV, raising=False)
    monkeypatch.setenv("MORIA_CACHE_DIR",
                       str(tmp_path_factory.getbasetemp() / "textworld-small-games"))


#: family -> how the tests provide its prepared data (families absent need none)
PREPARE: dict[str, Callable[[pytest.MonkeyPatch, pytest.TempPathFactory], None]] = {
    "textworld": _small_textworld_games,
}


# -- fixtures -----------------------------------------------------------------------------------


#: families whose checks take seconds (Melting Pot's engine, TextWorld's generated games):
#: marked slow, so ``make test-fast`` leaves them to ``make test``
SLOW_FAMILIES = frozenset({"meltingpot", "textworld"})


@pytest.fixture(params=[pytest.param(name, marks=pytest.mark.slow) if name in SLOW_FAMILIES
                        else name for name in sorted(FAMILIES)])
def family(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
           tmp_path_factory: pytest.TempPathFactory) -> Family:
    """Each registered family in turn, with its data provided."""
    name: str = request.param
    defect = KNOWN_DEFECTS.get((request.function.__name__, name))
    if defect is not None:
        raises, reason = defect
        request.applymarker(pytest.mark.xfail(strict=True, raises=raises, reason=reason))
    prepare = PREPARE.get(name)
    if prepare is not None:
        prepare(monkeypatch, tmp_path_factory)
    return load_family(name)  # a game package that is missing fails (make install has all)


@pytest.fixture
def task(family: Family) -> TaskInfo:
    """The task every check plays: the family's first available (headline) task."""
    tasks = family.list_tasks()
    assert tasks, f"{family.name}: list_tasks() is empty"
    available = _available(tasks)
    assert available, (f"{family.name}: every one of its {len(tasks)} tasks is unavailable "
                       f"(e.g. {tasks[0].task}: {tasks[0].unavailable}); nothing to check")
    return available[0]


def _available(tasks: list[TaskInfo]) -> list[TaskInfo]:
    """The tasks this server can open (``TaskInfo.unavailable`` empty), in listed order."""
    return [t for t in tasks if not t.unavailable]


def _open(family: Family, task: str, seed: int = SEED, **options: Any) -> Game:
    """``family.open(task, GameOptions(seed=seed, **options))``."""
    return family.open(task, GameOptions(seed=seed, **options))


# -- playing ------------------------------------------------------------------------------------


def _choices(game: Game, agent: str, view: AgentView) -> list[str]:
    """What the agent may answer now: the view's legal moves, else the action list (empty for
    a free-text game)."""
    return list(view.legal_actions) or [a.name for a in game.actions(agent)]


def _policy(game: Game, agent: str, view: AgentView, turn: int) -> str:
    """The deterministic player: choice ``turn mod n``; a free-text game's default action."""
    choices = _choices(game, agent, view)
    if not choices:
        return game.default_action(agent) or "look"
    return choices[turn % len(choices)]


class Episode:
    """Drives one game with the deterministic player, tracking each agent's latest view and
    who acts next."""

    def __init__(self, game: Game, seed: int = SEED):
        self.game = game
        self.views: dict[str, AgentView] = dict(game.reset(seed))
        self.acting: list[str] = game.first_agents()
        self.turn = 0
        self.done = False
        assert set(self.views) == set(game.agents), "reset() must return a view per agent"
        assert self.acting, "first_agents() is empty"
        assert set(self.acting) <= set(game.agents), f"first_agents() {self.acting} unknown"

    def answers(self) -> dict[str, str]:
        """The deterministic player's answers for the acting agents."""
        return {a: _policy(self.game, a, self.views[a], self.turn) for a in self.acting}

    def step(self, answers: Mapping[str, Any] | None = None) -> StepResult:
        """Submit ``answers`` (default: the player's) for exactly the acting agents."""
        answers = self.answers() if answers is None else answers
        assert set(answers) == set(self.acting)
        result = self.game.step(answers)
        assert set(self.acting) <= set(result.transitions), (
            f"step() returned transitions for {sorted(result.transitions)}, "
            f"not for every acting agent {self.acting}")
        self.views.update({a: t.view for a, t in result.transitions.items()})
        self.turn += 1
        self.done = result.done
        if not result.done:
            assert result.next_agents, "next_agents is empty but the episode is not done"
            assert set(result.next_agents) <= set(self.game.agents)
            self.acting = list(result.next_agents)
        return result

    def steps(self, limit: int) -> Iterator[StepResult]:
        """Up to ``limit`` steps, stopping after the one that ends the episode."""
        for _ in range(limit):
            yield self.step()
            if self.done:
                return


def _frozen(value: Any) -> Any:
    """A plain, comparable copy: arrays become (dtype, shape, bytes), dataclasses dicts."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return _frozen(value.item())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _frozen(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _frozen(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_frozen(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def _difference(a: Any, b: Any, path: str = "") -> str | None:
    """The first path where two ``_frozen`` values differ, with both values (shortened)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            found = _difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"{path}: {str(a)[:200]!r} != {str(b)[:200]!r}"


def _assert_same(first: Any, second: Any, what: str) -> None:
    found = _difference(_frozen(first), _frozen(second))
    assert found is None, f"{what} differ at {found}"


def _progression(metrics: Mapping[str, Any], when: str) -> None:
    assert "progression" in metrics, f"metrics {when} lack 'progression': {sorted(metrics)}"
    value = metrics["progression"]
    assert isinstance(value, int | float | np.floating | np.integer) and not isinstance(
        value, bool), f"progression {when} is {value!r}, not a number"
    assert 0.0 <= float(value) <= 1.0, f"progression {when} is {value!r}, outside [0, 1]"


def _frame(image: Any, what: str) -> None:
    assert isinstance(image, np.ndarray), f"{what} is {type(image).__name__}, not an ndarray"
    assert image.dtype == np.uint8, f"{what} has dtype {image.dtype}, not uint8"
    assert image.ndim == 3 and image.shape[2] == 3, f"{what} has shape {image.shape}, not (H, W, 3)"
    assert image.shape[0] > 0 and image.shape[1] > 0, f"{what} is empty: {image.shape}"


def _sample(tasks: list[TaskInfo], size: int = TASK_SAMPLE) -> list[TaskInfo]:
    """First, last and evenly spaced tasks between them: at most ``size``, deterministic."""
    if len(tasks) <= size:
        return list(tasks)
    picks = sorted({round(i * (len(tasks) - 1) / (size - 1)) for i in range(size)})
    return [tasks[i] for i in picks]


# -- 1. tasks -----------------------------------------------------------------------------------


def test_tasks_are_listed_unique_and_open(family: Family) -> None:
    name = family.name
    tasks = family.list_tasks()
    assert tasks, "list_tasks() is empty"
    names = [t.task for t in tasks]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"duplicate task names: {duplicates}"
    for info in tasks:
        assert info.family == name, f"{info.task}: TaskInfo.family {info.family!r} != {name!r}"
        assert info.task, "a task has an empty name"
        assert info.max_steps >= 0 and info.num_agents >= 1, info
        assert isinstance(info.unavailable, str), info
    available = _available(tasks)
    assert available, (f"every one of the {len(tasks)} tasks is unavailable (e.g. "
                       f"{tasks[0].task}: {tasks[0].unavailable}); the suite needs one to play")

    for info in _sample(available):
        game = _open(family, info.task)
        try:
            assert len(game.agents) == info.num_agents, (
                f"{info.task}: {len(game.agents)} agents, TaskInfo says {info.num_agents}")
            assert len(set(game.agents)) == len(game.agents), game.agents
            for agent in game.agents:
                assert game.default_action(agent) == info.default_action, (
                    f"{info.task}: default_action({agent!r}) {game.default_action(agent)!r} "
                    f"!= TaskInfo.default_action {info.default_action!r}")
                names_ = [a.name for a in game.actions(agent)]
                assert len(set(names_)) == len(names_), f"{info.task}: duplicate action names"
                assert not names_ or not info.default_action or info.default_action in names_, (
                    f"{info.task}: default action {info.default_action!r} not in the actions")
                assert game.instruction(agent), f"{info.task}: empty instruction for {agent}"
        finally:
            game.close()

    for info in _sample([t for t in tasks if t.unavailable]):  # none for most families
        reason = info.unavailable
        assert reason.strip() == reason and len(reason) >= 10 and "\n" not in reason, (
            f"{info.task}: TaskInfo.unavailable {reason!r} is not a one-line sentence")
        with pytest.raises(TaskUnavailableError) as err:
            _open(family, info.task).close()
        assert err.value.task == info.task, (err.value.task, info.task)
        assert err.value.reason == reason, (
            f"{info.task}: open refused it with {err.value.reason!r}, TaskInfo.unavailable "
            f"says {reason!r}")
        assert info.task in str(err.value) and reason in str(err.value), str(err.value)

    with pytest.raises(TaskNotFoundError):
        _open(family, "definitely-not-a-task")


def test_step_limit_matches_task_info(family: Family, task: TaskInfo) -> None:
    """Without ``GameOptions.max_steps`` the episode's limit is the task's own (when fixed)."""
    game = _open(family, task.task)
    try:
        game.reset(SEED)
        if task.max_steps:
            assert game.max_steps == task.max_steps, (
                f"max_steps {game.max_steps} after reset, TaskInfo says {task.max_steps}")
        else:
            assert game.max_steps > 0, f"max_steps {game.max_steps} after reset"
    finally:
        game.close()


def test_registry_name_matches_family_name(family: Family) -> None:
    assert family.name in FAMILIES, f"Family.name {family.name!r} is not its registry key"
    assert FAMILIES[family.name].endswith(f":{type(family).__name__}")


# -- 2. determinism -----------------------------------------------------------------------------


def test_same_seed_same_episode(family: Family, task: TaskInfo) -> None:
    first = _open(family, task.task, render_image=True)
    second = _open(family, task.task, render_image=True)
    try:
        # Alternate the two games step by step: no state may leak from one into the other.
        one, two = Episode(first), Episode(second)
        _assert_same(one.views, two.views, "reset views")
        record = [_frozen(one.views)]
        for turn in range(DETERMINISM_STEPS):
            _assert_same(one.acting, two.acting, f"acting agents before step {turn + 1}")
            answers = one.answers()
            a, b = one.step(answers), two.step(answers)
            _assert_same(a, b, f"step {turn + 1} results")
            record.append(_frozen(a))
            if one.done:
                break

        # Resetting with the same seed replays the same episode.
        again = Episode(first)
        replay = [_frozen(again.views)]
        for _ in range(len(record) - 1):
            replay.append(_frozen(again.step()))
        _assert_same(record, replay, "an episode replayed after reset(seed)")
    finally:
        first.close()
        second.close()


# -- 3. episode end -----------------------------------------------------------------------------


def test_step_before_reset_raises(family: Family, task: TaskInfo) -> None:
    game = _open(family, task.task)
    try:
        with pytest.raises(RuntimeError):
            game.step({a: game.default_action(a) for a in game.first_agents()})
    finally:
        game.close()


def test_episode_ends_at_the_step_cap_with_one_end_flag(family: Family, task: TaskInfo) -> None:
    game = _open(family, task.task, max_steps=PLAY_STEPS)
    try:
        episode = Episode(game)
        assert game.max_steps == PLAY_STEPS, (
            f"max_steps is {game.max_steps} after reset, GameOptions said {PLAY_STEPS}")
        result = None
        for result in episode.steps(PLAY_STEPS):
            if not result.done:
                ended = {a: (t.terminated, t.truncated) for a, t in result.transitions.items()
                         if t.terminated or t.truncated}
                assert not ended, f"step {episode.turn}: flags {ended} before the episode ended"
        assert result is not None and result.done, (
            f"not done after max_steps={PLAY_STEPS} steps")
        assert result.next_agents == [], f"next_agents {result.next_agents} after the end"
        for agent, t in result.transitions.items():
            assert t.terminated != t.truncated, (
                f"{agent}: terminated={t.terminated}, truncated={t.truncated} on the last step")
            if episode.turn < PLAY_STEPS:
                assert t.terminated, f"{agent}: truncated at step {episode.turn} < the cap"

        last_acting = episode.acting
        with pytest.raises(RuntimeError):
            game.step({a: _policy(game, a, episode.views[a], 0) for a in last_acting})

        # reset starts a fresh, playable episode
        again = Episode(game).step()
        assert not again.done or all(t.terminated for t in again.transitions.values()), (
            "the first step after reset ended the episode without termination")
    finally:
        game.close()


# -- 4. answers ---------------------------------------------------------------------------------


def test_legal_answers_are_applied(family: Family, task: TaskInfo) -> None:
    game = _open(family, task.task)
    try:
        episode = Episode(game)
        answers = episode.answers()
        result = episode.step(answers)
        for agent, answer in answers.items():
            t = result.transitions[agent]
            assert t.valid, f"{agent}: legal answer {answer!r} judged invalid ({t.feedback!r})"
            assert t.applied_action == answer, (
                f"{agent}: answered {answer!r}, applied {t.applied_action!r}")
            assert t.feedback == "", f"{agent}: feedback {t.feedback!r} for a legal answer"
    finally:
        game.close()


def _invalid_answers(game: Game, episode: Episode) -> list[Any]:
    """The answers no acting agent may accept: a non-action text unless an agent types free
    text, and out-of-range integer indices."""
    free_text = any(not _choices(game, a, episode.views[a]) for a in episode.acting)
    return [*BAD_INDICES] if free_text else [JUNK_ANSWER, *BAD_INDICES]


def test_invalid_answers_become_the_default_action(family: Family, task: TaskInfo) -> None:
    game = _open(family, task.task)
    try:
        for answer in _invalid_answers(game, Episode(game)):
            episode = Episode(game)
            legal = {a: _choices(game, a, episode.views[a]) for a in episode.acting}
            result = episode.step(dict.fromkeys(episode.acting, answer))
            for agent in legal:
                t = result.transitions[agent]
                what = f"{agent} answering {answer!r}"
                assert t.valid is False, f"{what}: judged valid (applied {t.applied_action!r})"
                default = game.default_action(agent)
                if default:
                    assert t.applied_action == default, (
                        f"{what}: applied {t.applied_action!r}, default_action is {default!r}")
                else:  # documented: the game plays a legal move of its choosing
                    assert t.applied_action in legal[agent], (
                        f"{what}: applied {t.applied_action!r}, not a legal move")
                assert t.feedback, f"{what}: no feedback"
                texts = {"short_term_context": t.view.short_term_context,
                         "long_term_context": t.view.long_term_context, **t.view.extra_text}
                for name, text in texts.items():
                    assert t.feedback not in text, (
                        f"{what}: feedback {t.feedback!r} is in the observation's {name} "
                        "(it belongs only in the transition's feedback)")
    finally:
        game.close()


# -- 5. progression -----------------------------------------------------------------------------


def test_progression_is_in_unit_interval(family: Family, task: TaskInfo) -> None:
    game = _open(family, task.task, max_steps=PLAY_STEPS)
    try:
        _progression(game.metrics(), "before the first reset")  # Game.metrics: "always"
        episode = Episode(game)
        _progression(game.metrics(), "after reset")
        for result in episode.steps(PLAY_STEPS):
            _progression(result.metrics, f"in StepResult {episode.turn}")
            _progression(game.metrics(), f"after step {episode.turn}")
    finally:
        game.close()


# -- 6. images ----------------------------------------------------------------------------------


def test_render_and_images(family: Family, task: TaskInfo) -> None:
    text_only = family.name in TEXT_ONLY_VIEWS
    game = _open(family, task.task, render_image=True)
    try:
        episode = Episode(game)
        _frame(game.render(), "render() after reset")
        for when in ("reset", "step"):
            if when == "step":
                episode.step()
                _frame(game.render(), "render() after a step")
            for agent, view in episode.views.items():
                if text_only:
                    assert view.image is None, (
                        f"{agent} after {when}: an image, but {TEXT_ONLY_VIEWS[family.name]}")
                else:
                    _frame(view.image, f"{agent}'s image after {when} with render_image")
    finally:
        game.close()

    plain = _open(family, task.task)
    try:
        episode = Episode(plain)
        episode.step()
        for agent, view in episode.views.items():
            assert view.image is None, f"{agent}: an image although render_image=False"
    finally:
        plain.close()


# -- 7. close -----------------------------------------------------------------------------------


def test_close_twice_and_step_after_close(family: Family, task: TaskInfo) -> None:
    never_reset = _open(family, task.task)
    never_reset.close()
    never_reset.close()

    game = _open(family, task.task)
    episode = Episode(game)
    episode.step()
    answers = episode.answers()
    game.close()
    game.close()
    with pytest.raises(RuntimeError):
        game.step(answers)


# -- 8. options ---------------------------------------------------------------------------------


def test_unknown_options_are_rejected_with_the_allowed_keys(
    family: Family, task: TaskInfo
) -> None:
    with pytest.raises(GameOptionError) as err:
        _open(family, task.task, kwargs={UNKNOWN_OPTION: 1})
    message = str(err.value)
    assert UNKNOWN_OPTION in message, f"the message does not name the key: {message!r}"
    match = re.search(r"allowed: (.*)$", message)
    assert match, f"the message does not list the allowed keys: {message!r}"
    allowed = [k.strip() for k in match.group(1).split(",") if k.strip()]
    assert UNKNOWN_OPTION not in allowed
    schema, _ = family.option_schema()
    assert set(allowed) == {k for k, spec in schema.items() if spec.applies_to(task.task)}
    for key in allowed:
        # A listed key is recognised: a nonsense value may be accepted or refused, but only
        # with GameOptionError, and not as an unknown key.
        try:
            _open(family, task.task, kwargs={key: JUNK_ANSWER}).close()
        except GameOptionError as exc:
            assert "unknown key" not in str(exc), f"listed key {key!r} rejected as unknown: {exc}"
