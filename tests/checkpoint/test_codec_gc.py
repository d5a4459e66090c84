"""``codec.gc_paused``: the collector is held off while a snapshot decodes and then put back."""

from __future__ import annotations

import gc

import pytest

from oma_actors.checkpoint.codec import decode, gc_paused
from oma_actors.errors import CheckpointError


def test_the_collector_is_put_back_as_it_was_even_on_an_error() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_callers_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_refused_value_leaves_the_collector_on() -> None:
    with pytest.raises(CheckpointError):
        decode("{not json", key="k")
    assert gc.isenabled()
