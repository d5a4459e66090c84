"""The run-level budget: OMA's ``maxTokenBudget`` and ``maxCostBudget`` with ``estimateCost``.

What a run has spent is what its task results say (a restored run's completed results included,
so the count continues across restores, where OMA's restarts at zero, LM-16) plus the
coordinator's calls, as OMA counts them: the decomposition is charged first (``charged``; a
decomposition alone over the budget ends the run before any task), and the synthesis after the
tasks (``after_synthesis``: over the budget, the synthesis is reported failed and the run ends
``budget_exhausted``). Each finished task is charged to the budget; once the spend is above it,
the run stops dispatching, drains what runs, skips the rest (``Skipped: token budget
exceeded.``) and ends ``budget_exhausted``, with no synthesis. A task suspended on an approval
is charged too, as OMA charges it, and so is a task that finishes while the run suspends, but the
run still suspends (nothing is skipped; AP-27); a suspended task's resumed result, which holds the
tokens before the suspension, replaces its charge after a restore. The
charge is also checked as a run starts, so a restore already over the budget (its own option,
not the saved run's) dispatches nothing and ends as the fresh run did. A task whose cost the
estimator cannot give (it raises, or returns no finite number >= 0: ``CostEstimateError``) fails
with that message, is never charged, and the run goes on, as in OMA; elsewhere (the
coordinator's calls, a restore's first check) the error ends the run. An agent's own
``max_token_budget`` is separate.

``BudgetExceeded`` names the charge that passed the budget, with OMA's error message (budget.ts
184-211, errors.ts 27-56): a task's assignee and id when a task's result passed it, the
coordinator (no task) when its decomposition or synthesis did (orchestrator.ts 1565,
coordinator.ts 625).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from oma_actors.domain.messages import TokenUsage
from oma_actors.domain.results import AgentRunResult, RunOutcome
from oma_actors.errors import ConfigurationError
from oma_actors.events import BudgetExceeded
from oma_actors.journal.jsjson import js_number
from oma_actors.orchestration.coordinator import COORDINATOR_NAME

_N = TypeVar("_N", int, float)

CostEstimator = Callable[[TokenUsage, str], float]
"""``estimate_cost(usage, model)``: the cost of ``usage`` on ``model``, in the caller's unit."""


class CostEstimateError(Exception):
    """``estimate_cost`` raised, or returned a cost that is not a finite number >= 0 (OMA's
    ``estimateIncrementalCost``, budget.ts 104-116). The message is the estimator's own, or
    names the cost it returned; a task being charged fails with it (task-execution.ts
    1392-1415)."""


TOKEN_SKIP_REASON = "Skipped: token budget exceeded."
COST_SKIP_REASON = "Skipped: cost budget exceeded."


@dataclass(frozen=True, slots=True)
class Charge:
    """One charge to the run's budget (a call of OMA's ``recordRunUsage``).

    Attributes:
        usage: the tokens spent.
        model: the model ``estimate_cost`` prices them on.
        agent: who spent them: a task's assignee, or the coordinator (its decomposition and
            synthesis).
        task_id: the task, for a task's charge.
    """

    usage: TokenUsage
    model: str
    agent: str = COORDINATOR_NAME
    task_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunBudget:
    """A run's budget; ``None`` limits are not enforced.

    Attributes:
        max_tokens: input + output tokens the whole run may spend.
        max_cost: what the run may spend as ``estimate_cost`` prices it.
        estimate_cost: prices each charge; required with ``max_cost``.
        spent: the coordinator's charges (its decomposition, before the tasks); ``check``
            counts them first, then the charges it is given.
    """

    max_tokens: int | None = None
    max_cost: float | None = None
    estimate_cost: CostEstimator | None = None
    spent: tuple[Charge, ...] = ()

    def charged(self, usage: TokenUsage, model: str) -> RunBudget:
        """This budget with ``usage`` on ``model`` already spent by the coordinator."""
        return replace(self, spent=(*self.spent, Charge(usage, model)))

    @classmethod
    def of(
        cls,
        max_tokens: int | None,
        max_cost: float | None,
        estimate_cost: CostEstimator | None,
    ) -> RunBudget | None:
        """The budget of ``OpenMultiAgent(...)``'s arguments, or ``None`` when none is set.

        Raises:
            ConfigurationError: a limit is not positive (or not finite), ``max_cost`` comes
                without ``estimate_cost``, or ``estimate_cost`` is not callable.
        """
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0
        ):
            raise ConfigurationError(f"max_token_budget must be a positive int, not {max_tokens!r}")
        if max_cost is not None and (
            isinstance(max_cost, bool)
            or not isinstance(max_cost, int | float)
            or not math.isfinite(max_cost)
            or max_cost <= 0
        ):
            raise ConfigurationError(f"max_cost_budget must be a positive number, not {max_cost!r}")
        if estimate_cost is not None and not callable(estimate_cost):
            raise ConfigurationError("estimate_cost must be callable (usage, model) -> cost")
        if max_cost is not None and estimate_cost is None:
            raise ConfigurationError("max_cost_budget needs estimate_cost=(usage, model) -> cost")
        if max_tokens is None and max_cost is None:
            return None
        return cls(max_tokens=max_tokens, max_cost=max_cost, estimate_cost=estimate_cost)

    def check(self, charges: Iterable[Charge], *, run_id: str | None) -> BudgetExceeded | None:
        """The event to report when ``charges`` pass the budget, else ``None``.

        The event names the charge at which the spend (``spent``, then ``charges``, in the
        order charged) passed the budget. Checked after each charge, that is the charge just
        made, the one OMA's ``recordRunUsage`` names; on a restore's first check, the restored
        charge that took the run over.

        Raises:
            CostEstimateError: ``estimate_cost`` raised, or priced a charge at a cost that is no
                finite number >= 0.
        """
        spent = [*self.spent, *charges]
        if self.max_tokens is not None:
            tokens, over = _passed(spent, self.max_tokens, 0, _tokens)
            if over is not None:
                message = (
                    f'Agent "{over.agent}" exceeded token budget: {tokens} tokens used'
                    f" (budget: {self.max_tokens})"
                )
                return _exceeded("tokens", tokens, self.max_tokens, message, over, run_id)
        if self.max_cost is not None and self.estimate_cost is not None:
            estimate = self.estimate_cost
            # Added one charge at a time from zero, as OMA's running total is (not ``sum``,
            # which compensates on Python 3.12+), so ``used`` is OMA's number to the last bit.
            cost, over = _passed(
                spent,
                self.max_cost,
                0.0,
                lambda charge: _priced(estimate, charge.usage, charge.model),
            )
            if over is not None:
                message = (
                    f'Agent "{over.agent}" exceeded cost budget: {js_number(cost)} estimated cost'
                    f" used (budget: {js_number(self.max_cost)})"
                )
                return _exceeded("cost", cost, self.max_cost, message, over, run_id)
        return None


