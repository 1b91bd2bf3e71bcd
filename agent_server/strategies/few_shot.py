"""few_shot: naive answering, preceded by recorded demonstration episodes of the same env.

The chat is the normal ``HistoryBuilder`` output with the demonstrations inserted right after
the instruction (system) message, as the same user/assistant turns the episode itself uses::

    [system]     env instruction + naive answer rules
    [user]       DEMO_START marker, a line saying what follows, demo 1's header, how its
                 instruction differed from yours, its first observation
    [assistant]  the expert's action (a bare action name, exactly what a naive answer is)
    [user]       the next observation (with the reward the previous action earned, if any)
    [assistant]  ...
    [user]       the end of the last demo, DEMO_END marker, then NOW_YOUR_TURN
    [user/assistant ...]  this episode's own history, then the current observation

Showing demo actions as answers teaches the answer format by example. An earlier layout put the
demos as one transcript inside a single user message; with the local 0.5B model that made the
model continue the transcript (observations and actions) instead of answering, and half its
answers held no valid action. The markers keep the demos apart from the real episode. A
demonstration's instruction usually differs from the episode's only in its goal (BabyAI's
mission, for example); only the lines of the demo's instruction absent from the episode's
instruction are shown.

``agent.max_icl_history`` caps the demonstration steps shown, counted over all demos in order:
the first demos are shown whole, the demo that crosses the cap is cut after its first steps
(its header says so), and later demos are left out. (BALROG counts observations and actions
separately, so its cap of N messages is about N/2 of our steps.)

Demonstrations come from ``EpisodeContext.demonstrations`` (``Begin.demonstrations``), so each
episode sees only its own; the strategy keeps nothing across episodes.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_server.backends.base import Backend, ChatMessage
from agent_server.history import HistoryBuilder
from agent_server.strategies.llm import system_prompt
from agent_server.strategies.naive import NaiveStrategy
from agent_server.turn import DemoEpisode, EpisodeContext, TurnInput
from moria.config import AgentConfig
from moria.quoting import quote

#: Opens the demonstration block.
DEMO_START = "##### RECORDED DEMONSTRATIONS: START #####"
#: Closes the demonstration block.
DEMO_END = "##### RECORDED DEMONSTRATIONS: END #####"
#: The line after the block: the demos are over and the real episode begins.
NOW_YOUR_TURN = (
    "The demonstrations are over. Your own episode starts now: the messages that follow are "
    "your game, and every action you choose is played in it."
)
#: Label of a demo step's observation (followed by " (step N):").
DEMO_OBSERVATION = "Demonstration observation"



def cut_demonstrations(demos: Iterable[DemoEpisode], max_steps: int,
                       ) -> list[tuple[DemoEpisode, int]]:
    """The demos to show under a cap of ``max_steps`` steps in total, as (demo, steps shown).

    Demos are taken in order; the one that crosses the cap keeps only its first steps and every
    later demo is left out (so a demo is never shown with steps from the middle removed).
    Demos with no step left are not returned.
    """
    shown: list[tuple[DemoEpisode, int]] = []
    left = max(0, max_steps)
    for demo in demos:
        count = min(len(demo.steps), left)
        if count <= 0:
            break
        shown.append((demo, count))
        left -= count
    return shown


def instruction_differences(demo_instruction: str, instruction: str) -> list[str]:
    """The non-empty lines of ``demo_instruction`` that do not occur in ``instruction``."""
    own = {line.strip() for line in instruction.splitlines()}
    return [line.strip() for line in demo_instruction.splitlines()
            if line.strip() and line.strip() not in own]


def demonstration_messages(demos: tuple[DemoEpisode, ...], instruction: str, max_steps: int,
                           ) -> list[ChatMessage]:
    """The demonstration turns (see the module docstring for their layout): user messages with
    the markers, headers and observations, alternating with assistant messages holding the
    expert's actions; the last message is a user message ending with ``NOW_YOUR_TURN``."""
    shown = cut_demonstrations(demos, max_steps)
    messages: list[ChatMessage] = []
    lines = [DEMO_START]
    if shown:
        episodes = ("1 recorded episode" if len(shown) == 1
                    else f"{len(shown)} recorded episodes")
        lines.append(
            f"Here {'is' if len(shown) == 1 else 'are'} {episodes} of this game, played to success "
            "by an expert player. They are examples to learn from, not part of your game; the "
            "expert's answers show the answer format.")
    else:
        lines.append(f"No demonstration steps are shown (agent.max_icl_history = {max_steps}).")
    for number, (demo, count) in enumerate(shown, start=1):
        lines.append("")
        header = f"=== Demonstration {number} of {len(shown)}"
        header += f" (task {demo.task}, played by {demo.source or 'an expert'}"
        if count < len(demo.steps):
            header += f"; only its first {count} of {len(demo.steps)} steps are shown"
        lines.append(header + ") ===")
        lines.extend(_briefing(demo.instruction, instruction))
        for index, step in enumerate(demo.steps[:count]):
            lines.append(f"{DEMO_OBSERVATION} (step {index}):")
            if step.observation:
                lines.append(step.observation)
            messages.append(ChatMessage(role="user", content="\n".join(lines)))
            messages.append(ChatMessage(role="assistant", content=step.action))
            lines = [f"(reward {step.reward:+g})"] if step.reward else []
        ending = "reached its goal" if count == len(demo.steps) else "continues (cut here)"
        lines.append(f"=== End of demonstration {number}: the episode {ending} ===")
    lines += ["", DEMO_END, NOW_YOUR_TURN]
    messages.append(ChatMessage(role="user", content="\n".join(lines).lstrip("\n")))
    return messages


