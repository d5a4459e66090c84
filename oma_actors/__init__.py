"""oma-actors: teams of LLM agents over a task graph, as asyncio actors.

The everyday API: build a ``Team`` of ``AgentConfig``s, give it ``Task``s, a ``PlanArtifact`` or
a goal, run it with ``OpenMultiAgent``, and make it durable with ``CheckpointOptions``,
``open_store`` and ``JournalOptions``/``open_journal``. Everything else lives one level down,
each surface with its own ``__all__``:

- ``oma_actors.llm``: the model adapter seam, ``ScriptedAdapter``, messages and content blocks;
- ``oma_actors.stores``: the store protocols and backends, encryption and redaction;
- ``oma_actors.checkpoint``: snapshots, keys, listing, the journal-tail fold, history and fork;
- ``oma_actors.journal``: run journals and ``verify_run``;
- ``oma_actors.runs``: run records, leases and fencing;
- ``oma_actors.approvals``: gates and durable approvals;
- ``oma_actors.timeline``: a run's timeline and its renderings;
- ``oma_actors.events`` and ``oma_actors.errors``: every progress event and every error;
- ``oma_actors.testing``: the test kit.

The names that lived here before the split still import for one release, with a
``DeprecationWarning`` naming their new home (``_MOVED``).
"""

import importlib
import warnings

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
from oma_actors.domain import (
    AgentRunResult,
    PlanArtifact,
    PlanTask,
    RunOutcome,
    Task,
    TaskState,
    TeamRunResult,
    TokenUsage,
    ToolCallRecord,
)
from oma_actors.errors import (
    CheckpointError,
    ConfigurationError,
    DurableApprovalError,
    LeaseError,
    OmaError,
    StoreError,
    TaskGraphError,
)
from oma_actors.journal import JournalOptions, open_journal
from oma_actors.orchestration.options import CheckpointOptions
from oma_actors.orchestration.orchestrator import OpenMultiAgent
from oma_actors.stores.uri import open_store
from oma_actors.tools.base import Tool, ToolContext, ToolResult, define_tool

__all__ = [
    "AgentConfig",
    "AgentRunResult",
    "CheckpointError",
    "CheckpointOptions",
    "CompressToolResults",
    "ConfigurationError",
    "ContextStrategy",
    "ContextStrategyError",
    "CustomContext",
    "DurableApprovalError",
    "JournalOptions",
    "LeaseError",
    "OmaError",
    "OpenMultiAgent",
    "PlanArtifact",
    "PlanTask",
    "RunOutcome",
    "SlidingWindow",
    "StoreError",
    "Summarize",
    "Task",
    "TaskGraphError",
    "TaskState",
    "Team",
    "TeamRunResult",
    "TokenUsage",
    "Tool",
    "ToolCallRecord",
    "ToolContext",
    "ToolResult",
    "define_tool",
    "event_loop_factory",
    "open_journal",
    "open_store",
]


def _homes(module: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, module)


# Every name this package exported before the tiers (issue 25), by its new home. It is the one
# record of the move: ``__getattr__`` serves it, ``scripts/rewrite_imports.py`` rewrites import
# lines with it, and tests/test_public_api.py checks each entry resolves to the same object.
_MOVED: dict[str, str] = {
    **_homes(
        "oma_actors.approvals",
        "Allow", "ApprovalDecision", "ApprovalRecord", "ApprovalRequest", "Deny",
        "DurableApprovalLedger", "Gate", "Reviewer", "Suspend", "ToolCallRequest",
        "decide_approval", "get_approval_record",
    ),
    **_homes(
        "oma_actors.checkpoint",
        "CHECKPOINT_KEY_PREFIX", "DEFAULT_CHECKPOINT_KEY", "Checkpoint", "CheckpointSnapshot",
        "CheckpointSummary", "Discarded", "FoldResult", "Folded", "ForkInfo", "HistoryPoint",
        "checkpoint_key", "fold_tail", "fork_run", "is_checkpoint_key", "list_checkpoints",
        "mark_started_unsafe", "read_journal_tail", "run_history", "state_at", "tail_read_from",
    ),
    **_homes(
        "oma_actors.errors",
        "CheckpointNotFoundError", "CorruptStoreError", "JournalDamagedError",
        "JournalUnavailableError", "NoHistoryError", "NotAHistoryPointError", "RunExistsError",
        "RunIdMismatchError", "UnsupportedSchemaError",
    ),
    **_homes(
        "oma_actors.events",
        "AgentCompleted", "ApprovalPending", "BudgetExceeded", "CheckpointSaveFailed",
        "CheckpointSaved", "CoordinatorFailed", "JournalAppendFailed", "JournalTailDiscarded",
        "LeaseLost", "ProgressEvent", "RunFinished", "RunStarted", "SynthesisFailed",
        "TaskCompleted", "TaskFailed", "TaskRetry", "TaskSkipped", "TaskStarted", "ToolCalled",
        "ToolOutcomeUnknown", "TurnCompleted",
    ),
    **_homes(
        "oma_actors.journal",
        "EncryptingJournal", "InMemoryRunJournal", "JournalEvent", "JsonlRunJournal",
        "RunJournal", "VerifyFinding", "VerifyResult", "verify_run",
    ),
    **_homes(
        "oma_actors.llm",
        "ChatOptions", "ContentBlock", "ImageBlock", "LLMAdapter", "LLMResponse", "Message",
        "ReasoningBlock", "RecordedCall", "ScriptedAdapter", "TextBlock", "ToolResultBlock",
        "ToolSpec", "ToolUseBlock", "text_response",
    ),
    **_homes(
        "oma_actors.runs",
        "Lease", "MemoryStoreRunStore", "RunLeaseHandle", "RunLedger", "RunRecord", "RunStore",
        "RunStoreOptions", "RunSummary", "list_runs",
    ),
    **_homes(
        "oma_actors.stores",
        "AtomicStore", "EncryptingStore", "FileStore", "InMemoryStore", "KeyRing",
        "MemoryEntry", "MemoryStore", "RedactingStore", "SqliteStore", "StoreTarget",
        "parse_store_uri",
    ),
    **_homes(
        "oma_actors.timeline",
        "Timeline", "TimelineApproval", "TimelineCall", "TimelineLane", "TimelineTurn",
        "build_timeline", "render_timeline_html", "render_timeline_text",
    ),
}  # fmt: skip


def __getattr__(name: str) -> object:
    """Serve a name that moved to a subpackage (or was renamed), warning where it is now."""
    if name == "RunStatus":
        # Renamed so no two types share a name: oma_actors.runs.RunStatus is the run record's.
        warnings.warn(
            "'oma_actors.RunStatus' is renamed 'oma_actors.RunOutcome' (the run record's status "
            "vocabulary is oma_actors.runs.RunStatus)",
            DeprecationWarning,
            stacklevel=2,
        )
        return RunOutcome
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module 'oma_actors' has no attribute {name!r}")
    warnings.warn(
        f"'oma_actors.{name}' moved to '{home}': import it as 'from {home} import {name}' "
        "(the top-level name is removed in the next release)",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(home), name)
