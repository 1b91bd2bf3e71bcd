"""moria.policy_config: the typed wire form of the agent and client config.

The pydantic models (moria.config) are the schema and AgentSettings / ClientSettings /
GenerateSettings (policy_service.proto) mirror them: these tests check, recursively and both
ways, that every model field has a wire field of the same name and a compatible type (and
every wire field a model field), that the proto comments state the models' defaults and
allowed values, and that a config with every field set to a non-default value comes back
unchanged, set fields included.
"""

from __future__ import annotations

import json
import re
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from agent_server.service import parse_policy_config
from moria.codecs import struct_from_dict
from moria.config import (
    INT32_MAX,
    INT64_MAX,
    AgentConfig,
    ClientConfig,
    GenerateKwargs,
    policy_config_dict,
)
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.policy_config import (
    EXTRA_FIELD,
    NULL_PREFIX,
    SETTINGS_MESSAGES,
    agent_settings,
    client_settings,
    config_dict,
    request_config,
)

PROTO = Path(__file__).resolve().parents[2] / "protos/moria/policy/v1/policy_service.proto"

#: Every field of every model set to a value other than its default (extra keys included).
AGENT_VALUES: dict[str, Any] = {
    "type": "few_shot", "protocol": "balrog", "balrog_source": "/opt/BALROG",
    "remember_cot": False, "max_text_history": 3, "max_image_history": 2, "max_cot_history": 4,
    "max_icl_history": 50, "checkpoint": "policy.npz", "sample": True,
}
CLIENT_VALUES: dict[str, Any] = {
    "client_name": "vllm", "model_id": "m", "base_url": "http://127.0.0.1:8000/v1",
    "generate_kwargs": {"temperature": 0.25, "max_tokens": 77, "top_p": 0.5, "stop": ["\n"],
                        "logit_bias": {"50256": -100}, "logprobs": True},
    "timeout": 12.5, "max_retries": 0, "delay": 0.5, "alternate_roles": True,
    "constrain_actions": True, "stream": True, "reasoning_effort": "high",
    "thinking_budget": 1000, "local_contexts": 4, "max_concurrency": 3,
    "max_prompt_bytes": 2**40,
    "max_requests_per_minute": 500.0,
    "max_tokens_per_minute": 30000.0,
    "http_client": "sdk",
}

_INT_TYPES = {FieldDescriptor.TYPE_INT32: INT32_MAX, FieldDescriptor.TYPE_INT64: INT64_MAX}


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the annotation without None, whether it accepts None)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        assert len(args) == 1, annotation
        return args[0], True
    return annotation, False


def _bound(info: FieldInfo, name: str) -> Any:
    return next((getattr(m, name) for m in info.metadata if hasattr(m, name)), None)


def _check_field(model: type[BaseModel], name: str, info: FieldInfo,
                 descriptor: Descriptor) -> list[str]:
    """Problems of the wire field mirroring ``model.name``."""
    where = f"{model.__name__}.{name} / {descriptor.name}.{name}"
    field = descriptor.fields_by_name.get(name)
    if field is None:
        return [f"{where}: no wire field"]
    if field.is_repeated:
        return [f"{where}: repeated"]
    if not field.has_presence:
        return [f"{where}: unset cannot be told from a zero value (make it optional)"]
    annotation, nullable = _unwrap(info.annotation)
    problems = []
    if nullable and info.default is not None:
        flag = descriptor.fields_by_name.get(NULL_PREFIX + name)
        if (flag is None or flag.type != FieldDescriptor.TYPE_BOOL
                or flag.containing_oneof is None
                or flag.containing_oneof is not field.containing_oneof):
            problems.append(f"{where}: None is allowed and not the default, so it needs a bool "
                            f"{NULL_PREFIX}{name} in a oneof with it")
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        expected = SETTINGS_MESSAGES.get(annotation)
        if expected is None or field.message_type is not expected.DESCRIPTOR:
            problems.append(f"{where}: {annotation.__name__} needs the message it travels as")
        return problems
    if typing.get_origin(annotation) is typing.Literal:
        ok = field.type == FieldDescriptor.TYPE_STRING
    elif annotation is bool:
        ok = field.type == FieldDescriptor.TYPE_BOOL
    elif annotation is int:
        ok = field.type in _INT_TYPES
        if ok:
            low, high = _bound(info, "ge"), _bound(info, "le")
            low = _bound(info, "gt") if low is None else low
            if low is None or low < -_INT_TYPES[field.type] - 1 or high is None \
                    or high > _INT_TYPES[field.type]:
                problems.append(f"{where}: the model's bounds ({low}, {high}) must lie within "
                                f"the wire type's")
    elif annotation is float:
        ok = field.type == FieldDescriptor.TYPE_DOUBLE
    elif annotation is str:
        ok = field.type == FieldDescriptor.TYPE_STRING
    else:
        ok = False
    if not ok:
        problems.append(f"{where}: {annotation} cannot travel as wire type {field.type}")
    return problems


