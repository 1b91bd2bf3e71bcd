from google.protobuf import struct_pb2 as _struct_pb2
from moria.common.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetInfoRequest(_message.Message):
    __slots__ = ("check_config", "check_agent", "check_client")
    CHECK_CONFIG_FIELD_NUMBER: _ClassVar[int]
    CHECK_AGENT_FIELD_NUMBER: _ClassVar[int]
    CHECK_CLIENT_FIELD_NUMBER: _ClassVar[int]
    check_config: _struct_pb2.Struct
    check_agent: AgentSettings
    check_client: ClientSettings
    def __init__(self, check_config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., check_agent: _Optional[_Union[AgentSettings, _Mapping]] = ..., check_client: _Optional[_Union[ClientSettings, _Mapping]] = ...) -> None: ...

class GetInfoResponse(_message.Message):
    __slots__ = ("version", "strategies", "backends", "capacity", "active_streams", "config_errors", "draining", "strategy_info", "peer_capacity", "peer_streams")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STRATEGIES_FIELD_NUMBER: _ClassVar[int]
    BACKENDS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_STREAMS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_ERRORS_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_INFO_FIELD_NUMBER: _ClassVar[int]
    PEER_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    PEER_STREAMS_FIELD_NUMBER: _ClassVar[int]
    version: _types_pb2.VersionInfo
    strategies: _containers.RepeatedScalarFieldContainer[str]
    backends: _containers.RepeatedScalarFieldContainer[str]
    capacity: int
    active_streams: int
    config_errors: _containers.RepeatedScalarFieldContainer[str]
    draining: bool
    strategy_info: _containers.RepeatedCompositeFieldContainer[StrategyInfo]
    peer_capacity: int
    peer_streams: int
    def __init__(self, version: _Optional[_Union[_types_pb2.VersionInfo, _Mapping]] = ..., strategies: _Optional[_Iterable[str]] = ..., backends: _Optional[_Iterable[str]] = ..., capacity: _Optional[int] = ..., active_streams: _Optional[int] = ..., config_errors: _Optional[_Iterable[str]] = ..., draining: _Optional[bool] = ..., strategy_info: _Optional[_Iterable[_Union[StrategyInfo, _Mapping]]] = ..., peer_capacity: _Optional[int] = ..., peer_streams: _Optional[int] = ...) -> None: ...

class StrategyInfo(_message.Message):
    __slots__ = ("name", "calls_model", "reads_tensors", "keeps_images")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CALLS_MODEL_FIELD_NUMBER: _ClassVar[int]
    READS_TENSORS_FIELD_NUMBER: _ClassVar[int]
    KEEPS_IMAGES_FIELD_NUMBER: _ClassVar[int]
    name: str
    calls_model: bool
    reads_tensors: bool
    keeps_images: bool
    def __init__(self, name: _Optional[str] = ..., calls_model: _Optional[bool] = ..., reads_tensors: _Optional[bool] = ..., keeps_images: _Optional[bool] = ...) -> None: ...

class Begin(_message.Message):
    __slots__ = ("episode_id", "agent_id", "instruction", "action_space", "agent_config", "seed", "env_name", "task", "demonstrations", "record_prompts", "observation", "agent", "client", "reserve_calls")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    ACTION_SPACE_FIELD_NUMBER: _ClassVar[int]
    AGENT_CONFIG_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    ENV_NAME_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    DEMONSTRATIONS_FIELD_NUMBER: _ClassVar[int]
    RECORD_PROMPTS_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    RESERVE_CALLS_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    agent_id: str
    instruction: str
    action_space: _types_pb2.ActionSpace
    agent_config: _struct_pb2.Struct
    seed: int
    env_name: str
    task: str
    demonstrations: _containers.RepeatedCompositeFieldContainer[Demonstration]
    record_prompts: bool
    observation: _types_pb2.Observation
    agent: AgentSettings
    client: ClientSettings
    reserve_calls: bool
    def __init__(self, episode_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., instruction: _Optional[str] = ..., action_space: _Optional[_Union[_types_pb2.ActionSpace, _Mapping]] = ..., agent_config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., seed: _Optional[int] = ..., env_name: _Optional[str] = ..., task: _Optional[str] = ..., demonstrations: _Optional[_Iterable[_Union[Demonstration, _Mapping]]] = ..., record_prompts: _Optional[bool] = ..., observation: _Optional[_Union[_types_pb2.Observation, _Mapping]] = ..., agent: _Optional[_Union[AgentSettings, _Mapping]] = ..., client: _Optional[_Union[ClientSettings, _Mapping]] = ..., reserve_calls: _Optional[bool] = ...) -> None: ...

