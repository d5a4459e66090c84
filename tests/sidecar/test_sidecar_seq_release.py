"""Giving back unused seqs at a graceful stop (``sidecar.record.releasing_reservation``).

Only the process that holds the stored reservation may lower it: if another process reserved
above it meanwhile, that one may have handed out seqs in between, and lowering the record would
let a later process hand them out again.
"""

from __future__ import annotations

from dataclasses import replace

from test_sidecar_record_codec import full_record

from sidecar.record import releasing_reservation


def test_the_holder_gives_back_what_it_did_not_use() -> None:
    record = replace(full_record(), seq_reserved_until=1024)
    assert releasing_reservation(1024, 19)(record).seq_reserved_until == 19


def test_a_reservation_another_process_moved_is_left_alone() -> None:
    record = replace(full_record(), seq_reserved_until=2048)  # a sibling reserved above ours
    assert releasing_reservation(1024, 19)(record) is record


def test_nothing_is_raised_or_lowered_past_what_was_used() -> None:
    record = replace(full_record(), seq_reserved_until=1024)
    assert releasing_reservation(1024, 1024)(record) is record
