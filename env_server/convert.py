"""Conversions between the pure-Python game interface and ``moria.*.v1`` messages."""

from __future__ import annotations

from env_server.game import ActionInfo, AgentView, Game, SubmittedAction
from moria.codecs import array_from_tensor, image_from_rgb, struct_from_dict, tensor_from_array
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from moria.observations import LONG_TERM, SHORT_TERM


def observation_to_proto(view: AgentView, *, step: int, obs: env_pb.ObservationOptions,
                         ) -> types_pb2.Observation:
    """Build an Observation: the two BALROG text channels plus extra text fields, the image
    when ``obs.include_image`` (PNG unless RAW_RGB is asked), tensors when
    ``obs.include_tensors``, legal actions, action mask and info."""
    text = {LONG_TERM: view.long_term_context, SHORT_TERM: view.short_term_context}
    text.update(view.extra_text)
    out = types_pb2.Observation(text=text, legal_actions=view.legal_actions, step=step,
                                long_term_context=view.long_term_context,
                                short_term_context=view.short_term_context)
    if view.action_mask is not None:
        out.action_mask.extend(view.action_mask)
    if obs.include_image and view.image is not None:
        encoding = obs.image_encoding or types_pb2.IMAGE_ENCODING_PNG
        out.image.CopyFrom(image_from_rgb(view.image, encoding))
    if obs.include_tensors:
        for name, array in view.tensors.items():
            out.tensors[name].CopyFrom(tensor_from_array(array))
    if view.info:
        out.info.CopyFrom(struct_from_dict(view.info))
    return out


def action_space_to_proto(game: Game, agent_id: str) -> types_pb2.ActionSpace:
    """The agent's ActionSpace (free_text when the game lists no actions)."""
    actions: list[ActionInfo] = game.actions(agent_id)
    return types_pb2.ActionSpace(
        actions=[types_pb2.NamedAction(name=a.name, description=a.description) for a in actions],
        default_action=game.default_action(agent_id),
        free_text=not actions,
    )


def start_to_proto(game: Game, views: dict[str, AgentView], obs: env_pb.ObservationOptions,
                   ) -> dict[str, env_pb.AgentStart]:
    """Per-agent instruction, action space and first observation."""
    return {
        agent_id: env_pb.AgentStart(
            instruction=game.instruction(agent_id),
            action_space=action_space_to_proto(game, agent_id),
            observation=observation_to_proto(view, step=0, obs=obs),
        )
        for agent_id, view in views.items()
    }


def submitted_action(action: types_pb2.Action) -> SubmittedAction:
    """What a game receives for a wire Action: text, an index, or (for a tensor) a scalar
    integer index; any other well-formed tensor becomes a text the game will judge invalid.

    Raises moria.codecs.CodecError for a malformed tensor (INVALID_ARGUMENT on the wire)."""
    kind = action.WhichOneof("kind")
    if kind == "index":
        return int(action.index)
    if kind == "tensor":
        array = array_from_tensor(action.tensor)
        if array.size == 1 and array.dtype.kind in "iu":
            return int(array.reshape(()).item())
        return f"<tensor {array.dtype.name}{list(array.shape)}>"
    return action.text
