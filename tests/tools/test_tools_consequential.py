"""``define_tool(consequential=...)``: OMA's flag, kept on the tool and checked at definition."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from oma_actors import ConfigurationError, ToolContext, define_tool


class Amount(BaseModel):
    amount: int


async def charge(args: BaseModel, ctx: ToolContext) -> str:
    return "charged"


def test_consequential_defaults_to_false_as_in_oma() -> None:
    tool = define_tool(name="charge", description="charge", input_model=Amount, execute=charge)
    assert tool.consequential is False


def test_consequential_is_kept_on_the_tool_and_not_shown_to_the_model() -> None:
    tool = define_tool(
        name="charge", description="charge", input_model=Amount, execute=charge, consequential=True
    )
    assert tool.consequential is True
    assert tool.effect == "idempotent"  # independent of the effect (decision D1)
    assert "consequential" not in tool.spec.input_schema


@pytest.mark.parametrize("flag", ["yes", 1, None])
def test_a_non_bool_flag_is_refused_because_it_would_change_the_approval_hash(flag: object) -> None:
    with pytest.raises(ConfigurationError, match="consequential must be a bool"):
        define_tool(
            name="charge",
            description="charge",
            input_model=Amount,
            execute=charge,
            consequential=flag,  # type: ignore[arg-type]
        )
