"""``oma serve``: run the gRPC sidecar.

``oma_actors.cli.main`` wires this in lazily (``add_parser(commands)`` when building the parser,
``await run(args)`` for the command), so ``oma`` never imports grpc unless it serves.
``python -m sidecar`` runs the same command standalone on uvloop.

On start it prints two lines a supervisor or test can parse::

    oma-sidecar listening on 127.0.0.1:50051
    oma-sidecar token file: /root/.oma/sidecar.token      (or: token from OMA_SIDECAR_TOKEN,
                                                           or: principals from FILE (N))

then the store and the owner id: ``<label>/<uuid4>``, fresh on every start (``--owner-id`` is
the label; see ``sidecar.owner``). Runs whose lease a previous incarnation left to expire are
adopted by any live sidecar, this one included (``sidecar.failover``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

LISTEN_LINE = "oma-sidecar listening on "
TOKEN_LINE = "oma-sidecar token file: "


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``serve`` command to ``commands`` (an ``add_subparsers`` result)."""
    serve = commands.add_parser(
        "serve",
        help="run the gRPC sidecar (start, watch, restore and approve runs from Go or Node)",
        description=(
            "Serve oma.v1 over gRPC on a loopback address. Every RPC but grpc.health.v1 needs "
            "'authorization: Bearer <token>'."
        ),
    )
    add_arguments(serve)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``serve``."""
    from sidecar.defaults import (
        DEFAULT_GC_THRESHOLD,
        DEFAULT_LISTEN,
        DEFAULT_MAX_ACTIVE_RUNS_PER_TENANT,
        DEFAULT_MAX_INPUT_BYTES,
        DEFAULT_MAX_WATCHES_PER_TENANT,
        DEFAULT_RETAIN_RUNS,
        DEFAULT_STORE,
        DEFAULT_TOKEN_FILE,
    )

    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        help=f"HOST:PORT to bind (default {DEFAULT_LISTEN}; port 0 picks a free port)",
    )
    parser.add_argument(
        "--store",
        default=DEFAULT_STORE,
        metavar="URI",
        help="state store (run registry) and default checkpoint store: a state file path or "
        "file:///abs/state.json (locked: one sidecar per file), sqlite:///abs/state.db, "
        "postgresql://user@host:5432/db[?table=T], redis://host:6379/0[?prefix=P], or "
        f"memory:// (forgotten at exit) (default {DEFAULT_STORE})",
    )
    parser.add_argument(
        "--store-root",
        action="append",
        type=Path,
        metavar="DIR",
        help="a directory in which a run's checkpoint.store_uri may name file:// and sqlite:// "
        "stores (repeatable). A client can name no file outside these directories: without "
        "this option, only files in the directory of --store (none when --store is not a file "
        "or SQLite store)",
    )
    parser.add_argument(
        "--allow-store",
        action="append",
        default=[],
        metavar="PATTERN",
        help="a postgresql:// or redis:// store URI a run's checkpoint.store_uri may name, "
        "shell-style (* ? [..]) and matched with the password masked, e.g. "
        "'postgresql://app:***@db:5432/runs*' (repeatable). Without it, clients may name no "
        "database server but --store itself",
    )
    parser.add_argument(
        "--host-call-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long a host tool call waits for a result (a host to connect included) when "
        "its tool definition sets no timeout (default 300); the run shows tool_call_waiting "
        "and tool_call_timed_out events",
    )
    parser.add_argument(
        "--lease-ttl",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long a run's lease lasts without renewal (default 10), on every --store: "
        "a live sidecar (a sibling sharing a postgresql:// store, or this one restarted) "
        "adopts the runs of a dead or stalled one (attempt + 1) once their leases expired",
    )
    parser.add_argument(
        "--retain-runs",
        type=int,
        default=DEFAULT_RETAIN_RUNS,
        metavar="N",
        help="delete finished runs (completed, failed, cancelled) beyond the newest N: their "
        "records, events, checkpoints, journals (default "
        f"{DEFAULT_RETAIN_RUNS}, so a long-lived sidecar's store stays bounded; suspended "
        "runs are always kept)",
    )
    parser.add_argument(
        "--no-retention",
        action="store_true",
        help="keep every finished run (no --retain-runs default; --retain-seconds still applies)",
    )
    parser.add_argument(
        "--retain-seconds",
        type=float,
        default=None,
        metavar="S",
        help="delete finished runs S seconds after they finished",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        help="read the bearer token from this file (OMA_SIDECAR_TOKEN wins when set)",
    )
    parser.add_argument(
        "--principals",
        type=Path,
        metavar="FILE",
        help="JSON list of {token, principal, tenant, roles} (roles among runs, reviewer, host, "
        "admin) replacing the single token: runs belong to the starting principal's tenant, "
        "approval decisions record the principal as reviewer. The file must not be accessible "
        "by group or others (chmod 600)",
    )
    parser.add_argument(
        "--generated-token-file",
        type=Path,
        default=DEFAULT_TOKEN_FILE,
        help="where the token is kept when neither OMA_SIDECAR_TOKEN nor --token-file gives "
        "one: a token already in the file is used, else a new one is written (mode 0600) "
        f"(default {DEFAULT_TOKEN_FILE})",
    )
    parser.add_argument(
        "--owner-id",
        help="a label for this sidecar, shown in listings and logs: its owner id (the holder "
        "of its runs' leases) is <label>/<uuid4>, fresh on every start, so sidecars started "
        "with identical flags are distinct owners and a restarted one adopts the runs its "
        "previous start left like any sibling does (default: sidecar)",
    )
    parser.add_argument(
        "--no-journal",
        action="store_true",
        help="keep no run journals. By default a run whose checkpoint store is a file store "
        "(when --store is one) keeps a durable JSONL journal beside it, "
        "<state file>.journals/<run>.jsonl (mode 0600): each turn is saved by an fsync'd "
        "journal append, the state file is rewritten at compaction points (task start and "
        "end, suspension, run end, or when the journal alone would not restore the exact "
        "state), and a restore folds the journal in. A run on a SQLite or PostgreSQL store "
        "keeps its journal in that database (one row per event; a leased run's appends are "
        "fenced). Redis and memory:// keep no journal: every save rewrites the snapshot. A run "
        "that already has a journal keeps using it when restored",
    )
    parser.add_argument(
        "--encryption-keys",
        type=Path,
        metavar="FILE",
        help="encrypt at rest: every store value and run journal payload is sealed with "
        "AES-256-GCM under the first key of FILE (lines id:base64key, mode 0600; older keys "
        "below it stay readable, see oma keys rotate)",
    )
    parser.add_argument(
        "--max-input-bytes",
        type=int,
        default=DEFAULT_MAX_INPUT_BYTES,
        metavar="N",
        help="the largest request a client may send, e.g. a StartRun with its descriptions and "
        "tool schemas, a host tool's result or an approval's edits (default 4 MiB); a larger "
        "one is refused with RESOURCE_EXHAUSTED naming its largest field, before anything of "
        "it is stored",
    )
    parser.add_argument(
        "--max-active-runs-per-tenant",
        type=int,
        default=DEFAULT_MAX_ACTIVE_RUNS_PER_TENANT,
        metavar="N",
        help="the most runs one tenant (with --principals; else all clients together) may "
        "hold that have not finished: queued, running, suspended or interrupted (default "
        f"{DEFAULT_MAX_ACTIVE_RUNS_PER_TENANT}). Retention deletes only finished runs; a "
        "StartRun or ForkRun over this is refused with RESOURCE_EXHAUSTED / TOO_MANY_RUNS "
        "(RestoreRun and approvals, which finish held runs, never are)",
    )
    parser.add_argument(
        "--max-watches-per-tenant",
        type=int,
        default=DEFAULT_MAX_WATCHES_PER_TENANT,
        metavar="N",
        help="the most WatchRun streams one tenant (with --principals; else all clients "
        f"together) may have open at once (default {DEFAULT_MAX_WATCHES_PER_TENANT}); one "
        "more is refused with RESOURCE_EXHAUSTED / TOO_MANY_WATCHERS until one ends",
    )
    parser.add_argument(
        "--gc-threshold",
        type=int,
        default=DEFAULT_GC_THRESHOLD,
        metavar="N",
        help="allocations between the cyclic garbage collector's young passes while serving "
        f"(default {DEFAULT_GC_THRESHOLD}; CPython's own is 700; 0 keeps the interpreter's "
        "setting): with many runs in memory, fewer passes leave more CPU to the runs",
    )
    parser.add_argument("--tls-cert", type=Path, help="PEM certificate (needed off loopback)")
    parser.add_argument("--tls-key", type=Path, help="PEM private key (with --tls-cert)")
    parser.add_argument("--no-reflection", action="store_true", help="do not serve reflection")
    parser.add_argument("--heartbeat", type=float, default=15.0, help=argparse.SUPPRESS)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")


async def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM; returns the exit code (2 for bad settings)."""
    from oma_actors import OmaError
    from oma_actors.stores import KeyRing, parse_store_uri
    from sidecar.auth import Token, resolve_token
    from sidecar.principals import Principals, PrincipalsError
    from sidecar.server import ServerConfig, ServerConfigError, Sidecar
    from sidecar.status import SidecarError

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        store = parse_store_uri(args.store)
    except (OmaError, ValueError) as exc:  # ValueError: a NUL byte in the path
        print(f"oma serve: --store: {exc}", file=sys.stderr)
        return 2
    principals: Principals | None = None
    if args.principals is not None:
        try:
            principals = Principals.from_file(args.principals)
        except (OSError, PrincipalsError) as exc:
            print(f"oma serve: --principals: {exc}", file=sys.stderr)
            return 2
        token = Token(value="", source="principals", path=args.principals)
    else:
        try:
            token = resolve_token(
                token_file=args.token_file,
                env=os.environ,
                generated_path=args.generated_token_file,
            )
        except (OSError, ValueError) as exc:
            print(f"oma serve: token: {exc}", file=sys.stderr)
            return 2
    try:
        keyring = None if args.encryption_keys is None else KeyRing.from_file(args.encryption_keys)
    except OmaError as exc:
        print(f"oma serve: --encryption-keys: {exc}", file=sys.stderr)
        return 2
    if token.source == "file" and token.path is not None:
        problem = _token_file_problem(token.path)
        if problem is not None:
            print(f"oma serve: token: {problem}", file=sys.stderr)
            return 2
    if not 0 < args.lease_ttl <= 3600:  # nan too: every comparison with it is false
        print("oma serve: --lease-ttl must be in (0, 3600] seconds", file=sys.stderr)
        return 2
    if args.gc_threshold < 0:
        print("oma serve: --gc-threshold must be >= 0", file=sys.stderr)
        return 2
    if (args.retain_runs is not None and args.retain_runs < 0) or (
        args.retain_seconds is not None and not args.retain_seconds > 0
    ):
        print("oma serve: --retain-runs must be >= 0, --retain-seconds > 0", file=sys.stderr)
        return 2
    for root in args.store_root or ():
        if not root.is_dir():
            print(f"oma serve: --store-root {root}: no such directory", file=sys.stderr)
            return 2
    for flag, path in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key)):
        if path is not None and not path.is_file():
            print(f"oma serve: {flag} {path}: no such file", file=sys.stderr)
            return 2
    config = ServerConfig(
        token=token.value,
        principals=principals,
        listen=args.listen,
        # A bare path becomes its file:// URI here: the server takes URIs only.
        store_uri=store.uri if store.kind == "file" else args.store,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        reflection=not args.no_reflection,
        heartbeat_s=args.heartbeat,
        owner_id=args.owner_id,
        store_roots=None if args.store_root is None else tuple(map(str, args.store_root)),
        host_call_timeout_s=args.host_call_timeout,
        lease_ttl_s=args.lease_ttl,
        retain_runs=None if args.no_retention else args.retain_runs,
        retain_seconds=args.retain_seconds,
        journal=not args.no_journal,
        encryption_keys=keyring,
        max_input_bytes=args.max_input_bytes,
        allowed_stores=tuple(args.allow_store),
        max_active_runs_per_tenant=args.max_active_runs_per_tenant,
        max_watches_per_tenant=args.max_watches_per_tenant,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # before the address is printed
        loop.add_signal_handler(sig, stop.set)
    try:
        async with collector_threshold(args.gc_threshold), Sidecar(config) as sidecar:
            print(f"{LISTEN_LINE}{sidecar.address}", flush=True)
            if principals is not None:
                shown = f"{args.principals} ({len(principals)})"
                print(f"oma-sidecar principals from {shown}", flush=True)
            elif token.path is not None:
                print(f"{TOKEN_LINE}{token.path}", flush=True)
            else:
                print("oma-sidecar token from OMA_SIDECAR_TOKEN", flush=True)
            print(f"oma-sidecar store: {store.uri}", flush=True)  # without its password
            print(f"oma-sidecar owner: {sidecar.owner_id}", flush=True)
            roots = ", ".join(sidecar.store_roots) or "none"
            print(f"oma-sidecar file stores of runs allowed in: {roots}", flush=True)
            journals = sidecar.journals is not None and sidecar.journals.enabled
            shown = "beside file stores (<file>.journals/)" if journals else "off"
            print(f"oma-sidecar run journals: {shown}", flush=True)
            if keyring is not None:
                sealed = f"sealed under key {keyring.active!r} ({len(keyring.ids)} in the ring)"
                print(f"oma-sidecar encryption at rest: {sealed}", flush=True)
            if sidecar.unreadable:
                listed = ", ".join(sidecar.unreadable)
                print(f"oma-sidecar unreadable run records (see ListRuns): {listed}", flush=True)
            await stop.wait()
    except (ServerConfigError, SidecarError, OmaError, OSError) as exc:
        # One line, no traceback: a bad setting, or a store that is unreachable, corrupt, or
        # (a state file) held by another process.
        print(f"oma serve: {exc}", file=sys.stderr)
        return 2
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return 0


@contextlib.asynccontextmanager
async def collector_threshold(threshold: int) -> AsyncIterator[None]:
    """Serve with the cyclic collector's first threshold at ``threshold`` (0: as it is).

    The interpreter's thresholds are put back after, so an ``oma serve`` run in-process leaves
    its host process as it found it.
    """
    before = gc.get_threshold()
    if threshold:
        gc.set_threshold(threshold, max(before[1], 20), max(before[2], 100))
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _token_file_problem(path: Path) -> str | None:
    """Why the token in ``path`` may not be used: every local user can read (or write) it.

    Whoever reads the token controls the sidecar: runs, approvals, tool results. A group may be
    meant to share it (the hosts' group); other users never are.
    """
    mode = path.stat().st_mode
    if mode & 0o006:
        return (
            f"token file {path} is readable or writable by every user (mode {mode & 0o777:o}); "
            f"restrict it (chmod 600 {path}, or 640 to share it with a group)"
        )
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sidecar``: parse the options and serve on uvloop."""
    parser = argparse.ArgumentParser(prog="python -m sidecar", description=__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(run(args))
