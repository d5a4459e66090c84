"""API.md's names, from the surface of their tier, and their signatures."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import typing

import pytest

import oma_actors
import oma_actors.approvals
import oma_actors.checkpoint
import oma_actors.errors
import oma_actors.events
import oma_actors.journal
import oma_actors.llm
import oma_actors.llm.scripted
import oma_actors.stores
import oma_actors.testing
from oma_actors.domain.results import RunStatusCode

# API.md's names by the surface that exports them (the tiers of issue 25).
API_NAMES: dict[str, set[str]] = {
    "oma_actors": {
        # Teams, agents, tasks; the orchestrator; results; tools; journals (D15); errors
        "AgentConfig", "Team", "Task", "PlanArtifact", "PlanTask", "OpenMultiAgent",
        "CheckpointOptions", "JournalOptions", "TeamRunResult", "RunOutcome", "TaskState",
        "AgentRunResult", "ToolCallRecord", "TokenUsage", "define_tool", "Tool", "ToolContext",
        "ToolResult", "open_journal", "open_store", "OmaError", "ConfigurationError",
        "StoreError", "CheckpointError", "DurableApprovalError", "LeaseError", "TaskGraphError",
    },
    "oma_actors.approvals": {
        "Allow", "Deny", "Suspend", "Gate", "ToolCallRequest", "decide_approval",
        "get_approval_record", "DurableApprovalLedger", "ApprovalRecord", "Reviewer",
        "ApprovalRequest", "ApprovalDecision",
    },
    "oma_actors.llm": {
        "LLMAdapter", "ChatOptions", "ToolSpec", "LLMResponse", "Message", "TextBlock",
        "ToolUseBlock", "ToolResultBlock", "ReasoningBlock", "ScriptedAdapter",
    },
    "oma_actors.testing": {"ScriptedAdapter"},
    "oma_actors.stores": {
        "MemoryStore", "AtomicStore", "MemoryEntry", "InMemoryStore", "FileStore",
        "RedactingStore", "SqliteStore", "open_store", "KeyRing", "EncryptingStore",
    },
    "oma_actors.journal": {
        "RunJournal", "InMemoryRunJournal", "JsonlRunJournal", "JournalOptions", "JournalEvent",
        "verify_run", "VerifyResult", "VerifyFinding", "open_journal", "EncryptingJournal",
    },
    "oma_actors.checkpoint": {
        "CHECKPOINT_KEY_PREFIX", "DEFAULT_CHECKPOINT_KEY", "checkpoint_key", "is_checkpoint_key",
        "Checkpoint", "CheckpointSnapshot", "list_checkpoints", "CheckpointSummary",
        "run_history", "state_at", "fork_run", "HistoryPoint", "ForkInfo",
    },
    "oma_actors.runs": {
        "RunRecord", "Lease", "RunStore", "MemoryStoreRunStore", "RunLedger", "RunLeaseHandle",
        "RunStoreOptions",
    },
    "oma_actors.events": {
        "ProgressEvent", "TaskStarted", "TaskCompleted", "TaskFailed", "TaskSkipped",
        "CheckpointSaved", "CheckpointSaveFailed", "SynthesisFailed", "ApprovalPending",
        "JournalTailDiscarded", "JournalAppendFailed", "ToolOutcomeUnknown", "LeaseLost",
    },
    "oma_actors.errors": {
        "OmaError", "ConfigurationError", "StoreError", "CorruptStoreError", "CheckpointError",
        "UnsupportedSchemaError", "RunIdMismatchError", "DurableApprovalError", "LeaseError",
        "TaskGraphError", "JournalUnavailableError", "JournalDamagedError",
        "CheckpointNotFoundError", "RunExistsError",
    },
}  # fmt: skip


@pytest.mark.parametrize(
    ("module", "name"), sorted((m, n) for m, names in API_NAMES.items() for n in names)
)
def test_api_md_names_import_from_their_surface(module: str, name: str) -> None:
    surface = importlib.import_module(module)
    assert name in surface.__all__
    assert getattr(surface, name) is not None


def test_run_status_is_the_deprecated_name_of_run_outcome() -> None:
    # Renamed so no two types share a name (oma_actors.runs.RunStatus is the record's, D16).
    with pytest.warns(DeprecationWarning, match="RunOutcome"):
        assert oma_actors.RunStatus is oma_actors.RunOutcome
    from oma_actors.runs import RunStatus

    assert RunStatus is not oma_actors.RunOutcome


# Seams added after API.md was written: keyword-only with a default, so no caller breaks.
INJECTED = {"clock"}


def params(obj: object) -> list[tuple[str, str]]:
    """API.md's parameters of ``obj``: its signature less the injected seams."""
    found = inspect.signature(obj).parameters.values()  # type: ignore[arg-type]
    for p in found:
        if p.name in INJECTED:
            assert p.kind is p.KEYWORD_ONLY, (obj, p)
            assert p.default is not p.empty, (obj, p)
    return [(p.name, p.kind.name) for p in found if p.name not in INJECTED]