def _briefing(demo_instruction: str, instruction: str) -> list[str]:
    if not demo_instruction.strip():
        return []
    different = instruction_differences(demo_instruction, instruction)
    if not different:
        return ["It was played with the same instructions as your episode."]
    return ["Its instructions differed from yours in these lines:",
            *(f"  {line}" for line in different)]


class _DemoHistory(HistoryBuilder):
    """The shared history, with the demonstration turns inserted after the instruction.

    Like the shared history it never merges roles: the backend merges same-role neighbours of
    the finished chat (with ``alternate_roles``, the user-role instruction and the first demo
    turn), so the demonstrations always follow the instruction.
    """

    def __init__(self, instruction: str, agent: AgentConfig, demos: list[ChatMessage], *,
                 alternate_roles: bool, answer_template: str) -> None:
        super().__init__(instruction, agent, alternate_roles=alternate_roles,
                         answer_template=answer_template)
        self.demos = demos

    def build(self, turn: TurnInput) -> list[ChatMessage]:
        """Instruction, the demonstrations, this episode's history, the current observation."""
        messages = super().build(turn)
        messages[1:1] = [ChatMessage(m.role, m.content) for m in self.demos]
        return messages


class FewShotStrategy(NaiveStrategy):
    """naive, preceded by this episode's demonstrations (``ctx.demonstrations``).

    Raises:
        ValueError: at construction when ``ctx.demonstrations`` is empty (the message says how
            to record them), or when ``backend`` is None.
    """

    name = "few_shot"

    def __init__(self, ctx: EpisodeContext, backend: Backend | None) -> None:
        if not ctx.demonstrations:
            env, task = ctx.env_name or "<env>", ctx.task or "<task>"
            if not (len(env) + len(task) <= 200 and f"{env}{task}".isprintable()):
                env, task = quote(env, 64), quote(task, 128)  # no game has such a name
            raise ValueError(
                f"few_shot got no demonstrations for {env}/{task}; record them with "
                f"`moria record-demos --env {env} --tasks {task}` (eval.icl_episodes sets how "
                "many each episode is shown)")
        super().__init__(ctx, backend)
        self.demos = demonstration_messages(ctx.demonstrations, ctx.instruction,
                                            ctx.agent.max_icl_history)
        self.history = _DemoHistory(
            system_prompt(ctx.instruction, self.format_instruction), ctx.agent, self.demos,
            alternate_roles=ctx.client.alternate_roles, answer_template=self.answer_template)
