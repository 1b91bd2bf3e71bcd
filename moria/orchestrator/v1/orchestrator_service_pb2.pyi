from google.protobuf import struct_pb2 as _struct_pb2
from moria.common.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATE_UNSPECIFIED: _ClassVar[RunState]
    RUN_STATE_QUEUED: _ClassVar[RunState]
    RUN_STATE_RUNNING: _ClassVar[RunState]
    RUN_STATE_SUCCEEDED: _ClassVar[RunState]
    RUN_STATE_FAILED: _ClassVar[RunState]
    RUN_STATE_CANCELLED: _ClassVar[RunState]
RUN_STATE_UNSPECIFIED: RunState
RUN_STATE_QUEUED: RunState
RUN_STATE_RUNNING: RunState
RUN_STATE_SUCCEEDED: RunState
RUN_STATE_FAILED: RunState
RUN_STATE_CANCELLED: RunState

class SubmitRunRequest(_message.Message):
    __slots__ = ("spec", "run_id")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    spec: _struct_pb2.Struct
    run_id: str
    def __init__(self, spec: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., run_id: _Optional[str] = ...) -> None: ...

class SubmitRunResponse(_message.Message):
    __slots__ = ("run_id", "run", "created")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    run: Run
    created: bool
    def __init__(self, run_id: _Optional[str] = ..., run: _Optional[_Union[Run, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class GetRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class CancelRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs", "next_page_token")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[Run]
    next_page_token: str
    def __init__(self, runs: _Optional[_Iterable[_Union[Run, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ("run_id", "state", "spec", "episodes_total", "episodes_done", "summary", "version", "error", "created_at", "updated_at", "last_sequence", "output_dir", "budget")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    EPISODES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    EPISODES_DONE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_DIR_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    state: RunState
    spec: _struct_pb2.Struct
    episodes_total: int
    episodes_done: int
    summary: _struct_pb2.Struct
    version: _types_pb2.VersionInfo
    error: str
    created_at: float
    updated_at: float
    last_sequence: int
    output_dir: str
    budget: Budget
    def __init__(self, run_id: _Optional[str] = ..., state: _Optional[_Union[RunState, str]] = ..., spec: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., episodes_total: _Optional[int] = ..., episodes_done: _Optional[int] = ..., summary: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., version: _Optional[_Union[_types_pb2.VersionInfo, _Mapping]] = ..., error: _Optional[str] = ..., created_at: _Optional[float] = ..., updated_at: _Optional[float] = ..., last_sequence: _Optional[int] = ..., output_dir: _Optional[str] = ..., budget: _Optional[_Union[Budget, _Mapping]] = ...) -> None: ...

class Budget(_message.Message):
    __slots__ = ("max_cost_usd", "spent_usd", "reserved_usd", "refused_calls")
    MAX_COST_USD_FIELD_NUMBER: _ClassVar[int]
    SPENT_USD_FIELD_NUMBER: _ClassVar[int]
    RESERVED_USD_FIELD_NUMBER: _ClassVar[int]
    REFUSED_CALLS_FIELD_NUMBER: _ClassVar[int]
    max_cost_usd: float
    spent_usd: float
    reserved_usd: float
    refused_calls: int
    def __init__(self, max_cost_usd: _Optional[float] = ..., spent_usd: _Optional[float] = ..., reserved_usd: _Optional[float] = ..., refused_calls: _Optional[int] = ...) -> None: ...

class StreamEventsRequest(_message.Message):
    __slots__ = ("run_id", "from_sequence")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    from_sequence: int
    def __init__(self, run_id: _Optional[str] = ..., from_sequence: _Optional[int] = ...) -> None: ...

class RunEvent(_message.Message):
    __slots__ = ("sequence", "type", "timestamp", "payload")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    type: str
    timestamp: float
    payload: _struct_pb2.Struct
    def __init__(self, sequence: _Optional[int] = ..., type: _Optional[str] = ..., timestamp: _Optional[float] = ..., payload: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class StreamEventsResponse(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: RunEvent
    def __init__(self, event: _Optional[_Union[RunEvent, _Mapping]] = ...) -> None: ...
