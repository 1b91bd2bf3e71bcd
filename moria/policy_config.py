"""The typed wire form of the agent and client config, both ways.

``AgentConfig`` / ``ClientConfig`` / ``GenerateKwargs`` (``moria.config``, the schema) travel
as ``AgentSettings`` / ``ClientSettings`` / ``GenerateSettings`` (``moria.policy.v1``) in
``Begin.agent`` / ``Begin.client`` and ``GetInfoRequest.check_agent`` / ``check_client``.
This module is the one owner of the mapping; ``tests/unit/test_policy_config.py`` checks that
the messages and the models have the same fields, recursively, so the two cannot drift.

The mapping, field by field (same names):

- only the fields the run set (pydantic's ``model_fields_set``, as ``policy_config_dict``'s
  ``exclude_unset``) are sent; the server fills in its defaults, so its parsed configs'
  ``model_fields_set`` still tell a chosen value from a default;
- a field set to ``None`` whose default is ``None`` is sent as unset (the same value); one
  whose default is not ``None`` (``generate_kwargs.temperature``) has a ``no_<name>`` flag in a
  oneof with it;
- the open-ended extra keys of ``generate_kwargs`` (``top_p``, ``seed``, ...) travel in its
  ``extra`` Struct.

Decoding gives the ``{"agent": {...}, "client": {...}}`` mapping the policy server validated
when the config came as a Struct (``Begin.agent_config``, still accepted), so a bad value is
reported the same way whichever form it came in. API keys are no part of either form.
"""

from __future__ import annotations

import math
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from pydantic import BaseModel

from moria.codecs import dict_from_struct, struct_from_dict
from moria.config import AgentConfig, ClientConfig, GenerateKwargs
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.quoting import quote

#: Each config model and the message it travels as.
SETTINGS_MESSAGES: dict[type[BaseModel], type[Message]] = {
    AgentConfig: pol_pb.AgentSettings,
    ClientConfig: pol_pb.ClientSettings,
    GenerateKwargs: pol_pb.GenerateSettings,
}
#: The Struct field holding a model's extra keys (models with ``extra="allow"`` only).
EXTRA_FIELD = "extra"
#: Prefix of the flag that sends ``None`` for a field whose default is not ``None``.
NULL_PREFIX = "no_"

_MODEL_OF: dict[str, type[BaseModel]] = {
    message.DESCRIPTOR.full_name: model for model, message in SETTINGS_MESSAGES.items()}


def agent_settings(agent: AgentConfig) -> pol_pb.AgentSettings:
    """``agent``'s set fields as an ``AgentSettings``. Raises ValueError for a number too big
    for its wire field."""
    out = pol_pb.AgentSettings()
    _encode(agent, out, "agent")
    return out


def client_settings(client: ClientConfig) -> pol_pb.ClientSettings:
    """``client``'s set fields as a ``ClientSettings`` (never an API key: the model has
    none). Raises ValueError for a number too big for its wire field."""
    out = pol_pb.ClientSettings()
    _encode(client, out, "client")
    return out


def config_dict(agent: pol_pb.AgentSettings | None,
                client: pol_pb.ClientSettings | None) -> dict[str, Any]:
    """The ``{"agent": {...}, "client": {...}}`` mapping of typed settings (a section left
    out when its message is None), holding the fields that are set: what
    ``agent_server.service.parse_policy_config`` validates. Raises ValueError for a number
    that is not finite and for an ``extra`` key that repeats a field (or a Struct with no
    JSON form)."""
    out: dict[str, Any] = {}
    if agent is not None:
        out["agent"] = _decode(agent, "agent")
    if client is not None:
        out["client"] = _decode(client, "client")
    return out


def request_config(message: Message, agent_field: str, client_field: str,
                   struct_field: str) -> dict[str, Any] | None:
    """The config a request carries, as ``config_dict`` gives it: from its typed fields when
    either is set (the deprecated Struct is then ignored), else from the Struct
    ``struct_field``; None when none of the three is set. Raises ValueError as
    ``config_dict`` does."""
    agent = getattr(message, agent_field) if message.HasField(agent_field) else None
    client = getattr(message, client_field) if message.HasField(client_field) else None
    if agent is not None or client is not None:
        return config_dict(agent, client)
    if message.HasField(struct_field):
        return dict_from_struct(getattr(message, struct_field))
    return None


def _encode(model: BaseModel, message: Message, path: str) -> None:
    fields = type(model).model_fields
    for name in sorted(model.model_fields_set & set(fields)):
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            sub = getattr(message, name)
            sub.SetInParent()  # set, even when empty: the section was chosen
            _encode(value, sub, f"{path}.{name}")
        elif value is None:
            if fields[name].default is not None:
                setattr(message, NULL_PREFIX + name, True)
        else:
            try:
                setattr(message, name, value)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{path}.{name}: {quote(value, 64)} does not fit its wire "
                                 f"field ({exc})") from None
    extra = model.model_extra
    if extra:
        dumped = model.model_dump(mode="json", include=set(extra))
        getattr(message, EXTRA_FIELD).CopyFrom(struct_from_dict(dumped))


def _decode(message: Message, path: str) -> dict[str, Any]:
    model = _MODEL_OF[message.DESCRIPTOR.full_name]
    out: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for field, value in message.ListFields():
        name = field.name
        if name == EXTRA_FIELD:
            extra = dict_from_struct(value)
        elif name.startswith(NULL_PREFIX) and name[len(NULL_PREFIX):] in model.model_fields:
            if value:
                out[name[len(NULL_PREFIX):]] = None
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            out[name] = _decode(value, f"{path}.{name}")
        else:
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{path}.{name}: must be a finite number (got {value})")
            out[name] = value
    repeated = sorted(key for key in extra if key in model.model_fields or key in out)
    if repeated:
        raise ValueError(f"{path}.{EXTRA_FIELD}.{repeated[0]}: a field of its own (set "
                         f"{path}.{repeated[0]} instead)")
    out.update(extra)
    return out
