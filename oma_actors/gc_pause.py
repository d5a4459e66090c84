"""Holding the cyclic garbage collector off while a restore builds a large value (P5)."""

from __future__ import annotations

import contextlib
import gc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector off while a large value is built (P5).

    Decoding a long run allocates tens of thousands of containers, none of them garbage; each
    700 allocations start a collection, and the older generations' passes walk the whole
    growing value again and again (about a third of a restore's decode). Reference counting
    still frees everything; the collector's state is put back as it was, even on an error.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


__all__ = ["gc_paused"]
