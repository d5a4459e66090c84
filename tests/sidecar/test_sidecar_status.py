"""The one table from errors to gRPC status: LeaseError by its code, never one code for all."""

from __future__ import annotations

import ast
import importlib
import inspect
import pickle
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest
from grpc_status import rpc_status

import sidecar
from oma_actors import LeaseError
from oma_actors.errors import RunIdTakenError
from sidecar import status
from sidecar.client import error_info, error_reason
from sidecar.status import InvalidArgument, RichStatus, SidecarError, map_error, rich_status

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import ModuleType

LEASE_CODES = [
    ("RUN_NOT_FOUND", grpc.StatusCode.NOT_FOUND),
    ("RUN_VALIDATION_ERROR", grpc.StatusCode.INVALID_ARGUMENT),
    ("RUN_INTEGRITY_ERROR", grpc.StatusCode.DATA_LOSS),
    ("RUN_ALREADY_TERMINAL", grpc.StatusCode.FAILED_PRECONDITION),
    ("RUN_SUSPENDED", grpc.StatusCode.FAILED_PRECONDITION),
    ("RUN_INVALID_TRANSITION", grpc.StatusCode.FAILED_PRECONDITION),
    ("RUN_STORE_ATOMIC_REQUIRED", grpc.StatusCode.FAILED_PRECONDITION),
    ("RUN_LEASE_HELD", grpc.StatusCode.ABORTED),
    ("RUN_LEASE_LOST", grpc.StatusCode.ABORTED),
    ("RUN_CONFLICT", grpc.StatusCode.ABORTED),
]


@pytest.mark.parametrize(("code", "status"), LEASE_CODES, ids=[code for code, _ in LEASE_CODES])
def test_a_lease_error_maps_by_its_code_with_the_code_as_reason(
    code: str, status: grpc.StatusCode
) -> None:
    mapped = map_error(LeaseError(code, "run r-1 says no"))
    assert (mapped.code, mapped.reason) == (status, code)
    assert "run r-1 says no" in mapped.message


def test_a_fork_onto_a_taken_id_is_already_exists_not_a_corrupt_checkpoint() -> None:
    # RunIdTakenError is a CheckpointError: it read DATA_LOSS/CHECKPOINT_CORRUPT.
    mapped = map_error(RunIdTakenError("child", "has a run record"))
    assert (mapped.code, mapped.reason) == (grpc.StatusCode.ALREADY_EXISTS, "RUN_ALREADY_EXISTS")
    assert "run 'child' has a run record" in mapped.message


def test_an_unknown_lease_code_is_a_retryable_abort_with_its_own_reason() -> None:
    mapped = map_error(LeaseError("RUN_FROM_THE_FUTURE", "later"))
    assert (mapped.code, mapped.reason) == (grpc.StatusCode.ABORTED, "RUN_FROM_THE_FUTURE")


class _FailedCall:
    """What a client holds of a call that ended with ``status`` (the ``grpc.Call`` reads)."""

    def __init__(self, status: grpc.Status) -> None:
        self._status = status

    def code(self) -> grpc.StatusCode:
        return self._status.code

    def details(self) -> str:
        return self._status.details

    def trailing_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self._status.trailing_metadata


def test_the_rich_status_round_trips_its_error_info() -> None:
    error = InvalidArgument("tasks[0].id", "empty")
    status = rich_status(map_error(error))
    call = _FailedCall(status)
    assert (status.code, status.details) == (grpc.StatusCode.INVALID_ARGUMENT, error.message)
    info = error_info(call)  # type: ignore[arg-type]
    assert info is not None
    assert (info.reason, info.domain, dict(info.metadata)) == (
        "VALIDATION",
        "oma.v1",
        {"field": "tasks[0].id"},
    )
    assert error_reason(call) == "VALIDATION"  # type: ignore[arg-type]
    # The rich status must agree with the call's code: grpcio-status refuses one that does not.
    with pytest.raises(ValueError, match="doesn't match status code"):
        rpc_status.from_call(
            _FailedCall(
                RichStatus(grpc.StatusCode.INTERNAL, error.message, status.trailing_metadata)
            )
        )


# -- the proto's list of reasons -------------------------------------------------------------

SOURCE = Path(sidecar.__file__).resolve().parent
PROTO = SOURCE.parent / "proto" / "oma" / "v1" / "sidecar.proto"
LIST_START = "ErrorInfo reasons by code"
"""The line of the proto's header comment that opens its list of reasons."""
Function = ast.FunctionDef | ast.AsyncFunctionDef


