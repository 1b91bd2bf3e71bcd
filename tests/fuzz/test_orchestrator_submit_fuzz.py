"""Fuzzing ``OrchestratorService.SubmitRun`` with random and malformed run specs.

One real orchestrator service on loopback (in-process, on the harness's background loop, over a
temporary state directory; started once for the module) receives 2,000 generated submissions:
a small valid spec (babyai, ``agent.type=dummy``, one episode) changed at a few dotted keys, or
a random document. The changes reach every section: episode counts of every kind (negative,
zero, floats, strings, up to 10**12 and past int64), env names (unknown, empty, unicode,
control characters, very long), task lists (unknown names, non-lists), sections replaced by
lists or scalars, unknown keys at any level, 100k-key mappings, deep nesting, huge strings,
NaN and infinities, ``eval.prices`` (and the other path settings) naming server files
(/etc/passwd, ../.., /proc/self/environ, /dev/zero, a YAML file of the repository), and run
ids (bad patterns, very long, taken, the spec's ``eval.run_id`` disagreeing).

No run plays a game: every spec keeps ``endpoints`` pointing at an address where nothing
listens (so no local stack is started, and a run that is accepted fails at its preflight), and
every accepted run is cancelled at once (CancelRun) and waited for to end.

Properties, after every example:
- SubmitRun ends OK or with INVALID_ARGUMENT, ALREADY_EXISTS, RESOURCE_EXHAUSTED or
  FAILED_PRECONDITION (never UNKNOWN/INTERNAL, never a dead channel or a missed deadline), and
  its status details stay under 4 KiB;
- an accepted run is one the service may run: every file it opens itself (its price table, its
  demonstrations, its TLS files) is inline or an entry of the folders the service offers (here
  --prices-dir alone), never a path the spec gave (the files its env and agent servers open
  stay names for those servers); its endpoints are the ones the service was told to dial
  (--allowed-endpoints); it plans no more episodes than
  ``orchestrator.plan.spec.MAX_EPISODES`` (where defined); its id is the one asked for; the same
  submission again is answered OK (created=False); once stopped, its error is under 4 KiB.
  (Tasks the shipped lists lack are the env server's call, at the run's preflight: counted as
  an event, not checked here; tests/integration/test_run_bounds.py plays that case.)
- the service stays responsive: health is SERVING, GetRun of the control run and
  ListRuns(page_size=1) are answered within a 1 s gRPC deadline after the example, and GetRun
  of the control run made every 50 ms while SubmitRun runs is answered within
  ``STALL_DEADLINE_S`` too (a DEADLINE_EXCEEDED is a stall: the event loop was kept busy by
  the example; on an idle machine they answer in a few milliseconds, and 250 ms was missed
  once under the whole suite's load on 2 cores);
- the accepted run reaches a final state after CancelRun (runs do not pile up), and no
  unhandled error was logged by gRPC or by the service's run scheduler;
- the process RSS stays within 200 MiB of its baseline over the run (the baseline taken after
  a warm-up of every large request kind; a growth over the limit is measured again after
  garbage collection and ``malloc_trim``, so the allocators' caches of a transient large
  request are not counted). Large values (100k-key mappings, megabyte strings) are drawn as
  descriptions (``Big``) and built only when sent, so Hypothesis keeps a few bytes of each.

The module caps the process's address space (RLIMIT_AS, a few GiB over its size after
warm-up) so a request that makes the server allocate without bound ends in a MemoryError (a
failed example) instead of exhausting the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from moria.codecs import dict_from_struct
from moria.orchestrator.v1 import orchestrator_service_pb2 as pb
from moria.orchestrator.v1 import orchestrator_service_pb2_grpc as pb_grpc
from moria.server import MoriaServer
from moria.server_files import ServerFiles
from orchestrator.apps.service import OrchestratorServicer
from orchestrator.plan import spec as spec_module
from orchestrator.plan.spec import DEFAULT_NUM_EPISODES, TasksConfig
from tests.fuzz.harness import (
    JSON_VALUE,
    MAX_DETAILS_BYTES,
    TEXT,
    BackgroundLoop,
    ControlProbe,
    RssBound,
    assert_serving,
    assert_status,
    rss_bytes,
)
from tests.support.servers import start_orchestrator

#: Examples per run (at least 2,000; lower it only for a quick local look).
EXAMPLES = int(os.environ.get("MORIA_FUZZ_EXAMPLES", "2000"))
#: Where nothing listens: a run that is accepted fails at its preflight, fast.
DEAD = "127.0.0.1:1"
TASK = "BabyAI-MixedTrainLocal-v0/goto"
FAMILIES = sorted(DEFAULT_NUM_EPISODES)
#: The tasks each env family knows (the shipped task lists).
KNOWN_TASKS = {env: frozenset(TasksConfig().for_env(env)) for env in FAMILIES}
#: SubmitRun's refusals a client can cause (the proto's codes for a bad spec or run id, plus
#: the limits); OK aside, anything else means the service broke.
SUBMIT_CODES = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.ALREADY_EXISTS,
                          grpc.StatusCode.RESOURCE_EXHAUSTED,
                          grpc.StatusCode.FAILED_PRECONDITION})
#: SubmitRun's own deadline: far above any legitimate answer; past it the call hung.
SUBMIT_DEADLINE_S = 30.0
#: The control calls' deadline: past it the service stalled.
CONTROL_DEADLINE_S = 1.0
#: How long an accepted run may take to end after CancelRun.
STOP_WITHIN_S = 10.0
#: RSS growth allowed over the whole run.
RSS_LIMIT = 200 * 2**20
#: Address space allowed over the process's size after warm-up (a guard, not a property).
ADDRESS_SPACE_HEADROOM = 4 * 2**30
#: Longest string sent (far below the 64 MiB message limit).
LONG_TEXT = 200_000
#: The largest request sent (a fuzzer's own check: the examples test the server, never the
#: client's message limit).
MAX_REQUEST_BYTES = 32 * 2**20
#: The client takes statuses of any size, so an oversized one is measured, not cut by the
#: transport into a client-side error.
CLIENT_OPTIONS = [("grpc.max_metadata_size", 64 * 2**20),
                  ("grpc.absolute_max_metadata_size", 64 * 2**20),
                  ("grpc.max_receive_message_length", 64 * 2**20),
                  ("grpc.max_send_message_length", 64 * 2**20)]
FINAL_STATES = frozenset({pb.RUN_STATE_SUCCEEDED, pb.RUN_STATE_FAILED, pb.RUN_STATE_CANCELLED})
REPO = Path(__file__).resolve().parents[2]


#: A price table file name a remote run may give (a plain YAML name inside --prices-dir).
PRICE_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\.ya?ml$")
PRICE_TABLE = {"as_of": "2025-01-01", "currency": "USD",
               "models": {"m": {"input": 1.0, "output": 2.0, "cached_input": 0.5}}}


def dead_endpoints() -> dict[str, Any]:
    """Every family and the policy at an address where nothing listens."""
    return {"env": {env: [DEAD] for env in FAMILIES}, "policy": [DEAD]}


def base_spec() -> dict[str, Any]:
    """The small valid spec the examples change: one babyai episode of the dummy player."""
    return {"agent": {"type": "dummy"}, "envs": {"names": "babyai"},
            "tasks": {"babyai_tasks": [TASK]},
            "eval": {"num_episodes": {"babyai": 1}, "num_workers": 1},
            "endpoints": dead_endpoints()}


def to_struct(data: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(data)
    return out


@dataclass(frozen=True, eq=False)
class Big:
    """A large value, described: ``kind`` "text" is ``part`` * ``n``; "list" is [``part``] *
    ``n``; "dict" is ``n`` keys in the style ``part`` ("plain", "control", "long"), each mapped
    to ``value``. Strategies draw the description and the example builds it (``built``) just
    before sending, so Hypothesis keeps a few bytes per example instead of megabytes."""

    kind: str
    n: int
    part: Any
    value: Any = None

    def build(self) -> Any:
        if self.kind == "text":
            return str(self.part) * self.n
        if self.kind == "list":
            return [built(self.part) for _ in range(self.n)]
        style = {"control": "\x01\n{}\u202e", "long": "{}-" + "k" * 200}.get(self.part, "k{}")
        return {style.format(i): built(self.value) for i in range(self.n)}

    def __repr__(self) -> str:
        if self.kind == "text":
            return f"({self.part!r} * {self.n})"
        if self.kind == "list":
            return f"([{self.part!r}] * {self.n})"
        return f"<{self.n} {self.part} keys: {self.value!r}>"


#: The key under which a ``Big`` mapping is merged into its parent mapping when built.
MERGE = Big("text", 0, "")


def built(value: Any) -> Any:
    """``value`` with every ``Big`` built (keys included; a ``MERGE`` entry merged)."""
    if isinstance(value, Big):
        return value.build()
    if isinstance(value, dict):
        out = {built(k): built(v) for k, v in value.items() if k is not MERGE}
        if MERGE in value:
            out.update(built(value[MERGE]))
        return out
    if isinstance(value, list):
        return [built(v) for v in value]
    return value


# ---- the service -------------------------------------------------------------------------------

#: Loggers whose records the module takes over (see ``ErrorRecords``).
TAKEN_LOGGERS = ("grpc", "moria", "orchestrator")


class ErrorRecords(logging.Handler):
    """ERROR records of gRPC (an exception a handler let through) and of the service's run
    scheduler (``orchestrator service error``): the service's own record of having broken.
    A run's failure (``run X failed``, its preflight against the dead endpoints) is not one.

    ``take_over`` makes it the only taker of the records of ``TAKEN_LOGGERS`` (and of every
    logger under them known then): the accepted runs fail at preflight by design, and pytest
    would print each such record and keep it, with its traceback and the frames it holds (the
    requests), until the test ends."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []
        self._saved: list[tuple[logging.Logger, bool]] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.name.startswith("grpc") or "service error" in message:
            self.records.append(f"{record.name}: {message[:300]}")

    def _take(self, record: logging.LogRecord) -> bool:
        """Logger filter: keep what ``emit`` wants, then drop the record for everyone."""
        if record.levelno >= self.level:
            self.emit(record)
        return False

    def take_over(self) -> None:
        names = [n for n in logging.root.manager.loggerDict
                 if n.split(".")[0] in TAKEN_LOGGERS]
        for name in {*TAKEN_LOGGERS, *names}:
            logger = logging.getLogger(name)
            self._saved.append((logger, logger.propagate))
            logger.addFilter(self._take)
            if name in TAKEN_LOGGERS:  # loggers made later still stop here
                logger.addHandler(self)
                logger.propagate = False

    def give_back(self) -> None:
        for logger, propagate in self._saved:
            logger.removeFilter(self._take)
            logger.removeHandler(self)
            logger.propagate = propagate
        self._saved.clear()


