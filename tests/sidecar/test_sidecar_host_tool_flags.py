"""A host tool declared consequential carries OMA's flag (it is in the approval hash, issue 13)."""

from __future__ import annotations

import pytest

from sidecar._pb.oma.v1 import sidecar_pb2 as pb
from sidecar.tool_host import ToolHost


@pytest.mark.parametrize("consequential", [True, False])
def test_a_host_tool_keeps_its_consequential_flag(consequential: bool) -> None:
    definition = pb.ToolDefinition(name="charge", consequential=consequential)
    tool = ToolHost().make_tool(definition, run_attempt=1)
    assert tool.consequential is consequential
    assert tool.effect == ("unsafe" if consequential else "idempotent")
