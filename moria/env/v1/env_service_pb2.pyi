from google.protobuf import struct_pb2 as _struct_pb2
from moria.common.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetInfoResponse(_message.Message):
    __slots__ = ("version", "families", "capacity", "active_sessions", "draining", "peer_capacity", "peer_sessions")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FAMILIES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    PEER_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    PEER_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    version: _types_pb2.VersionInfo
    families: _containers.RepeatedScalarFieldContainer[str]
    capacity: int
    active_sessions: int
    draining: bool
    peer_capacity: int
    peer_sessions: int
    def __init__(self, version: _Optional[_Union[_types_pb2.VersionInfo, _Mapping]] = ..., families: _Optional[_Iterable[str]] = ..., capacity: _Optional[int] = ..., active_sessions: _Optional[int] = ..., draining: _Optional[bool] = ..., peer_capacity: _Optional[int] = ..., peer_sessions: _Optional[int] = ...) -> None: ...

class ListTasksRequest(_message.Message):
    __slots__ = ("family",)
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    family: str
    def __init__(self, family: _Optional[str] = ...) -> None: ...

class TaskInfo(_message.Message):
    __slots__ = ("family", "task", "description", "max_steps", "default_action", "num_agents", "unavailable")
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_ACTION_FIELD_NUMBER: _ClassVar[int]
    NUM_AGENTS_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    family: str
    task: str
    description: str
    max_steps: int
    default_action: str
    num_agents: int
    unavailable: str
    def __init__(self, family: _Optional[str] = ..., task: _Optional[str] = ..., description: _Optional[str] = ..., max_steps: _Optional[int] = ..., default_action: _Optional[str] = ..., num_agents: _Optional[int] = ..., unavailable: _Optional[str] = ...) -> None: ...

class ListTasksResponse(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    def __init__(self, tasks: _Optional[_Iterable[_Union[TaskInfo, _Mapping]]] = ...) -> None: ...

class ObservationOptions(_message.Message):
    __slots__ = ("include_image", "image_encoding", "include_tensors", "feedback_on_invalid_action")
    INCLUDE_IMAGE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_ENCODING_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_TENSORS_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_ON_INVALID_ACTION_FIELD_NUMBER: _ClassVar[int]
    include_image: bool
    image_encoding: _types_pb2.ImageEncoding
    include_tensors: bool
    feedback_on_invalid_action: bool
    def __init__(self, include_image: _Optional[bool] = ..., image_encoding: _Optional[_Union[_types_pb2.ImageEncoding, str]] = ..., include_tensors: _Optional[bool] = ..., feedback_on_invalid_action: _Optional[bool] = ...) -> None: ...

class OpenRequest(_message.Message):
    __slots__ = ("task", "seed", "players", "observation", "options", "oracle", "max_steps")
    TASK_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    PLAYERS_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ORACLE_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    task: str
    seed: int
    players: _containers.RepeatedCompositeFieldContainer[_types_pb2.PlayerSpec]
    observation: ObservationOptions
    options: _struct_pb2.Struct
    oracle: bool
    max_steps: int
    def __init__(self, task: _Optional[str] = ..., seed: _Optional[int] = ..., players: _Optional[_Iterable[_Union[_types_pb2.PlayerSpec, _Mapping]]] = ..., observation: _Optional[_Union[ObservationOptions, _Mapping]] = ..., options: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., oracle: _Optional[bool] = ..., max_steps: _Optional[int] = ...) -> None: ...

class AgentStart(_message.Message):
    __slots__ = ("instruction", "action_space", "observation")
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    ACTION_SPACE_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    instruction: str
    action_space: _types_pb2.ActionSpace
    observation: _types_pb2.Observation
    def __init__(self, instruction: _Optional[str] = ..., action_space: _Optional[_Union[_types_pb2.ActionSpace, _Mapping]] = ..., observation: _Optional[_Union[_types_pb2.Observation, _Mapping]] = ...) -> None: ...

class OpenResponse(_message.Message):
    __slots__ = ("session_id", "family", "task", "agents", "next_agents", "max_steps", "metrics", "idle_timeout_s", "progression")
    class AgentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: AgentStart
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[AgentStart, _Mapping]] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_AGENTS_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    PROGRESSION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    family: str
    task: str
    agents: _containers.MessageMap[str, AgentStart]
    next_agents: _containers.RepeatedScalarFieldContainer[str]
    max_steps: int
    metrics: _struct_pb2.Struct
    idle_timeout_s: float
    progression: float
    def __init__(self, session_id: _Optional[str] = ..., family: _Optional[str] = ..., task: _Optional[str] = ..., agents: _Optional[_Mapping[str, AgentStart]] = ..., next_agents: _Optional[_Iterable[str]] = ..., max_steps: _Optional[int] = ..., metrics: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idle_timeout_s: _Optional[float] = ..., progression: _Optional[float] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ("seed",)
    SEED_FIELD_NUMBER: _ClassVar[int]
    seed: int
    def __init__(self, seed: _Optional[int] = ...) -> None: ...

class ResetResponse(_message.Message):
    __slots__ = ("agents", "next_agents", "max_steps")
    class AgentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: AgentStart
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[AgentStart, _Mapping]] = ...) -> None: ...
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_AGENTS_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.MessageMap[str, AgentStart]
    next_agents: _containers.RepeatedScalarFieldContainer[str]
    max_steps: int
    def __init__(self, agents: _Optional[_Mapping[str, AgentStart]] = ..., next_agents: _Optional[_Iterable[str]] = ..., max_steps: _Optional[int] = ...) -> None: ...