@dataclass
class OrchFixture:
    """The module's service, its stub and the bookkeeping of the examples."""

    loop: BackgroundLoop
    server: MoriaServer
    channel: grpc.aio.Channel
    stub: pb_grpc.OrchestratorServiceStub
    servicer: OrchestratorServicer
    errors: ErrorRecords
    prices: Path
    rss: RssBound | None = None
    fresh: Iterator[int] = field(default_factory=itertools.count)


@contextlib.contextmanager
def address_space_cap(headroom: int) -> Iterator[None]:
    """Cap this process's address space at its size now plus ``headroom`` (restored after)."""
    try:
        import resource
    except ImportError:  # not on this platform
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    size = 0
    with contextlib.suppress(OSError), open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmSize:"):
                size = int(line.split()[1]) * 1024
    if not size:
        yield
        return
    cap = size + headroom
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


async def _submit(fx: OrchFixture, spec: dict[str, Any], run_id: str,
                  ) -> tuple[grpc.StatusCode, str, pb.SubmitRunResponse | None]:
    request = pb.SubmitRunRequest(run_id=run_id)
    # CopyFrom, not the constructor: the constructor re-parses the Struct, which refuses
    # nesting the server must be shown (the decoder stops at 100 message levels)
    request.spec.CopyFrom(to_struct(spec))
    assert request.ByteSize() < MAX_REQUEST_BYTES, f"a request of {request.ByteSize():,} bytes"
    try:
        response = await fx.stub.SubmitRun(request, timeout=SUBMIT_DEADLINE_S)
    except grpc.aio.AioRpcError as err:
        return err.code(), err.details() or "", None
    return grpc.StatusCode.OK, "", response


