"""A player's prompting protocol in its two forms: the dict results record
(``EpisodeRecord.protocol``) and the ``moria.policy.v1.Protocol`` message of ``Ready``.

The dict: ``{"name", "instruction_sha256", "generation": {"temperature": float | None,
"max_tokens": int}, and for BALROG's protocol "balrog_commit", "balrog_source",
"feedback_statement", "set_aside"}``; keys without a value are left out.
"""

from __future__ import annotations

from typing import Any

from moria.policy.v1 import policy_service_pb2 as pol_pb


def protocol_message(protocol: dict[str, Any]) -> pol_pb.Protocol:
    """The ``Protocol`` message for a protocol dict (unknown keys are an error: TypeError)."""
    message = pol_pb.Protocol(
        name=str(protocol.get("name", "")),
        instruction_sha256=str(protocol.get("instruction_sha256", "")),
        balrog_commit=str(protocol.get("balrog_commit", "")),
        balrog_source=str(protocol.get("balrog_source", "")),
        feedback_statement=bool(protocol.get("feedback_statement", False)),
        set_aside=[str(name) for name in protocol.get("set_aside", [])])
    generation = protocol.get("generation")
    if generation:
        message.generation.max_tokens = int(generation.get("max_tokens") or 0)
        if generation.get("temperature") is not None:
            message.generation.temperature = float(generation["temperature"])
    return message


def protocol_dict(message: pol_pb.Protocol) -> dict[str, Any]:
    """The protocol dict of a ``Protocol`` message ({} when the message is empty)."""
    out: dict[str, Any] = {}
    for key in ("name", "instruction_sha256", "balrog_commit", "balrog_source"):
        value = getattr(message, key)
        if value:
            out[key] = value
    if message.HasField("generation"):
        out["generation"] = {
            "temperature": (message.generation.temperature
                            if message.generation.HasField("temperature") else None),
            "max_tokens": message.generation.max_tokens}
    if out.get("name") == "balrog":
        out["feedback_statement"] = message.feedback_statement
        out["set_aside"] = list(message.set_aside)
    return out
