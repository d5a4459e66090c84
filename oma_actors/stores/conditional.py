"""``compare_and_set`` as the one-check, one-write case of a store's ``apply`` (D2, D11).

Every conditional store writes through one ``apply(checks, writes)``; this base gives each the
same ``compare_and_set`` on top of it, so the single-key rule cannot drift between backends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oma_actors.stores.base import Expect, Put

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from oma_actors.stores.base import Write


class AppliesConditionally:
    """A store whose ``compare_and_set`` is ``apply`` with one ``Expect`` and one ``Put``."""

    async def apply(self, checks: Sequence[Expect], writes: Sequence[Write]) -> bool:
        """Apply ``writes`` in order, atomically, only if every check holds (each store's own)."""
        raise NotImplementedError

    async def compare_and_set(
        self,
        key: str,
        expected: str | None,
        value: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        """Write ``value`` only if the current value equals ``expected`` (``None``: key absent).

        Returns:
            ``True`` if the write happened, ``False`` on a mismatch (nothing written).

        Raises:
            StoreError: The metadata is not JSON-serializable, or the store failed.
        """
        return await self.apply((Expect(key, expected),), (Put(key, value, metadata),))
