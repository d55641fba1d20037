"""Where a package's own options disable xdist, read from real files the way pytest finds them."""

from __future__ import annotations

from pathlib import Path

from promote.runners.configuration import own_options


def test_no_xdist_is_found_in_the_ini_file_above_the_package_in_pytest_addopts_and_in_args(tmp_path: Path) -> None:
    pkg = tmp_path / "repo" / "pkg"
    pkg.mkdir(parents=True)
    (tmp_path / "repo" / "tox.ini").write_text("[pytest]\naddopts = -q -pno:xdist\n")

    assert own_options(pkg, (), {}).blocks("xdist") == str(tmp_path / "repo" / "tox.ini")
    # The nearest configuration is the one pytest reads: a pytest.ini in the package hides the tox.ini above it.
    (pkg / "pytest.ini").write_text("[pytest]\naddopts = -p no:randomly\n")
    own = own_options(pkg, (), {})
    assert own.blocks("xdist") is None and own.blocks("randomly") == str(pkg / "pytest.ini")
    assert own_options(pkg, (), {"PYTEST_ADDOPTS": "-p no:xdist"}).blocks("xdist") == "PYTEST_ADDOPTS"
    assert own_options(pkg, ("-p", "no:xdist"), {}).blocks("xdist") == "its args"
    # A plugin merely loaded, or "-p" as the last word, disables nothing.
    assert own_options(pkg, ("-p", "xdist", "-p"), {}).blocks("xdist") is None


def test_an_unreadable_configuration_is_said_not_raised(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes(b"[tool.pytest.ini_options]\naddopts = \xff\n")

    own = own_options(tmp_path, (), {})

    assert own.blocks("xdist") is None
    assert own.unreadable is not None and "not UTF-8" in own.unreadable