async def _stop(fx: OrchFixture, run_id: str) -> pb.Run:
    """CancelRun, then wait until the run has ended; returns it."""
    try:
        await fx.stub.CancelRun(pb.CancelRunRequest(run_id=run_id), timeout=5)
    except grpc.aio.AioRpcError as err:
        raise AssertionError(f"CancelRun of the accepted run {run_id!r} ended "
                             f"{err.code().name}: {(err.details() or '')[:300]!r}") from None
    deadline = asyncio.get_running_loop().time() + STOP_WITHIN_S
    while True:
        run = (await fx.stub.GetRun(pb.GetRunRequest(run_id=run_id), timeout=5)).run
        if run.state in FINAL_STATES:
            return run
        assert asyncio.get_running_loop().time() < deadline, (
            f"run {run_id!r} still {pb.RunState.Name(run.state)} {STOP_WITHIN_S:.0f} s after "
            "CancelRun: runs pile up")
        await asyncio.sleep(0.005)


async def _responsive(fx: OrchFixture) -> None:
    """Health SERVING and both control calls answered within ``CONTROL_DEADLINE_S``."""
    try:
        got = await fx.stub.GetRun(pb.GetRunRequest(run_id="control"),
                                   timeout=CONTROL_DEADLINE_S)
        assert got.run.run_id == "control"
        await fx.stub.ListRuns(pb.ListRunsRequest(page_size=1), timeout=CONTROL_DEADLINE_S)
    except grpc.aio.AioRpcError as err:
        raise AssertionError(f"control call failed: {err.code().name} "
                             f"{(err.details() or '')[:300]!r} (a stall when "
                             "DEADLINE_EXCEEDED)") from None
    await assert_serving(fx.channel)


