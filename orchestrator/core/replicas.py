"""Several servers for one role (an env family's env servers, or the policy servers), and the
choice of which one takes the next episode.

Each episode asks ``ReplicaSet.acquire()`` for a target and gives it back with ``release``.
The choice, per acquire:

1. every replica is asked ``GetInfo`` (short deadline); one that does not answer (down,
   restarting) or says ``draining`` (SIGTERM'd, finishing its sessions) is skipped;
2. a replica's free room is ``capacity - max(active sessions it reports, episodes this run has
   in flight on it)``, and no more than this client's share of it (``peer_capacity`` minus what
   it holds, the server's per-peer limit); one known full (it answered RESOURCE_EXHAUSTED, see
   ``mark_full``) counts as full for ``full_cooldown_s``;
3. the replica with the most free room wins, ties going to the one with fewer of this run's
   episodes, then to the one used least recently, so load spreads evenly.

When no replica has room, ``acquire`` waits (polling with backoff) until one has; when none
answers for ``unreachable_timeout_s``, it raises ``NoReplicaError``. A ``dns:///`` target is one
logical replica whose calls gRPC spreads over every address the name resolves to
(``round_robin``); its reported capacity is one pod's, so it is never treated as full.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import grpc

from moria.clients import EnvClient, PolicyClient

log = logging.getLogger("moria.replicas")


@dataclass(frozen=True)
class Load:
    """What a replica reported: ``capacity`` (concurrent sessions or streams), ``active``
    (in use now), ``draining``, and this client's share: ``peer_capacity`` (the most this
    client address may hold; 0 from a server that sets none or predates the field) and
    ``peer_active`` (what it holds now)."""

    capacity: int
    active: int
    draining: bool
    peer_capacity: int = 0
    peer_active: int = 0

    def room(self, in_flight: int) -> int:
        """Sessions or streams this client may still open there, with ``in_flight`` of its
        own under way: the server's free capacity, within this client's share."""
        free = self.capacity - max(self.active, in_flight)
        if self.peer_capacity:
            free = min(free, self.peer_capacity - max(self.peer_active, in_flight))
        return free


#: Asks one target for its load; raises ``grpc.aio.AioRpcError`` (or ``OSError``) when down.
Probe = Callable[[str], Awaitable[Load]]


class NoReplicaError(RuntimeError):
    """No replica of a role answered for the whole wait; the message lists the targets."""


async def env_load(target: str) -> Load:
    """An env server's load from ``GetInfo`` (2 s deadline)."""
    info = await EnvClient(target).get_info(timeout=2.0)
    return Load(info.capacity, info.active_sessions, info.draining, info.peer_capacity,
                info.peer_sessions)


async def policy_load(target: str) -> Load:
    """A policy server's load from ``GetInfo`` (2 s deadline)."""
    info = await PolicyClient(target).get_info(timeout=2.0)
    return Load(info.capacity, info.active_streams, info.draining, info.peer_capacity,
                info.peer_streams)


@dataclass
class _Replica:
    target: str
    in_flight: int = 0
    last_used: int = 0
    full_until: float = 0.0


class ReplicaSet:
    """The replicas of one role. ``role`` names it in messages (``"env server for babyai"``);
    ``probe`` reads a replica's load (``env_load``/``policy_load``).

    Raises ValueError for an empty or repeated target list.
    """

    def __init__(self, role: str, targets: Sequence[str], probe: Probe, *,
                 unreachable_timeout_s: float = 60.0, full_cooldown_s: float = 2.0) -> None:
        if not targets:
            raise ValueError(f"no target given for the {role}")
        if len(set(targets)) != len(targets):
            raise ValueError(f"a target is listed twice for the {role}: {list(targets)}")
        self.role = role
        self.probe = probe
        self.unreachable_timeout_s = unreachable_timeout_s
        self.full_cooldown_s = full_cooldown_s
        self._replicas = [_Replica(t) for t in targets]
        self._uses = itertools.count(1)
        self._lock = asyncio.Lock()

    @property
    def targets(self) -> list[str]:
        """Every target, in the order given."""
        return [r.target for r in self._replicas]

    def in_flight(self, target: str) -> int:
        """Episodes of this run holding ``target`` now."""
        return self._replica(target).in_flight

    async def acquire(self) -> str:
        """A target with room for one more episode (see the module docstring); the caller
        must ``release`` it. Waits while every reachable replica is full. Raises
        NoReplicaError when none answers for ``unreachable_timeout_s`` seconds."""
        delay = 0.05
        unreachable_since: float | None = None
        while True:
            # probe outside the lock (a hung replica costs its 2 s deadline once, not once per
            # waiting episode); choose under it, so the in_flight counts stay exact
            loads = await asyncio.gather(*(self._load(r) for r in self._replicas))
            async with self._lock:
                choice = self._choose(loads)
                if choice is not None:
                    choice.in_flight += 1
                    choice.last_used = next(self._uses)
                    return choice.target
            now = time.monotonic()
            if any(load is not None for load in loads):
                unreachable_since = None
            else:
                unreachable_since = unreachable_since or now
                if now - unreachable_since >= self.unreachable_timeout_s:
                    raise NoReplicaError(
                        f"no {self.role} answered for {self.unreachable_timeout_s:.0f} s: "
                        + ", ".join(self.targets))
            await asyncio.sleep(delay)
            delay = min(1.0, delay * 2)

    def release(self, target: str) -> None:
        """Give back a target taken with ``acquire``."""
        replica = self._replica(target)
        replica.in_flight = max(0, replica.in_flight - 1)

    def mark_full(self, target: str) -> None:
        """``target`` answered RESOURCE_EXHAUSTED: count it as full for a short while."""
        self._replica(target).full_until = time.monotonic() + self.full_cooldown_s

    def _replica(self, target: str) -> _Replica:
        for replica in self._replicas:
            if replica.target == target:
                return replica
        raise KeyError(f"{target!r} is not a {self.role} of this run")

    async def _load(self, replica: _Replica) -> Load | None:
        try:
            return await self.probe(replica.target)
        except (grpc.aio.AioRpcError, OSError) as exc:
            log.debug("%s %s did not answer: %s", self.role, replica.target, exc)
            return None

    def _choose(self, loads: Sequence[Load | None]) -> _Replica | None:
        now = time.monotonic()
        best: tuple[int, int, int] | None = None
        chosen: _Replica | None = None
        for replica, load in zip(self._replicas, loads, strict=True):
            if load is None or load.draining:
                continue
            if replica.target.startswith("dns:"):
                free = 1  # gRPC spreads its calls; one pod's capacity says little
            elif replica.full_until > now:
                free = 0
            else:
                free = load.room(replica.in_flight)
            if free <= 0:
                continue
            rank = (free, -replica.in_flight, -replica.last_used)
            if best is None or rank > best:
                best, chosen = rank, replica
        return chosen
