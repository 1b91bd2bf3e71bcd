"""One multigrid game (Soccer or Collect): all agents act simultaneously every step.

Agents are ``agent_0`` .. ``agent_{n-1}``, the env's agent indices; teams are the env's real
``team_index`` values, named by the team colour the package gives them (``green``, ``blue``,
``purple``). Every agent is in ``next_agents`` until the episode ends, and ``step`` takes one
action per agent (an invalid one becomes ``noop``, valid=False).

Observation text (``long_term_context``): who the agent is, the step and the score, then the
decoded view (``text.describe_view``); in ``visible_teammates`` mode one more line per teammate
(id, colour, facing, carrying, and the position only when the teammate is in the agent's view).
The short-term text is empty (the invalid-action feedback travels only in
``ActionResult.feedback``). Tensors: ``image`` (V, V, 3) int64 and
``direction`` (int64 scalar), the env's own observation, and in Soccer ``target_side`` (int64
scalar: 0 east, 1 west; the same fact as ``info["target_goal_side"]``). Images: the env's full
RGB frame (Soccer (352, 512, 3)), the same for every agent, when images are asked.

Info (per agent): ``team`` (colour), ``teammates`` (ids), ``view`` (the same egocentric view
as data, ``text.view_info``: facing, carrying, wall ahead, the objects and walls seen) and, in
Soccer, ``target_goal_side`` (``east``/``west``: the end of the field the agent scores at, as the
instruction states). Nothing there goes beyond what the agent sees and is told.

Rewards are the env's own (scoring, zero-sum and shaping terms as the package defines them).

Metrics (running, and final in ``EpisodeEnd``):
- ``teams``: per team colour: ``agents``, ``goals_for``, ``goals_against`` (Soccer goals; Collect
  balls collected by the team / by the others), ``outcome`` (``win``/``draw``/``loss``, "" while
  running); Soccer adds ``passes``, ``steals`` (from the env's own event lists),
  ``possession_steps`` and ``possession_share`` (the team's share of the steps that ended with
  someone holding the ball; 0 when nobody ever held it);
- ``agent_outcomes`` (per agent, its team's outcome), ``agent_goals`` (goals scored / balls
  collected per agent);
- ``winner`` (a team colour, "" for a draw or while running), ``end_reason`` (``goals_to_win``,
  ``all_balls_collected``, ``step_limit`` or ""), ``steps``, ``game`` (soccer/collect),
  ``players`` (per agent: team, role, coordination_level asked and used, observation_mode);
- ``progression``: agent_0's team result, 1.0 win / 0.5 draw / 0.0 loss, set when the episode
  ends (0.0 while running).

Outcome: the team(s) with the most goals (balls) win, or draw when several share the top; all
other teams lose. A field with a single team (solo or one-sided practice) is a win when it
reached the goals needed, else a loss.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from mosaic_multigrid.core.actions import Action
from mosaic_multigrid.core.constants import TILE_PIXELS

from env_server.families.multigrid.instruction import (
    DEFAULT_ACTION,
    Seat,
    Setting,
    action_infos,
    build_instruction,
)
from env_server.families.multigrid.tasks import SOCCER, TaskSpec
from env_server.families.multigrid.text import (
    Offset,
    describe_view,
    facing_name,
    relative_position,
    team_colour,
    view_info,
)
from env_server.game import AgentTransition, AgentView, GameOptions, StepResult, SubmittedAction
from env_server.simultaneous import SimultaneousGame

# pygame (the package's Soccer renderer calls pygame.init) must not probe a sound card or a
# display: frames are drawn off-screen.
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

#: The package draws Soccer frames with pygame (global init, shared font cache); games on the
#: server's threads take turns.
_RENDER_LOCK = threading.Lock()

WIN, DRAW, LOSS = "win", "draw", "loss"
PROGRESSION = {WIN: 1.0, DRAW: 0.5, LOSS: 0.0}
#: ``target_side`` tensor value -> the end of the field the agent scores at
TARGET_SIDES = ("east", "west")


@dataclass(frozen=True)
class PlayerSetup:
    """One agent's settings: ``observation_mode``, the ``level`` asked, the ``level_used``
    (level 3 falls back to 2 where there are no roles) and ``role`` ("" when none)."""

    observation_mode: str = "egocentric"
    level: int = 1
    level_used: int = 1
    role: str = ""


def agent_id(index: int) -> str:
    """The Moria id of the env's agent ``index``."""
    return f"agent_{index}"