class StepRequest(_message.Message):
    __slots__ = ("actions",)
    class ActionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _types_pb2.Action
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_types_pb2.Action, _Mapping]] = ...) -> None: ...
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    actions: _containers.MessageMap[str, _types_pb2.Action]
    def __init__(self, actions: _Optional[_Mapping[str, _types_pb2.Action]] = ...) -> None: ...

class AgentStep(_message.Message):
    __slots__ = ("observation", "reward", "terminated", "truncated", "action_result")
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    ACTION_RESULT_FIELD_NUMBER: _ClassVar[int]
    observation: _types_pb2.Observation
    reward: float
    terminated: bool
    truncated: bool
    action_result: _types_pb2.ActionResult
    def __init__(self, observation: _Optional[_Union[_types_pb2.Observation, _Mapping]] = ..., reward: _Optional[float] = ..., terminated: _Optional[bool] = ..., truncated: _Optional[bool] = ..., action_result: _Optional[_Union[_types_pb2.ActionResult, _Mapping]] = ...) -> None: ...

class StepResponse(_message.Message):
    __slots__ = ("agents", "next_agents", "metrics", "episode_end", "step", "error", "progression")
    class AgentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: AgentStep
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[AgentStep, _Mapping]] = ...) -> None: ...
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_AGENTS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    EPISODE_END_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PROGRESSION_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.MessageMap[str, AgentStep]
    next_agents: _containers.RepeatedScalarFieldContainer[str]
    metrics: _struct_pb2.Struct
    episode_end: _types_pb2.EpisodeEnd
    step: int
    error: _types_pb2.Status
    progression: float
    def __init__(self, agents: _Optional[_Mapping[str, AgentStep]] = ..., next_agents: _Optional[_Iterable[str]] = ..., metrics: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., episode_end: _Optional[_Union[_types_pb2.EpisodeEnd, _Mapping]] = ..., step: _Optional[int] = ..., error: _Optional[_Union[_types_pb2.Status, _Mapping]] = ..., progression: _Optional[float] = ...) -> None: ...

class RenderRequest(_message.Message):
    __slots__ = ("encoding",)
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    encoding: _types_pb2.ImageEncoding
    def __init__(self, encoding: _Optional[_Union[_types_pb2.ImageEncoding, str]] = ...) -> None: ...

class RenderResponse(_message.Message):
    __slots__ = ("image",)
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    image: _types_pb2.Image
    def __init__(self, image: _Optional[_Union[_types_pb2.Image, _Mapping]] = ...) -> None: ...

class CloseRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PingRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PingResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CloseResponse(_message.Message):
    __slots__ = ("episode_end",)
    EPISODE_END_FIELD_NUMBER: _ClassVar[int]
    episode_end: _types_pb2.EpisodeEnd
    def __init__(self, episode_end: _Optional[_Union[_types_pb2.EpisodeEnd, _Mapping]] = ...) -> None: ...

class SessionRequest(_message.Message):
    __slots__ = ("open", "reset", "step", "render", "close", "ping")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    RENDER_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    open: OpenRequest
    reset: ResetRequest
    step: StepRequest
    render: RenderRequest
    close: CloseRequest
    ping: PingRequest
    def __init__(self, open: _Optional[_Union[OpenRequest, _Mapping]] = ..., reset: _Optional[_Union[ResetRequest, _Mapping]] = ..., step: _Optional[_Union[StepRequest, _Mapping]] = ..., render: _Optional[_Union[RenderRequest, _Mapping]] = ..., close: _Optional[_Union[CloseRequest, _Mapping]] = ..., ping: _Optional[_Union[PingRequest, _Mapping]] = ...) -> None: ...

class SessionResponse(_message.Message):
    __slots__ = ("opened", "reset", "step", "render", "closed", "pong")
    OPENED_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    RENDER_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    PONG_FIELD_NUMBER: _ClassVar[int]
    opened: OpenResponse
    reset: ResetResponse
    step: StepResponse
    render: RenderResponse
    closed: CloseResponse
    pong: PingResponse
    def __init__(self, opened: _Optional[_Union[OpenResponse, _Mapping]] = ..., reset: _Optional[_Union[ResetResponse, _Mapping]] = ..., step: _Optional[_Union[StepResponse, _Mapping]] = ..., render: _Optional[_Union[RenderResponse, _Mapping]] = ..., closed: _Optional[_Union[CloseResponse, _Mapping]] = ..., pong: _Optional[_Union[PingResponse, _Mapping]] = ...) -> None: ...