def _wire_only_allowed(model: type[BaseModel], field: FieldDescriptor) -> bool:
    """Wire fields with no model field of the same name: the Struct of a model's extra keys,
    and the None flags."""
    if field.name == EXTRA_FIELD:
        return (model.model_config.get("extra") == "allow"
                and field.message_type is struct_pb2.Struct.DESCRIPTOR)
    if field.name.startswith(NULL_PREFIX):
        target = model.model_fields.get(field.name[len(NULL_PREFIX):])
        return target is not None and _unwrap(target.annotation)[1] and target.default is not None
    return False


def test_every_model_has_its_settings_message_recursively() -> None:
    """Every config model reachable from AgentConfig and ClientConfig is mapped."""
    seen: set[type[BaseModel]] = set()
    todo: list[type[BaseModel]] = [AgentConfig, ClientConfig]
    while todo:
        model = todo.pop()
        seen.add(model)
        for info in model.model_fields.values():
            annotation = _unwrap(info.annotation)[0]
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                todo.append(annotation)
    assert seen == set(SETTINGS_MESSAGES)


@pytest.mark.parametrize("model", list(SETTINGS_MESSAGES), ids=lambda m: m.__name__)
def test_models_and_messages_have_the_same_fields(model: type[BaseModel]) -> None:
    descriptor = SETTINGS_MESSAGES[model].DESCRIPTOR
    problems = [p for name, info in model.model_fields.items()
                for p in _check_field(model, name, info, descriptor)]
    problems += [f"{descriptor.name}.{f.name}: no field {model.__name__}.{f.name}"
                 for f in descriptor.fields
                 if f.name not in model.model_fields and not _wire_only_allowed(model, f)]
    if model.model_config.get("extra") == "allow":
        problems += [] if EXTRA_FIELD in descriptor.fields_by_name else [
            f"{descriptor.name}: {model.__name__} allows extra keys: it needs {EXTRA_FIELD}"]
    assert not problems, "\n".join(problems)


def _proto_comments(message: str) -> dict[str, str]:
    """Field name -> the comment above it, in ``message``'s block of the .proto file."""
    block = re.search(rf"^message {message} \{{\n(.*?)^\}}", PROTO.read_text(), re.M | re.S)
    assert block is not None, message
    comments: dict[str, str] = {}
    pending: list[str] = []
    for line in block.group(1).splitlines():
        text = line.strip()
        if text.startswith("//"):
            pending.append(text[2:].strip())
            continue
        field = re.match(r"(?:optional\s+)?[\w.]+\s+(\w+)\s*=\s*\d+;", text)
        if field:
            comments[field.group(1)] = " ".join(pending)
        pending = []
    return comments


def _stated_default(comment: str) -> Any:
    found = re.search(r"Default: (\"[^\"]*\"|true|false|none|-?\d+(?:\.\d+)?)", comment)
    assert found is not None, f"no 'Default: <value>' in {comment!r}"
    value = found.group(1)
    return None if value == "none" else json.loads(value)