def _warm_up() -> list[tuple[dict[str, Any], Any]]:
    """Submissions made before the RSS baseline: one of each kind and size of request."""
    out: list[tuple[dict[str, Any], Any]] = [(base_spec(), ""), ({"eval": {"num_workerz": 2}}, "")]
    for n in (20_001, 100_000):
        for style in ("plain", "control", "long"):
            out.append(({**base_spec(), "players": Big("dict", n, style, [1])}, ""))
    for ch in ("a", "\u4e2d", "\U0001f600"):
        out.append(({**base_spec(), "hydra": Big("text", LONG_TEXT, ch)}, ""))
    out.append((base_spec(), Big("text", 10**6, "a")))
    out.append(({**base_spec(), "tasks": {"babyai_tasks": Big("list", 10_000, "x" * 100)}}, ""))
    out.append(({**base_spec(), "envs": _nest(40, "dict", 1)}, ""))
    return out


@pytest.fixture(scope="module")
def orch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OrchFixture]:
    state = tmp_path_factory.mktemp("orchestrator-state")
    prices = tmp_path_factory.mktemp("prices")
    (prices / "table.yaml").write_text(json.dumps(PRICE_TABLE), encoding="utf-8")
    loop = BackgroundLoop()
    errors = ErrorRecords()

    async def start() -> OrchFixture:
        # prices: the folder whose file names a submitted eval.prices may give; DEAD: the one
        # server the specs' endpoints name (nothing listens there)
        server, servicer = await start_orchestrator(
            state, files=ServerFiles({"prices": prices}), allowed_endpoints=[DEAD])
        channel = grpc.aio.insecure_channel(server.bound_address, options=CLIENT_OPTIONS)
        fx = OrchFixture(loop, server, channel,
                         pb_grpc.OrchestratorServiceStub(channel), servicer, errors,
                         prices.resolve())
        # the control run, then a warm-up of each path (accepted, refused, resubmitted) and of
        # the large requests, so the baseline RSS counts the allocators' steady state; what
        # goes wrong here is left to the examples to report
        code, details, _ = await _submit(fx, base_spec(), "control")
        assert code == grpc.StatusCode.OK, (code, details)
        with contextlib.suppress(AssertionError):
            await _stop(fx, "control")
        for n, (spec, run_id) in enumerate(_warm_up()):
            for _ in range(2):
                code, _, answer = await _submit(fx, built(spec), built(run_id) or f"warm-up-{n}")
                if answer is not None:
                    with contextlib.suppress(AssertionError):
                        await _stop(fx, answer.run_id)
        return fx

    errors.take_over()
    fixture = loop.run(start(), timeout=120)
    errors.give_back()
    errors.take_over()  # again: the warm-up imported the run's modules and their loggers
    errors.records.clear()
    fixture.rss = RssBound(RSS_LIMIT)
    try:
        with address_space_cap(ADDRESS_SPACE_HEADROOM):
            yield fixture
    finally:
        async def stop() -> None:
            await fixture.channel.close()
            await fixture.server.shutdown()
            await fixture.servicer.aclose()

        loop.run(stop(), timeout=120)
        loop.stop()
        errors.give_back()


# ---- strategies --------------------------------------------------------------------------------

#: Short texts made of control characters and the odd format characters.
CONTROL_TEXT = st.text(st.one_of(st.characters(max_codepoint=31),
                                 st.sampled_from("\x7f\x85\u2028\u202e\u200b\ufeff")),
                       min_size=1, max_size=12)
#: Long strings: a repeated character, up to ``LONG_TEXT``.
LONG = st.one_of(
    st.builds(lambda ch, n: Big("text", n, ch),
              st.sampled_from(["a", "\u00e9", "\u4e2d", "\U0001f600", "\x00", "/"]),
              st.integers(1000, LONG_TEXT)),
    st.builds(lambda n: Big("text", n, "x"), st.integers(65, 5000)))
NASTY_TEXT = st.one_of(TEXT, CONTROL_TEXT, LONG)
ODD_FLOATS = st.sampled_from([math.nan, math.inf, -math.inf, 0.5, -0.0, 1e12, 1e300, 2.0**64,
                              1e-300])