class AgentSettings(_message.Message):
    __slots__ = ("type", "protocol", "balrog_source", "remember_cot", "max_text_history", "max_image_history", "max_cot_history", "max_icl_history", "checkpoint", "sample")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    BALROG_SOURCE_FIELD_NUMBER: _ClassVar[int]
    REMEMBER_COT_FIELD_NUMBER: _ClassVar[int]
    MAX_TEXT_HISTORY_FIELD_NUMBER: _ClassVar[int]
    MAX_IMAGE_HISTORY_FIELD_NUMBER: _ClassVar[int]
    MAX_COT_HISTORY_FIELD_NUMBER: _ClassVar[int]
    MAX_ICL_HISTORY_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_FIELD_NUMBER: _ClassVar[int]
    type: str
    protocol: str
    balrog_source: str
    remember_cot: bool
    max_text_history: int
    max_image_history: int
    max_cot_history: int
    max_icl_history: int
    checkpoint: str
    sample: bool
    def __init__(self, type: _Optional[str] = ..., protocol: _Optional[str] = ..., balrog_source: _Optional[str] = ..., remember_cot: _Optional[bool] = ..., max_text_history: _Optional[int] = ..., max_image_history: _Optional[int] = ..., max_cot_history: _Optional[int] = ..., max_icl_history: _Optional[int] = ..., checkpoint: _Optional[str] = ..., sample: _Optional[bool] = ...) -> None: ...

class ClientSettings(_message.Message):
    __slots__ = ("client_name", "model_id", "base_url", "generate_kwargs", "timeout", "max_retries", "delay", "alternate_roles", "constrain_actions", "stream", "reasoning_effort", "thinking_budget", "local_contexts", "max_concurrency", "max_prompt_bytes", "max_requests_per_minute", "max_tokens_per_minute", "http_client")
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    GENERATE_KWARGS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    ALTERNATE_ROLES_FIELD_NUMBER: _ClassVar[int]
    CONSTRAIN_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    REASONING_EFFORT_FIELD_NUMBER: _ClassVar[int]
    THINKING_BUDGET_FIELD_NUMBER: _ClassVar[int]
    LOCAL_CONTEXTS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    MAX_PROMPT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_REQUESTS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    HTTP_CLIENT_FIELD_NUMBER: _ClassVar[int]
    client_name: str
    model_id: str
    base_url: str
    generate_kwargs: GenerateSettings
    timeout: float
    max_retries: int
    delay: float
    alternate_roles: bool
    constrain_actions: bool
    stream: bool
    reasoning_effort: str
    thinking_budget: int
    local_contexts: int
    max_concurrency: int
    max_prompt_bytes: int
    max_requests_per_minute: float
    max_tokens_per_minute: float
    http_client: str
    def __init__(self, client_name: _Optional[str] = ..., model_id: _Optional[str] = ..., base_url: _Optional[str] = ..., generate_kwargs: _Optional[_Union[GenerateSettings, _Mapping]] = ..., timeout: _Optional[float] = ..., max_retries: _Optional[int] = ..., delay: _Optional[float] = ..., alternate_roles: _Optional[bool] = ..., constrain_actions: _Optional[bool] = ..., stream: _Optional[bool] = ..., reasoning_effort: _Optional[str] = ..., thinking_budget: _Optional[int] = ..., local_contexts: _Optional[int] = ..., max_concurrency: _Optional[int] = ..., max_prompt_bytes: _Optional[int] = ..., max_requests_per_minute: _Optional[float] = ..., max_tokens_per_minute: _Optional[float] = ..., http_client: _Optional[str] = ...) -> None: ...

class GenerateSettings(_message.Message):
    __slots__ = ("temperature", "no_temperature", "max_tokens", "extra")
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    NO_TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    no_temperature: bool
    max_tokens: int
    extra: _struct_pb2.Struct
    def __init__(self, temperature: _Optional[float] = ..., no_temperature: _Optional[bool] = ..., max_tokens: _Optional[int] = ..., extra: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Demonstration(_message.Message):
    __slots__ = ("task", "seed", "instruction", "steps", "source")
    TASK_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    task: str
    seed: int
    instruction: str
    steps: _containers.RepeatedCompositeFieldContainer[DemonstrationStep]
    source: str
    def __init__(self, task: _Optional[str] = ..., seed: _Optional[int] = ..., instruction: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[DemonstrationStep, _Mapping]]] = ..., source: _Optional[str] = ...) -> None: ...

class DemonstrationStep(_message.Message):
    __slots__ = ("observation", "action", "reward")
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    observation: str
    action: str
    reward: float
    def __init__(self, observation: _Optional[str] = ..., action: _Optional[str] = ..., reward: _Optional[float] = ...) -> None: ...

class Observe(_message.Message):
    __slots__ = ("observation", "last_action_result", "step")
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTION_RESULT_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    observation: _types_pb2.Observation
    last_action_result: _types_pb2.ActionResult
    step: int
    def __init__(self, observation: _Optional[_Union[_types_pb2.Observation, _Mapping]] = ..., last_action_result: _Optional[_Union[_types_pb2.ActionResult, _Mapping]] = ..., step: _Optional[int] = ...) -> None: ...

class End(_message.Message):
    __slots__ = ("episode_end",)
    EPISODE_END_FIELD_NUMBER: _ClassVar[int]
    episode_end: _types_pb2.EpisodeEnd
    def __init__(self, episode_end: _Optional[_Union[_types_pb2.EpisodeEnd, _Mapping]] = ...) -> None: ...