def test_signatures_match_api_md() -> None:
    kw, pos = "KEYWORD_ONLY", "POSITIONAL_OR_KEYWORD"
    assert params(oma_actors.AgentConfig)[:1] == [("name", pos)]
    assert {n for n, k in params(oma_actors.AgentConfig) if k == kw} >= {
        "model", "provider", "system_prompt", "tools", "max_turns", "max_token_budget", "adapter",
        "base_url", "api_key",
    }  # fmt: skip
    assert params(oma_actors.Team)[:2] == [("name", pos), ("agents", pos)]
    assert ("shared_memory_store", kw) in params(oma_actors.Team)
    assert params(oma_actors.Task)[:2] == [("title", pos), ("description", pos)]
    assert {n for n, k in params(oma_actors.Task) if k == kw} >= {
        "id", "assignee", "depends_on", "max_retries", "metadata"
    }  # fmt: skip
    assert params(oma_actors.PlanArtifact)[0] == ("tasks", pos)
    assert ("goal", kw) in params(oma_actors.PlanArtifact)
    assert params(oma_actors.PlanTask)[:3] == [("id", pos), ("title", pos), ("description", pos)]
    assert params(oma_actors.OpenMultiAgent) == [
        ("checkpoint", kw), ("on_progress", kw), ("max_concurrency", kw),
        ("on_task_dispatch", kw), ("on_plan_ready", kw), ("on_tool_call", kw),
        ("require_consequential_confirmation", kw), ("max_token_budget", kw),
        ("max_cost_budget", kw), ("estimate_cost", kw), ("journal", kw), ("run_store", kw),
    ]  # fmt: skip
    orch = oma_actors.OpenMultiAgent
    assert params(orch.run_agent)[1:] == [("agent", pos), ("prompt", pos), ("journal", kw)]
    # API.md "Checkpoints": the fresh-run methods take on_existing (decision D12).
    assert params(orch.run_tasks)[1:] == [
        ("team", pos), ("tasks", pos), ("checkpoint", kw), ("on_existing", kw), ("journal", kw), ("run_store", kw)
    ]  # fmt: skip
    assert params(orch.run_team)[1:] == [
        ("team", pos), ("goal", pos), ("checkpoint", kw), ("coordinator", kw), ("plan_only", kw),
        ("on_existing", kw), ("journal", kw), ("run_store", kw),
    ]  # fmt: skip
    assert params(orch.run_from_plan)[1:] == [
        ("team", pos), ("plan", pos), ("checkpoint", kw), ("on_existing", kw), ("journal", kw), ("run_store", kw)
    ]  # fmt: skip
    assert params(orch.restore)[1:] == [
        ("team", pos), ("tasks_or_plan", pos), ("checkpoint", kw), ("coordinator", kw),
        ("journal", kw), ("run_store", kw), ("on_damaged_journal", kw),
    ]  # fmt: skip
    assert inspect.signature(orch.restore).parameters["on_damaged_journal"].default == "refuse"
    for method in (orch.run_agent, orch.run_tasks, orch.run_team, orch.run_from_plan, orch.restore):
        assert inspect.iscoroutinefunction(method)
    assert params(oma_actors.CheckpointOptions) == [
        ("enabled", kw), ("store", kw), ("run_id", kw), ("key", kw)
    ]  # fmt: skip
    assert params(oma_actors.define_tool) == [
        ("name", kw), ("description", kw), ("input_model", kw), ("execute", kw), ("effect", kw),
        ("consequential", kw), ("reconcile", kw),
    ]  # fmt: skip
    # API.md: the defaults that keep OMA's behaviour when a caller sets nothing.
    assert inspect.signature(oma_actors.define_tool).parameters["consequential"].default is False
    assert inspect.signature(oma_actors.AgentConfig).parameters["max_token_budget"].default is None
    confirm = inspect.signature(oma_actors.OpenMultiAgent).parameters
    assert confirm["require_consequential_confirmation"].default is False
    assert "budget_exhausted" in typing.get_args(RunStatusCode)
    assert params(oma_actors.ToolResult)[0] == ("data", pos)
    assert ("is_error", kw) in params(oma_actors.ToolResult)
    assert params(oma_actors.checkpoint.Checkpoint) == [("store", pos), ("run_id", kw), ("key", kw)]
    assert params(oma_actors.stores.FileStore) == [("path", pos)]
    assert params(oma_actors.stores.RedactingStore.__new__)[1:] == [
        ("inner", pos),
        ("patterns", kw),
    ]
    assert params(oma_actors.stores.KeyRing) == [("keys", pos), ("active", kw)]
    assert params(oma_actors.stores.EncryptingStore) == [("inner", pos), ("keyring", pos)]
    assert params(oma_actors.journal.EncryptingJournal) == [("inner", pos), ("keyring", pos)]
    assert params(oma_actors.llm.LLMResponse)[0] == ("content", pos)
    assert params(oma_actors.llm.ToolResultBlock) == [
        ("tool_use_id", pos), ("content", pos), ("is_error", pos)
    ]  # fmt: skip
    assert oma_actors.TokenUsage(1, 2).output_tokens == 2
    assert params(oma_actors.approvals.decide_approval) == [
        ("store", pos), ("request_id", kw), ("request_hash", kw), ("decision", kw), ("reviewer", kw),
        ("edited_input", kw),
    ]  # fmt: skip
    # API.md "Journals on every store; history and fork" (D17).
    assert params(oma_actors.checkpoint.run_history) == [
        ("store", pos),
        ("run_id", pos),
        ("journal", kw),
    ]
    assert params(oma_actors.checkpoint.state_at) == [
        ("store", pos), ("run_id", pos), ("seq", pos), ("journal", kw)
    ]  # fmt: skip
    assert params(oma_actors.checkpoint.fork_run) == [
        ("store", pos), ("run_id", pos), ("at_seq", kw), ("new_run_id", kw), ("journal", kw)
    ]  # fmt: skip
    assert params(oma_actors.approvals.get_approval_record) == [("store", pos), ("request_id", pos)]
    assert params(oma_actors.approvals.Reviewer) == [("id", pos), ("display_name", pos)]
    assert params(oma_actors.open_journal) == [("uri", pos)]