def documented_reasons() -> dict[str, set[str]]:
    """The proto's list: gRPC code name -> the reasons listed under it."""
    lines = PROTO.read_text().splitlines()
    start = next(index for index, line in enumerate(lines) if LIST_START in line)
    listed: dict[str, set[str]] = {}
    code = ""
    for line in lines[start + 1 :]:
        if not line.startswith("//    "):
            break  # the list ends where the comment's next bullet ("//  * ...") begins
        text = re.sub(r"\([^)]*\)", "", line.removeprefix("//"))  # metadata and notes
        heading = re.match(r" {1,8}([A-Z_]+) ", text)  # a code; its reasons are indented more
        if heading is not None:
            code = heading.group(1)
            text = text[heading.end() :]
        listed.setdefault(code, set()).update(re.findall(r"\b[A-Z][A-Z0-9_]+\b", text))
    return listed


@dataclass(frozen=True)
class Carrier:
    """A callable whose argument ``param`` is the reason of an error with ``code``."""

    signature: inspect.Signature
    param: str
    code: grpc.StatusCode


@dataclass(frozen=True)
class Scope:
    """Where a call is written: its module, enclosing function and class."""

    module: ModuleType
    function: Function | None = None
    cls: ast.ClassDef | None = None


class RaisedReasons:
    """Reads the sidecar's source for the reason of every ``SidecarError`` it raises.

    A reason is the argument a ``SidecarError`` class binds to its ``reason`` parameter (an
    ``InvalidArgument`` without one: its default, ``VALIDATION``), read where the error is
    made: a string, a constant of the module, a local variable set to either (or to an
    ``x if c else y`` of them). A parameter of the enclosing function makes that function a
    carrier of the reason too, read at its own calls (``claim_refused(exc, "RUN_ACTIVE")``).
    Anything else is ``unread``: the test names it rather than guess.
    """

    def __init__(self) -> None:
        # __main__ is left out: importing it starts a server.
        paths = sorted(path for path in SOURCE.glob("*.py") if path.stem != "__main__")
        self.modules = {path: importlib.import_module(f"sidecar.{path.stem}") for path in paths}
        self.carriers: dict[str, Carrier] = {}
        for cls in _subclasses(SidecarError):
            signature = inspect.signature(cls)
            if "reason" in signature.parameters:
                self.carriers[cls.__name__] = Carrier(signature, "reason", cls.code)
        self.found: set[tuple[str, str]] = set()  # (code name, reason)
        self.unread: set[str] = set()
        trees = {path: _parsed(path) for path in self.modules}
        known = -1
        while known != len(self.carriers):  # until no pass finds another carrier
            known = len(self.carriers)
            for path, module in self.modules.items():
                self._visit(trees[path], Scope(module), path.name)

    def _visit(self, node: ast.AST, scope: Scope, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, ast.ClassDef):
                inner = Scope(scope.module, None, child)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = Scope(scope.module, child, scope.cls if scope.function is None else None)
            elif isinstance(child, ast.Call):
                self._call(child, scope, f"{where}:{child.lineno}")
            self._visit(child, inner, where)

    def _call(self, call: ast.Call, scope: Scope, where: str) -> None:
        carrier = self._carrier_of(call, scope)
        if carrier is None:
            return
        keywords = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg}
        bound = carrier.signature.bind_partial(*call.args, **keywords).arguments
        given = bound.get(carrier.param, carrier.signature.parameters[carrier.param].default)
        for reason in self._values(given, scope, carrier.code, where):
            self.found.add((carrier.code.name, reason))

    def _carrier_of(self, call: ast.Call, scope: Scope) -> Carrier | None:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "__init__" and scope.cls is not None:
            # super().__init__(reason, ...) of an error class: the base's reason, its own code
            cls = getattr(scope.module, scope.cls.name)
            base = cls.__mro__[1]
            if not issubclass(base, SidecarError):
                return None  # SidecarError's own: Exception(message)
            return Carrier(inspect.signature(base), "reason", cls.code)
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        return self.carriers.get(name) if isinstance(name, str) else None

    def _values(self, given: object, scope: Scope, code: grpc.StatusCode, where: str) -> set[str]:
        if isinstance(given, str):  # a default of the signature
            return {given}
        if isinstance(given, ast.Constant) and isinstance(given.value, str):
            return {given.value}
        if isinstance(given, ast.IfExp):
            return self._values(given.body, scope, code, where) | self._values(
                given.orelse, scope, code, where
            )
        if isinstance(given, ast.Name):
            function = scope.function
            assigned = [
                node.value
                for node in (ast.walk(function) if function is not None else ())
                if isinstance(node, ast.Assign)
                and [getattr(target, "id", None) for target in node.targets] == [given.id]
            ]
            if assigned:
                return set().union(*(self._values(v, scope, code, where) for v in assigned))
            if function is not None and given.id in _parameters(function):
                self._carry(function, scope, given.id, code)
                return set()
            value = getattr(scope.module, given.id, None)
            if isinstance(value, str):
                return {value}
        self.unread.add(f"{where}: {ast.unparse(given) if isinstance(given, ast.AST) else given}")
        return set()

    def _carry(self, function: Function, scope: Scope, param: str, code: grpc.StatusCode) -> None:
        """Make ``function`` a carrier: its ``param`` is passed on as a reason."""
        if scope.cls is not None and function.name == "__init__":
            return  # an error class's own reason parameter: a carrier already
        owner = getattr(scope.module, scope.cls.name) if scope.cls is not None else scope.module
        signature = inspect.signature(getattr(owner, function.name))
        if scope.cls is not None and not isinstance(
            inspect.getattr_static(owner, function.name), staticmethod
        ):
            signature = signature.replace(parameters=list(signature.parameters.values())[1:])
        self.carriers.setdefault(function.name, Carrier(signature, param, code))


