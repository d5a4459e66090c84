"""A store outage is not a run's failure: tell one apart, and retry through it.

``StoreError`` itself (not a subclass such as a corrupt file or a full store) with no
``ValueError`` behind it is a store that did not answer: the run waits for it
(``RunExecutor``) instead of failing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, TypeVar

from oma_actors import StoreError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

logger = logging.getLogger(__name__)

T = TypeVar("T")
MIN_BACKOFF = 0.1
MAX_BACKOFF = 2.0


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says a store did not answer (an outage), not that it refused."""
    return type(exc) is StoreError and not isinstance(exc.__cause__, ValueError)


async def until_stored(operation: Callable[[], Awaitable[T]]) -> T:
    """``operation()``, again while its store is unreachable (backing off up to
    ``MAX_BACKOFF``).

    A finished attempt's result is written once the store answers, however long the outage:
    the run never stays running after its tasks finished. Cancelled at shutdown.
    """
    delay = MIN_BACKOFF
    while True:
        try:
            return await operation()
        except Exception as exc:
            if not unreachable(exc):
                raise
            logger.warning("store unreachable, retrying in %.1f s: %s", delay, exc)
        await asyncio.sleep(delay)
        delay = min(delay * 2, MAX_BACKOFF)
