"""The tiers of the public API (issue 25): each surface's ``__all__`` is pinned, and every name
that left the top level still imports from there, with a warning naming its new home.

A change to a pinned list is a change to the public API: update the pin, the mapping in
``oma_actors._MOVED`` when a name moves, and API.md's tier when it names one.
"""

from __future__ import annotations

import importlib
import inspect
import warnings

import pytest

import oma_actors

PINNED: dict[str, list[str]] = {
    "oma_actors": [
        "AgentConfig", "AgentRunResult", "CheckpointError", "CheckpointOptions",
        "CompressToolResults", "ConfigurationError", "ContextStrategy", "ContextStrategyError",
        "CustomContext", "DurableApprovalError", "JournalOptions", "LeaseError", "OmaError",
        "OpenMultiAgent", "PlanArtifact", "PlanTask", "RunOutcome", "SlidingWindow", "StoreError",
        "Summarize", "Task", "TaskGraphError", "TaskState", "Team", "TeamRunResult",
        "TokenUsage", "Tool", "ToolCallRecord", "ToolContext", "ToolResult", "define_tool",
        "event_loop_factory", "open_journal", "open_store",
    ],
    "oma_actors.approvals": [
        "APPROVAL_KEY_PREFIX", "Allow", "ApprovalDecision", "ApprovalRecord", "ApprovalRequest",
        "Deny", "DurableApprovalLedger", "Gate", "PLAN_BOUNDARY", "Reviewer", "Suspend",
        "ToolCallRequest", "approval_hash_input", "approval_key", "approval_request_id",
        "check_reviewer", "content_boundary", "create_approval_request", "decide_approval",
        "decision_from_json", "decision_to_json", "dispatch_boundary", "dispatch_content",
        "get_approval_record", "hash_approval_request", "plan_content", "request_from_json",
        "request_to_json", "require_atomic_store", "round_boundary", "round_content",
        "stable_json", "tool_call_boundary", "tool_call_content",
    ],
    "oma_actors.checkpoint": [
        "CHECKPOINT_KEY_PREFIX", "Checkpoint", "CheckpointActor", "CheckpointSnapshot",
        "CheckpointSummary", "CompletedTask", "DEFAULT_CHECKPOINT_KEY", "Discarded", "FoldResult",
        "Folded", "ForkInfo", "HistoryPoint", "InFlightTask", "NotSaved", "RunIdentity", "RunMode",
        "RunWriter", "Save", "SaveOutcome", "Saved", "Unknown", "checkpoint_key", "decode",
        "encode", "fold_tail", "fork_run", "history_keys", "is_checkpoint_key", "list_checkpoints",
        "mark_started_unsafe", "read_journal_tail", "run_history", "state_at", "tail_read_from",
    ],
    "oma_actors.errors": [
        "ActorFailedError", "ActorStoppedError", "AskTimeoutError", "AuthenticationError",
        "CheckpointError", "CheckpointNotFoundError", "ConfigurationError", "CorruptStoreError",
        "DurableApprovalError", "JournalDamagedError", "JournalUnavailableError", "KeyMismatchError",
        "LLMError",
        "LeaseError", "MailboxFullError", "NoHistoryError", "NotAHistoryPointError",
        "ObservedRunRecord", "OmaError", "OverloadedError", "ProviderError", "RateLimitError",
        "RunExistsError", "RunIdMismatchError", "RunIdTakenError", "StoreError", "StoreLimitError", "TaskGraphError",
        "ToolInputError", "UnsupportedSchemaError",
    ],
    "oma_actors.events": [
        "AgentCompleted", "ApprovalPending", "BudgetExceeded", "CheckpointSaveFailed",
        "CheckpointSaved", "CoordinatorFailed", "JournalAppendFailed", "JournalTailDiscarded",
        "LeaseLost", "ProgressEvent", "RunFinished", "RunStarted", "SynthesisFailed",
        "TaskCompleted", "TaskFailed", "TaskRetry", "TaskSkipped", "TaskStarted", "ToolCalled",
        "ToolOutcomeUnknown", "TurnCompleted",
    ],
    "oma_actors.journal": [
        "EVENT_TYPES", "EncryptingJournal", "EventDraft", "FencedJournal", "InMemoryRunJournal",
        "JournalAppendError", "JournalClosedError", "JournalCorruptError", "JournalDuplicateError",
        "JournalEvent", "JournalLineageError", "JournalOptions", "JournalRecorder",
        "JsonlRunJournal", "PostgresRunJournal", "RunJournal", "SqliteRunJournal", "VerifyFinding",
        "VerifyResult", "canonical_content_hash", "open_event", "open_journal", "parse_line",
        "peek_seq", "read_run", "seal_event", "to_json_line", "verify_events", "verify_run",
        "vocabulary",
    ],
    "oma_actors.llm": [
        "AnthropicAdapter", "ChatOptions", "ContentBlock", "ImageBlock", "LLMAdapter",
        "LLMResponse", "Message", "OpenAIAdapter", "ReasoningBlock", "RecordedCall",
        "ScriptedAdapter", "TextBlock", "ToolResultBlock", "ToolSpec", "ToolUseBlock",
        "create_adapter", "text_response", "with_retries",
    ],
    "oma_actors.runs": [
        "Acquisition", "DEFAULT_LEASE_TTL", "Lease", "MemoryStoreRunStore", "RUN_STATUSES",
        "RunLeaseHandle", "RunLedger", "RunRecord", "RunStatus", "RunStore", "RunStoreOptions",
        "RunSummary", "can_transition", "is_run_record_key", "is_terminal", "lease_live",
        "list_runs", "read_run_records", "resolve_run_store", "settle_record",
    ],
    "oma_actors.stores": [
        "AtomicStore", "ConditionalStore", "EncryptingStore", "Expect", "ExpiringStore",
        "FileStore", "InMemoryStore", "KeyRing", "MemoryEntry", "MemoryStore", "Put",
        "RedactingStore", "Remove", "SqliteStore", "StoreTarget", "UnreadableEntry", "Write",
        "is_atomic_store", "is_conditional_store", "is_memory_store", "list_each", "open_store",
        "parse_store_uri", "redact_object", "store_missing", "table_missing",
    ],
    "oma_actors.testing": [
        "CRASH_EXIT", "CrashPoint", "CrashPointError", "CrashingStore", "FailingStore",
        "FakeClock", "ForwardingStore", "JournalHooks", "MinimalStore", "RecordedCall",
        "RecordingStore", "RendezvousStore", "ScriptedAdapter", "StoreCall", "UnknownOutcomeStore",
        "check_atomic_store", "check_conditional_store", "check_expiring_store",
        "check_memory_store", "check_run_journal", "check_run_ownership", "crash_at",
        "text_response",
    ],
    "oma_actors.timeline": [
        "CallMark", "Timeline", "TimelineApproval", "TimelineCall", "TimelineFork", "TimelineLane",
        "TimelineTurn", "build_timeline", "render_timeline_html", "render_timeline_text",
    ],
}  # fmt: skip

