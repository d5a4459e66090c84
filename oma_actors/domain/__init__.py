"""Frozen domain values: messages and content blocks, tasks, plans, results."""

from oma_actors.domain.approvals import ApprovalDecision, ApprovalRequest, Reviewer
from oma_actors.domain.messages import (
    ChatOptions,
    ContentBlock,
    ImageBlock,
    LLMResponse,
    Message,
    ReasoningBlock,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    text_of,
)
from oma_actors.domain.results import (
    AgentRunResult,
    RunOutcome,
    RunStatusCode,
    TeamRunResult,
    ToolCallRecord,
)
from oma_actors.domain.tasks import (
    TERMINAL_STATUSES,
    PlanArtifact,
    PlanTask,
    Task,
    TaskState,
    TaskStatus,
)

__all__ = [
    "TERMINAL_STATUSES",
    "AgentRunResult",
    "ApprovalDecision",
    "ApprovalRequest",
    "ChatOptions",
    "ContentBlock",
    "ImageBlock",
    "LLMResponse",
    "Message",
    "PlanArtifact",
    "PlanTask",
    "ReasoningBlock",
    "Reviewer",
    "RunOutcome",
    "RunStatusCode",
    "Task",
    "TaskState",
    "TaskStatus",
    "TeamRunResult",
    "TextBlock",
    "TokenUsage",
    "ToolCallRecord",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "text_of",
]
