"""The run record and its lease, written and read as OMA's JSON byte for byte (RS-01).

A run record answers "who may advance this run, and is it still open"; a checkpoint answers
"what state can it resume from". Two counters live here: ``version`` grows on every write and is
what a store compares against; ``fencing_token`` grows only when ownership changes hands, so a
worker holding token N is recognisably stale after any number of unrelated writes.

The JSON is OMA's: camelCase, ``schema: 1``, ``toISOString`` timestamps, no extra fields, and the
key order a JavaScript writer would produce. OMA builds each new record by spreading the old one,
so a key that already exists keeps its place and a key that appears is added at the end; a
record remembers its key order (``json_key_order``) so that a record written by the TypeScript
OMA is written back identically, and a record derived here with ``dataclasses.replace`` is laid
out exactly as OMA would lay it out.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Final, TypeAlias, cast

from oma_actors.errors import LeaseError, sealed_note
from oma_actors.jsontext import reject_constant
from oma_actors.runs.fields import (
    ISO_RULE,
    checkpoint_ref_problem,
    is_int,
    iso_ms,
    moment_problem,
    ms_precision,
    outcome_problem,
    parse_iso_ms,
    suspension_problem,
    to_ms,
)
from oma_actors.runs.lifecycle import INTEGRITY, RUN_STATUSES, VALIDATION, RunStatus

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

_Bad: TypeAlias = "Callable[[str], LeaseError]"
"""Builds the integrity error of one record, naming its run."""

KEYS: Final = (
    "schema",
    "runId",
    "version",
    "status",
    "attempt",
    "fencingToken",
    "lease",
    "checkpointRef",
    "outcome",
    "suspension",
    "createdAt",
    "updatedAt",
)
"""Every field of a run record, in the order OMA writes a new one."""

_OPTIONAL: Final = frozenset({"lease", "checkpointRef", "outcome", "suspension"})
_LEASE_KEYS: Final = ("owner", "acquiredAt", "expiresAt")
_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Lease:
    """Who may advance the run, and until when (RS-01).

    Times are kept to the millisecond, as OMA's JSON carries them.

    Raises:
        LeaseError: ``RUN_VALIDATION_ERROR`` for a blank owner or a naive datetime.
    """

    owner: str
    acquired_at: datetime
    expires_at: datetime

    def __post_init__(self) -> None:
        if not isinstance(self.owner, str) or not self.owner.strip():
            raise LeaseError(VALIDATION, f"lease.owner must be a non-blank string: {self.owner!r}")
        for name, spelled in (
            ("acquired_at", "lease.acquiredAt"),
            ("expires_at", "lease.expiresAt"),
        ):
            value = getattr(self, name)
            problem = moment_problem(value, spelled)
            if problem is not None:
                raise LeaseError(VALIDATION, problem)
            object.__setattr__(self, name, ms_precision(value))

    def is_live(self, now: datetime) -> bool:
        """Whether the lease has not expired at ``now`` (expiry is exclusive, as OMA's)."""
        return to_ms(self.expires_at) > to_ms(now)

    def to_dict(self) -> dict[str, str]:
        """OMA's ``{owner, acquiredAt, expiresAt}``."""
        return {
            "owner": self.owner,
            "acquiredAt": iso_ms(self.acquired_at),
            "expiresAt": iso_ms(self.expires_at),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """The authoritative record of one run (RS-01); every instance is valid.

    ``checkpoint_ref``, ``outcome`` and ``suspension`` are OMA's JSON objects as they are stored
    (``{"key", "snapshotVersion", "savedAt"}``, ``{"code", "message"?}``,
    ``{"suspendedAt", "pendingApprovalIds"}``); the record keeps its own copies.

    Attributes:
        json_key_order: The order of this record's JSON keys (see the module docstring). Leave
            it empty for a new record; ``parse`` and ``dataclasses.replace`` fill it in.

    Raises:
        LeaseError: ``RUN_VALIDATION_ERROR`` naming the first field that breaks RS-01: a blank
            run id, ``version`` or ``attempt`` below 1, a negative ``fencing_token``, an unknown
            status, a naive datetime or a malformed nested object.
    """

    schema: ClassVar[int] = 1

    run_id: str
    version: int
    status: RunStatus
    attempt: int
    fencing_token: int
    created_at: datetime
    updated_at: datetime
    lease: Lease | None = None
    checkpoint_ref: dict[str, object] | None = None
    outcome: dict[str, object] | None = None
    suspension: dict[str, object] | None = None
    json_key_order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        problem = self._problem()
        if problem is not None:
            raise LeaseError(VALIDATION, f"run record {self.run_id!r}: {problem}")
        for name in ("checkpoint_ref", "outcome", "suspension"):
            object.__setattr__(self, name, copy.deepcopy(getattr(self, name)))
        object.__setattr__(self, "created_at", ms_precision(self.created_at))
        object.__setattr__(self, "updated_at", ms_precision(self.updated_at))
        present = {key for key, value in self._values().items() if value is not None}
        order = [key for key in dict.fromkeys(self.json_key_order) if key in present]
        order += [key for key in KEYS if key in present and key not in order]
        object.__setattr__(self, "json_key_order", tuple(order))

    def _problem(self) -> str | None:
        if not isinstance(self.run_id, str) or not self.run_id.strip():
            return "runId must be a non-empty string"
        for name, spelled, least in (
            ("version", "version", 1),
            ("attempt", "attempt", 1),
            ("fencing_token", "fencingToken", 0),
        ):
            value = getattr(self, name)
            if not is_int(value) or value < least:
                return f"{spelled} must be an integer >= {least}, got {value!r}"
        if self.status not in RUN_STATUSES:
            return f"status must be one of {', '.join(RUN_STATUSES)}, got {self.status!r}"
        for value, spelled in ((self.created_at, "createdAt"), (self.updated_at, "updatedAt")):
            problem = moment_problem(value, spelled)
            if problem is not None:
                return problem
        if self.lease is not None and not isinstance(self.lease, Lease):
            return f"lease must be a Lease, got {type(self.lease).__name__}"
        checks = (
            (self.checkpoint_ref, checkpoint_ref_problem),
            (self.outcome, outcome_problem),
            (self.suspension, suspension_problem),
        )
        for value, check in checks:
            problem = None if value is None else check(value)
            if problem is not None:
                return problem
        return None

    def _values(self) -> dict[str, object]:
        return {
            "schema": self.schema,
            "runId": self.run_id,
            "version": self.version,
            "status": self.status,
            "attempt": self.attempt,
            "fencingToken": self.fencing_token,
            "lease": None if self.lease is None else self.lease.to_dict(),
            "checkpointRef": copy.deepcopy(self.checkpoint_ref),
            "outcome": copy.deepcopy(self.outcome),
            "suspension": copy.deepcopy(self.suspension),
            "createdAt": iso_ms(self.created_at),
            "updatedAt": iso_ms(self.updated_at),
        }

    def to_dict(self) -> dict[str, object]:
        """The record as OMA's JSON object, keys in ``json_key_order``, absent fields left out."""
        values = self._values()
        return {key: values[key] for key in self.json_key_order}

    def to_json(self) -> str:
        """The record as the TypeScript OMA's ``JSON.stringify`` writes it (compact, UTF-8)."""
        text = json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))
        # JSON.stringify escapes a lone surrogate rather than emit text UTF-8 cannot carry.
        return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)

    @classmethod
    def parse(cls, text: str, *, run_id: str | None = None) -> RunRecord:
        """Read a stored record strictly (RS-04); a bad record is an error, never "absent".

        Args:
            text: The stored JSON text.
            run_id: The run the key says this is; a record of another run is refused.

        Raises:
            LeaseError: ``RUN_INTEGRITY_ERROR`` naming the field for anything but OMA's record:
                invalid JSON, a duplicate or unknown key, a missing field, ``schema`` other
                than 1, a timestamp not in ``toISOString`` form, any RS-01 violation, or
                another run id than ``run_id``.
        """
        label = run_id or "?"
        try:
            raw = json.loads(text, object_pairs_hook=_unique, parse_constant=reject_constant)
        except (ValueError, RecursionError) as error:
            raise LeaseError(
                INTEGRITY, f"run record {label!r} is not valid JSON: {error}{sealed_note(text)}"
            ) from None
        if not isinstance(raw, dict):
            raise LeaseError(INTEGRITY, f"run record {label!r} must be a JSON object")
        record = _decode(raw, label if not isinstance(raw.get("runId"), str) else raw["runId"])
        if run_id is not None and record.run_id != run_id:
            raise LeaseError(
                INTEGRITY, f"the run record under run id {run_id!r} holds run {record.run_id!r}"
            )
        return record


