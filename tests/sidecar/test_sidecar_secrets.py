"""Store passwords never leave the sidecar: GetRun and ServerInfo show masked store URIs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.record import Outcome, RunRecordV1, RunView
from sidecar.run_view import run_message
from sidecar.servicer import SystemServicer

PG = "postgresql://oma:hunter2@db.example:5432/app?table=runs"
REDIS = "redis://:hunter2@cache.example:6379/0?prefix=oma%3A"


def test_get_run_masks_the_password_of_the_run_store() -> None:
    for uri in (PG, REDIS):
        record = RunRecordV1(
            run_id="r-1", request_id="q", request=pb.StartRunRequest(), store_uri=uri
        )
        view = RunView(
            record=record, status=pb.RUN_STATUS_QUEUED, outcome=Outcome(),
            updated_at=record.updated_at, tasks=(), pending_approvals=(),
        )  # fmt: skip
        shown = run_message(view, last_seq=0, full=True)
        assert "hunter2" not in str(shown)
        assert "db.example" in shown.checkpoint.store_uri or "cache.example" in (
            shown.checkpoint.store_uri
        )


async def test_server_info_masks_the_password_of_the_default_store() -> None:
    executor: Any = SimpleNamespace(python_tools=[], journals=SimpleNamespace(enabled=False))
    desk: Any = SimpleNamespace()
    servicer = SystemServicer(executor=executor, desk=desk, default_store_uri=PG)
    info = await servicer.GetServerInfo(pb.GetServerInfoRequest(), None)
    assert "hunter2" not in info.default_store_uri
    assert info.default_store_uri.startswith("postgresql://oma:")
    assert "db.example:5432/app" in info.default_store_uri
