import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConflictPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFLICT_POLICY_UNSPECIFIED: _ClassVar[ConflictPolicy]
    CONFLICT_POLICY_FAIL: _ClassVar[ConflictPolicy]
    CONFLICT_POLICY_USE_EXISTING: _ClassVar[ConflictPolicy]

class RunStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATUS_UNSPECIFIED: _ClassVar[RunStatus]
    RUN_STATUS_QUEUED: _ClassVar[RunStatus]
    RUN_STATUS_RUNNING: _ClassVar[RunStatus]
    RUN_STATUS_SUSPENDED: _ClassVar[RunStatus]
    RUN_STATUS_COMPLETED: _ClassVar[RunStatus]
    RUN_STATUS_FAILED: _ClassVar[RunStatus]
    RUN_STATUS_CANCELLED: _ClassVar[RunStatus]
    RUN_STATUS_INTERRUPTED: _ClassVar[RunStatus]
    RUN_STATUS_UNREADABLE: _ClassVar[RunStatus]

class RunMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_MODE_UNSPECIFIED: _ClassVar[RunMode]
    RUN_MODE_TEAM: _ClassVar[RunMode]
    RUN_MODE_TASKS: _ClassVar[RunMode]
    RUN_MODE_PLAN: _ClassVar[RunMode]