PACKAGES = [name for name in PINNED if name not in ("oma_actors.errors", "oma_actors.events")]


@pytest.mark.parametrize("module", sorted(PINNED))
def test_each_surface_exports_exactly_its_pinned_names(module: str) -> None:
    exported = importlib.import_module(module).__all__
    assert len(set(exported)) == len(exported), f"{module}.__all__ repeats a name"
    assert sorted(exported) == PINNED[module]


@pytest.mark.parametrize("module", PACKAGES)
def test_a_package_surface_binds_nothing_public_beyond_its_all(module: str) -> None:
    # Modules (a package's own submodules) are bound as a side effect of importing them.
    package = importlib.import_module(module)
    public = {n for n in vars(package) if not n.startswith("_")}
    modules = {n for n in public if inspect.ismodule(getattr(package, n))}
    assert public - modules == set(package.__all__) - modules


def test_the_top_level_is_the_everyday_surface() -> None:
    assert oma_actors.__all__ == sorted(oma_actors.__all__)
    # About 30: the context strategies are AgentConfig's own arguments (API.md), so they stay.
    assert len(oma_actors.__all__) <= 34
    # A moved name is served by the deprecation path only: it is neither bound nor exported.
    assert not set(oma_actors._MOVED) & (set(oma_actors.__all__) | set(vars(oma_actors)))


@pytest.mark.parametrize("name", sorted(oma_actors._MOVED))
def test_a_moved_name_warns_with_its_home_and_is_the_same_object(name: str) -> None:
    home = oma_actors._MOVED[name]
    assert name in PINNED[home], f"{name} moved to {home}, which does not export it"
    with pytest.warns(DeprecationWarning, match=f"'{home}'") as caught:
        old = getattr(oma_actors, name)
    assert len(caught) == 1
    assert f"from {home} import {name}" in str(caught[0].message)
    assert old is getattr(importlib.import_module(home), name)


def test_the_old_spelling_of_an_import_statement_still_works_and_warns() -> None:
    with pytest.warns(DeprecationWarning, match="oma_actors.stores"):
        from oma_actors import InMemoryStore
    from oma_actors.stores import InMemoryStore as home

    assert InMemoryStore is home


def test_an_unknown_name_is_an_attribute_error_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no_such_name"):
            _ = oma_actors.no_such_name
        assert not hasattr(oma_actors, "Nothing")