@pytest.mark.parametrize("model", list(SETTINGS_MESSAGES), ids=lambda m: m.__name__)
def test_proto_comments_state_the_defaults_and_allowed_values(model: type[BaseModel]) -> None:
    comments = _proto_comments(SETTINGS_MESSAGES[model].DESCRIPTOR.name)
    for name, info in model.model_fields.items():
        annotation = _unwrap(info.annotation)[0]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            continue
        comment = comments[name]
        default = _stated_default(comment)
        assert default == info.default and type(default) in (type(info.default), int), (
            f"{model.__name__}.{name}: the proto says {default!r}, the model {info.default!r}")
        if typing.get_origin(annotation) is typing.Literal:
            missing = [v for v in typing.get_args(annotation) if f'"{v}"' not in comment]
            assert not missing, f"{model.__name__}.{name}: allowed values not named: {missing}"


def _fields_set(model: BaseModel) -> dict[str, Any]:
    """The set fields, recursively (the nested models' own sets)."""
    return {name: _fields_set(value) if isinstance(value := getattr(model, name), BaseModel)
            else True for name in model.model_fields_set}


def _round_trip(agent: AgentConfig, client: ClientConfig, *, same_dict: bool = True,
                ) -> tuple[AgentConfig, ClientConfig]:
    begin = pol_pb.Begin(agent=agent_settings(agent), client=client_settings(client))
    wire = pol_pb.Begin.FromString(begin.SerializeToString())
    raw = request_config(wire, "agent", "client", "agent_config")
    assert raw is not None
    if same_dict:
        assert raw == policy_config_dict(agent, client)  # the dict the Struct form carried
    return parse_policy_config(raw)


def test_non_default_values_round_trip() -> None:
    agent = AgentConfig.model_validate(AGENT_VALUES)
    client = ClientConfig.model_validate(CLIENT_VALUES)
    for model in (agent, client, client.generate_kwargs):  # the test covers every field
        fields = type(model).model_fields
        assert model.model_fields_set >= set(fields), type(model).__name__
        same = [n for n, info in fields.items()
                if not isinstance(getattr(model, n), BaseModel)
                and getattr(model, n) == info.get_default(call_default_factory=True)]
        assert not same, f"{type(model).__name__}: set to the default: {same}"
    assert client.generate_kwargs.model_extra
    back_agent, back_client = _round_trip(agent, client)
    assert (back_agent, back_client) == (agent, client)
    assert _fields_set(back_agent) == _fields_set(agent)
    assert _fields_set(back_client) == _fields_set(client)


def test_only_the_fields_set_travel() -> None:
    assert agent_settings(AgentConfig()).ListFields() == []
    assert client_settings(ClientConfig()).ListFields() == []
    # a default value chosen explicitly is sent (under protocol=balrog it overrides BALROG's)
    agent = AgentConfig(max_text_history=16)
    client = ClientConfig.model_validate({"generate_kwargs": {"max_tokens": 4096}})
    assert agent_settings(agent) == pol_pb.AgentSettings(max_text_history=16)
    assert client_settings(client) == pol_pb.ClientSettings(
        generate_kwargs=pol_pb.GenerateSettings(max_tokens=4096))
    back_agent, back_client = _round_trip(agent, client)
    assert back_agent.model_fields_set == {"max_text_history"}
    assert back_client.model_fields_set == {"generate_kwargs"}
    assert back_client.generate_kwargs.model_fields_set == {"max_tokens"}
    # an empty section still counts as chosen on the wire, and means all defaults
    wire = pol_pb.Begin.FromString(pol_pb.Begin(agent=agent_settings(AgentConfig()))
                                   .SerializeToString())
    assert wire.HasField("agent") and not wire.HasField("client")
    assert request_config(wire, "agent", "client", "agent_config") == {"agent": {}}


def test_a_null_temperature_travels_as_its_flag() -> None:
    client = ClientConfig.model_validate({"generate_kwargs": {"temperature": None}})
    settings = client_settings(client)
    assert settings.generate_kwargs.WhichOneof("temperature_choice") == "no_temperature"
    _, back = _round_trip(AgentConfig(), client)
    assert back.generate_kwargs.temperature is None
    assert back.generate_kwargs.model_fields_set == {"temperature"}
    # false is the same as unset
    unset = pol_pb.ClientSettings(generate_kwargs=pol_pb.GenerateSettings(no_temperature=False))
    assert config_dict(None, unset) == {"client": {"generate_kwargs": {}}}


