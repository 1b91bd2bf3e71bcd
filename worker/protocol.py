"""The interactive JSON-lines protocol: one command object per stdin line, one answer object
per stdout line (see docs/worker.md for every command and answer).

Nothing but answers goes to stdout. A malformed line, an unknown command, a missing or
ill-typed field, a command out of order or a server failure is answered with
``{"type":"error","message":...}`` and the loop goes on; ``stop`` or the end of stdin ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable
from typing import IO, Any

import grpc

from moria.clients import StreamClosedError
from moria.quoting import quote
from orchestrator.store.telemetry import dumps
from worker.selector import ActionSelector
from worker.session import CommandError, GameSession

log = logging.getLogger("moria.worker")

#: Protocol version written in the init line.
PROTOCOL_VERSION = "1.0"

#: Commands and their fields: name -> (required fields, optional fields).
COMMANDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "reset": ((), ("seed",)),
    "step": ((), ("action",)),
    "init_agent": (("game_name", "player_id"), ("instruction_prompt",)),
    "select_action": (("observation", "player_id"), ("info", "action_mask", "action")),
    "ping": ((), ()),
    "stop": ((), ()),
}


class JsonLineWriter:
    """Writes one scrubbed JSON object per line to ``stream`` (one write + flush, locked)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self._lock = threading.Lock()

    def __call__(self, obj: dict[str, Any]) -> None:
        """Write ``obj`` as one line."""
        line = dumps(obj) + "\n"
        with self._lock:
            self.stream.write(line)
            self.stream.flush()


#: Episode seeds are unsigned 64-bit integers (``OpenRequest.seed``).
MAX_SEED = 2**64 - 1
SEED_RANGE = "an integer in [0, 2**64 - 1]"


def _get(msg: dict[str, Any], name: str, kind: type | tuple[type, ...], what: str,
         *, required: bool = False) -> Any:
    """``msg[name]`` checked against ``kind``; None when absent and optional."""
    if name not in msg or msg[name] is None:
        if required:
            raise CommandError(f"missing field {name!r} ({what}) in {msg.get('cmd')!r}")
        return None
    value = msg[name]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise CommandError(f"field {name!r} must be {what} (got {quote(value, 64)})")
    if not isinstance(value, kind):
        raise CommandError(f"field {name!r} must be {what} (got {quote(value, 64)})")
    return value


