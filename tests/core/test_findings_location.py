"""A package's rootdir joins node ids, and the plugin's places, to paths relative to the repository root."""

from __future__ import annotations

from pathlib import PurePosixPath

from promote.core.findings import Finding, Location, Rootdir


def test_a_node_id_is_located_at_its_file_under_the_rootdir() -> None:
    sub, top = Rootdir(PurePosixPath("packages/p")), Rootdir(PurePosixPath("."))

    assert sub.locate("tests/test_x.py::TestC::test_d[1-a::b]") == Location("packages/p/tests/test_x.py")
    assert sub.locate("tests/test_x.py", 3) == Location("packages/p/tests/test_x.py", 3)
    assert top.locate("tests/test_x.py::test_a") == Location("tests/test_x.py")
    # pytest's pseudo-nodes name no file.
    assert sub.locate("<collection>") is None
    assert sub.locate("") is None


def test_rebase_moves_a_rootdir_relative_location_under_the_rootdir_and_leaves_others_alone() -> None:
    sub = Rootdir(PurePosixPath("pkg"))
    placed = Finding("leaked-state", "warning", "t.py::a", "m", location=Location("t.py", 4))
    unplaced = Finding("leaked-state", "info", "mlx", "m")

    assert sub.rebase(placed).location == Location("pkg/t.py", 4)
    assert sub.rebase(unplaced) is unplaced
