"""Running one agent on one task: attempts with retries, and the ``RunnerActor``.

A task gets ``max_retries + 1`` attempts; a failed, retryable attempt waits a jittered,
exponentially growing delay capped at 30 s before the next one, and terminal failures are not
retried (spec TQ-10).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeAlias, assert_never

from oma_actors.actors import Actor, ActorRef
from oma_actors.agents.context_step import ContextStep, summary_options
from oma_actors.agents.facts import Facts, Retrying
from oma_actors.agents.loop import BoundaryHook, LoopContext, RequestHook, drive, prompted
from oma_actors.agents.tool_calls import CallPolicy
from oma_actors.agents.turn import initial_state, last_assistant_text
from oma_actors.domain.messages import ChatOptions, TokenUsage, ToolUseBlock
from oma_actors.domain.results import AgentRunResult, RunOutcome
from oma_actors.domain.tasks import DEFAULT_RETRY_BACKOFF, DEFAULT_RETRY_DELAY_MS
from oma_actors.errors import ActorStoppedError, DurableApprovalError
from oma_actors.events import (
    ProgressEvent,
    TaskRetry,
    ToolCalled,
    ToolOutcomeUnknown,
    TurnCompleted,
)
from oma_actors.llm.factory import create_adapter

if TYPE_CHECKING:
    from oma_actors.agents.config import AgentConfig
    from oma_actors.domain.inflight import PendingCall, RunnerState
    from oma_actors.domain.tasks import TaskState
    from oma_actors.llm.base import LLMAdapter

logger = logging.getLogger(__name__)

Emit = Callable[[ProgressEvent], None]
FactHook = Callable[[Facts], None]
"""Takes the facts a runner reports outside any boundary (a retry), as they happen (D14)."""
MAX_RETRY_DELAY_MS = 30_000
AGENT_SUSPENSION = "Durable approval required before execution can continue."
"""The status message of an agent result a tool call's approval suspended (OMA's, agent.ts)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedAgent:
    """An agent with its adapter built once per run."""

    config: AgentConfig
    adapter: LLMAdapter

    @property
    def name(self) -> str:
        """The agent's name."""
        return self.config.name


def resolve_agent(config: AgentConfig) -> ResolvedAgent:
    """Build the adapter of ``config`` (an explicit adapter wins over provider and model)."""
    adapter = config.adapter or create_adapter(
        provider=config.provider,
        model=config.model,
        base_url=config.base_url,
        api_key=config.api_key,
    )
    return ResolvedAgent(config=config, adapter=adapter)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskOutcome:
    """The final result of a task after its attempts.

    Attributes:
        suspended: the task stopped on a durable tool approval (spec AP-27); it stays in
            progress and is never retried.
        fatal: an error that must end the whole run (an approval integrity problem).
    """

    task_id: str | None
    agent: str
    result: AgentRunResult
    attempts: int
    suspended: bool = False
    fatal: Exception | None = None


def context_step(
    config: AgentConfig, adapter: LLMAdapter, options: ChatOptions
) -> ContextStep | None:
    """The agent's context strategy with what its summary calls use, or ``None`` without one.

    A ``Summarize`` with a ``summarizer`` calls that agent's model (its adapter is built here,
    once per runner); without one, the agent's own model and system prompt, without tools.
    """
    strategy = config.context_strategy
    if strategy is None:
        return None
    summarizer = getattr(strategy, "summarizer", None)
    if summarizer is not None:
        resolved = resolve_agent(summarizer)
        own = ChatOptions(model=summarizer.model, system_prompt=summarizer.system_prompt)
        return ContextStep(strategy=strategy, adapter=resolved.adapter, options=own)
    return ContextStep(strategy=strategy, adapter=adapter, options=summary_options(options))


def result_of(state: RunnerState, usage: TokenUsage) -> AgentRunResult:
    """The caller-facing result of a completed runner state, with ``usage`` summed over attempts."""
    return AgentRunResult(
        success=state.success,
        output=state.final_output,
        messages=list(state.messages),
        token_usage=usage,
        tool_calls=list(state.tool_calls),
        turns=state.turns,
    )


def budget_status(config: AgentConfig, usage: TokenUsage) -> RunOutcome:
    """OMA's status of a runner stopped by its token budget, with OMA's message.

    ``usage`` is the runner's own count, restored usage included; a state restored with the
    flag already set but no budget configured here reports a budget of 0, as OMA does.
    """
    used = usage.input_tokens + usage.output_tokens
    budget = config.max_token_budget or 0
    message = f'Agent "{config.name}" exceeded token budget: {used} tokens used (budget: {budget})'
    return RunOutcome("budget_exhausted", message)


