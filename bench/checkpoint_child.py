"""The child processes of P5, one per invocation: ``--_child`` ``restore``, ``load``, ``floor``
(``floor``: ``parse_floor.child_floor``).

Run by ``checkpoint_p5.run_child``, never by hand. Each child prints one JSON line (``seconds``
from after import to the measured point, or ``error``), so the timing excludes the import.
"""

from __future__ import annotations

import argparse

from checkpoint_journal import child_load, child_restore
from checkpoint_langgraph import child_lg_crash, child_lg_resume
from parse_floor import child_floor


def main() -> None:
    """Parse the child's arguments and run it."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--_child", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--_store", help=argparse.SUPPRESS)
    ap.add_argument("--_journal", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_durable", default="1", help=argparse.SUPPRESS)
    ap.add_argument("--_channel", default="add", help=argparse.SUPPRESS)
    ap.add_argument("--_turns", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_payload", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_profile", default="", help=argparse.SUPPRESS)
    ap.add_argument("--_tail_from", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    ns = argparse.Namespace(
        store=a._store,
        journal=a._journal,
        durable=a._durable,
        channel=a._channel,
        turns=a._turns,
        payload=a._payload,
        profile=bool(a._profile),
        tail_from=a._tail_from,
    )
    children = {
        "restore": child_restore,
        "load": child_load,
        "floor": child_floor,
        "lg-crash": child_lg_crash,
        "lg-resume": child_lg_resume,
    }
    children[a._child](ns)


if __name__ == "__main__":
    main()