class Protocol:
    """Dispatches commands to the game session and the action selector.

    ``emit``: writes one answer object (stdout). ``game`` is None when the env cannot be played
    by the worker (then reset/step answer errors).
    """

    def __init__(self, game: GameSession, selector: ActionSelector,
                 emit: Callable[[dict[str, Any]], None]) -> None:
        self.game = game
        self.selector = selector
        self.emit = emit
        self.commands = 0

    def init_line(self) -> dict[str, Any]:
        """The first line: ``{"type":"init","run_id","env","task","version"}`` (+ agent)."""
        s = self.game.settings
        return {"type": "init", "run_id": self.game.telemetry.run_id, "env": s.env_name,
                "task": self.game.task, "version": PROTOCOL_VERSION,
                "agent_id": self.game.agent_id, "agent_type": s.agent_type,
                "opponent": s.opponent, "commands": sorted(COMMANDS)}

    async def handle_line(self, line: str) -> bool:
        """Answer one input line. Returns False when the worker must stop."""
        text = line.strip()
        if not text:
            return True
        try:
            msg = json.loads(text)
        except json.JSONDecodeError as exc:
            self._error(f"bad JSON ({exc.msg} at column {exc.colno}); each line must be one "
                        'JSON object such as {"cmd":"ping"}')
            return True
        if not isinstance(msg, dict):
            self._error(f"each line must be a JSON object with a 'cmd' field, got "
                        f"{type(msg).__name__}")
            return True
        cmd = msg.get("cmd")
        if not isinstance(cmd, str) or cmd not in COMMANDS:
            what = "missing field 'cmd'" if cmd is None else f"unknown cmd {cmd!r}"
            self._error(f"{what}; allowed: {', '.join(COMMANDS)}", cmd)
            return True
        self.commands += 1
        try:
            return await self._dispatch(cmd, msg)
        except CommandError as exc:
            self._error(str(exc), cmd)
        except grpc.aio.AioRpcError as exc:
            self._error(f"server error {exc.code().name}: {exc.details()}", cmd)
        except StreamClosedError as exc:
            self._error(f"server error: {exc}", cmd)
        except Exception as exc:  # the worker never dies on one command
            log.exception("command %s failed", cmd)
            self._error(f"internal error: {type(exc).__name__}: {quote(exc, 500)}", cmd)
        return True

    async def _dispatch(self, cmd: str, msg: dict[str, Any]) -> bool:
        required, optional = COMMANDS[cmd]
        unknown = sorted(set(msg) - {"cmd", *required, *optional})
        if unknown:
            allowed = ", ".join((*required, *optional)) or "none"
            raise CommandError(f"unknown field {unknown[0]!r} for {cmd!r}; allowed fields: "
                               f"{allowed}")
        if cmd == "ping":
            self.emit({"type": "pong"})
        elif cmd == "stop":
            self.emit({"type": "stopped", "commands": self.commands})
            return False
        elif cmd == "reset":
            seed = _get(msg, "seed", int, SEED_RANGE)
            if seed is not None and not 0 <= seed <= MAX_SEED:
                raise CommandError(f"field 'seed' must be {SEED_RANGE} (got {quote(seed, 64)})")
            self.emit(await self.game.reset(seed))
        elif cmd == "step":
            move = _get(msg, "action", (str, int), "the move as text")
            answer, episode = await self.game.step(None if move is None else str(move))
            self.emit(answer)
            if episode is not None:
                self.emit(episode)
        elif cmd == "init_agent":
            game_name = _get(msg, "game_name", str, "the game's name", required=True)
            player_id = _get(msg, "player_id", (str, int), "the player's id", required=True)
            instruction = _get(msg, "instruction_prompt", str, "text")
            self.emit(await self.selector.init_agent(game_name, str(player_id), instruction))
        elif cmd == "select_action":
            await self._select(msg)
        return True

    async def _select(self, msg: dict[str, Any]) -> None:
        observation = _get(msg, "observation", str, "the observation text", required=True)
        player_id = _get(msg, "player_id", (str, int), "the player's id", required=True)
        info = _get(msg, "info", dict, "an object such as {\"legal_moves\": [...]}") or {}
        legal = info.get("legal_moves")
        if legal is not None and (not isinstance(legal, list) or not all(
                isinstance(m, str | int) and not isinstance(m, bool) for m in legal)):
            raise CommandError(f"field 'info.legal_moves' must be a list of moves (strings or "
                               f"integers), got {quote(legal, 200)}")
        mask = _get(msg, "action_mask", list, "a list of booleans")
        if mask is not None and not all(isinstance(m, bool | int) for m in mask):
            raise CommandError(f"field 'action_mask' must be a list of booleans, got "
                               f"{quote(mask, 200)}")
        move = _get(msg, "action", (str, int), "the move as text")
        self.emit(await self.selector.select_action(
            str(player_id), observation, None if legal is None else [str(m) for m in legal],
            None if mask is None else [bool(m) for m in mask],
            None if move is None else str(move)))

    def _error(self, message: str, cmd: str | None = None) -> None:
        answer: dict[str, Any] = {"type": "error", "message": message}
        if cmd:
            answer["cmd"] = cmd
        self.emit(answer)


def stdin_lines(stream: IO[str]) -> asyncio.Queue[str | None]:
    """A queue fed with ``stream``'s lines by a daemon thread; None at end of input."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def pump() -> None:
        try:
            for line in stream:
                loop.call_soon_threadsafe(queue.put_nowait, line)
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(RuntimeError):  # the loop may be gone already
                loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=pump, name="worker-stdin", daemon=True).start()
    return queue


async def serve(protocol: Protocol, lines: asyncio.Queue[str | None]) -> str:
    """Answer lines until ``stop`` or end of input. Returns ``"stop"`` or ``"eof"``."""
    protocol.emit(protocol.init_line())
    while True:
        line = await lines.get()
        if line is None:
            return "eof"
        if not await protocol.handle_line(line):
            return "stop"
