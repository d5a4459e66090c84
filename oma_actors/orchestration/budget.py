"""The run-level budget: OMA's ``maxTokenBudget`` and ``maxCostBudget`` with ``estimateCost``.

What a run has spent is what its task results say (a restored run's completed results included,
so the count continues across restores, where OMA's restarts at zero, LM-16) plus the
coordinator's calls, as OMA counts them: the decomposition is charged first (``charged``; a
decomposition alone over the budget ends the run before any task), and the synthesis after the
tasks (``after_synthesis``: over the budget, the synthesis is reported failed and the run ends
``budget_exhausted``). Each finished task is charged to the budget; once the spend is above it,
the run stops dispatching, drains what runs, skips the rest (``Skipped: token budget
exceeded.``) and ends ``budget_exhausted``, with no synthesis. A task suspended on an approval
is charged too, as OMA charges it, but the run still suspends (nothing is skipped); its resumed
result, which holds the tokens before the suspension, replaces that charge after a restore. The
charge is also checked as a run starts, so a restore already over the budget (its own option,
not the saved run's) dispatches nothing and ends as the fresh run did. A task whose cost the
estimator cannot give (it raises, or returns no finite number >= 0: ``CostEstimateError``) fails
with that message, is never charged, and the run goes on, as in OMA; elsewhere (the
coordinator's calls, a restore's first check) the error ends the run. An agent's own
``max_token_budget`` is separate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from oma_actors.domain.messages import TokenUsage
from oma_actors.domain.results import AgentRunResult, RunOutcome
from oma_actors.errors import ConfigurationError
from oma_actors.events import BudgetExceeded

CostEstimator = Callable[[TokenUsage, str], float]
"""``estimate_cost(usage, model)``: the cost of ``usage`` on ``model``, in the caller's unit."""


class CostEstimateError(Exception):
    """``estimate_cost`` raised, or returned a cost that is not a finite number >= 0 (OMA's
    ``estimateIncrementalCost``, budget.ts 104-116). The message is the estimator's own, or
    names the cost it returned; a task being charged fails with it (task-execution.ts
    1392-1415)."""


TOKEN_SKIP_REASON = "Skipped: token budget exceeded."
COST_SKIP_REASON = "Skipped: cost budget exceeded."


@dataclass(frozen=True, slots=True, kw_only=True)
class RunBudget:
    """A run's budget; ``None`` limits are not enforced.

    Attributes:
        max_tokens: input + output tokens the whole run may spend.
        max_cost: what the run may spend as ``estimate_cost`` prices it.
        estimate_cost: prices each charge; required with ``max_cost``.
        spent: charges made before the tasks (the coordinator's decomposition), as
            ``(usage, model)``; ``check`` counts them with the charges it is given.
    """

    max_tokens: int | None = None
    max_cost: float | None = None
    estimate_cost: CostEstimator | None = None
    spent: tuple[tuple[TokenUsage, str], ...] = ()

    def charged(self, usage: TokenUsage, model: str) -> RunBudget:
        """This budget with ``usage`` on ``model`` already spent (the coordinator's calls)."""
        return replace(self, spent=(*self.spent, (usage, model)))

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

    def check(
        self, charges: Iterable[tuple[TokenUsage, str]], *, run_id: str | None
    ) -> BudgetExceeded | None:
        """The event to report when ``charges`` (usage, model) pass the budget, else ``None``.

        Raises:
            CostEstimateError: ``estimate_cost`` raised, or priced a charge at a cost that is no
                finite number >= 0.
        """
        spent = [*self.spent, *charges]
        if self.max_tokens is not None:
            tokens = sum(usage.input_tokens + usage.output_tokens for usage, _ in spent)
            if tokens > self.max_tokens:
                message = (
                    f"Run exceeded token budget: {tokens} tokens used (budget: {self.max_tokens})"
                )
                return BudgetExceeded(
                    run_id=run_id, kind="tokens", used=tokens, budget=self.max_tokens,
                    message=message,
                )  # fmt: skip
        if self.max_cost is not None and self.estimate_cost is not None:
            cost = sum(_priced(self.estimate_cost, usage, model) for usage, model in spent)
            if cost > self.max_cost:
                message = f"Run exceeded cost budget: {cost:g} used (budget: {self.max_cost:g})"
                return BudgetExceeded(
                    run_id=run_id, kind="cost", used=cost, budget=self.max_cost, message=message
                )
        return None


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
) -> list[tuple[TokenUsage, str]]:
    """The ``(usage, model)`` charge of every task result, priced on its assignee's model."""
    return [
        (result.token_usage, models.get(assignee_of(task_id) or "", ""))
        for task_id, result in results.items()
    ]


def after_synthesis(
    budget: RunBudget | None,
    charges: Iterable[tuple[TokenUsage, str]],
    synthesis: AgentRunResult,
    model: str,
    *,
    run_id: str | None,
) -> BudgetExceeded | None:
    """The event to report when the synthesis took the run over its budget (OMA charges it)."""
    if budget is None:
        return None
    return budget.charged(synthesis.token_usage, model).check(charges, run_id=run_id)


def exhausted(event: BudgetExceeded) -> tuple[str, RunOutcome]:
    """The skip reason and the run status of a run stopped by ``event``."""
    reason = TOKEN_SKIP_REASON if event.kind == "tokens" else COST_SKIP_REASON
    return reason, RunOutcome("budget_exhausted", event.message)
