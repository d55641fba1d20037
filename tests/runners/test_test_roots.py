"""Where a repository's tests are: test roots from tracked files and named directories, and who runs each test."""

from __future__ import annotations

from promote.evidence.gates import inventory_line
from promote.runners.inventory import Collected, tally
from promote.runners.test_roots import directory_of, discovered, merged


def test_a_test_module_counts_under_its_outermost_tests_directory_below_its_root() -> None:
    assert directory_of("models/llama/tests/unit/test_a.py", "") == "models/llama/tests"
    assert directory_of("tests/unit/test_a.py", "tests/unit") == "tests/unit"
    assert directory_of("src/pkg/test_a.py", "src") == "src"


def test_discovery_takes_test_modules_test_paths_matches_and_nothing_else() -> None:
    files = ["pkg/tests/test_a.py", "pkg/tests/helpers.py", "src/x_test.py", "docs/test_notes.md", "vendor/test_v.py"]
    assert discovered(files, ("pkg/**", "src/**")) == ["pkg/tests", "src"]


def test_a_root_inside_another_is_collected_with_it_and_each_keeps_what_named_it() -> None:
    roots = merged([("pkg/tests", "test_paths"), ("pkg/tests/unit", "job `t`"), ("pkg/tests", "job `t`"), ("b", "x")])
    assert [(r.path, r.sources) for r in roots] == [("b", ("x",)), ("pkg/tests", ("test_paths", "job `t`"))]
    assert [r.path for r in merged([(".", "pytest"), ("a", "test_paths")])] == [""]


def test_the_owner_of_each_test_and_the_gate_sentence_in_numbers() -> None:
    collected = (
        Collected("a/tests", ("x",), ("a/tests/test_1.py::t1", "a/tests/test_1.py::t2")),
        Collected("b/tests", ("x",), ("b/tests/test_2.py::t",), errors=("b/tests/test_3.py",), error_count=1),
        Collected("c/tests", ("x",), ("c/tests/test_4.py::t",)),
    )
    owners = {"b/tests/test_2.py::t": ("nobody", None), "b/tests/test_3.py": ("nobody", None)}
    whole = tally(collected, {"a/tests/test_1.py::t1": "a"}, lambda t: owners.get(t, ("ci-undecided", "why")))
    assert [(r.path, r.count, r.owner, r.by, r.errors) for r in whole.roots] == [
        ("a/tests", 1, "ci-undecided", "why", ()),
        ("a/tests", 1, "package", "a", ()),
        ("b/tests", 1, "nobody", None, ("b/tests/test_3.py",)),
        ("c/tests", 1, "ci-undecided", "why", ()),
    ]
    assert inventory_line(whole) == (
        "1 of 4 tests are run by a package; 1 in 1 directory by nothing: no package, no CI job; "
        "2 in 2 directories by no package, and maybe by a CI job (undecided)"
    )
    everything = tally(collected[:1], {"a/tests/test_1.py::t1": "a", "a/tests/test_1.py::t2": "a"}, owners.get)
    assert inventory_line(everything) == "all 2 tests in the repository are run by a package"
