"""Task names of the ``babaisai`` family: BALROG's 40 puzzles as ``env/<name>``.

Listed in docs/families/babaisai.md. The canonical id is BALROG's (``env/goto_win``); the bare
puzzle name (``goto_win``) is accepted as an alias. Every task has a 100-step limit.
"""

from __future__ import annotations

from env_server.families.babaisai.puzzles import PUZZLES

PREFIX = "env/"
MAX_STEPS = 100
#: Canonical task ids in BALROG's order.
TASK_NAMES: tuple[str, ...] = tuple(PREFIX + name for name in PUZZLES)

# Words of a puzzle name -> what they mean, to describe a task.
_PARTS: dict[str, str] = {
    "two_room": "two rooms split by a wall",
    "goto_win": "walk to the WIN object",
    "make_win": "rebuild the broken WIN rule, then reach its object",
    "break_stop": "break WALL IS STOP to cross the wall",
    "maybe_break_stop": "WALL IS STOP is intact; the WIN object may be on either side",
    "make_you": "make another object YOU and move it to the WIN object",
    "make_wall_win": "break WALL IS STOP and build WALL IS WIN",
    "distr_obj": "a distractor object",
    "distr_rule": "a distractor rule block",
    "distr_obj_rule": "a distractor object and rule block",
    "irrelevant_rule": "an irrelevant rule block",
    "distr_win_rule": "a second WIN rule for an absent object",
}


def puzzle_name(task: str) -> str | None:
    """The bare puzzle name of ``env/<name>`` or ``<name>``; None for an unknown task."""
    name = task[len(PREFIX):] if task.startswith(PREFIX) else task
    return name if name in PUZZLES else None


def describe(name: str) -> str:
    """A one-line description of the bare puzzle ``name``."""
    words = [_PARTS.get(part, part) for part in name.split("-")]
    if not name.startswith("two_room"):
        words.insert(0, "one room")
    return "; ".join(words)
