"""oma-actors: teams of LLM agents over a task graph, as asyncio actors.

The public API (see API.md): build a ``Team`` of ``AgentConfig``s, give it ``Task``s, a
``PlanArtifact`` or a goal, and run it with ``OpenMultiAgent``.
"""

from oma_actors.actors.loop import event_loop_factory
from oma_actors.agents.config import AgentConfig, Team
from oma_actors.agents.context import (
    CompressToolResults,
    ContextStrategy,
    ContextStrategyError,
    CustomContext,
    SlidingWindow,
    Summarize,
)
from oma_actors.approvals import (
    ApprovalRecord,
    DurableApprovalLedger,
    decide_approval,
    get_approval_record,
)
from oma_actors.approvals.gates import Allow, Deny, Gate, Suspend, ToolCallRequest
from oma_actors.checkpoint import (
    CHECKPOINT_KEY_PREFIX,
    DEFAULT_CHECKPOINT_KEY,
    Checkpoint,
    CheckpointSnapshot,
    checkpoint_key,
    is_checkpoint_key,
)
from oma_actors.checkpoint.fold import Discarded, Folded, FoldResult, fold_tail, tail_read_from
from oma_actors.checkpoint.fork import ForkInfo, fork_run
from oma_actors.checkpoint.history import HistoryPoint, run_history, state_at
from oma_actors.checkpoint.journal_path import mark_started_unsafe
from oma_actors.checkpoint.journal_tail import read_journal_tail
from oma_actors.checkpoint.listing import CheckpointSummary, list_checkpoints
from oma_actors.domain import (
    AgentRunResult,
    ApprovalDecision,
    ApprovalRequest,
    ChatOptions,
    ContentBlock,
    ImageBlock,
    LLMResponse,
    Message,
    PlanArtifact,
    PlanTask,
    ReasoningBlock,
    Reviewer,
    RunOutcome,
    Task,
    TaskState,
    TeamRunResult,
    TextBlock,
    TokenUsage,
    ToolCallRecord,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from oma_actors.errors import (
    CheckpointError,
    CheckpointNotFoundError,
    ConfigurationError,
    CorruptStoreError,
    DurableApprovalError,
    JournalDamagedError,
    JournalUnavailableError,
    LeaseError,
    NoHistoryError,
    NotAHistoryPointError,
    OmaError,
    RunExistsError,
    RunIdMismatchError,
    StoreError,
    TaskGraphError,
    UnsupportedSchemaError,
)
from oma_actors.events import (
    AgentCompleted,
    ApprovalPending,
    BudgetExceeded,
    CheckpointSaved,
    CheckpointSaveFailed,
    CoordinatorFailed,
    JournalAppendFailed,
    JournalTailDiscarded,
    LeaseLost,
    ProgressEvent,
    RunFinished,
    RunStarted,
    SynthesisFailed,
    TaskCompleted,
    TaskFailed,
    TaskRetry,
    TaskSkipped,
    TaskStarted,
    ToolCalled,
    ToolOutcomeUnknown,
    TurnCompleted,
)
from oma_actors.journal import (
    EncryptingJournal,
    InMemoryRunJournal,
    JournalEvent,
    JournalOptions,
    JsonlRunJournal,
    RunJournal,
    VerifyFinding,
    VerifyResult,
    open_journal,
    verify_run,
)
from oma_actors.llm.base import LLMAdapter
from oma_actors.llm.scripted import RecordedCall, ScriptedAdapter, text_response
from oma_actors.orchestration.options import CheckpointOptions
from oma_actors.orchestration.orchestrator import OpenMultiAgent
from oma_actors.runs import (
    Lease,
    MemoryStoreRunStore,
    RunLeaseHandle,
    RunLedger,
    RunRecord,
    RunStore,
    RunStoreOptions,
    RunSummary,
    list_runs,
)
from oma_actors.stores.base import AtomicStore, MemoryEntry, MemoryStore
from oma_actors.stores.encrypting import EncryptingStore
from oma_actors.stores.file import FileStore
from oma_actors.stores.keyring import KeyRing
from oma_actors.stores.memory import InMemoryStore
from oma_actors.stores.redacting import RedactingStore
from oma_actors.stores.sqlite import SqliteStore
from oma_actors.stores.uri import StoreTarget, open_store, parse_store_uri
from oma_actors.timeline import (
    Timeline,
    TimelineApproval,
    TimelineCall,
    TimelineLane,
    TimelineTurn,
    build_timeline,
    render_timeline_html,
    render_timeline_text,
)
from oma_actors.tools.base import Tool, ToolContext, ToolResult, define_tool

__all__ = [
    "AgentCompleted",
    "AgentConfig",
    "AgentRunResult",
    "Allow",
    "ApprovalDecision",
    "ApprovalPending",
    "ApprovalRecord",
    "ApprovalRequest",
    "AtomicStore",
    "BudgetExceeded",
    "CHECKPOINT_KEY_PREFIX",
    "ChatOptions",
    "Checkpoint",
    "CheckpointError",
    "CheckpointNotFoundError",
    "CheckpointOptions",
    "CheckpointSaveFailed",
    "CheckpointSaved",
    "CheckpointSnapshot",
    "CheckpointSummary",
    "CompressToolResults",
    "ConfigurationError",
    "ContentBlock",
    "ContextStrategy",
    "ContextStrategyError",
    "CoordinatorFailed",
    "CorruptStoreError",
    "CustomContext",
    "DEFAULT_CHECKPOINT_KEY",
    "Deny",
    "Discarded",
    "DurableApprovalError",
    "DurableApprovalLedger",
    "EncryptingJournal",
    "EncryptingStore",
    "FileStore",
    "FoldResult",
    "Folded",
    "ForkInfo",
    "Gate",
    "HistoryPoint",
    "ImageBlock",
    "InMemoryRunJournal",
    "InMemoryStore",
    "JournalAppendFailed",
    "JournalDamagedError",
    "JournalEvent",
    "JournalOptions",
    "JournalTailDiscarded",
    "JournalUnavailableError",
    "JsonlRunJournal",
    "KeyRing",
    "LLMAdapter",
    "LLMResponse",
    "Lease",
    "LeaseError",
    "LeaseLost",
    "MemoryEntry",
    "MemoryStore",
    "MemoryStoreRunStore",
    "Message",
    "NoHistoryError",
    "NotAHistoryPointError",
    "OmaError",
    "OpenMultiAgent",
    "PlanArtifact",
    "PlanTask",
    "ProgressEvent",
    "ReasoningBlock",
    "RecordedCall",
    "RedactingStore",
    "Reviewer",
    "RunExistsError",
    "RunFinished",
    "RunIdMismatchError",
    "RunJournal",
    "RunLeaseHandle",
    "RunLedger",
    "RunOutcome",
    "RunRecord",
    "RunStarted",
    "RunStore",
    "RunStoreOptions",
    "RunSummary",
    "ScriptedAdapter",
    "SlidingWindow",
    "SqliteStore",
    "StoreError",
    "StoreTarget",
    "Summarize",
    "Suspend",
    "SynthesisFailed",
    "Task",
    "TaskCompleted",
    "TaskFailed",
    "TaskGraphError",
    "TaskRetry",
    "TaskSkipped",
    "TaskStarted",
    "TaskState",
    "Team",
    "TeamRunResult",
    "TextBlock",
    "Timeline",
    "TimelineApproval",
    "TimelineCall",
    "TimelineLane",
    "TimelineTurn",
    "TokenUsage",
    "Tool",
    "ToolCallRecord",
    "ToolCallRequest",
    "ToolCalled",
    "ToolContext",
    "ToolOutcomeUnknown",
    "ToolResult",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "TurnCompleted",
    "UnsupportedSchemaError",
    "VerifyFinding",
    "VerifyResult",
    "build_timeline",
    "checkpoint_key",
    "decide_approval",
    "define_tool",
    "event_loop_factory",
    "fold_tail",
    "fork_run",
    "get_approval_record",
    "is_checkpoint_key",
    "list_checkpoints",
    "list_runs",
    "mark_started_unsafe",
    "open_journal",
    "open_store",
    "parse_store_uri",
    "read_journal_tail",
    "render_timeline_html",
    "render_timeline_text",
    "run_history",
    "state_at",
    "tail_read_from",
    "text_response",
    "verify_run",
]


def __getattr__(name: str) -> object:
    """``RunStatus``: the old name of :class:`RunOutcome`, deprecated.

    Renamed so that no two types share a name: ``oma_actors.runs.RunStatus`` is the run
    record's status vocabulary (D16).
    """
    if name == "RunStatus":
        import warnings

        warnings.warn(
            "oma_actors.RunStatus is deprecated: use oma_actors.RunOutcome",
            DeprecationWarning,
            stacklevel=2,
        )
        return RunOutcome
    raise AttributeError(f"module 'oma_actors' has no attribute {name!r}")
