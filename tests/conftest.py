"""Suite-wide fixtures: git identity and configuration pinned, nothing read from the user's setup (nor their venv)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.gitrepos import GIT_ENV


@pytest.fixture(autouse=True)
def pinned_git(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    home = tmp_path_factory.mktemp("home")
    (home / ".gitconfig").write_text('[init]\n\tdefaultBranch = main\n[protocol "file"]\n\tallow = always\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    # An activated venv running the suite would be taken for the tested repositories' own (`promote init`).
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    yield


@pytest.fixture
def fleet(tmp_path: Path):  # type: ignore[no-untyped-def]
    from tests.helpers.gitrepos import make_fleet

    return make_fleet(tmp_path)
