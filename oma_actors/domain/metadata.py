"""Task metadata rules (OMA's, spec T-95): JSON values, named keys, no credentials, bounded size.

``Task(metadata=...)`` is checked here when the task is built, so a value no snapshot could hold
(``object()``, ``NaN``, a non-string key) or a credential-like key is refused before any model
call, with a ``TaskGraphError`` naming the task and the key. What is accepted is copied, so the
caller's later changes do not reach the task.

Secret-looking *values* are not refused (a description may quote a token by accident): the
queue masks them (``oma_actors.stores.redaction``) before a snapshot or journal holds them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from oma_actors.domain.secret_names import is_sensitive_name
from oma_actors.errors import TaskGraphError
from oma_actors.jsontext import compact_text

KEY = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
"""A top-level metadata key (API.md "Teams, agents, tasks")."""
MAX_ENTRIES = 32
"""Top-level keys per task (OMA's run-metadata bound, spec ID-05)."""
MAX_DEPTH = 8
"""Nested arrays and objects below the top level."""
MAX_BYTES = 16 * 1024
"""The metadata's compact JSON, UTF-8 encoded (as ``JSON.stringify`` writes it: a lone surrogate,
which a string may hold, as its six-character escape)."""
WHOLE = "metadata"
"""How errors name the metadata as a whole; keys follow as ``metadata['a'][0]``."""


def check_task_metadata(
    metadata: Mapping[str, Any] | None, *, task_id: str
) -> Mapping[str, Any] | None:
    """A read-only copy of ``metadata`` when it follows the rules; ``None`` stays ``None``.

    Args:
        metadata: the task's metadata as given.
        task_id: the task, named in the error.

    Raises:
        TaskGraphError: not a mapping, more than ``MAX_ENTRIES`` keys, a key not matching
            ``KEY`` or credential-like (``password``, ``api_key``, ``token``, ...), a value that
            is not JSON (objects with string keys, arrays, strings, finite numbers, booleans,
            null), nesting deeper than ``MAX_DEPTH``, or more than ``MAX_BYTES`` of JSON.
    """
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise _error(task_id, WHOLE, f"must be a mapping, got {type(metadata).__name__}")
    if len(metadata) > MAX_ENTRIES:
        raise _error(task_id, WHOLE, f"has {len(metadata)} keys; at most {MAX_ENTRIES} are allowed")
    copied: dict[str, Any] = {}
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise _error(task_id, WHOLE, f"key {key!r} is not a string")
        if not KEY.fullmatch(key):
            raise _error(task_id, f"{WHOLE} key {key!r}", f"is not a valid key ({KEY.pattern})")
        if is_sensitive_name(key):
            raise _error(
                task_id, f"{WHOLE} key {key!r}", "looks like a credential; keep secrets out"
            )
        copied[key] = _json_value(value, task_id=task_id, path=f"{WHOLE}[{key!r}]", depth=0)
    # The text snapshots and journal lines hold (``compact_text``), which always encodes.
    size = len(compact_text(copied).encode())
    if size > MAX_BYTES:
        raise _error(task_id, WHOLE, f"is {size} bytes of JSON; at most {MAX_BYTES} are allowed")
    return MappingProxyType(copied)


def _json_value(value: Any, *, task_id: str, path: str, depth: int) -> Any:
    """A copy of ``value`` if it is JSON, checked all the way down."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _error(task_id, path, f"is {value!r}; JSON has no NaN or Infinity")
        return float(value)
    if depth >= MAX_DEPTH:
        raise _error(task_id, path, f"nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, list | tuple):
        return [
            _json_value(item, task_id=task_id, path=f"{path}[{index}]", depth=depth + 1)
            for index, item in enumerate(value)
        ]
    if isinstance(value, Mapping):
        copied: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _error(task_id, path, f"has the non-string key {key!r}")
            if is_sensitive_name(key):
                raise _error(task_id, f"{path}[{key!r}]", "looks like a credential")
            copied[key] = _json_value(
                item, task_id=task_id, path=f"{path}[{key!r}]", depth=depth + 1
            )
        return copied
    raise _error(task_id, path, f"is a {type(value).__name__}, not a JSON value")


def _error(task_id: str, where: str, problem: str) -> TaskGraphError:
    """The error naming the task, and the key or path (``where``) that breaks a rule."""
    return TaskGraphError(f"task {task_id!r}: {where} {problem}", tasks=(task_id,))
