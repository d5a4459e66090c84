"""``oma runs delete`` deletes all of the run and nothing else: its approval rows go too, and a
journal file that is not beside the store (a copied directory's snapshot names the original's)
stays unless ``--journal`` names it."""

from __future__ import annotations

import asyncio
import shutil
from typing import TYPE_CHECKING

from test_cli_history import journal_first_run, oma

from oma_actors.approvals import (
    DurableApprovalLedger,
    Reviewer,
    create_approval_request,
    decide_approval,
    tool_call_content,
)
from oma_actors.keyspace import APPROVAL_KEY_PREFIX
from oma_actors.stores import FileStore

if TYPE_CHECKING:
    from pathlib import Path

    from oma_actors.approvals import ApprovalRequest

SECRET = "card-4111-1111"


def request(run_id: str, call: str) -> ApprovalRequest:
    content = tool_call_content(
        tool_name="charge", raw_input={"card": SECRET}, input={"card": SECRET},
        agent_name="w", task_id="t0", tool_call_id=call,
    )  # fmt: skip
    return create_approval_request(
        run_id=run_id, scope="tool_call", boundary=f"t0:{call}", content=content
    )


async def approval_rows(path: Path, *requests: ApprovalRequest) -> dict[str, str]:
    """Store ``requests``, approve the first with an edited input; every row, by key."""
    store = FileStore(path)
    try:
        ledger = DurableApprovalLedger(store)
        for each in requests:
            await ledger.ensure_request(each)
        await decide_approval(
            store, request_id=requests[0].id, request_hash=requests[0].request_hash,
            decision="approve", reviewer=Reviewer("alice"), edited_input={"card": SECRET + "0"},
        )  # fmt: skip
        return {e.key: e.value for e in await store.list() if e.key.startswith(APPROVAL_KEY_PREFIX)}
    finally:
        await store.aclose()


def test_delete_takes_the_run_s_approval_rows_and_no_other_s(tmp_path: Path) -> None:
    asyncio.run(journal_first_run(tmp_path, run_id="r1"))
    mine = [request("r1", "c1"), request("r1", "c2")]
    theirs = request("r2", "c1")
    before = asyncio.run(approval_rows(tmp_path / "state.json", *mine, theirs))
    assert len(before) == 3
    assert SECRET + "0" in before[APPROVAL_KEY_PREFIX + mine[0].id]  # the edited input
    deleted = oma("runs", "delete", "r1", "--store", str(tmp_path / "state.json"))
    assert deleted.returncode == 0, deleted.stderr
    assert "snapshot(s), 2 approval row(s), record: False" in deleted.stdout
    text = (tmp_path / "state.json").read_text()
    assert all(row.id not in text for row in mine)
    assert theirs.id in text  # another run's row stays
    assert SECRET + "0" not in text  # the reviewer's edited input of r1 is gone too
    listed = oma("approvals", "list", "--store", str(tmp_path / "state.json"), "--json")
    assert listed.returncode == 0, listed.stderr
    assert '"run_id": "r2"' in listed.stdout
    assert '"run_id": "r1"' not in listed.stdout


def test_delete_in_a_copied_directory_keeps_the_original_s_journal(tmp_path: Path) -> None:
    original = tmp_path / "original"
    original.mkdir()
    asyncio.run(journal_first_run(original))
    kept = original / "run.jsonl"
    before = kept.read_bytes()
    marks = (original / "run.jsonl.marks").exists()
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)

    # The copy's snapshot names original/run.jsonl (an absolute journalRef): not this store's.
    deleted = oma("runs", "delete", "r1", "--store", str(copy / "state.json"))
    assert deleted.returncode == 0, deleted.stderr
    assert f"journal: {kept} kept (not beside the store; --journal {kept} deletes it)" in (
        deleted.stdout
    )
    assert kept.read_bytes() == before
    assert (original / "run.jsonl.marks").exists() == marks
    assert (copy / "run.jsonl").exists()  # not named either: kept
    assert "__oma_checkpoint__/r1/" not in (copy / "state.json").read_text()
    assert "__oma_checkpoint__/r1/" in (original / "state.json").read_text()

    # --journal names the copy's own file: that one goes, the original's is still kept.
    second = tmp_path / "second"
    shutil.copytree(original, second)
    named = oma(
        "runs", "delete", "r1", "--store", str(second / "state.json"),
        "--journal", str(second / "run.jsonl"),
    )  # fmt: skip
    assert named.returncode == 0, named.stderr
    assert f"journal: {second / 'run.jsonl'} removed; {kept} kept (the snapshot names it" in (
        named.stdout
    )
    assert not (second / "run.jsonl").exists()
    assert kept.read_bytes() == before

    # In its own directory the journal is beside the store: removed, as before.
    own = oma("runs", "delete", "r1", "--store", str(original / "state.json"))
    assert own.returncode == 0, own.stderr
    assert f"journal: {kept} removed" in own.stdout
    assert not kept.exists()


def test_delete_refuses_a_journal_option_it_cannot_honour(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path}/state.db"
    asyncio.run(journal_first_run(tmp_path, store_uri=uri, journal_uri=uri))
    refused = oma("runs", "delete", "r1", "--store", uri, "--journal", str(tmp_path / "x.jsonl"))
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "oma runs: --journal: a database store's runs keep their journal in it"
    )
    assert oma("runs", "history", "r1", "--store", uri).returncode == 0  # nothing deleted
