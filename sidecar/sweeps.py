"""The one loop behind the sidecar's periodic sweeps (failover, retention).

A sweep reads the store and acts on what it finds; a failure (a store hiccup) is logged and the
next sweep tries again, so one bad read never stops a long-lived sidecar's upkeep. Cancellation
is the server's shutdown and always propagates (``Exception`` does not catch it).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

logger = logging.getLogger(__name__)


async def sweep_forever(
    sweep: Callable[[], Awaitable[Any]], *, interval: float, what: str, at_once: bool
) -> None:
    """Run ``sweep`` every ``interval`` seconds until cancelled.

    Args:
        sweep: one pass; its result is ignored, its exceptions are logged.
        interval: seconds between passes.
        what: names the sweep in the log ("failover", "retention").
        at_once: the first pass runs before the first wait (failover adopts at start).
    """
    if not at_once:
        await asyncio.sleep(interval)
    while True:
        try:
            await sweep()
        except Exception:  # a store hiccup: the next sweep tries again
            logger.exception("%s sweep failed", what)
        await asyncio.sleep(interval)