#: Episode counts of every kind: small, at the edges, huge, negative, fractional, not numbers.
COUNTS = st.one_of(
    st.integers(-3, 5),
    st.sampled_from([0, -1, 999_999, 1_000_001, 10**7, 10**9, 10**12, -(10**12), 2**31, 2**53,
                     2**53 + 1, 2**63 - 1, 2**64]),
    ODD_FLOATS, st.floats(-10.0, 10.0),
    st.sampled_from(["1", "10", "1e12", "ten", "", "0x10", "-1"]),
    st.none(), st.booleans(), st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(TEXT, st.integers(), max_size=2),
)
#: Env family names: real, several, unknown, empty, odd.
ENV_NAMES = st.one_of(
    st.sampled_from([*FAMILIES, "babyai-minihack", "babyai-babyai", "BABYAI", "chess",
                     "babyai-chess", "", "-", "--", "babyai-", "ba\u0301byai", "babyai\x00",
                     "../..", "babyai " * 3]),
    NASTY_TEXT,
)
#: Task names: known, unknown, odd (short ones, then any).
SHORT_TASK_NAMES = st.one_of(
    st.sampled_from([TASK, *sorted(KNOWN_TASKS["babyai"])[:3],
                     "BabyAI-NoSuchTask-v0/goto", "BabyAI-MixedTrainLocal-v0/nope",
                     "NetHackScore-v0", "", "/", "..", "babyai:" + TASK]),
    TEXT, CONTROL_TEXT,
)
TASK_NAMES = st.one_of(SHORT_TASK_NAMES, LONG)
TASK_LISTS: st.SearchStrategy[Any] = st.one_of(
    st.lists(TASK_NAMES, min_size=1, max_size=4),
    st.just([]),
    st.builds(lambda name, n: Big("list", n, name), SHORT_TASK_NAMES,
              st.sampled_from([100, 10_000])),
    TASK_NAMES,  # a string where a list belongs
    st.dictionaries(TEXT, TEXT, max_size=2),
)
#: Paths on the server: system files, escapes, a YAML file of the repository, devices.
SERVER_PATHS = st.sampled_from([
    "/etc/passwd", "../..", "../../../../../../../etc/passwd", "/proc/self/environ",
    "/proc/self/status", "/dev/zero", "/dev/null", "/", ".", "~/.ssh/id_rsa",
    str(REPO / "orchestrator" / "suites" / "prices.yaml"), str(REPO / "deploy"),
    "orchestrator/suites/prices.yaml",
    "prices.yaml", "/etc/passwd\x00.yaml", "C:\\Windows\\win.ini", "file:///etc/passwd",
    "table.yaml", "missing.yaml", "../table.yaml", "./table.yaml", "a/table.yaml", "table.yml",
    "-table.yaml", "table.yaml/", "table.yaml\n", ".." + "/.." * 30 + "/etc/passwd",
])
INLINE_PRICES = st.one_of(
    st.just(PRICE_TABLE),
    st.dictionaries(st.sampled_from(["as_of", "currency", "models"]), JSON_VALUE, max_size=3),
    st.dictionaries(TEXT, JSON_VALUE, max_size=3),
)
RUN_ID_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
VALID_IDS = st.builds(lambda head, tail: head + tail, st.sampled_from("aZ0"),
                      st.text(st.sampled_from(RUN_ID_CHARS), max_size=40))
BAD_IDS = st.one_of(
    st.sampled_from(["../escape", "..", ".", "a/b", "a\\b", " a", "a ", "-a", "_a", ".a", "a b",
                     "a\x00", "a\n", "\u00e9t\u00e9", "\u202eabc", "a" * 65, "a:b", "*", "a;b"]),
    TEXT, CONTROL_TEXT, LONG,
    st.builds(lambda n: Big("text", n, "a"), st.sampled_from([10**5, 10**6])),
)


#: Mappings with many keys (up to 100k).
BIG_DICTS = st.builds(lambda n, keys, value: Big("dict", n, keys, value),
                      st.sampled_from([1000, 20_001, 100_000]),
                      st.sampled_from(["plain", "control", "long"]),
                      st.sampled_from([1, "x", None, {}, [1]]))


def _nest(depth: int, kind: str, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"k": value} if kind == "dict" else [value]
    return value


#: Deep nesting (a Struct decodes to about 32 levels; deeper ones test the transport too).
DEEP = st.builds(_nest, st.sampled_from([5, 20, 30, 31, 32, 33, 40, 64, 100, 200]),
                 st.sampled_from(["dict", "list"]), st.sampled_from([1, "x", None, {}]))
NASTY_VALUES = st.one_of(JSON_VALUE, NASTY_TEXT, ODD_FLOATS, COUNTS, DEEP,
                         st.lists(JSON_VALUE, max_size=3))

