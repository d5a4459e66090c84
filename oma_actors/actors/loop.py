"""Choosing the event loop: uvloop when it is installed, asyncio's own loop otherwise.

The kernel never creates or installs a loop (``ActorSystem`` runs on whatever loop is running).
The one sync doorway, the CLI's ``main()``, asks this module for a loop factory::

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(main_async())

``asyncio.Runner`` treats a ``None`` factory as "the default asyncio loop".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """Return uvloop's ``new_event_loop`` if uvloop can be imported, else ``None``.

    uvloop is imported here, not at module level, so that ``import oma_actors`` stays cheap and
    works where uvloop is not installed (Windows, PyPy).

    Returns:
        A loop factory for ``asyncio.Runner(loop_factory=...)``, or ``None`` for asyncio's
        default loop.
    """
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


__all__ = ["event_loop_factory"]