def lease_live(record: RunRecord, now: datetime) -> bool:
    """Whether ``record`` has a lease that has not expired at ``now`` (no lease: never live)."""
    return record.lease is not None and record.lease.is_live(now)


def _decode(raw: dict[str, object], label: str) -> RunRecord:
    def bad(problem: str) -> LeaseError:
        return LeaseError(INTEGRITY, f"run record {label!r}: {problem}")

    for key in raw:
        if key not in KEYS:
            raise bad(f"{key} is not a field of a run record")
    if not is_int(raw.get("schema")) or raw.get("schema") != RunRecord.schema:
        raise bad(f"schema must be {RunRecord.schema}, got {raw.get('schema')!r}")
    for key in KEYS:
        if key not in raw and key not in _OPTIONAL:
            raise bad(f"{key} is missing")
    created, updated = parse_iso_ms(raw["createdAt"]), parse_iso_ms(raw["updatedAt"])
    for moment, key in ((created, "createdAt"), (updated, "updatedAt")):
        if moment is None:
            raise bad(f"{key} {ISO_RULE}, got {raw[key]!r}")
    try:
        lease = None if "lease" not in raw else _decode_lease(raw["lease"], bad)
        return RunRecord(
            run_id=cast("str", raw["runId"]),
            version=cast("int", raw["version"]),
            status=cast("RunStatus", raw["status"]),
            attempt=cast("int", raw["attempt"]),
            fencing_token=cast("int", raw["fencingToken"]),
            created_at=cast("datetime", created),
            updated_at=cast("datetime", updated),
            lease=lease,
            checkpoint_ref=_object(raw, "checkpointRef", bad),
            outcome=_object(raw, "outcome", bad),
            suspension=_object(raw, "suspension", bad),
            json_key_order=tuple(raw),
        )
    except LeaseError as error:
        # The same rule a caller breaks with RUN_VALIDATION_ERROR means corrupt bytes here.
        raise LeaseError(INTEGRITY, error.message) from None


def _decode_lease(raw: object, bad: _Bad) -> Lease:
    if not isinstance(raw, dict):
        raise bad(f"lease must be an object, got {raw!r}")
    for key in raw:
        if key not in _LEASE_KEYS:
            raise bad(f"lease.{key} is not a field of a lease")
    owner = raw.get("owner")
    if not isinstance(owner, str) or not owner.strip():
        raise bad(f"lease.owner must be a non-blank string, got {owner!r}")
    acquired, expires = parse_iso_ms(raw.get("acquiredAt")), parse_iso_ms(raw.get("expiresAt"))
    for moment, key in ((acquired, "acquiredAt"), (expires, "expiresAt")):
        if moment is None:
            raise bad(f"lease.{key} {ISO_RULE}, got {raw.get(key)!r}")
    return Lease(owner, cast("datetime", acquired), cast("datetime", expires))


def _object(raw: dict[str, object], key: str, bad: _Bad) -> dict[str, object] | None:
    value = raw.get(key)
    if key in raw and not isinstance(value, dict):
        raise bad(f"{key} must be an object, got {value!r}")
    return cast("dict[str, object] | None", value)


def _unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out
