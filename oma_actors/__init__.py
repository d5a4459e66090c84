"""oma-actors: teams of LLM agents over a task graph, as asyncio actors.

The public API (see API.md): build a ``Team`` of ``AgentConfig``s, give it ``Task``s, a
``PlanArtifact`` or a goal, and run it with ``OpenMultiAgent``.
"""

from oma_actors.agents.config import AgentConfig, Team
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
    Reviewer,
    RunStatus,
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
    ConfigurationError,
    CorruptStoreError,
    DurableApprovalError,
    LeaseError,
    OmaError,
    RunIdMismatchError,
    StoreError,
    TaskGraphError,
    UnsupportedSchemaError,
)
from oma_actors.events import (
    AgentCompleted,
    ApprovalPending,
    CheckpointSaved,
    CheckpointSaveFailed,
    CoordinatorFailed,
    JournalAppendFailed,
    JournalTailDiscarded,
    LeaseLost,
    ProgressEvent,
    SynthesisFailed,
    TaskCompleted,
    TaskFailed,
    TaskRetry,
    TaskSkipped,
    TaskStarted,
    ToolCalled,
    ToolOutcomeUnknown,
)
from oma_actors.llm.base import LLMAdapter
from oma_actors.orchestration.gates import Allow, Deny, Gate, Suspend
from oma_actors.orchestration.options import CheckpointOptions
from oma_actors.orchestration.orchestrator import OpenMultiAgent
from oma_actors.stores.base import AtomicStore, MemoryEntry, MemoryStore
from oma_actors.stores.file import FileStore
from oma_actors.stores.memory import InMemoryStore
try:
    from oma_actors.stores.redacting import RedactingStore
except ImportError:  # TEMP until the redacting helper lands
    pass
from oma_actors.tools.base import Tool, ToolContext, ToolResult, define_tool

__all__ = [
    "AgentCompleted",
    "AgentConfig",
    "AgentRunResult",
    "Allow",
    "ApprovalDecision",
    "ApprovalPending",
    "ApprovalRequest",
    "AtomicStore",
    "ChatOptions",
    "CheckpointError",
    "CheckpointOptions",
    "CheckpointSaveFailed",
    "CheckpointSaved",
    "ConfigurationError",
    "ContentBlock",
    "CoordinatorFailed",
    "CorruptStoreError",
    "Deny",
    "DurableApprovalError",
    "FileStore",
    "Gate",
    "ImageBlock",
    "InMemoryStore",
    "JournalAppendFailed",
    "JournalTailDiscarded",
    "LLMAdapter",
    "LLMResponse",
    "LeaseError",
    "LeaseLost",
    "MemoryEntry",
    "MemoryStore",
    "Message",
    "OmaError",
    "OpenMultiAgent",
    "PlanArtifact",
    "PlanTask",
    "ProgressEvent",
    "RedactingStore",
    "Reviewer",
    "RunIdMismatchError",
    "RunStatus",
    "StoreError",
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
    "TokenUsage",
    "Tool",
    "ToolCallRecord",
    "ToolCalled",
    "ToolContext",
    "ToolOutcomeUnknown",
    "ToolResult",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "UnsupportedSchemaError",
    "define_tool",
]
