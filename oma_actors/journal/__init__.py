"""Run journals (spec 17.1-17.4): OMA's append-only event log of a run, its tail fold, verify_run.

Work in progress (issue 9): the event value is here; backends, the recorder, the fold and
``verify_run`` follow.
"""

from oma_actors.journal.event import JournalEvent

__all__ = ["JournalEvent"]
