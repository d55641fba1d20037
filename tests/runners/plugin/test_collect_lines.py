"""A module that cannot be collected is recorded with the line of it that raised, read from the exception."""

from __future__ import annotations

import pytest

from tests.runners.support import record

pytest_plugins = ["pytester"]


def test_each_kind_of_collection_error_records_the_line_of_the_module_that_raised(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_raises="import os\n\nraise RuntimeError('at import')\n",
        test_imports="import os\nimport promote_no_such_module_anywhere\n",
        test_syntax="def test_a():\n    pass\n\ndef broken(:\n",
        test_exits="import sys\n\n\nsys.exit(1)\n",
        test_fine="def test_ok():\n    pass\n",
    )
    # The error is raised in another file: the module's own line is the import that led there.
    pytester.makepyfile(helper_raises="raise ValueError('in the helper')\n")
    pytester.makepyfile(test_via_helper="import os\nimport os.path\nimport helper_raises\n")

    rec = record(pytester, "--continue-on-collection-errors", subprocess=True)

    tests = rec.tests()
    assert {n: t.line for n, t in tests.items() if t.index == 0} == {
        "test_raises.py": 3,
        "test_imports.py": 2,
        "test_syntax.py": 4,
        "test_exits.py": 4,
        "test_via_helper.py": 3,
    }
    # A test that ran has no such line: its place is its node id.
    assert tests["test_fine.py::test_ok"].line is None