SECTIONS = ["agent", "client", "eval", "envs", "tasks", "endpoints", "players", "hydra"]
#: Known dotted keys (and some near misses) the examples change.
KNOWN_PATHS: list[tuple[str, ...]] = [
    ("agent",), ("agent", "type"), ("agent", "max_text_history"), ("agent", "checkpoint"),
    ("client",), ("client", "client_name"), ("client", "model_id"), ("client", "timeout"),
    ("client", "base_url"), ("client", "generate_kwargs"),
    ("eval",), ("eval", "num_episodes"), ("eval", "num_workers"), ("eval", "seed"),
    ("eval", "output_dir"), ("eval", "num_samples"), ("eval", "max_steps_per_episode"),
    ("eval", "step_timeout_s"), ("eval", "episode_timeout_s"), ("eval", "icl_episodes"),
    ("eval", "max_concurrent_model_calls"), ("eval", "max_episode_retries"),
    ("eval", "num_workerz"),
    ("envs",), ("envs", "babyai_kwargs"), ("envs", "babyai_kwargs", "num_dists"),
    ("envs", "minihack_kwargs"), ("envs", "nle_kwargs"),
    ("tasks",), ("tasks", "nle_tasks"), ("tasks", "chess_tasks"),
    ("endpoints", "tls"), ("endpoints", "token_env"), ("endpoints", "max_message_mb"),
    ("endpoints", "env", "babyai"), ("endpoints", "env", "chess"),
    ("players",), ("players", "agent_0"), ("players", "agent_0", "agent"),
    ("players", "agent_0", "coordination_level"), ("hydra",),
]
#: Keys naming a file or folder on the server.
PATH_KEYS: list[tuple[str, ...]] = [
    ("eval", "icl_dataset"), ("agent", "checkpoint"), ("endpoints", "tls", "ca_cert"),
    ("endpoints", "tls", "client_cert"), ("envs", "minihack_kwargs", "boxoban_levels"),
    ("eval", "output_dir"), ("client", "model_id"),
]

Mutation = tuple[tuple[str, ...], Any]

mutations: st.SearchStrategy[Mutation] = st.one_of(
    # episode counts: of the env the spec plays, of the others and of unknown envs
    st.tuples(st.just(("eval", "num_episodes", "babyai")), COUNTS),
    st.tuples(st.one_of(st.sampled_from(FAMILIES), ENV_NAMES).map(
        lambda env: ("eval", "num_episodes", env)), COUNTS),
    st.tuples(st.just(("eval", "num_samples")), COUNTS),
    st.tuples(st.just(("eval", "num_episodes")), st.one_of(BIG_DICTS, NASTY_VALUES)),
    # names
    st.tuples(st.just(("envs", "names")), ENV_NAMES),
    st.tuples(st.sampled_from(FAMILIES).map(lambda env: ("tasks", f"{env}_tasks")), TASK_LISTS),
    st.tuples(st.just(("tasks", "babyai_tasks")), TASK_LISTS),
    # the price table and the other server paths
    st.tuples(st.just(("eval", "prices")),
              st.one_of(SERVER_PATHS, INLINE_PRICES, NASTY_TEXT, NASTY_VALUES)),
    st.tuples(st.sampled_from(PATH_KEYS), st.one_of(SERVER_PATHS, NASTY_TEXT)),
    st.tuples(st.just(("agent", "type")),
              st.sampled_from(["few_shot", "rl", "human", "naive", "oracle", "random", "nope"])),
    # the run id inside the spec
    st.tuples(st.just(("eval", "run_id")), st.one_of(VALID_IDS, BAD_IDS, NASTY_VALUES)),
    # any known key, odd values; sections as lists or scalars; many keys; deep nesting
    st.tuples(st.sampled_from(KNOWN_PATHS), NASTY_VALUES),
    st.tuples(st.sampled_from(SECTIONS).map(lambda s: (s,)),
              st.one_of(st.lists(JSON_VALUE, max_size=3), NASTY_TEXT, COUNTS)),
    st.tuples(st.sampled_from([("players",), ("envs", "babyai_kwargs"), ("eval", "num_episodes"),
                               ("client", "generate_kwargs"), ("agent",), ()]).map(
        lambda p: p or ("many",)), BIG_DICTS),
    st.tuples(st.sampled_from(KNOWN_PATHS), DEEP),
    # unknown keys anywhere, huge strings anywhere
    st.tuples(st.lists(st.one_of(st.sampled_from(SECTIONS), TEXT, CONTROL_TEXT, LONG),
                       min_size=1, max_size=3).map(tuple), NASTY_VALUES),
    st.tuples(st.sampled_from(KNOWN_PATHS), LONG),
)