class RunView(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_VIEW_UNSPECIFIED: _ClassVar[RunView]
    RUN_VIEW_BASIC: _ClassVar[RunView]
    RUN_VIEW_FULL: _ClassVar[RunView]

class TaskStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_STATUS_UNSPECIFIED: _ClassVar[TaskStatus]
    TASK_STATUS_PENDING: _ClassVar[TaskStatus]
    TASK_STATUS_BLOCKED: _ClassVar[TaskStatus]
    TASK_STATUS_IN_PROGRESS: _ClassVar[TaskStatus]
    TASK_STATUS_COMPLETED: _ClassVar[TaskStatus]
    TASK_STATUS_FAILED: _ClassVar[TaskStatus]
    TASK_STATUS_SKIPPED: _ClassVar[TaskStatus]

class ApprovalScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    APPROVAL_SCOPE_UNSPECIFIED: _ClassVar[ApprovalScope]
    APPROVAL_SCOPE_PLAN: _ClassVar[ApprovalScope]
    APPROVAL_SCOPE_TASK_ROUND: _ClassVar[ApprovalScope]
    APPROVAL_SCOPE_TASK_DISPATCH: _ClassVar[ApprovalScope]
    APPROVAL_SCOPE_TOOL_CALL: _ClassVar[ApprovalScope]

class ApprovalState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    APPROVAL_STATE_UNSPECIFIED: _ClassVar[ApprovalState]
    APPROVAL_STATE_PENDING: _ClassVar[ApprovalState]
    APPROVAL_STATE_APPROVED: _ClassVar[ApprovalState]
    APPROVAL_STATE_REJECTED: _ClassVar[ApprovalState]
CONFLICT_POLICY_UNSPECIFIED: ConflictPolicy
CONFLICT_POLICY_FAIL: ConflictPolicy
CONFLICT_POLICY_USE_EXISTING: ConflictPolicy
RUN_STATUS_UNSPECIFIED: RunStatus
RUN_STATUS_QUEUED: RunStatus
RUN_STATUS_RUNNING: RunStatus
RUN_STATUS_SUSPENDED: RunStatus
RUN_STATUS_COMPLETED: RunStatus
RUN_STATUS_FAILED: RunStatus
RUN_STATUS_CANCELLED: RunStatus
RUN_STATUS_INTERRUPTED: RunStatus
RUN_STATUS_UNREADABLE: RunStatus
RUN_MODE_UNSPECIFIED: RunMode
RUN_MODE_TEAM: RunMode
RUN_MODE_TASKS: RunMode
RUN_MODE_PLAN: RunMode
RUN_VIEW_UNSPECIFIED: RunView
RUN_VIEW_BASIC: RunView
RUN_VIEW_FULL: RunView
TASK_STATUS_UNSPECIFIED: TaskStatus
TASK_STATUS_PENDING: TaskStatus
TASK_STATUS_BLOCKED: TaskStatus
TASK_STATUS_IN_PROGRESS: TaskStatus
TASK_STATUS_COMPLETED: TaskStatus
TASK_STATUS_FAILED: TaskStatus
TASK_STATUS_SKIPPED: TaskStatus
APPROVAL_SCOPE_UNSPECIFIED: ApprovalScope
APPROVAL_SCOPE_PLAN: ApprovalScope
APPROVAL_SCOPE_TASK_ROUND: ApprovalScope
APPROVAL_SCOPE_TASK_DISPATCH: ApprovalScope
APPROVAL_SCOPE_TOOL_CALL: ApprovalScope
APPROVAL_STATE_UNSPECIFIED: ApprovalState
APPROVAL_STATE_PENDING: ApprovalState
APPROVAL_STATE_APPROVED: ApprovalState
APPROVAL_STATE_REJECTED: ApprovalState

class StartRunRequest(_message.Message):
    __slots__ = ("run_id", "request_id", "team", "goal", "tasks", "plan", "checkpoint", "approval_gates", "metadata", "conflict_policy", "max_concurrency")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TEAM_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_GATES_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_POLICY_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    request_id: str
    team: TeamSpec
    goal: GoalMode
    tasks: TasksMode
    plan: PlanArtifact
    checkpoint: CheckpointOptions
    approval_gates: ApprovalGates
    metadata: _struct_pb2.Struct
    conflict_policy: ConflictPolicy
    max_concurrency: int
    def __init__(self, run_id: _Optional[str] = ..., request_id: _Optional[str] = ..., team: _Optional[_Union[TeamSpec, _Mapping]] = ..., goal: _Optional[_Union[GoalMode, _Mapping]] = ..., tasks: _Optional[_Union[TasksMode, _Mapping]] = ..., plan: _Optional[_Union[PlanArtifact, _Mapping]] = ..., checkpoint: _Optional[_Union[CheckpointOptions, _Mapping]] = ..., approval_gates: _Optional[_Union[ApprovalGates, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., conflict_policy: _Optional[_Union[ConflictPolicy, str]] = ..., max_concurrency: _Optional[int] = ...) -> None: ...

class StartRunResponse(_message.Message):
    __slots__ = ("run", "created")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    run: Run
    created: bool
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class TeamSpec(_message.Message):
    __slots__ = ("name", "agents", "shared_memory", "host_tools")
    NAME_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    HOST_TOOLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    agents: _containers.RepeatedCompositeFieldContainer[AgentSpec]
    shared_memory: bool
    host_tools: _containers.RepeatedCompositeFieldContainer[ToolDefinition]
    def __init__(self, name: _Optional[str] = ..., agents: _Optional[_Iterable[_Union[AgentSpec, _Mapping]]] = ..., shared_memory: _Optional[bool] = ..., host_tools: _Optional[_Iterable[_Union[ToolDefinition, _Mapping]]] = ...) -> None: ...

class AgentSpec(_message.Message):
    __slots__ = ("name", "provider", "model", "system_prompt", "tools", "max_turns", "base_url", "scripted")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    MAX_TURNS_FIELD_NUMBER: _ClassVar[int]
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    SCRIPTED_FIELD_NUMBER: _ClassVar[int]
    name: str
    provider: str
    model: str
    system_prompt: str
    tools: _containers.RepeatedScalarFieldContainer[str]
    max_turns: int
    base_url: str
    scripted: ScriptedModel
    def __init__(self, name: _Optional[str] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ..., system_prompt: _Optional[str] = ..., tools: _Optional[_Iterable[str]] = ..., max_turns: _Optional[int] = ..., base_url: _Optional[str] = ..., scripted: _Optional[_Union[ScriptedModel, _Mapping]] = ...) -> None: ...

class ScriptedModel(_message.Message):
    __slots__ = ("turns", "delay")
    TURNS_FIELD_NUMBER: _ClassVar[int]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    turns: _containers.RepeatedCompositeFieldContainer[ScriptedTurn]
    delay: _duration_pb2.Duration
    def __init__(self, turns: _Optional[_Iterable[_Union[ScriptedTurn, _Mapping]]] = ..., delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ScriptedTurn(_message.Message):
    __slots__ = ("text", "tool_calls", "when")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    WHEN_FIELD_NUMBER: _ClassVar[int]
    text: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ScriptedToolCall]
    when: str
    def __init__(self, text: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ScriptedToolCall, _Mapping]]] = ..., when: _Optional[str] = ...) -> None: ...