class Ping(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Pong(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PlayRequest(_message.Message):
    __slots__ = ("begin", "observe", "end", "ping", "grant")
    BEGIN_FIELD_NUMBER: _ClassVar[int]
    OBSERVE_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    begin: Begin
    observe: Observe
    end: End
    ping: Ping
    grant: Grant
    def __init__(self, begin: _Optional[_Union[Begin, _Mapping]] = ..., observe: _Optional[_Union[Observe, _Mapping]] = ..., end: _Optional[_Union[End, _Mapping]] = ..., ping: _Optional[_Union[Ping, _Mapping]] = ..., grant: _Optional[_Union[Grant, _Mapping]] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ("granted", "reason")
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    granted: bool
    reason: str
    def __init__(self, granted: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class Reserve(_message.Message):
    __slots__ = ("model", "input_tokens", "output_tokens", "rate_tokens")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RATE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    model: str
    input_tokens: int
    output_tokens: int
    rate_tokens: int
    def __init__(self, model: _Optional[str] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., rate_tokens: _Optional[int] = ...) -> None: ...

class Ready(_message.Message):
    __slots__ = ("strategy", "model", "idle_timeout_s", "protocol")
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    strategy: str
    model: str
    idle_timeout_s: float
    protocol: Protocol
    def __init__(self, strategy: _Optional[str] = ..., model: _Optional[str] = ..., idle_timeout_s: _Optional[float] = ..., protocol: _Optional[_Union[Protocol, _Mapping]] = ...) -> None: ...

class Protocol(_message.Message):
    __slots__ = ("name", "instruction_sha256", "generation", "balrog_commit", "balrog_source", "feedback_statement", "set_aside")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_SHA256_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    BALROG_COMMIT_FIELD_NUMBER: _ClassVar[int]
    BALROG_SOURCE_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_STATEMENT_FIELD_NUMBER: _ClassVar[int]
    SET_ASIDE_FIELD_NUMBER: _ClassVar[int]
    name: str
    instruction_sha256: str
    generation: Generation
    balrog_commit: str
    balrog_source: str
    feedback_statement: bool
    set_aside: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., instruction_sha256: _Optional[str] = ..., generation: _Optional[_Union[Generation, _Mapping]] = ..., balrog_commit: _Optional[str] = ..., balrog_source: _Optional[str] = ..., feedback_statement: _Optional[bool] = ..., set_aside: _Optional[_Iterable[str]] = ...) -> None: ...

class Generation(_message.Message):
    __slots__ = ("temperature", "max_tokens")
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    max_tokens: int
    def __init__(self, temperature: _Optional[float] = ..., max_tokens: _Optional[int] = ...) -> None: ...

class Act(_message.Message):
    __slots__ = ("action", "raw_completion", "reasoning", "usage", "latency_s", "error", "stop_reason", "attempts", "prompt_json", "model", "rate_limit_wait_s")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    RAW_COMPLETION_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_JSON_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMIT_WAIT_S_FIELD_NUMBER: _ClassVar[int]
    action: _types_pb2.Action
    raw_completion: str
    reasoning: str
    usage: _types_pb2.Usage
    latency_s: float
    error: _types_pb2.Status
    stop_reason: str
    attempts: int
    prompt_json: str
    model: str
    rate_limit_wait_s: float
    def __init__(self, action: _Optional[_Union[_types_pb2.Action, _Mapping]] = ..., raw_completion: _Optional[str] = ..., reasoning: _Optional[str] = ..., usage: _Optional[_Union[_types_pb2.Usage, _Mapping]] = ..., latency_s: _Optional[float] = ..., error: _Optional[_Union[_types_pb2.Status, _Mapping]] = ..., stop_reason: _Optional[str] = ..., attempts: _Optional[int] = ..., prompt_json: _Optional[str] = ..., model: _Optional[str] = ..., rate_limit_wait_s: _Optional[float] = ...) -> None: ...

class Ended(_message.Message):
    __slots__ = ("total_usage",)
    TOTAL_USAGE_FIELD_NUMBER: _ClassVar[int]
    total_usage: _types_pb2.Usage
    def __init__(self, total_usage: _Optional[_Union[_types_pb2.Usage, _Mapping]] = ...) -> None: ...

class PlayResponse(_message.Message):
    __slots__ = ("ready", "act", "ended", "pong", "reserve")
    READY_FIELD_NUMBER: _ClassVar[int]
    ACT_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    PONG_FIELD_NUMBER: _ClassVar[int]
    RESERVE_FIELD_NUMBER: _ClassVar[int]
    ready: Ready
    act: Act
    ended: Ended
    pong: Pong
    reserve: Reserve
    def __init__(self, ready: _Optional[_Union[Ready, _Mapping]] = ..., act: _Optional[_Union[Act, _Mapping]] = ..., ended: _Optional[_Union[Ended, _Mapping]] = ..., pong: _Optional[_Union[Pong, _Mapping]] = ..., reserve: _Optional[_Union[Reserve, _Mapping]] = ...) -> None: ...