def _apply(spec: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set ``spec[path]`` (creating mappings on the way; a non-mapping on the way is
    replaced); ``("many",)`` at the top merges a mapping of many keys into the top level."""
    if path == ("many",):
        spec[MERGE] = value  # type: ignore[index]
        return
    node = spec
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[path[-1]] = value


def _keep_remote(spec: dict[str, Any]) -> dict[str, Any]:
    """Keep the endpoints configured, so no accepted run starts a local stack: an emptied
    endpoints section gets the dead address back (garbage is left for the validator)."""
    endpoints = spec.get("endpoints")
    if endpoints is None or endpoints == {}:
        spec["endpoints"] = dead_endpoints()
    elif isinstance(endpoints, dict):
        if not endpoints.get("policy"):
            endpoints["policy"] = [DEAD]
        if not endpoints.get("env"):
            endpoints["env"] = dead_endpoints()["env"]
    return spec


def _mutated(changes: list[Mutation]) -> dict[str, Any]:
    spec = base_spec()
    for path, value in changes:
        _apply(spec, path, value)
    return _keep_remote(spec)


#: Whole random documents (sections with random content, unknown sections).
random_specs = st.dictionaries(st.one_of(st.sampled_from(SECTIONS), TEXT), NASTY_VALUES,
                               max_size=5).map(_keep_remote)

specs: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.lists(mutations, min_size=1, max_size=3).map(_mutated),
    st.lists(mutations, min_size=1, max_size=3).map(_mutated),
    st.lists(mutations, min_size=1, max_size=3).map(_mutated),
    st.just(base_spec()),
    random_specs,
)


@dataclass(frozen=True)
class RunId:
    """The request's run id: ``text`` (built when a ``Big``), made unique at run time when
    ``fresh``."""

    text: str | Big
    fresh: bool = False

    def __repr__(self) -> str:
        return f"RunId({self.text!r}{', fresh' if self.fresh else ''})"


run_ids = st.one_of(
    st.just(RunId("")),
    st.just(RunId("")),
    st.sampled_from(["control", "taken", "taken-2"]).map(RunId),
    VALID_IDS.map(lambda t: RunId(t, fresh=True)),
    VALID_IDS.map(lambda t: RunId(t, fresh=True)),
    BAD_IDS.map(RunId),
)


# ---- checks ------------------------------------------------------------------------------------

def _server_path(spec: dict[str, Any]) -> str | None:
    """The ``eval.prices`` of the request when it names anything but a plain YAML file name
    (a path, an escape, a device): such a price table must never be accepted."""
    evaluation = spec.get("eval")
    prices = evaluation.get("prices") if isinstance(evaluation, dict) else None
    if isinstance(prices, str) and prices and not PRICE_FILE_NAME.match(prices):
        return prices
    return None


def _files_outside(run: pb.Run, prices: Path) -> list[str]:
    """The files of the stored spec that the service opens itself and does not offer: a
    price table outside ``prices`` (an empty name is the shipped table), a demonstration
    folder, TLS files (it offers neither)."""
    stored = dict_from_struct(run.spec)
    evaluation = stored.get("eval") or {}
    out = []
    table = evaluation.get("prices")
    if isinstance(table, str) and table and Path(table).parent != prices:
        out.append(f"eval.prices={table!r}")
    if evaluation.get("icl_dataset"):
        out.append(f"eval.icl_dataset={evaluation['icl_dataset']!r}")
    tls = (stored.get("endpoints") or {}).get("tls") or {}
    out.extend(f"endpoints.tls.{k}={v!r}" for k, v in tls.items()
               if k != "server_name" and v)
    return out


def _unknown_tasks(run: pb.Run) -> list[tuple[str, str]]:
    """(env, task) pairs of the stored spec that the run would play and the shipped task lists
    do not have (the env server decides at the run's preflight: an event, not a failure)."""
    stored = dict_from_struct(run.spec)
    names = [n for n in str(stored.get("envs", {}).get("names", "")).split("-") if n]
    counts = dict(stored.get("eval", {}).get("num_episodes") or {})
    tasks = dict(stored.get("tasks") or {})
    out: list[tuple[str, str]] = []
    for env in names:
        if env in KNOWN_TASKS and counts.get(env, 1):
            out.extend((env, str(t)) for t in tasks.get(f"{env}_tasks", [])
                       if t not in KNOWN_TASKS[env])
    return out


async def _check_accepted(fx: OrchFixture, spec: dict[str, Any], asked: str,
                          response: pb.SubmitRunResponse, repeat: bool) -> list[str]:
    """The accepted run is stopped, then checked (see the module docstring)."""
    run_id = response.run_id
    events = [f"accepted ({'created' if response.created else 'existing'})"]
    run = await _stop(fx, run_id)
    if repeat:  # the same submission again: idempotent
        code, details, again = await _submit(fx, spec, run_id)
        assert code == grpc.StatusCode.OK and again is not None, (
            f"the same submission again ended {code.name}: {details[:300]!r}")
        assert not again.created, "the same submission again created a new run"
        run = await _stop(fx, run_id)
        events.append("resubmitted")
    if asked:
        assert run_id == asked, (run_id, asked)
    error_size = len(run.error.encode("utf-8", "surrogatepass"))
    assert error_size < MAX_DETAILS_BYTES, (
        f"the run's error is {error_size:,} bytes: {run.error[:300]!r}...")
    path = _server_path(spec)
    assert path is None, f"a run whose price table is the server path {path!r} was accepted"
    outside = _files_outside(response.run, fx.prices)
    assert not outside, f"an accepted run opens files the service does not offer: {outside}"
    if _unknown_tasks(response.run):
        events.append("accepted with tasks outside the shipped lists (left to the preflight)")
    limit = getattr(spec_module, "MAX_EPISODES", None)
    if limit is not None:
        assert response.run.episodes_total <= limit, (
            f"a run of {response.run.episodes_total:,} episodes was accepted (max {limit:,})")
    return events


async def _example(fx: OrchFixture, spec: dict[str, Any], asked: RunId,
                   repeat: bool) -> list[str]:
    """Submit one spec and check everything; returns what happened (Hypothesis events)."""
    spec = built(spec)
    text = str(built(asked.text))
    run_id = f"{text}-{next(fx.fresh)}" if asked.fresh else text
    async with ControlProbe(lambda deadline: fx.stub.GetRun(pb.GetRunRequest(run_id="control"),
                                                            timeout=deadline)) as probe:
        code, details, response = await _submit(fx, spec, run_id)
    assert probe.stalls == 0, f"{probe.stalls} control call(s) stalled during SubmitRun"
    events = [f"SubmitRun: {code.name}", probe.bucket()]
    if response is not None:
        events += await _check_accepted(fx, spec, run_id, response, repeat)
    assert_status(code, details, SUBMIT_CODES, what="SubmitRun")
    await _responsive(fx)
    assert not fx.errors.records, fx.errors.records[:3]
    return events


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.large_base_example,
                                 HealthCheck.function_scoped_fixture])