def failure_text(error: BaseException) -> str:
    """The output of a task an unexpected ``error`` failed: its type and message, and for an
    exception group (a turn's tool calls run in a task group) those of each error in it, since
    the group's own message ("unhandled errors in a TaskGroup") names no cause."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(failure_text(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}"


def retry_delay_ms(task: TaskState, attempt: int) -> int:
    """Delay before attempt ``attempt + 1``: uniform in [nominal/2, nominal] (spec TQ-10).

    As OMA's ``executeWithRetry``: a negative base delay counts as 0 and a backoff below 1 as
    1 (a task's retry fields come from a coordinator's plan or an OMA snapshot as they are, and
    a delay must neither be negative nor shrink from one retry to the next).
    """
    delay = DEFAULT_RETRY_DELAY_MS if task.retry_delay_ms is None else task.retry_delay_ms
    factor = DEFAULT_RETRY_BACKOFF if task.retry_backoff is None else task.retry_backoff
    base, backoff = max(0, delay), max(1.0, factor)
    nominal = min(base * backoff ** (attempt - 1), MAX_RETRY_DELAY_MS)
    return round(random.uniform(nominal / 2, nominal))


async def run_task(
    agent: ResolvedAgent,
    task: TaskState | None,
    prompt: str,
    *,
    run_id: str | None,
    emit: Emit,
    on_boundary: BoundaryHook | None = None,
    resume: RunnerState | None = None,
    policy: CallPolicy | None = None,
    on_request: RequestHook | None = None,
    on_facts: FactHook | None = None,
) -> TaskOutcome:
    """Run ``prompt`` on ``agent``, retrying an unsuccessful, retryable attempt per the task.

    With ``task=None`` (``run_agent``) there is exactly one attempt. ``resume`` continues the
    first attempt from a restored conversation instead of the prompt (spec RN-03); retries
    always start fresh. ``on_request`` sees every model request just before it is sent (the
    run's journal records it, spec 17.2); ``on_facts`` takes a retry's ``Retrying`` as the
    runner decides it.
    """
    config = agent.config
    options = ChatOptions(
        model=config.model,
        system_prompt=config.system_prompt,
        tools=[tool.spec for tool in config.tools],
    )
    tools = {tool.name: tool for tool in config.tools}
    context = context_step(config, agent.adapter, options)
    task_id = task.id if task is not None else None
    max_attempts = (task.max_retries if task is not None else 0) + 1
    usage = TokenUsage()

    def on_tool(item: PendingCall, replayed: bool) -> None:
        commit = item.commit
        emit(
            ToolCalled(
                run_id=run_id,
                task_id=task_id,
                agent=config.name,
                tool_name=item.call.name,
                tool_call_id=item.call.id,
                is_error=commit.block.is_error if commit is not None else False,
                replayed=replayed,
            )
        )

    def on_turn(state: RunnerState, usage: TokenUsage, duration_ms: float) -> None:
        last = state.conversation[-1] if state.conversation else None
        calls = sum(isinstance(b, ToolUseBlock) for b in last.content) if last is not None else 0
        emit(
            TurnCompleted(
                run_id=run_id, task_id=task_id, agent=config.name, turn=state.turns,
                input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                duration_ms=duration_ms, tool_calls=calls,
            )
        )  # fmt: skip

    def on_unknown(tool_call_id: str) -> None:
        emit(ToolOutcomeUnknown(run_id=run_id, task_id=task_id or "", tool_call_id=tool_call_id))

    attempt = 1
    while True:
        ctx = LoopContext(
            agent_name=config.name,
            adapter=agent.adapter,
            options=options,
            tools=tools,
            max_turns=config.max_turns,
            max_token_budget=config.max_token_budget,
            run_id=run_id,
            task_id=task_id,
            attempt=attempt,
            on_boundary=on_boundary,
            on_tool=on_tool,
            on_unknown=on_unknown,
            on_turn=on_turn,
            on_request=on_request,
            context=context,
            policy=policy or CallPolicy(),
        )
        start = resume if resume is not None and attempt == 1 else initial_state(prompt)
        if attempt > 1 and on_boundary is not None:
            # Spec TQ-10: the failed attempt's in-flight entry is dropped and saved first.
            await on_boundary(start, "attempt_reset", ())
        state = await drive(start, ctx, () if start is resume else prompted(start))
        usage = usage + state.token_usage
        if state.awaiting_approval:
            # OMA's suspended result (agent.ts 499-509) says so in its status (spec AP-27); its
            # output is the runner's, the text of the turn that asked for the call (runner.ts
            # 1206-1207, 1355-1361), often empty.
            pending = AgentRunResult(
                success=False,
                output=last_assistant_text(state),
                messages=list(state.messages),
                token_usage=usage,
                tool_calls=list(state.tool_calls),
                turns=state.turns,
                status=RunOutcome("suspended", AGENT_SUSPENSION),
            )
            return TaskOutcome(
                task_id=task_id, agent=config.name, result=pending, attempts=attempt, suspended=True
            )
        result = result_of(state, usage)
        if state.budget_exceeded:
            # Spec TQ-10: a spent budget is a terminal failure, never retried.
            result = replace(result, success=False, status=budget_status(config, state.token_usage))
            return TaskOutcome(task_id=task_id, agent=config.name, result=result, attempts=attempt)
        if state.success or attempt >= max_attempts or not state.retryable or task is None:
            return TaskOutcome(task_id=task_id, agent=config.name, result=result, attempts=attempt)
        delay = retry_delay_ms(task, attempt)
        if on_facts is not None:
            on_facts((Retrying(attempt=attempt),))
        emit(
            TaskRetry(
                run_id=run_id,
                task_id=task.id,
                attempt=attempt,
                max_attempts=max_attempts,
                error=state.final_output,
                next_delay_ms=delay,
            )
        )
        await asyncio.sleep(delay / 1000)
        attempt += 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecuteTask:
    """Work one task (or, with ``task=None``, one ``run_agent`` prompt).

    When ``reply_to`` is set the outcome is told to it as ``RunnerFinished``; the outcome is also
    the reply of an ``ask``.
    """

    task: TaskState | None
    prompt: str
    resume: RunnerState | None = None
    reply_to: ActorRef[RunnerFinished] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerFinished:
    """A runner's outcome, sent to whoever assigned the task."""

    outcome: TaskOutcome


RunnerMessage: TypeAlias = ExecuteTask
"""Everything a ``RunnerActor`` accepts (a closed union, of one message today)."""


class RunnerActor(Actor[RunnerMessage, TaskOutcome]):
    """One agent working one task: owns the conversation, its turns, usage and pending calls."""

    def __init__(
        self,
        agent: ResolvedAgent,
        *,
        run_id: str | None,
        emit: Emit,
        on_boundary: BoundaryHook | None = None,
        policy: CallPolicy | None = None,
        on_request: RequestHook | None = None,
        on_facts: FactHook | None = None,
    ) -> None:
        self._agent = agent
        self._run_id = run_id
        self._emit = emit
        self._on_boundary = on_boundary
        self._policy = policy
        self._on_request = on_request
        self._on_facts = on_facts

    async def receive(self, message: RunnerMessage) -> TaskOutcome:
        """Run the task; the outcome is the ask's reply and is told to ``reply_to`` if set."""
        match message:
            case ExecuteTask():
                return await self._execute(message)
            case _:
                assert_never(message)

    async def _execute(self, message: ExecuteTask) -> TaskOutcome:
        """Run the task and report its outcome; an unexpected error fails only this task."""
        try:
            outcome = await run_task(
                self._agent,
                message.task,
                message.prompt,
                run_id=self._run_id,
                emit=self._emit,
                on_boundary=self._on_boundary,
                resume=message.resume,
                policy=self._policy,
                on_request=self._on_request,
                on_facts=self._on_facts,
            )
        except Exception as exc:
            # Whoever waits for this task must hear back, or the run would wait forever.
            fatal = exc if isinstance(exc, DurableApprovalError) else None
            failure = AgentRunResult(success=False, output=failure_text(exc))
            outcome = TaskOutcome(
                task_id=message.task.id if message.task else None,
                agent=self._agent.name,
                result=failure,
                attempts=1,
                fatal=fatal,
            )
            if message.reply_to is None:
                raise
        if message.reply_to is not None:
            try:
                message.reply_to.tell(RunnerFinished(outcome=outcome))
            except ActorStoppedError:
                # The run stopped meanwhile (it was cancelled, or its lease was lost): nobody
                # waits for this task any more, and a plain abort must not log a failure.
                logger.debug("task %s finished after its run stopped", outcome.task_id)
        return outcome


__all__ = [
    "ExecuteTask",
    "ResolvedAgent",
    "RunnerActor",
    "RunnerFinished",
    "RunnerMessage",
    "TaskOutcome",
    "budget_status",
    "resolve_agent",
    "result_of",
    "run_task",
]
