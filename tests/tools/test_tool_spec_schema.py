"""``Tool.spec``: the input model's JSON schema, built once per model class, a copy per spec."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from oma_actors import ToolContext, define_tool


def _counted(built: list[int]) -> type[BaseModel]:
    """A model class of its own that counts how often pydantic is asked for its schema."""

    class Counted(BaseModel):
        query: str
        limit: int = 10

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            built.append(1)
            return super().model_json_schema(*args, **kwargs)

    return Counted


async def _run(args: BaseModel, ctx: ToolContext) -> str:
    return "ok"


def _tool(model: type[BaseModel]) -> Any:
    return define_tool(name="search", description="finds", input_model=model, execute=_run)


def test_the_spec_carries_the_models_schema() -> None:
    class Query(BaseModel):
        query: str
        tags: list[str] = []

    assert _tool(Query).spec.input_schema == Query.model_json_schema()


def test_the_schema_is_built_once_per_model_class() -> None:
    built: list[int] = []
    model = _counted(built)
    first, second = _tool(model), _tool(model)
    for _ in range(3):
        assert first.spec.input_schema == second.spec.input_schema
    assert len(built) == 1


def test_changing_one_specs_schema_changes_no_other() -> None:
    tool = _tool(_counted([]))
    changed = tool.spec.input_schema
    changed["properties"]["query"]["type"] = "integer"
    changed["required"].append("extra")
    again = tool.spec.input_schema
    assert again["properties"]["query"]["type"] == "string"
    assert "extra" not in again["required"]