def _subclasses(cls: type[SidecarError]) -> Iterator[type[SidecarError]]:
    yield cls
    for sub in cls.__subclasses__():
        yield from _subclasses(sub)


def _parameters(function: Function) -> set[str]:
    args = function.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {arg.arg for arg in every if arg is not None}


def mapped_reasons() -> set[tuple[str, str]]:
    """Every (code name, reason) ``map_error`` gives an error of oma_actors by its tables."""
    pairs = {(code.name, reason) for _, code, reason in status._OMA_TABLE}
    by_code = status._LEASE_CODES | status._APPROVAL_CODES  # the errors carrying their reason
    pairs |= {(code.name, reason) for reason, code in by_code.items()}
    fallback = map_error(RuntimeError("unexpected"))
    return pairs | {(fallback.code.name, fallback.reason)}


def test_every_reason_raised_is_in_the_protos_list() -> None:
    # A reason a client can meet and the proto does not list is one it cannot branch on.
    listed = documented_reasons()
    assert set(listed) <= set(grpc.StatusCode.__members__), sorted(listed)
    reasons = RaisedReasons()
    assert reasons.unread == set()  # every reason written so that it can be read here
    raised = reasons.found | mapped_reasons()
    assert ("FAILED_PRECONDITION", "RUN_OWNED_ELSEWHERE") in raised  # via claim_refused
    assert ("INVALID_ARGUMENT", "UNKNOWN_STORE_SCHEME") in raised  # via a local variable
    missing = sorted(
        (code, reason) for code, reason in raised if reason not in listed.get(code, ())
    )
    assert missing == []


def test_every_reason_in_the_protos_list_is_raised() -> None:
    # A reason listed and never raised is one a client writes a branch for that never runs
    # (DRAINING was, until a stopping sidecar refused to start runs; TOOL_CALL_NOT_FOUND,
    # CONCURRENT_MODIFICATION and RUN_SPEC_MISSING had no situation: an unknown tool call is
    # acknowledged STATUS_UNKNOWN_CALL, a lost compare-and-set has its own reasons, and every
    # run keeps its spec).
    raised = RaisedReasons().found | mapped_reasons()
    unraised = sorted(
        (code, reason)
        for code, reasons in documented_reasons().items()
        for reason in reasons
        if (code, reason) not in raised
    )
    assert unraised == []


def _parsed(path: Path) -> ast.Module:
    """``ast.parse`` of ``path``; in a child interpreter when CPython 3.11 raises
    ``SystemError`` ("AST constructor recursion depth mismatch"): its AST recursion counter is
    interpreter state that an error mid-conversion, or another thread's parse, can leave off
    for the rest of the process (cpython gh-106905), as a whole-suite run once showed."""
    try:
        return ast.parse(path.read_text())
    except SystemError:
        code = "import ast, pickle, sys; sys.stdout.buffer.write(pickle.dumps(ast.parse(open(sys.argv[1]).read())))"
        done = subprocess.run(
            [sys.executable, "-c", code, str(path)], capture_output=True, check=True, timeout=60
        )
        tree = pickle.loads(done.stdout)  # our own child's output
        assert isinstance(tree, ast.Module)
        return tree
