"""One PettingZoo classic game: a turn-based (AEC) two-player board game behind ``Game``.

The driver is the shared ``env_server.turn_based.TurnBasedGame`` (``PettingZooGame`` names it)
over a ``board.BoardGame``; this docstring says what it means for the PettingZoo games.

Turns: ``agents`` are the PettingZoo agent ids in seat order; after ``reset`` and after every
step, ``StepResult.next_agents`` holds only the player to move (``[]`` once the game is over);
``first_agents()`` says who moves first. A step needs the mover's action; an action submitted
for an agent whose turn it is not is ignored (its transition says so, ``valid=False``).

Every step returns a transition for *every* agent: both see the new board, and the final
rewards (+1 win, -1 loss, 0 draw, as PettingZoo gives them) go to both players on the last move.

Actions: a text naming a legal move (see each board module for its notation; case and
surrounding space/quotes are ignored) or an integer, read as the env's own action index (the
position in the action mask). Anything else, including a legal-looking move that is illegal
now, is *illegal*: a legal move drawn from a ``random.Random`` seeded from (task, episode seed)
(label ``pettingzoo/{task}/{seed}``) is played instead, ``valid=False``, the feedback names the
move played, and the player's ``illegal_moves`` count goes up. The sentence travels only in
``ActionResult.feedback``, never in the observation text.

Observation per agent: ``long_term_context`` is the board (``BoardGame.board_text``);
``short_term_context`` says the side, the move number, the last move, whose turn it is and, on
the agent's turn, the legal moves (chess: ``uci (SAN)``); ``legal_actions`` are the legal move
names on the agent's turn (else empty); ``action_mask`` and ``tensors["action_mask"]`` (uint8)
are the env's own mask for the agent (all zero when it is not its turn or the game is over);
``tensors["observation"]`` is the env's observation planes for the agent; ``info`` has
``current_player``, ``move_number``, ``side`` and the board's extras (chess ``fen``; go
``board_size``, ``komi``); the image (``render_image``) is the env's RGB drawing.

Metrics: ``moves`` (plies played), ``current_player``, ``illegal_moves`` {agent: n},
``returns`` {agent: float}, ``progression_agent``, and once the game is over ``outcome``
{agent: "win" | "draw" | "loss" | "unfinished"}, ``winner`` (agent id, "" for a draw or an
unfinished game), ``end`` (how it ended), ``truncated`` (the step limit was reached before the
game ended: every outcome ``unfinished``, returns 0), and for Go ``score`` (Black's area score
minus White's, komi included). ``progression`` is the result for ``progression_agent``
(default: the first seat): 1.0 win, 0.5 draw, 0.0 loss or unfinished, and 0.0 while the game
runs.
"""

from __future__ import annotations

from env_server.turn_based import OUTCOME_PROGRESS, TurnBasedGame

#: the driver of a PettingZoo game (built by ``PettingZooFamily.open`` with a ``BoardGame``)
PettingZooGame = TurnBasedGame

__all__ = ["OUTCOME_PROGRESS", "PettingZooGame"]