def test_every_event_is_a_frozen_progress_event_with_a_run_id() -> None:
    events = [getattr(oma_actors.events, name) for name in oma_actors.events.__all__]
    assert len(events) >= 13
    for event in events:
        assert issubclass(event, oma_actors.events.ProgressEvent)
        assert "run_id" in inspect.signature(event).parameters
        assert event.__dataclass_params__.frozen


def test_error_tree() -> None:
    errors = oma_actors.errors
    for name in ("ConfigurationError", "StoreError", "CheckpointError", "DurableApprovalError",
                 "LeaseError", "TaskGraphError"):  # fmt: skip
        assert issubclass(getattr(errors, name), errors.OmaError)
    assert issubclass(errors.CorruptStoreError, errors.StoreError)
    assert issubclass(errors.UnsupportedSchemaError, errors.CheckpointError)
    assert issubclass(errors.RunIdMismatchError, errors.CheckpointError)


def test_import_does_not_load_sdks_grpc_or_rich() -> None:
    code = (
        "import sys, oma_actors; "
        "print(sorted(m for m in ('anthropic','openai','grpc','rich','uvloop','opentelemetry','asyncpg','redis') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_scripted_model_is_public_in_the_adapters_surface() -> None:
    # It lives in oma_actors.llm.scripted so that production code (the CLI's demo, the sidecar's
    # scripted provider) need not import the test kit; the test kit still re-exports it.
    for name in ("RecordedCall", "ScriptedAdapter", "text_response"):
        assert name in oma_actors.llm.__all__
        assert getattr(oma_actors.llm, name) is getattr(oma_actors.llm.scripted, name)
        assert getattr(oma_actors.testing, name) is getattr(oma_actors.llm.scripted, name)
