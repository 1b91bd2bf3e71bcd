from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DataType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DATA_TYPE_UNSPECIFIED: _ClassVar[DataType]
    DATA_TYPE_BOOL: _ClassVar[DataType]
    DATA_TYPE_UINT8: _ClassVar[DataType]
    DATA_TYPE_INT8: _ClassVar[DataType]
    DATA_TYPE_UINT16: _ClassVar[DataType]
    DATA_TYPE_INT16: _ClassVar[DataType]
    DATA_TYPE_UINT32: _ClassVar[DataType]
    DATA_TYPE_INT32: _ClassVar[DataType]
    DATA_TYPE_UINT64: _ClassVar[DataType]
    DATA_TYPE_INT64: _ClassVar[DataType]
    DATA_TYPE_FLOAT16: _ClassVar[DataType]
    DATA_TYPE_FLOAT32: _ClassVar[DataType]
    DATA_TYPE_FLOAT64: _ClassVar[DataType]

class ImageEncoding(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    IMAGE_ENCODING_UNSPECIFIED: _ClassVar[ImageEncoding]
    IMAGE_ENCODING_PNG: _ClassVar[ImageEncoding]
    IMAGE_ENCODING_RAW_RGB: _ClassVar[ImageEncoding]

class EndReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    END_REASON_UNSPECIFIED: _ClassVar[EndReason]
    END_REASON_TERMINATED: _ClassVar[EndReason]
    END_REASON_TRUNCATED: _ClassVar[EndReason]
    END_REASON_AGENT_ERROR: _ClassVar[EndReason]
    END_REASON_ENV_ERROR: _ClassVar[EndReason]
    END_REASON_CANCELLED: _ClassVar[EndReason]
    END_REASON_BUDGET_EXHAUSTED: _ClassVar[EndReason]
DATA_TYPE_UNSPECIFIED: DataType
DATA_TYPE_BOOL: DataType
DATA_TYPE_UINT8: DataType
DATA_TYPE_INT8: DataType
DATA_TYPE_UINT16: DataType
DATA_TYPE_INT16: DataType
DATA_TYPE_UINT32: DataType
DATA_TYPE_INT32: DataType
DATA_TYPE_UINT64: DataType
DATA_TYPE_INT64: DataType
DATA_TYPE_FLOAT16: DataType
DATA_TYPE_FLOAT32: DataType
DATA_TYPE_FLOAT64: DataType
IMAGE_ENCODING_UNSPECIFIED: ImageEncoding
IMAGE_ENCODING_PNG: ImageEncoding
IMAGE_ENCODING_RAW_RGB: ImageEncoding
END_REASON_UNSPECIFIED: EndReason
END_REASON_TERMINATED: EndReason
END_REASON_TRUNCATED: EndReason
END_REASON_AGENT_ERROR: EndReason
END_REASON_ENV_ERROR: EndReason
END_REASON_CANCELLED: EndReason
END_REASON_BUDGET_EXHAUSTED: EndReason

class Tensor(_message.Message):
    __slots__ = ("dtype", "shape", "data")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    dtype: DataType
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, dtype: _Optional[_Union[DataType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class Image(_message.Message):
    __slots__ = ("encoding", "width", "height", "data")
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    encoding: ImageEncoding
    width: int
    height: int
    data: bytes
    def __init__(self, encoding: _Optional[_Union[ImageEncoding, str]] = ..., width: _Optional[int] = ..., height: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class Observation(_message.Message):
    __slots__ = ("text", "image", "tensors", "legal_actions", "action_mask", "info", "step", "long_term_context", "short_term_context")
    class TextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class TensorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Tensor
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    LEGAL_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    ACTION_MASK_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    LONG_TERM_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SHORT_TERM_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    text: _containers.ScalarMap[str, str]
    image: Image
    tensors: _containers.MessageMap[str, Tensor]
    legal_actions: _containers.RepeatedScalarFieldContainer[str]
    action_mask: _containers.RepeatedScalarFieldContainer[bool]
    info: _struct_pb2.Struct
    step: int
    long_term_context: str
    short_term_context: str
    def __init__(self, text: _Optional[_Mapping[str, str]] = ..., image: _Optional[_Union[Image, _Mapping]] = ..., tensors: _Optional[_Mapping[str, Tensor]] = ..., legal_actions: _Optional[_Iterable[str]] = ..., action_mask: _Optional[_Iterable[bool]] = ..., info: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., step: _Optional[int] = ..., long_term_context: _Optional[str] = ..., short_term_context: _Optional[str] = ...) -> None: ...

class NamedAction(_message.Message):
    __slots__ = ("name", "description")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class ActionSpace(_message.Message):
    __slots__ = ("actions", "default_action", "free_text")
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_ACTION_FIELD_NUMBER: _ClassVar[int]
    FREE_TEXT_FIELD_NUMBER: _ClassVar[int]
    actions: _containers.RepeatedCompositeFieldContainer[NamedAction]
    default_action: str
    free_text: bool
    def __init__(self, actions: _Optional[_Iterable[_Union[NamedAction, _Mapping]]] = ..., default_action: _Optional[str] = ..., free_text: _Optional[bool] = ...) -> None: ...

class Action(_message.Message):
    __slots__ = ("text", "index", "tensor")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    text: str
    index: int
    tensor: Tensor
    def __init__(self, text: _Optional[str] = ..., index: _Optional[int] = ..., tensor: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class ActionResult(_message.Message):
    __slots__ = ("valid", "applied_action", "feedback")
    VALID_FIELD_NUMBER: _ClassVar[int]
    APPLIED_ACTION_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    applied_action: Action
    feedback: str
    def __init__(self, valid: _Optional[bool] = ..., applied_action: _Optional[_Union[Action, _Mapping]] = ..., feedback: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens", "calls")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    reasoning_tokens: int
    calls: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cached_input_tokens: _Optional[int] = ..., reasoning_tokens: _Optional[int] = ..., calls: _Optional[int] = ...) -> None: ...

class EpisodeEnd(_message.Message):
    __slots__ = ("reason", "returns", "metrics", "num_steps", "detail", "progression")
    class ReturnsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETURNS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    NUM_STEPS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    PROGRESSION_FIELD_NUMBER: _ClassVar[int]
    reason: EndReason
    returns: _containers.ScalarMap[str, float]
    metrics: _struct_pb2.Struct
    num_steps: int
    detail: str
    progression: float
    def __init__(self, reason: _Optional[_Union[EndReason, str]] = ..., returns: _Optional[_Mapping[str, float]] = ..., metrics: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., num_steps: _Optional[int] = ..., detail: _Optional[str] = ..., progression: _Optional[float] = ...) -> None: ...

class PlayerSpec(_message.Message):
    __slots__ = ("agent_id", "role", "options")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    role: str
    options: _struct_pb2.Struct
    def __init__(self, agent_id: _Optional[str] = ..., role: _Optional[str] = ..., options: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class VersionInfo(_message.Message):
    __slots__ = ("api_version", "package_version", "components")
    class ComponentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    PACKAGE_VERSION_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    package_version: str
    components: _containers.ScalarMap[str, str]
    def __init__(self, api_version: _Optional[str] = ..., package_version: _Optional[str] = ..., components: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Status(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...