class MultigridGame(SimultaneousGame):
    """A Soccer or Collect game; built by ``MultigridFamily.open``, not reset yet.

    Args:
        spec: the task (env class, kind, teams).
        options: the open options (seed, render_image, max_steps).
        players: agent id -> its settings (every agent present).
    """

    def __init__(self, spec: TaskSpec, options: GameOptions, players: Mapping[str, PlayerSetup]):
        self._spec = spec
        self._options = options
        self._env: Any = spec.make_env(options.max_steps)
        self._agents = [agent_id(a.index) for a in self._env.agents]
        self._team = {agent_id(a.index): int(a.team_index) for a in self._env.agents}
        self._colour = {a: team_colour(t) for a, t in self._team.items()}
        self._teams = list(dict.fromkeys(self._colour[a] for a in self._agents))
        self._players = dict(players)
        self._actions = action_infos(spec.kind)
        self._instructions = {a: self._build_instruction(a) for a in self._agents}
        self._target_side = {a: self._goal_sides(self._team[a])[1] for a in self._agents}
        self._collected = [0] * len(self._agents)
        if spec.kind != SOCCER:
            self._track_collects()
        self._obs: dict[int, dict[str, Any]] | None = None
        self._done = False
        self._steps = 0
        self._reset_counters()

    # -- static facts -------------------------------------------------------------------------

    @property
    def max_steps(self) -> int:
        """The env's step limit (``GameOptions.max_steps`` if set, else the task's)."""
        return int(self._env.max_steps)

    def teammates(self, agent_id: str) -> list[str]:
        """The other agents of ``agent_id``'s team (the env's team assignment)."""
        self._check_agent(agent_id)
        return [a for a in self._agents if a != agent_id and self._team[a] == self._team[agent_id]]

    # -- episode ------------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> dict[str, AgentView]:
        """Start an episode; (task, seed) fixes the layout and every random draw of the env.

        Raises ``ValueError`` for a negative seed, ``RuntimeError`` once the game is closed."""
        if self._env is None:
            raise RuntimeError("the game is closed")
        seed = self._options.seed if seed is None else seed
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        self._obs, _ = self._env.reset(seed=int(seed))
        self._reset_counters()
        frame = self._frame()
        return {a: self._view(a, frame) for a in self._agents}

    def step(self, actions: Mapping[str, SubmittedAction]) -> StepResult:
        """Apply one action per agent, all at once.

        Raises:
            RuntimeError: before ``reset``, after the episode ended or once the game is closed.
            ValueError: ``actions`` does not hold exactly one entry per agent.
        """
        if self._env is None:
            raise RuntimeError("the game is closed")
        chosen = self._choose_all(actions, started=self._obs is not None)
        env_actions = {i: Action[chosen[a].applied] for i, a in enumerate(self._agents)}
        self._obs, rewards, terms, truncs, _ = self._env.step(env_actions)
        self._steps += 1
        self._count_possession()
        terminated = bool(all(bool(terms[i]) for i in range(len(self._agents))))
        truncated = not terminated and bool(truncs[0])
        self._done = terminated or truncated
        if self._done:
            self._finish(terminated)
        frame = self._frame()
        transitions: dict[str, AgentTransition] = {
            a: chosen[a].transition(self._view(a, frame), float(rewards[i]),
                                    terminated=terminated, truncated=truncated)
            for i, a in enumerate(self._agents)}
        return self._step_result(transitions)

    def metrics(self) -> dict[str, Any]:
        """Running metrics (module doc)."""
        scores = self._scores()
        teams: dict[str, dict[str, Any]] = {}
        held = sum(self._possession.values())
        for colour in self._teams:
            entry: dict[str, Any] = {
                "agents": [a for a in self._agents if self._colour[a] == colour],
                "goals_for": scores[colour],
                "goals_against": sum(v for c, v in scores.items() if c != colour),
                "outcome": self._outcomes.get(colour, ""),
            }
            if self._spec.kind == SOCCER:
                entry["passes"] = self._events_of("passes_completed", colour)
                entry["steals"] = self._events_of("steals_completed", colour)
                entry["possession_steps"] = self._possession[colour]
                entry["possession_share"] = self._possession[colour] / held if held else 0.0
            teams[colour] = entry
        first = self._outcomes.get(self._colour[self._agents[0]], "")
        return {
            "progression": PROGRESSION[first] if first else 0.0,
            "game": self._spec.kind,
            "steps": self._steps,
            "teams": teams,
            "winner": self._winner,
            "end_reason": self._end_reason,
            "agent_outcomes": {a: self._outcomes.get(self._colour[a], "") for a in self._agents},
            "agent_goals": self._agent_goals(),
            "players": {a: {"team": self._colour[a], "role": p.role,
                            "coordination_level": p.level,
                            "coordination_level_used": p.level_used,
                            "observation_mode": p.observation_mode}
                        for a, p in self._players.items()},
        }

    def render(self) -> np.ndarray:
        """The full field as RGB (H, W, 3) uint8 (Soccer: (352, 512, 3))."""
        if self._obs is None:
            self.reset()
        frame = self._frame(force=True)
        assert frame is not None
        return frame

    def close(self) -> None:
        """Drop the env; safe to call twice."""
        env, self._env = self._env, None
        if env is not None:
            env.close()

    # -- helpers ------------------------------------------------------------------------------

    def _default_name(self) -> str:
        return DEFAULT_ACTION

    def _reset_counters(self) -> None:
        self._done = False
        self._steps = 0
        self._outcomes: dict[str, str] = {}
        self._winner = ""
        self._end_reason = ""
        self._possession = {c: 0 for c in self._teams}
        self._collected = [0] * len(self._agents)

    def _track_collects(self) -> None:
        """Count Collect pickups per agent: wrap the env's own pickup handler and watch its
        ball counter (the env reports no collect events)."""
        env = self._env
        original = env._handle_pickup

        def pickup(agent_index: int, agent: Any, rewards: dict[int, float]) -> None:
            before = env._remaining_balls
            original(agent_index, agent, rewards)
            if env._remaining_balls < before:
                self._collected[agent_index] += 1

        env._handle_pickup = pickup

    def _scores(self) -> dict[str, int]:
        scores = {c: 0 for c in self._teams}
        if self._spec.kind == SOCCER:
            for goal in getattr(self._env, "goal_scored_by", []):
                scores[self._colour[agent_id(int(goal["scorer"]))]] += 1
        else:
            for i, n in enumerate(self._collected):
                scores[self._colour[self._agents[i]]] += n
        return scores

    def _agent_goals(self) -> dict[str, int]:
        if self._spec.kind == SOCCER:
            goals = {a: 0 for a in self._agents}
            for goal in getattr(self._env, "goal_scored_by", []):
                goals[agent_id(int(goal["scorer"]))] += 1
            return goals
        return {a: self._collected[i] for i, a in enumerate(self._agents)}

    def _events_of(self, attr: str, colour: str) -> int:
        events = getattr(self._env, attr, None) or []
        return sum(1 for e in events if team_colour(int(e["team"])) == colour)

    def _count_possession(self) -> None:
        if self._spec.kind != SOCCER:
            return
        holders = {self._colour[a] for i, a in enumerate(self._agents)
                   if self._env.agents[i].state.carrying is not None}
        for colour in holders:
            self._possession[colour] += 1

    def _finish(self, terminated: bool) -> None:
        scores = self._scores()
        if self._spec.kind == SOCCER:
            reached = any(v >= self._spec.goals_to_win for v in scores.values())
            self._end_reason = "goals_to_win" if terminated and reached else "step_limit"
        else:
            self._end_reason = "all_balls_collected" if terminated else "step_limit"
        if len(self._teams) == 1:
            colour = self._teams[0]
            won = (scores[colour] >= self._spec.goals_to_win if self._spec.kind == SOCCER
                   else scores[colour] > 0)
            self._outcomes = {colour: WIN if won else LOSS}
            self._winner = colour if won else ""
            return
        best = max(scores.values())
        top = [c for c, v in scores.items() if v == best]
        for colour in self._teams:
            self._outcomes[colour] = (LOSS if colour not in top else WIN if len(top) == 1
                                      else DRAW)
        self._winner = top[0] if len(top) == 1 else ""

    def _frame(self, force: bool = False) -> np.ndarray | None:
        if not (force or self._options.render_image):
            return None
        with _RENDER_LOCK:
            frame = self._env.get_frame(highlight=True, tile_size=TILE_PIXELS)
        return np.ascontiguousarray(frame, dtype=np.uint8)

    def _status_lines(self, agent: str) -> list[str]:
        colour = self._colour[agent]
        lines = [f"You are {agent} ({colour} team). Step {self._steps} of {self.max_steps}."]
        scores = self._scores()
        board = ", ".join(f"{c} {scores[c]}" for c in self._teams)
        if self._spec.kind == SOCCER:
            lines.append(f"Score: {board} (first to {self._spec.goals_to_win} goals wins).")
        else:
            left = int(getattr(self._env, "_remaining_balls", 0))
            lines.append(f"Balls collected: {board}; {left} left on the grid.")
        if self._done:
            result = self._outcomes.get(colour, "")
            lines.append(f"The game is over: your team's result is a {result}.")
        return lines

    def _names_around(self, index: int) -> dict[Offset, str]:
        """Map offset -> id of the agent drawn there (the highest index wins a shared cell,
        as the package draws agents in index order)."""
        me = self._env.agents[index]
        mx, my = (int(v) for v in me.state.pos)
        names: dict[Offset, str] = {}
        for other in self._env.agents:
            if other.index == index or other.state.terminated:
                continue
            ox, oy = (int(v) for v in other.state.pos)
            names[(ox - mx, oy - my)] = agent_id(other.index)
        return names

    def _teammate_lines(self, agent: str, seen: set[str], index: int) -> list[str]:
        mates = self.teammates(agent)
        if not mates:
            return ["Teammates: none."]
        me = self._env.agents[index]
        mx, my = (int(v) for v in me.state.pos)
        lines = ["Teammates:"]
        for mate in mates:
            other = self._env.agents[self._agents.index(mate)]
            carrying = other.state.carrying
            holds = (f"carrying a {carrying.color.value} {carrying.type.value}" if carrying
                     is not None else "carrying nothing")
            if mate in seen:
                ox, oy = (int(v) for v in other.state.pos)
                where = f"position: {relative_position(ox - mx, oy - my)}"
            else:
                where = "position: unknown (not in your view)"
            facing = facing_name(int(other.state.dir))
            lines.append(f"- {mate} ({self._colour[mate]}): facing {facing}; {holds}; {where}")
        return lines

    def _view(self, agent: str, frame: np.ndarray | None) -> AgentView:
        assert self._obs is not None
        index = self._agents.index(agent)
        obs = self._obs[index]
        image = np.asarray(obs["image"], dtype=np.int64)
        direction = int(obs["direction"])
        decoded = describe_view(image, direction, self._colour[agent],
                                self._names_around(index))
        lines = self._status_lines(agent) + decoded.lines
        if self._players[agent].observation_mode == "visible_teammates":
            seen = {s.name for s in decoded.agents if s.name}
            lines += self._teammate_lines(agent, seen, index)
        return AgentView(
            long_term_context="\n".join(lines),
            image=frame,
            tensors=self._tensors(agent, image, direction),
            info=self._info(agent, image, direction),
        )

    def _tensors(self, agent: str, image: np.ndarray, direction: int) -> dict[str, np.ndarray]:
        """``image``, ``direction`` and, in Soccer, ``target_side`` (0 east, 1 west)."""
        tensors = {"image": image, "direction": np.array(direction, dtype=np.int64)}
        side = self._target_side[agent]
        if self._spec.kind == SOCCER and side in TARGET_SIDES:
            tensors["target_side"] = np.array(TARGET_SIDES.index(side), dtype=np.int64)
        return tensors

    def _info(self, agent: str, image: np.ndarray, direction: int) -> dict[str, Any]:
        """The agent's info: team, teammates, its view as data, (Soccer) its target side."""
        info: dict[str, Any] = {"team": self._colour[agent], "teammates": self.teammates(agent),
                                "view": view_info(image, direction, self._colour[agent])}
        if self._spec.kind == SOCCER and self._target_side[agent]:
            info["target_goal_side"] = self._target_side[agent]
        return info

    def _build_instruction(self, agent: str) -> str:
        player = self._players[agent]
        mates = self.teammates(agent)
        seat = Seat(agent, self._colour[agent], player.role)
        teammates = [Seat(m, self._colour[m], self._players[m].role) for m in mates]
        opponents = [Seat(o, self._colour[o]) for o in self._agents
                     if o != agent and o not in mates]
        env = self._env
        setting = Setting(
            kind=self._spec.kind, task=self._spec.task, width=int(env.width),
            height=int(env.height), view_size=int(env.agents[0].view_size),
            max_steps=self.max_steps, goals_to_win=self._spec.goals_to_win,
            num_balls=self._spec.num_balls,
            steal_cooldown=int(getattr(env, "steal_cooldown", 0)))
        own_side, target_side = self._goal_sides(self._team[agent])
        return build_instruction(setting, seat, teammates, opponents, level=player.level_used,
                                 observation_mode=player.observation_mode,
                                 own_goal_side=own_side, target_goal_side=target_side)

    def _goal_sides(self, team: int) -> tuple[str, str]:
        """(own, target) goal ends of the field for ``team`` from the env's goal cells."""
        env = self._env
        cells = list(zip(getattr(env, "goal_pos", []), getattr(env, "goal_index", []),
                         strict=True))
        if not cells:
            return "", ""

        def side(xs: list[int]) -> str:
            if not xs:
                return ""
            return "west" if sum(xs) / len(xs) < env.width / 2 else "east"

        own = side([int(p[0]) for p, t in cells if int(t) == team])
        target = side([int(p[0]) for p, t in cells if int(t) != team])
        return own, target
