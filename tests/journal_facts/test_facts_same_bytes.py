"""The journal bytes of deterministic scripted runs stay what they were (issue 19, step 2).

Moving where the facts are recorded (from diffing states at each boundary to the moment they
happen) must not change one byte a journal holds: each scenario of ``scripted_runs`` in OMA's
mode, journal-first and without a checkpoint is run and its JSONL compared with the golden file
written before the move (timestamps blanked). ``OMA_FACTS_REGEN=1`` rewrites the golden files,
for a deliberate change of the event bytes only.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from scripted_runs import ALL_RUNS, normalized, run_scenario

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize(("scenario", "mode"), ALL_RUNS, ids=[f"{s}-{m}" for s, m in ALL_RUNS])
async def test_the_journal_bytes_are_the_golden_ones(
    scenario: str, mode: str, tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    await run_scenario(scenario, mode, path)
    got = normalized(path.read_bytes(), run_id=mode == "nocheckpoint")
    golden = GOLDEN / f"{scenario}-{mode}.jsonl"
    if os.environ.get("OMA_FACTS_REGEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        golden.write_bytes(got)
    expected = golden.read_bytes()
    assert got.splitlines() == expected.splitlines()


async def test_the_scripted_runs_are_deterministic(tmp_path: Path) -> None:
    # The comparison above means something only if a run repeats its own bytes.
    first, second = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    await run_scenario("parallel", "durable", first)
    await run_scenario("parallel", "durable", second)
    assert normalized(first.read_bytes(), run_id=False) == normalized(
        second.read_bytes(), run_id=False
    )
