"""KeyRing: the key file's rules (typed errors naming the file and line) and the ring's checks."""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING

import pytest

from oma_actors.errors import ConfigurationError
from oma_actors.stores.keyring import PREFIX, KeyRing

if TYPE_CHECKING:
    from pathlib import Path

KEY = base64.b64encode(bytes(range(32))).decode()
OTHER = base64.b64encode(bytes(32)).decode()


def key_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "keys"
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)
    return path


def test_the_first_key_is_active_and_every_key_opens(tmp_path: Path) -> None:
    path = key_file(tmp_path, f"# rotated 2026-12\nnew:{KEY}\n\nold:{OTHER}\n")
    ring = KeyRing.from_file(path)
    assert ring.active == "new"
    assert ring.ids == ("new", "old")
    envelope = ring.seal(b"x", b"ctx")
    assert envelope.startswith(PREFIX + "new:")
    assert ring.open(envelope, b"ctx") == b"x"
    assert KEY not in repr(ring)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620])
def test_a_key_file_others_can_access_is_refused(tmp_path: Path, mode: int) -> None:
    path = key_file(tmp_path, f"k:{KEY}\n", mode)
    with pytest.raises(ConfigurationError, match="accessible by other users"):
        KeyRing.from_file(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "holds no key"),
        ("# only a comment\n", "holds no key"),
        (f"{KEY}\n", "line 1: expected 'id:base64key'"),
        (f"bad id:{KEY}\n", "line 1: expected 'id:base64key'"),
        ("k:not*base64\n", "line 1: key 'k' is not valid base64"),
        (f"k:{base64.b64encode(bytes(16)).decode()}\n", "line 1: key 'k' is 16 bytes"),
        (f"k:{KEY}\nj:{OTHER}\nk:{OTHER}\n", "line 3: key id 'k' is given twice"),
    ],
)
def test_a_malformed_key_file_names_the_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        KeyRing.from_file(key_file(tmp_path, text))


def test_a_missing_key_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read it"):
        KeyRing.from_file(tmp_path / "absent")


def test_the_ring_checks_its_keys() -> None:
    with pytest.raises(ConfigurationError, match="at least one key"):
        KeyRing({}, active="k")
    with pytest.raises(ConfigurationError, match="must be 32 bytes, got 31"):
        KeyRing({"k": bytes(31)}, active="k")
    with pytest.raises(ConfigurationError, match="not in the ring"):
        KeyRing({"k": bytes(32)}, active="j")
    with pytest.raises(ConfigurationError, match="key id 'a:b'"):
        KeyRing({"a:b": bytes(32)}, active="a:b")