class ScriptedToolCall(_message.Message):
    __slots__ = ("name", "input_json", "id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    input_json: str
    id: str
    def __init__(self, name: _Optional[str] = ..., input_json: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class GoalMode(_message.Message):
    __slots__ = ("goal", "coordinator", "plan_only")
    GOAL_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    PLAN_ONLY_FIELD_NUMBER: _ClassVar[int]
    goal: str
    coordinator: AgentSpec
    plan_only: bool
    def __init__(self, goal: _Optional[str] = ..., coordinator: _Optional[_Union[AgentSpec, _Mapping]] = ..., plan_only: _Optional[bool] = ...) -> None: ...

class TasksMode(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskSpec]
    def __init__(self, tasks: _Optional[_Iterable[_Union[TaskSpec, _Mapping]]] = ...) -> None: ...

class TaskSpec(_message.Message):
    __slots__ = ("id", "title", "description", "assignee", "depends_on", "max_retries", "metadata")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ASSIGNEE_FIELD_NUMBER: _ClassVar[int]
    DEPENDS_ON_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    title: str
    description: str
    assignee: str
    depends_on: _containers.RepeatedScalarFieldContainer[str]
    max_retries: int
    metadata: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., assignee: _Optional[str] = ..., depends_on: _Optional[_Iterable[str]] = ..., max_retries: _Optional[int] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class PlanArtifact(_message.Message):
    __slots__ = ("version", "goal", "tasks")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    version: int
    goal: str
    tasks: _containers.RepeatedCompositeFieldContainer[TaskSpec]
    def __init__(self, version: _Optional[int] = ..., goal: _Optional[str] = ..., tasks: _Optional[_Iterable[_Union[TaskSpec, _Mapping]]] = ...) -> None: ...

class CheckpointOptions(_message.Message):
    __slots__ = ("disabled", "store_uri", "key", "journal")
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    STORE_URI_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_FIELD_NUMBER: _ClassVar[int]
    disabled: bool
    store_uri: str
    key: str
    journal: bool
    def __init__(self, disabled: _Optional[bool] = ..., store_uri: _Optional[str] = ..., key: _Optional[str] = ..., journal: _Optional[bool] = ...) -> None: ...

class ApprovalGates(_message.Message):
    __slots__ = ("plan", "task_dispatch", "tool_calls")
    PLAN_FIELD_NUMBER: _ClassVar[int]
    TASK_DISPATCH_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    plan: bool
    task_dispatch: bool
    tool_calls: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, plan: _Optional[bool] = ..., task_dispatch: _Optional[bool] = ..., tool_calls: _Optional[_Iterable[str]] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ("run_id", "mode", "status", "attempt", "request_id", "created_at", "updated_at", "outcome", "task_counts", "pending_approval_ids", "last_event_seq", "checkpoint", "metadata", "tasks", "result")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    TASK_COUNTS_FIELD_NUMBER: _ClassVar[int]
    PENDING_APPROVAL_IDS_FIELD_NUMBER: _ClassVar[int]
    LAST_EVENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    mode: RunMode
    status: RunStatus
    attempt: int
    request_id: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    outcome: Outcome
    task_counts: TaskCounts
    pending_approval_ids: _containers.RepeatedScalarFieldContainer[str]
    last_event_seq: int
    checkpoint: CheckpointRef
    metadata: _struct_pb2.Struct
    tasks: _containers.RepeatedCompositeFieldContainer[TaskState]
    result: RunResult
    def __init__(self, run_id: _Optional[str] = ..., mode: _Optional[_Union[RunMode, str]] = ..., status: _Optional[_Union[RunStatus, str]] = ..., attempt: _Optional[int] = ..., request_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., outcome: _Optional[_Union[Outcome, _Mapping]] = ..., task_counts: _Optional[_Union[TaskCounts, _Mapping]] = ..., pending_approval_ids: _Optional[_Iterable[str]] = ..., last_event_seq: _Optional[int] = ..., checkpoint: _Optional[_Union[CheckpointRef, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tasks: _Optional[_Iterable[_Union[TaskState, _Mapping]]] = ..., result: _Optional[_Union[RunResult, _Mapping]] = ...) -> None: ...

class Outcome(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class TaskCounts(_message.Message):
    __slots__ = ("pending", "blocked", "in_progress", "completed", "failed", "skipped")
    PENDING_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_FIELD_NUMBER: _ClassVar[int]
    IN_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    pending: int
    blocked: int
    in_progress: int
    completed: int
    failed: int
    skipped: int
    def __init__(self, pending: _Optional[int] = ..., blocked: _Optional[int] = ..., in_progress: _Optional[int] = ..., completed: _Optional[int] = ..., failed: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class CheckpointRef(_message.Message):
    __slots__ = ("enabled", "store_uri", "key")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    STORE_URI_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    store_uri: str
    key: str
    def __init__(self, enabled: _Optional[bool] = ..., store_uri: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class TaskState(_message.Message):
    __slots__ = ("id", "title", "status", "assignee", "depends_on", "result")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNEE_FIELD_NUMBER: _ClassVar[int]
    DEPENDS_ON_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    id: str
    title: str
    status: TaskStatus
    assignee: str
    depends_on: _containers.RepeatedScalarFieldContainer[str]
    result: str
    def __init__(self, id: _Optional[str] = ..., title: _Optional[str] = ..., status: _Optional[_Union[TaskStatus, str]] = ..., assignee: _Optional[str] = ..., depends_on: _Optional[_Iterable[str]] = ..., result: _Optional[str] = ...) -> None: ...

class TokenUsage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ...) -> None: ...

class RunResult(_message.Message):
    __slots__ = ("success", "status", "synthesis", "usage", "approval_decisions", "plan_only")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SYNTHESIS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_DECISIONS_FIELD_NUMBER: _ClassVar[int]
    PLAN_ONLY_FIELD_NUMBER: _ClassVar[int]
    success: bool
    status: Outcome
    synthesis: str
    usage: TokenUsage
    approval_decisions: _containers.RepeatedCompositeFieldContainer[ApprovalDecision]
    plan_only: bool
    def __init__(self, success: _Optional[bool] = ..., status: _Optional[_Union[Outcome, _Mapping]] = ..., synthesis: _Optional[str] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., approval_decisions: _Optional[_Iterable[_Union[ApprovalDecision, _Mapping]]] = ..., plan_only: _Optional[bool] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("run_id", "view")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    view: RunView
    def __init__(self, run_id: _Optional[str] = ..., view: _Optional[_Union[RunView, str]] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "statuses")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    statuses: _containers.RepeatedScalarFieldContainer[RunStatus]
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., statuses: _Optional[_Iterable[_Union[RunStatus, str]]] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs", "next_page_token")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[Run]
    next_page_token: str
    def __init__(self, runs: _Optional[_Iterable[_Union[Run, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("run_id", "reason")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    reason: str
    def __init__(self, run_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DeleteRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class DeleteRunResponse(_message.Message):
    __slots__ = ("deleted_keys",)
    DELETED_KEYS_FIELD_NUMBER: _ClassVar[int]
    deleted_keys: int
    def __init__(self, deleted_keys: _Optional[int] = ...) -> None: ...

class GetRunTimelineRequest(_message.Message):
    __slots__ = ("run_id", "width")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    width: int
    def __init__(self, run_id: _Optional[str] = ..., width: _Optional[int] = ...) -> None: ...

class GetRunTimelineResponse(_message.Message):
    __slots__ = ("text", "html", "timeline_json")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    HTML_FIELD_NUMBER: _ClassVar[int]
    TIMELINE_JSON_FIELD_NUMBER: _ClassVar[int]
    text: str
    html: str
    timeline_json: str
    def __init__(self, text: _Optional[str] = ..., html: _Optional[str] = ..., timeline_json: _Optional[str] = ...) -> None: ...

class GetRunHistoryRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class HistoryPoint(_message.Message):
    __slots__ = ("seq", "attempt", "boundary", "task_id", "at", "label")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    BOUNDARY_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    seq: int
    attempt: int
    boundary: str
    task_id: str
    at: _timestamp_pb2.Timestamp
    label: str
    def __init__(self, seq: _Optional[int] = ..., attempt: _Optional[int] = ..., boundary: _Optional[str] = ..., task_id: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., label: _Optional[str] = ...) -> None: ...

class GetRunHistoryResponse(_message.Message):
    __slots__ = ("points",)
    POINTS_FIELD_NUMBER: _ClassVar[int]
    points: _containers.RepeatedCompositeFieldContainer[HistoryPoint]
    def __init__(self, points: _Optional[_Iterable[_Union[HistoryPoint, _Mapping]]] = ...) -> None: ...

class ForkRunRequest(_message.Message):
    __slots__ = ("run_id", "at_seq", "new_run_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AT_SEQ_FIELD_NUMBER: _ClassVar[int]
    NEW_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    at_seq: int
    new_run_id: str
    def __init__(self, run_id: _Optional[str] = ..., at_seq: _Optional[int] = ..., new_run_id: _Optional[str] = ...) -> None: ...

class ForkRunResponse(_message.Message):
    __slots__ = ("run_id", "parent_run_id", "parent_seq", "run")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    parent_run_id: str
    parent_seq: int
    run: Run
    def __init__(self, run_id: _Optional[str] = ..., parent_run_id: _Optional[str] = ..., parent_seq: _Optional[int] = ..., run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class RestoreRunRequest(_message.Message):
    __slots__ = ("run_id", "team", "coordinator")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TEAM_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    team: TeamSpec
    coordinator: AgentSpec
    def __init__(self, run_id: _Optional[str] = ..., team: _Optional[_Union[TeamSpec, _Mapping]] = ..., coordinator: _Optional[_Union[AgentSpec, _Mapping]] = ...) -> None: ...

class RestoreRunResponse(_message.Message):
    __slots__ = ("run", "resumed_from_checkpoint")
    RUN_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FROM_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    run: Run
    resumed_from_checkpoint: bool
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ..., resumed_from_checkpoint: _Optional[bool] = ...) -> None: ...

class WatchRunRequest(_message.Message):
    __slots__ = ("run_id", "after_seq", "allow_gap", "follow_suspended", "types", "journal", "progress")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    ALLOW_GAP_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_SUSPENDED_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    after_seq: int
    allow_gap: bool
    follow_suspended: bool
    types: _containers.RepeatedScalarFieldContainer[str]
    journal: bool
    progress: bool
    def __init__(self, run_id: _Optional[str] = ..., after_seq: _Optional[int] = ..., allow_gap: _Optional[bool] = ..., follow_suspended: _Optional[bool] = ..., types: _Optional[_Iterable[str]] = ..., journal: _Optional[bool] = ..., progress: _Optional[bool] = ...) -> None: ...

class RunEvent(_message.Message):
    __slots__ = ("seq", "run_id", "attempt", "type", "time", "task_id", "agent", "data", "run_status", "task_status", "approval_pending", "tool_call_dispatched", "gap")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    RUN_STATUS_FIELD_NUMBER: _ClassVar[int]
    TASK_STATUS_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_PENDING_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_DISPATCHED_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    seq: int
    run_id: str
    attempt: int
    type: str
    time: _timestamp_pb2.Timestamp
    task_id: str
    agent: str
    data: _struct_pb2.Struct
    run_status: RunStatusChanged
    task_status: TaskStatusChanged
    approval_pending: Approval
    tool_call_dispatched: ToolCallDispatched
    gap: Gap
    def __init__(self, seq: _Optional[int] = ..., run_id: _Optional[str] = ..., attempt: _Optional[int] = ..., type: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., task_id: _Optional[str] = ..., agent: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., run_status: _Optional[_Union[RunStatusChanged, _Mapping]] = ..., task_status: _Optional[_Union[TaskStatusChanged, _Mapping]] = ..., approval_pending: _Optional[_Union[Approval, _Mapping]] = ..., tool_call_dispatched: _Optional[_Union[ToolCallDispatched, _Mapping]] = ..., gap: _Optional[_Union[Gap, _Mapping]] = ...) -> None: ...

class RunStatusChanged(_message.Message):
    __slots__ = ("status", "outcome")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    status: RunStatus
    outcome: Outcome
    def __init__(self, status: _Optional[_Union[RunStatus, str]] = ..., outcome: _Optional[_Union[Outcome, _Mapping]] = ...) -> None: ...

class TaskStatusChanged(_message.Message):
    __slots__ = ("status", "reason")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    status: TaskStatus
    reason: str
    def __init__(self, status: _Optional[_Union[TaskStatus, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class ToolCallDispatched(_message.Message):
    __slots__ = ("tool_name", "tool_call_id", "session_id", "delivery_attempt")
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    tool_name: str
    tool_call_id: str
    session_id: str
    delivery_attempt: int
    def __init__(self, tool_name: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., session_id: _Optional[str] = ..., delivery_attempt: _Optional[int] = ...) -> None: ...

class Gap(_message.Message):
    __slots__ = ("from_seq", "to_seq")
    FROM_SEQ_FIELD_NUMBER: _ClassVar[int]
    TO_SEQ_FIELD_NUMBER: _ClassVar[int]
    from_seq: int
    to_seq: int
    def __init__(self, from_seq: _Optional[int] = ..., to_seq: _Optional[int] = ...) -> None: ...

class Approval(_message.Message):
    __slots__ = ("id", "run_id", "scope", "boundary", "request_hash", "canonical_json", "reason", "requested_at", "state", "decision")
    ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    BOUNDARY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_HASH_FIELD_NUMBER: _ClassVar[int]
    CANONICAL_JSON_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_AT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    id: str
    run_id: str
    scope: ApprovalScope
    boundary: str
    request_hash: str
    canonical_json: str
    reason: str
    requested_at: _timestamp_pb2.Timestamp
    state: ApprovalState
    decision: ApprovalDecision
    def __init__(self, id: _Optional[str] = ..., run_id: _Optional[str] = ..., scope: _Optional[_Union[ApprovalScope, str]] = ..., boundary: _Optional[str] = ..., request_hash: _Optional[str] = ..., canonical_json: _Optional[str] = ..., reason: _Optional[str] = ..., requested_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., state: _Optional[_Union[ApprovalState, str]] = ..., decision: _Optional[_Union[ApprovalDecision, _Mapping]] = ...) -> None: ...

class ApprovalDecision(_message.Message):
    __slots__ = ("request_id", "run_id", "scope", "request_hash", "decision", "reviewer", "decided_at", "edited_input_json")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_HASH_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    REVIEWER_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_FIELD_NUMBER: _ClassVar[int]
    EDITED_INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    run_id: str
    scope: ApprovalScope
    request_hash: str
    decision: ApprovalState
    reviewer: Reviewer
    decided_at: _timestamp_pb2.Timestamp
    edited_input_json: str
    def __init__(self, request_id: _Optional[str] = ..., run_id: _Optional[str] = ..., scope: _Optional[_Union[ApprovalScope, str]] = ..., request_hash: _Optional[str] = ..., decision: _Optional[_Union[ApprovalState, str]] = ..., reviewer: _Optional[_Union[Reviewer, _Mapping]] = ..., decided_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., edited_input_json: _Optional[str] = ...) -> None: ...

class Reviewer(_message.Message):
    __slots__ = ("id", "display_name")
    ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    id: str
    display_name: str
    def __init__(self, id: _Optional[str] = ..., display_name: _Optional[str] = ...) -> None: ...

class ListApprovalsRequest(_message.Message):
    __slots__ = ("run_id", "states", "page_size", "page_token")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    states: _containers.RepeatedScalarFieldContainer[ApprovalState]
    page_size: int
    page_token: str
    def __init__(self, run_id: _Optional[str] = ..., states: _Optional[_Iterable[_Union[ApprovalState, str]]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListApprovalsResponse(_message.Message):
    __slots__ = ("approvals", "next_page_token")
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    approvals: _containers.RepeatedCompositeFieldContainer[Approval]
    next_page_token: str
    def __init__(self, approvals: _Optional[_Iterable[_Union[Approval, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetApprovalRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DecideApprovalRequest(_message.Message):
    __slots__ = ("id", "request_hash", "decision", "reviewer", "resume", "edited_input_json")
    class Decision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        DECISION_UNSPECIFIED: _ClassVar[DecideApprovalRequest.Decision]
        DECISION_APPROVE: _ClassVar[DecideApprovalRequest.Decision]
        DECISION_REJECT: _ClassVar[DecideApprovalRequest.Decision]
    DECISION_UNSPECIFIED: DecideApprovalRequest.Decision
    DECISION_APPROVE: DecideApprovalRequest.Decision
    DECISION_REJECT: DecideApprovalRequest.Decision
    class ResumePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        RESUME_POLICY_UNSPECIFIED: _ClassVar[DecideApprovalRequest.ResumePolicy]
        RESUME_POLICY_WHEN_ALL_DECIDED: _ClassVar[DecideApprovalRequest.ResumePolicy]
        RESUME_POLICY_NEVER: _ClassVar[DecideApprovalRequest.ResumePolicy]
    RESUME_POLICY_UNSPECIFIED: DecideApprovalRequest.ResumePolicy
    RESUME_POLICY_WHEN_ALL_DECIDED: DecideApprovalRequest.ResumePolicy
    RESUME_POLICY_NEVER: DecideApprovalRequest.ResumePolicy
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_HASH_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    REVIEWER_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    EDITED_INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    request_hash: str
    decision: DecideApprovalRequest.Decision
    reviewer: Reviewer
    resume: DecideApprovalRequest.ResumePolicy
    edited_input_json: str
    def __init__(self, id: _Optional[str] = ..., request_hash: _Optional[str] = ..., decision: _Optional[_Union[DecideApprovalRequest.Decision, str]] = ..., reviewer: _Optional[_Union[Reviewer, _Mapping]] = ..., resume: _Optional[_Union[DecideApprovalRequest.ResumePolicy, str]] = ..., edited_input_json: _Optional[str] = ...) -> None: ...

class DecideApprovalResponse(_message.Message):
    __slots__ = ("approval", "recorded", "run")
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    approval: Approval
    recorded: bool
    run: Run
    def __init__(self, approval: _Optional[_Union[Approval, _Mapping]] = ..., recorded: _Optional[bool] = ..., run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class ToolHostMessage(_message.Message):
    __slots__ = ("register", "result", "drain")
    REGISTER_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    register: Register
    result: ToolResult
    drain: Drain
    def __init__(self, register: _Optional[_Union[Register, _Mapping]] = ..., result: _Optional[_Union[ToolResult, _Mapping]] = ..., drain: _Optional[_Union[Drain, _Mapping]] = ...) -> None: ...

class ToolServerMessage(_message.Message):
    __slots__ = ("register_ack", "call", "cancel", "result_ack", "ping")
    REGISTER_ACK_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    RESULT_ACK_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    register_ack: RegisterAck
    call: ToolCall
    cancel: CancelToolCall
    result_ack: ResultAck
    ping: Ping
    def __init__(self, register_ack: _Optional[_Union[RegisterAck, _Mapping]] = ..., call: _Optional[_Union[ToolCall, _Mapping]] = ..., cancel: _Optional[_Union[CancelToolCall, _Mapping]] = ..., result_ack: _Optional[_Union[ResultAck, _Mapping]] = ..., ping: _Optional[_Union[Ping, _Mapping]] = ...) -> None: ...

class Register(_message.Message):
    __slots__ = ("host_id", "tools", "max_concurrent_calls")
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_CALLS_FIELD_NUMBER: _ClassVar[int]
    host_id: str
    tools: _containers.RepeatedCompositeFieldContainer[ToolDefinition]
    max_concurrent_calls: int
    def __init__(self, host_id: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[ToolDefinition, _Mapping]]] = ..., max_concurrent_calls: _Optional[int] = ...) -> None: ...

class ToolDefinition(_message.Message):
    __slots__ = ("name", "description", "input_schema_json", "consequential", "timeout")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    CONSEQUENTIAL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    input_schema_json: str
    consequential: bool
    timeout: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema_json: _Optional[str] = ..., consequential: _Optional[bool] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RegisterAck(_message.Message):
    __slots__ = ("session_id", "accepted_tools", "rejected_tools", "heartbeat_interval")
    class RejectedToolsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    REJECTED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    accepted_tools: _containers.RepeatedScalarFieldContainer[str]
    rejected_tools: _containers.ScalarMap[str, str]
    heartbeat_interval: _duration_pb2.Duration
    def __init__(self, session_id: _Optional[str] = ..., accepted_tools: _Optional[_Iterable[str]] = ..., rejected_tools: _Optional[_Mapping[str, str]] = ..., heartbeat_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("call_id", "run_id", "task_id", "tool_call_id", "idempotency_key", "tool_name", "input_json", "agent", "run_attempt", "delivery_attempt", "deadline", "redelivery")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    RUN_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    REDELIVERY_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    run_id: str
    task_id: str
    tool_call_id: str
    idempotency_key: str
    tool_name: str
    input_json: str
    agent: str
    run_attempt: int
    delivery_attempt: int
    deadline: _timestamp_pb2.Timestamp
    redelivery: bool
    def __init__(self, call_id: _Optional[str] = ..., run_id: _Optional[str] = ..., task_id: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., tool_name: _Optional[str] = ..., input_json: _Optional[str] = ..., agent: _Optional[str] = ..., run_attempt: _Optional[int] = ..., delivery_attempt: _Optional[int] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., redelivery: _Optional[bool] = ...) -> None: ...

class ToolResult(_message.Message):
    __slots__ = ("call_id", "tool_call_id", "success", "error")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    tool_call_id: str
    success: ToolSuccess
    error: ToolError
    def __init__(self, call_id: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., success: _Optional[_Union[ToolSuccess, _Mapping]] = ..., error: _Optional[_Union[ToolError, _Mapping]] = ...) -> None: ...

class ToolSuccess(_message.Message):
    __slots__ = ("output_text",)
    OUTPUT_TEXT_FIELD_NUMBER: _ClassVar[int]
    output_text: str
    def __init__(self, output_text: _Optional[str] = ...) -> None: ...

class ToolError(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class CancelToolCall(_message.Message):
    __slots__ = ("call_id", "reason")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    reason: str
    def __init__(self, call_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ResultAck(_message.Message):
    __slots__ = ("call_id", "status")
    class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        STATUS_UNSPECIFIED: _ClassVar[ResultAck.Status]
        STATUS_COMMITTED: _ClassVar[ResultAck.Status]
        STATUS_DUPLICATE: _ClassVar[ResultAck.Status]
        STATUS_UNKNOWN_CALL: _ClassVar[ResultAck.Status]
        STATUS_NOT_DURABLE: _ClassVar[ResultAck.Status]
    STATUS_UNSPECIFIED: ResultAck.Status
    STATUS_COMMITTED: ResultAck.Status
    STATUS_DUPLICATE: ResultAck.Status
    STATUS_UNKNOWN_CALL: ResultAck.Status
    STATUS_NOT_DURABLE: ResultAck.Status
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    status: ResultAck.Status
    def __init__(self, call_id: _Optional[str] = ..., status: _Optional[_Union[ResultAck.Status, str]] = ...) -> None: ...

class Drain(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Ping(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CompleteToolCallRequest(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: ToolResult
    def __init__(self, result: _Optional[_Union[ToolResult, _Mapping]] = ...) -> None: ...

class CompleteToolCallResponse(_message.Message):
    __slots__ = ("ack",)
    ACK_FIELD_NUMBER: _ClassVar[int]
    ack: ResultAck
    def __init__(self, ack: _Optional[_Union[ResultAck, _Mapping]] = ...) -> None: ...

class GetServerInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ServerInfo(_message.Message):
    __slots__ = ("server_version", "api_versions", "store_schemes", "providers", "python_tools", "capabilities", "default_store_uri")
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    API_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    STORE_SCHEMES_FIELD_NUMBER: _ClassVar[int]
    PROVIDERS_FIELD_NUMBER: _ClassVar[int]
    PYTHON_TOOLS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_STORE_URI_FIELD_NUMBER: _ClassVar[int]
    server_version: str
    api_versions: _containers.RepeatedScalarFieldContainer[str]
    store_schemes: _containers.RepeatedScalarFieldContainer[str]
    providers: _containers.RepeatedScalarFieldContainer[str]
    python_tools: _containers.RepeatedScalarFieldContainer[str]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    default_store_uri: str
    def __init__(self, server_version: _Optional[str] = ..., api_versions: _Optional[_Iterable[str]] = ..., store_schemes: _Optional[_Iterable[str]] = ..., providers: _Optional[_Iterable[str]] = ..., python_tools: _Optional[_Iterable[str]] = ..., capabilities: _Optional[_Iterable[str]] = ..., default_store_uri: _Optional[str] = ...) -> None: ...