def _tokens(charge: Charge) -> int:
    return charge.usage.input_tokens + charge.usage.output_tokens


def _passed(
    spent: Iterable[Charge], limit: float, total: _N, amount: Callable[[Charge], _N]
) -> tuple[_N, Charge | None]:
    """The running total of ``spent`` from ``total``, and the charge at which it first passed
    ``limit`` (``None``: it never did)."""
    over: Charge | None = None
    for charge in spent:
        total += amount(charge)
        if over is None and total > limit:
            over = charge
    return total, over


def _exceeded(
    kind: str, used: float, budget: float, message: str, over: Charge, run_id: str | None
) -> BudgetExceeded:
    return BudgetExceeded(
        run_id=run_id, kind=kind, used=used, budget=budget, message=message, agent=over.agent,
        task_id=over.task_id,
    )  # fmt: skip


def _priced(estimate: CostEstimator, usage: TokenUsage, model: str) -> float:
    try:
        cost = estimate(usage, model)
    except Exception as exc:  # the caller's function: any error it raises
        raise CostEstimateError(str(exc) or type(exc).__name__) from exc
    # ``bool`` is an int, and NaN passes no comparison: each would slip by the budget silently.
    if type(cost) not in (int, float) or not math.isfinite(cost) or cost < 0:
        raise CostEstimateError(
            f"Cost estimator returned invalid cost for model {model!r}: {cost!r}"
        )
    return float(cost)


def task_charges(
    results: Mapping[str, AgentRunResult],
    assignee_of: Callable[[str], str | None],
    models: Mapping[str, str],
) -> list[Charge]:
    """The charge of every task result: its assignee's, priced on the assignee's model."""
    charges = []
    for task_id, result in results.items():
        assignee = assignee_of(task_id) or ""
        charges.append(Charge(result.token_usage, models.get(assignee, ""), assignee, task_id))
    return charges


def after_synthesis(
    budget: RunBudget | None,
    charges: Iterable[Charge],
    synthesis: AgentRunResult,
    model: str,
    *,
    run_id: str | None,
) -> BudgetExceeded | None:
    """The event to report when the synthesis took the run over its budget (OMA charges it
    last, to the coordinator, coordinator.ts 608-625: the event names the coordinator)."""
    if budget is None:
        return None
    # Charged after the tasks, as OMA adds it: the event names it, and the cost adds up as OMA's.
    return budget.check([*charges, Charge(synthesis.token_usage, model)], run_id=run_id)


def exhausted(event: BudgetExceeded) -> tuple[str, RunOutcome]:
    """The skip reason and the run status of a run stopped by ``event``."""
    reason = TOKEN_SKIP_REASON if event.kind == "tokens" else COST_SKIP_REASON
    return reason, RunOutcome("budget_exhausted", event.message)