def test_a_null_whose_default_is_null_travels_as_unset() -> None:
    client = ClientConfig(model_id=None, base_url=None)
    assert client_settings(client).ListFields() == []
    _, back = _round_trip(AgentConfig(), client, same_dict=False)
    assert back == client and back.model_fields_set == set()  # the same values, as defaults


def test_extra_may_not_repeat_a_field_and_numbers_must_be_finite() -> None:
    repeated = pol_pb.ClientSettings(generate_kwargs=pol_pb.GenerateSettings(
        max_tokens=5, extra=struct_from_dict({"max_tokens": 6})))
    with pytest.raises(ValueError, match=r"client.generate_kwargs.extra.max_tokens: a field"):
        config_dict(None, repeated)
    with pytest.raises(ValueError, match=r"client.timeout: must be a finite number"):
        config_dict(None, pol_pb.ClientSettings(timeout=float("inf")))
    with pytest.raises(ValueError, match="finite"):
        config_dict(None, pol_pb.ClientSettings(
            generate_kwargs=pol_pb.GenerateSettings(temperature=float("nan"))))


def test_typed_settings_win_over_the_deprecated_struct() -> None:
    legacy = struct_from_dict({"agent": {"type": "telepathy"}})
    both = pol_pb.Begin(agent_config=legacy, client=pol_pb.ClientSettings(max_retries=1))
    assert request_config(both, "agent", "client", "agent_config") == {
        "client": {"max_retries": 1}}
    old = pol_pb.Begin(agent_config=legacy)
    assert request_config(old, "agent", "client", "agent_config") == {
        "agent": {"type": "telepathy"}}
    assert request_config(pol_pb.Begin(), "agent", "client", "agent_config") is None
    check = pol_pb.GetInfoRequest(check_agent=pol_pb.AgentSettings(type="dummy"))
    assert request_config(check, "check_agent", "check_client", "check_config") == {
        "agent": {"type": "dummy"}}
    assert request_config(pol_pb.GetInfoRequest(), "check_agent", "check_client",
                          "check_config") is None


def test_bad_values_get_the_messages_the_dict_form_gets() -> None:
    """The typed form decodes to the dict the server validates, so a bad value reads the same
    whichever form it came in."""
    raw = {"agent": {"type": "telepathy", "max_text_history": -1},
           "client": {"client_name": "nope", "timeout": 0.0,
                      "generate_kwargs": {"temperature": 3.0, "top_p": 0.5}}}
    typed = config_dict(
        pol_pb.AgentSettings(type="telepathy", max_text_history=-1),
        pol_pb.ClientSettings(client_name="nope", timeout=0.0, generate_kwargs=(
            pol_pb.GenerateSettings(temperature=3.0, extra=struct_from_dict({"top_p": 0.5})))))
    assert typed == raw
    with pytest.raises(ValueError) as from_dict:
        parse_policy_config(raw)
    with pytest.raises(ValueError) as from_typed:
        parse_policy_config(typed)
    assert str(from_typed.value) == str(from_dict.value)
    for part in ("agent.type", "agent.max_text_history", "client.client_name", "client.timeout",
                 "client.generate_kwargs.temperature"):
        assert part in str(from_typed.value)


def test_no_settings_field_can_hold_a_credential() -> None:
    """The config never carries API keys: each backend reads its own from the policy server's
    environment. No typed field (and no model field) is named for one."""
    credential = re.compile(r"(api_?key|secret|password|credential|auth|bearer|^token$)")
    named = [f"{message.DESCRIPTOR.name}.{f.name}" for message in SETTINGS_MESSAGES.values()
             for f in message.DESCRIPTOR.fields if credential.search(f.name)]
    named += [f"{model.__name__}.{name}" for model in SETTINGS_MESSAGES
              for name in model.model_fields if credential.search(name)]
    assert not named
    assert GenerateKwargs.model_config.get("extra") == "allow"  # only sampling keys go there


def test_a_number_too_big_for_the_wire_is_refused_by_the_model() -> None:
    with pytest.raises(ValueError, match="less than or equal to 2147483647"):
        AgentConfig(max_text_history=INT32_MAX + 1)
    assert agent_settings(AgentConfig(max_text_history=INT32_MAX)).max_text_history == INT32_MAX
