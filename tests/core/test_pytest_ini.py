"""The one reader of a pytest configuration: any bytes give settings, none, or its one typed error."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promote.core.pytest_ini import MAX_BYTES, Ini, PytestConfigError, locate, parse_config, read_config

NAMES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")

# Text near what each format accepts, so the property reaches past the first parse error too.
NEARLY = st.sampled_from(
    [
        b"[pytest]\naddopts = ",
        b"[tool:pytest]\naddopts = ",
        b"[tool.pytest.ini_options]\naddopts = ",
        b"[tool.pytest]\nini_options = ",
        b"tool = ",
        b"[tool]\npytest = ",
        b"[pytest]\ntestpaths = ",
        b"[tool.pytest]\naddopts = ",
        b"pytest = ",
        b"[tool.pytest.ini_options]\ntestpaths = ",
        b"",
    ]
)


def _judge(name: str, data: bytes) -> None:
    try:
        found = parse_config(name, data)
    except PytestConfigError as e:
        assert str(e).startswith(name), str(e)
        return
    assert found is None or isinstance(found, Ini)
    if found is not None:
        assert all(isinstance(w, str) for w in (*found.addopts, *found.testpaths))


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(NAMES), data=st.binary(max_size=200))
def test_any_bytes_give_settings_none_or_the_typed_error(name: str, data: bytes) -> None:
    _judge(name, data)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(NAMES), head=NEARLY, tail=st.text(max_size=60))
def test_text_near_each_format_gives_settings_none_or_the_typed_error(name: str, head: bytes, tail: str) -> None:
    _judge(name, head + tail.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize(
    ("toml", "addopts"),
    [
        ('[tool.pytest.ini_options]\naddopts = "-p no:xdist --maxfail=1"\n', ("-p", "no:xdist", "--maxfail=1")),
        ('[tool.pytest.ini_options]\naddopts = ["-x", 3]\n', ("-x", "3")),
        ("tool = 1\n", None),  # a `tool` that is no table holds no pytest settings
        ("[tool]\npytest = [1]\n", None),
        ("[tool.pytest.ini_options]\naddopts = 7\ntestpaths = 5\n", ()),
        # pytest 9's native table wins over ini_options (pytest refuses both; the native one is what it would say).
        ('[tool.pytest]\naddopts = ["-p", "no:xdist"]\n', ("-p", "no:xdist")),
    ],
)
def test_pyproject_shapes(toml: str, addopts: tuple[str, ...] | None) -> None:
    found = parse_config("pyproject.toml", toml.encode())
    assert (found.addopts if found is not None else None) == addopts


def test_a_file_past_the_bound_is_the_typed_error_and_pytest_ini_without_section_still_counts(tmp_path: Path) -> None:
    big = tmp_path / "tox.ini"
    big.write_bytes(b"[pytest]\naddopts = -q\n" + b"#" * MAX_BYTES)
    with pytest.raises(PytestConfigError, match="larger than"):
        read_config(big, str(tmp_path))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pytest.ini").write_text("# nothing\n")
    assert locate(tmp_path / "pkg") == (tmp_path / "pytest.ini", Ini(str(tmp_path)))


def test_pytest_toml_counts_even_empty_and_reads_its_pytest_table() -> None:
    assert parse_config("pytest.toml", b"", "d") == Ini("d")
    assert parse_config("pytest.toml", b'[pytest]\naddopts = ["-x"]\ntestpaths = ["t"]\n', "d") == Ini(
        "d", ("-x",), ("t",)
    )
    assert parse_config(".pytest.toml", b"pytest = 3\n", "d") == Ini("d")


def test_arrays_nested_too_deep_for_tomllib_are_the_typed_error() -> None:
    data = b"[tool.pytest.ini_options]\naddopts = " + b"[" * 5000 + b"]" * 5000 + b"\n"
    with pytest.raises(PytestConfigError, match="nested too deep"):
        parse_config("pyproject.toml", data)
