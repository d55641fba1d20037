"""What `promote bisect` prints: one line, and one line per polluter when there are many."""

from __future__ import annotations

from promote.cli.commands.testing import bisect_text
from promote.runners.rerun_verdict import Verdict


def test_many_polluters_each_get_a_line_of_their_own_and_a_newline_in_an_id_starts_none() -> None:
    named = (*(f"t.py::test_{i}" for i in range(5)), "t.py::test_x\n::error::forged")
    text = bisect_text(
        "t.py::v", Verdict("t.py::v", "order-dependent", named, 9, "3 of 3 after each of them", each=True), 9
    )
    lines = text.splitlines()
    assert lines[0] == (
        "t.py::v: order-dependent: caused by each of these 6 tests (3 of 3 after each of them); 9 reruns, 9 pytest runs"
    )
    assert lines[1:6] == [f"  t.py::test_{i}" for i in range(5)]
    assert len(lines) == 7 and not any(line.lstrip().startswith("::") for line in lines)


def test_two_needed_together_are_said_together_and_one_alone_plainly() -> None:
    together = Verdict("t.py::v", "order-dependent", ("t.py::a", "t.py::b"), 12, "4 of 4 after t.py::a, t.py::b")
    assert "caused by together: t.py::a, t.py::b (" in bisect_text("t.py::v", together, 12)
    one = Verdict("t.py::v", "order-dependent", ("t.py::a",), 10, "", each=True)
    assert bisect_text("t.py::v", one, 11) == "t.py::v: order-dependent: caused by t.py::a; 10 reruns, 11 pytest runs"
