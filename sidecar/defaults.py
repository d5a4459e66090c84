"""Defaults of ``oma serve``, importable without grpc (the ``oma`` parser shows them)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_LISTEN = "127.0.0.1:50051"
DEFAULT_STORE = f"file://{Path.home() / '.oma' / 'sidecar' / 'state.json'}"
DEFAULT_TOKEN_FILE = Path.home() / ".oma" / "sidecar.token"
TOKEN_ENV = "OMA_SIDECAR_TOKEN"
DEFAULT_MAX_INPUT_BYTES = 4 << 20
"""``oma serve --max-input-bytes``: the largest request a client may send (4 MiB)."""
DEFAULT_MAX_ACTIVE_RUNS_PER_TENANT = 1000
"""``oma serve --max-active-runs-per-tenant``: the runs one tenant may hold that have not
finished (queued, running, suspended, interrupted); retention deletes only finished runs, so
without it one tenant could fill the shared store with suspended runs."""
DEFAULT_MAX_WATCHES_PER_TENANT = 2000
"""``oma serve --max-watches-per-tenant``: the ``WatchRun`` streams one tenant may have open
(about 35 KB of memory each): two for each run the default lets it hold, so a host watching
every run it started (``bench/sidecar.py``'s P8 watches 1,000 at once) and a dashboard fit."""
DEFAULT_RETAIN_RUNS = 1000
"""``oma serve --retain-runs``: finished runs kept (the newest); older ones are deleted, so a
long-lived sidecar's store stays bounded (``--no-retention`` keeps every run)."""
DEFAULT_GC_THRESHOLD = 50_000
"""``oma serve --gc-threshold``: allocations between the cyclic collector's young passes while
serving (CPython's own is 700). A sidecar holds many runs' conversations at once, and each pass
of an older generation walks them all: with 1,000 runs in flight, 50,000 carried 13-17% more
checkpoint saves per second (``bench/sidecar.py``'s P8 against ``--gc-threshold 0``, memory store,
three alternated pairs)."""
