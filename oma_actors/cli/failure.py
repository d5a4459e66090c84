"""``CommandFailed``: the one way a command reports an error (one line on stderr, exit 2).

Every ``oma`` command writes its results to stdout and nothing else, so ``--json`` output can
be piped straight into a parser; errors go to stderr as ONE line, which ``main`` prints. Exit 2
means "could not be carried out" (bad input, nothing to act on, refused); exit 1 is kept for
"checked and found findings" (``oma verify`` failures, a journal tail that does not fold),
which a command returns itself.
"""

from __future__ import annotations


class CommandFailed(Exception):
    """A command could not be carried out; ``main`` prints the message on stderr and exits 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


__all__ = ["CommandFailed"]
