"""Two stations for a fleet, each a real sshd on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import sshd
from tests.helpers.remote import sshd_or_skip


@pytest.fixture
def mini(tmp_path: Path) -> Iterator[sshd.Sshd]:
    yield from sshd_or_skip(tmp_path / "sshd-mini")


@pytest.fixture
def training(tmp_path: Path) -> Iterator[sshd.Sshd]:
    yield from sshd_or_skip(tmp_path / "sshd-training")
