"""A fleet's worker places a test elsewhere when a `skipif` that holds here names what another station has:
real items collected by pytest, the worker's own placement (tests/runners/fleet has it over real sshds)."""

from __future__ import annotations

from typing import Any

import pytest

from promote.core.station import Station
from promote.runners.plugin.fleet_worker import placed_elsewhere

pytest_plugins = ["pytester"]

SUITE = """
    import pytest

    EVALUATED = []  # each string condition evaluated appends to it

    @pytest.mark.skipif("EVALUATED.append('metal') or True", reason="Metal only")
    def test_metal_here_skips():
        pass

    @pytest.mark.skipif(False, reason="Metal only")
    def test_metal_condition_false_here():
        pass

    @pytest.mark.skip(reason="Metal only")
    def test_skip_mark():
        pass

    @pytest.mark.skipif(reason="Metal only")
    def test_skipif_without_condition():
        pass

    @pytest.mark.skipif("no_such_name", reason="Metal only")
    def test_condition_raises():
        pass

    @pytest.mark.skipif("EVALUATED.append('slow') or True", reason="slow, run by hand")
    def test_names_nothing():
        pass

    @pytest.mark.skipif(True, reason="needs the M-series chip")
    def test_worded_our_own_way():
        pass

    @pytest.mark.requires("checkpoint:big")
    @pytest.mark.skipif(True, reason="No GPU available")
    def test_checkpoint_and_gpu():
        pass
"""

HERE = Station("local", devices=("cpu",), resources=("checkpoint:big",))
MAC = Station("mac", devices=("metal", "cpu"))
CPU = Station("cpu-box", devices=("cpu",))
RULE = {"pattern": "(?i)needs the M-series chip", "requirement": "device:metal", "frames": []}


def place(pytester: pytest.Pytester, *others: Station, rules: list[dict[str, Any]] | None = None) -> list[str]:
    items = pytester.getitems(SUITE)
    given = {"station": HERE.to_json(), "others": [s.to_json() for s in others], "rules": rules or []}
    return [item.name for item in placed_elsewhere(given, items)]


def test_a_skip_that_holds_here_for_a_device_another_station_has_is_placed_there(pytester: pytest.Pytester) -> None:
    # Not the false condition, not the skips that hold everywhere, not one naming nothing, and not the condition
    # that raises (collection goes on; pytest reports the error when it runs the test here); the GPU skip goes
    # only to a station that also has the checkpoint its marker asks for.
    assert place(pytester, MAC) == ["test_metal_here_skips"]
    assert place(pytester, MAC, rules=[RULE]) == ["test_metal_here_skips", "test_worded_our_own_way"]
    both = Station("studio", devices=("metal",), resources=("checkpoint:big",))
    assert place(pytester, CPU, both) == ["test_metal_here_skips", "test_checkpoint_and_gpu"]


def test_conditions_are_evaluated_only_when_another_station_has_what_a_reason_names(
    pytester: pytest.Pytester,
) -> None:
    items = pytester.getitems(SUITE)
    calls: list[str] = items[0].module.EVALUATED  # type: ignore[attr-defined]
    given: dict[str, Any] = {"station": HERE.to_json(), "others": [], "rules": []}
    assert placed_elsewhere(given, items) == [] and calls == []
    given["others"] = [CPU.to_json()]
    assert placed_elsewhere(given, items) == [] and calls == []
    given["others"] = [MAC.to_json()]
    assert [i.name for i in placed_elsewhere(given, items)] == ["test_metal_here_skips"]
    assert calls == ["metal"]  # "slow, run by hand" names nothing: its condition was never evaluated
