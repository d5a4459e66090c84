"""The TypeScript OMA's own checkpoints (shared/fixtures/oma), and what OMA's re-save changes.

Each fixture folder holds a FileStore file written by the real OMA 1.16.1, its checkpoint
pretty-printed, and ``scenario.json``: the team, the scripted model responses, and what OMA did
when it restored that very file (``observedResume``). Some also hold ``resave.json``: every
checkpoint OMA wrote during that restore.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from oma_actors import AgentConfig, Team
from oma_actors.domain.messages import LLMResponse, TextBlock, TokenUsage
from oma_actors.stores import InMemoryStore
from oma_actors.testing import ScriptedAdapter

# shared/ sits beside the repository (a clean clone in any folder finds it, never /work/...).
FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "oma"
NAMES = sorted(path.name for path in FIXTURES.iterdir() if (path / "scenario.json").is_file())

# What OMA's own re-save changes besides real state transitions (fixture README, resave.json).
RESTAMPED = tuple(
    re.compile(pattern)
    for pattern in (
        r"\$\.createdAt",
        r"\$\.identity\.(attempt|lastTraceId|lastRootSpanId)",
        r"\$\.queue\.tasks\[\d+\]\.updatedAt",
        r"\$\.sharedMemory\.entries\[\d+\]\.createdAt",
    )
)
# Members of our own that every save adds (OMA ignores members it does not know).
OURS = ("$.revision", "$.announcedTaskIds")

Json = dict[str, Any]
Change = tuple[str, str]  # (path, "added" | "removed" | "changed")


def scenario(name: str) -> Json:
    """The fixture's scenario.json."""
    value: Json = json.loads((FIXTURES / name / "scenario.json").read_text(encoding="utf-8"))
    return value


def stored_value(name: str) -> str:
    """The checkpoint value exactly as OMA stored it in its FileStore file."""
    store = json.loads((FIXTURES / name / "store.json").read_text(encoding="utf-8"))
    key = scenario(name)["checkpointKey"]
    (value,) = [entry["value"] for entry in store["entries"] if entry["key"] == key]
    return str(value)


def oma_resaves(name: str) -> list[Json] | None:
    """Every checkpoint OMA wrote while restoring the fixture, or ``None`` if not recorded."""
    path = FIXTURES / name / "resave.json"
    if not path.is_file():
        return None
    writes: list[Json] = json.loads(path.read_text(encoding="utf-8"))["writes"]
    return writes


def fixture_team(name: str) -> tuple[Team, dict[str, ScriptedAdapter], InMemoryStore]:
    """The scenario's team with fresh scripted models serving only the ``resume`` responses.

    As in OMA's resume procedure, shared memory is a new, empty store of its own.
    """
    spec = scenario(name)
    adapters: dict[str, ScriptedAdapter] = {}
    agents = []
    for agent in spec["team"]["agents"]:
        script = [
            _response(item["response"])
            for item in spec["scriptedResponses"].get(agent["name"], [])
            if item["consumedBy"] == "resume"
        ]
        adapters[agent["name"]] = ScriptedAdapter(script)
        agents.append(
            AgentConfig(
                agent["name"],
                model=agent["model"],
                system_prompt=agent["systemPrompt"],
                adapter=adapters[agent["name"]],
            )
        )
    shared = InMemoryStore()
    return Team(spec["team"]["name"], agents, shared_memory_store=shared), adapters, shared


def _response(raw: Json) -> LLMResponse:
    text = "".join(block["text"] for block in raw["content"] if block["type"] == "text")
    usage = raw["usage"]
    return LLMResponse(
        [TextBlock(text)],
        stop_reason=raw["stop_reason"],
        usage=TokenUsage(usage["input_tokens"], usage["output_tokens"]),
    )


def changes(before: Any, after: Any, path: str = "$") -> list[Change]:
    """Every member added, removed or changed from ``before`` to ``after``, by JSON path."""
    if isinstance(before, dict) and isinstance(after, dict):
        found: list[Change] = []
        for key in before.keys() | after.keys():
            where = f"{path}.{key}"
            if key not in after:
                found.append((where, "removed"))
            elif key not in before:
                found.append((where, "added"))
            else:
                found.extend(changes(before[key], after[key], where))
        return sorted(found)
    if isinstance(before, list) and isinstance(after, list):
        found = []
        for index in range(max(len(before), len(after))):
            where = f"{path}[{index}]"
            if index >= len(after):
                found.append((where, "removed"))
            elif index >= len(before):
                found.append((where, "added"))
            else:
                found.extend(changes(before[index], after[index], where))
        return found
    same = before == after and type(before) is type(after)
    return [] if same else [(path, "changed")]


def restamped(path: str) -> bool:
    """Whether OMA's own re-save re-stamps the member at ``path``."""
    return any(pattern.fullmatch(path) for pattern in RESTAMPED)
