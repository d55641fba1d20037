"""The plugin's namer of code places never fails, whatever state a test left the process in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from promote.runners.plugin.sites import failure_site, shown


def test_a_failure_raised_in_a_deleted_working_directory_is_still_placed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "scratch"
    gone.mkdir()
    monkeypatch.chdir(gone)
    monkeypatch.setattr(sys, "path", ["", "relative/entry", *sys.path])
    gone.rmdir()
    with pytest.raises(FileNotFoundError):
        os.getcwd()
    try:
        raise KeyError("x")
    except KeyError as error:
        site = failure_site(error, tmp_path)
    assert site is not None
    kind, where, own = site
    assert kind == "KeyError"
    assert where.endswith(f"test_sites.py:{sys._getframe().f_lineno - 6}")
    assert shown("relative.py", tmp_path) == ("relative.py", False)
    assert own is False
