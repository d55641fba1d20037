"""The bounded reader of `pytest --collect-only -q`: real pytest output read whole, anything else one typed error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promote.runners.collect_output import MAX_BYTES, Collection, CollectionUnreadable, read_collection
from promote.runners.inventory import Collector, collect, command
from promote.runners.test_roots import RootSpec

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_real_pytest_output_is_read_whole_errors_and_hostile_ids_included(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text(
        "import pytest\n\ndef test_x():\n    pass\n\nclass TestC:\n    def test_y(self):\n        pass\n\n"
        "@pytest.mark.parametrize('v', ['a::b', 'x y', '<script>', '\\n'])\ndef test_p(v):\n    pass\n"
    )
    (tmp_path / "test_broken.py").write_text("import no_such_module_here\n")
    # A conftest that prints while it is imported: its words are no test ids.
    (tmp_path / "conftest.py").write_text("print('hello from conftest')\n")
    done = subprocess.run(command(sys.executable), cwd=tmp_path, capture_output=True, check=False)
    assert done.returncode == 2, done.stdout
    read = read_collection(done.stdout)
    assert read.ids[:2] == ("test_a.py::test_x", "test_a.py::TestC::test_y")
    assert read.ids[2:] == ("test_a.py::test_p[a::b]", "test_a.py::test_p[x y]", "test_a.py::test_p[<script>]",
                            "test_a.py::test_p[\\n]")  # fmt: skip
    assert (read.errors, read.error_count) == (("test_broken.py",), 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("t.py::a\nt.py::b\n\n2 tests collected in 0.01s\n", Collection(("t.py::a", "t.py::b"))),
        ("t.py::a\n\n1/3 tests collected (2 deselected) in 0.01s\n", Collection(("t.py::a",))),
        ("\nno tests collected in 0.01s\n", Collection(())),
        ("ERROR x.py\nno tests collected, 1 error in 0.1s\n", Collection((), ("x.py",), 1)),
    ],
)
def test_summaries_pytest_writes(text: str, expected: Collection) -> None:
    assert read_collection(text.encode()) == expected


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"t.py::a\n", "summary"),
        (b"t.py::a\n\n2 tests collected in 0.01s\n", "count"),
        (b"1234567890123 tests collected in 0.1s\n", "summary"),
        (b"x" * (MAX_BYTES + 1), "size"),
    ],
)
def test_what_is_not_pytest_output_as_promised_is_one_typed_error(data: bytes, kind: str) -> None:
    with pytest.raises(CollectionUnreadable) as refused:
        read_collection(data)
    assert refused.value.kind == kind


@FAST
@given(st.binary(max_size=2000))
def test_any_bytes_give_a_collection_or_one_typed_error(data: bytes) -> None:
    try:
        read = read_collection(data)
    except CollectionUnreadable as e:
        assert e.kind in ("size", "summary", "count")
        return
    assert all("::" in i for i in read.ids)
    assert read.error_count >= len(read.errors)


ids = st.lists(
    st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=20).map(
        lambda s: f"tests/test_{s.strip() or 'x'}.py::t".replace("\n", "")
    ),
    max_size=30,
)


@FAST
@given(ids, st.text(max_size=300))
def test_ids_pytest_printed_are_read_back_whatever_follows(tests: list[str], tail: str) -> None:
    summary = f"{len(tests)} test{'s' if len(tests) != 1 else ''} collected in 0.02s"
    text = "\n".join([*tests, "", "=== warnings summary ===", tail.replace("\n", " "), summary]) + "\n"
    try:
        read = read_collection(text.encode())
    except CollectionUnreadable as e:
        # Only an id that is no id (no line of its own, a line pytest would not start with) may spoil the count.
        assert e.kind == "count"
        assert any(not t.strip() or t[0].isspace() or t.startswith("=") or "\r" in t for t in tests)
        return
    assert list(read.ids) == tests


def test_ids_are_rooted_where_pytest_roots_them_a_setup_py_above_included(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_s.py").write_text("def test_s():\n    pass\n")
    (tmp_path / "pkg" / "tests").mkdir(parents=True)
    (tmp_path / "pkg" / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "pkg" / "tests" / "test_p.py").write_text("def test_p():\n    pass\n")
    found = [
        collect(tmp_path, Collector(RootSpec(root, ("test_paths",)), sys.executable)) for root in ("tests", "pkg/tests")
    ]
    assert [(c.ids, c.problem) for c in found] == [
        (("tests/test_s.py::test_s",), None),
        (("pkg/tests/test_p.py::test_p",), None),
    ]