@given(spec=specs, run_id=run_ids, repeat=st.booleans())
def test_submit_run_survives_random_and_malformed_specs(
        orch: OrchFixture, spec: dict[str, Any], run_id: RunId, repeat: bool) -> None:
    orch.errors.records.clear()
    try:
        events = orch.loop.run(_example(orch, spec, run_id, repeat), timeout=120)
    except TimeoutError:
        raise AssertionError("the example did not end within 120 s: the service's event loop "
                             "is blocked") from None
    for name in events:
        event(name)
    assert orch.rss is not None
    growth = orch.rss.check(f" after SubmitRun of run id {run_id!r}")
    event(f"RSS growth: {'<50' if growth < 50 * 2**20 else '>=50'} MiB")


@pytest.mark.parametrize("size", [60_000, 70_000, 3_000_000])
def test_every_other_call_with_an_oversized_field_is_refused_or_answered(
        orch: OrchFixture, size: int) -> None:
    """GetRun, CancelRun, ListRuns and StreamEvents naming a run id of ``size`` characters:
    under the 64 KiB such a request may be, an answer (NOT_FOUND, or an empty page); over it,
    RESOURCE_EXHAUSTED before it is read; never another code, and the service answers its
    control calls meanwhile."""
    run_id = "r" * size
    calls = {
        "GetRun": lambda: orch.stub.GetRun(pb.GetRunRequest(run_id=run_id), timeout=10),
        "CancelRun": lambda: orch.stub.CancelRun(pb.CancelRunRequest(run_id=run_id),
                                                 timeout=10),
        "ListRuns": lambda: orch.stub.ListRuns(pb.ListRunsRequest(page_token=run_id),
                                               timeout=10),
        "StreamEvents": lambda: _drain(orch.stub.StreamEvents(
            pb.StreamEventsRequest(run_id=run_id), timeout=10)),
    }
    allowed = ({grpc.StatusCode.RESOURCE_EXHAUSTED} if size > 64 * 1024
               else {grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT})

    async def check() -> None:
        async with ControlProbe(lambda deadline: orch.stub.GetRun(
                pb.GetRunRequest(run_id="control"), timeout=deadline)) as probe:
            for name, call in calls.items():
                try:
                    await call()
                except grpc.aio.AioRpcError as err:
                    assert err.code() in allowed, (name, err.code(), err.details())
                    assert_status(err.code(), err.details() or "", frozenset(allowed),
                                  what=name)
        assert probe.stalls == 0
        await _responsive(orch)

    orch.loop.run(check())


async def _drain(stream: Any) -> None:
    async for _ in stream:
        pass


def test_service_still_takes_a_valid_run(orch: OrchFixture) -> None:
    """After the fuzzing, a valid spec is still accepted, stopped and listed; the RSS growth
    over the whole run is reported."""

    async def check() -> None:
        code, details, response = await _submit(orch, base_spec(), "after-fuzzing")
        assert code == grpc.StatusCode.OK and response is not None, (code, details)
        run = await _stop(orch, "after-fuzzing")
        assert run.state in FINAL_STATES
        listed = await orch.stub.ListRuns(pb.ListRunsRequest(page_size=1), timeout=5)
        assert [r.run_id for r in listed.runs] == ["after-fuzzing"]
        await _responsive(orch)

    orch.loop.run(check())
    assert orch.rss is not None
    growth = orch.rss.check(release=True)
    print(f"RSS: baseline {orch.rss.baseline / 2**20:,.0f} MiB; growth now "
          f"{growth / 2**20:+,.0f} MiB (after releasing free memory), largest "
          f"{orch.rss.peak / 2**20:+,.0f} MiB ({orch.rss.peak_released / 2**20:+,.0f} MiB "
          f"released); RSS now {rss_bytes() / 2**20:,.0f} MiB")
