"""The leak policies: what the plugin does about global state a test leaves changed, spelled once for every layer."""

from __future__ import annotations

from typing import Final

from promote.core.vocab import LeakPolicy

RESTORE: Final = "restore"  # report the leak, and put the state back before the next test
REPORT: Final = "report"  # report the leak, and leave the state as the test left it
OFF: Final = "off"  # do not probe: a rerun asks only whether a test fails
LEAK_POLICIES: tuple[LeakPolicy, ...] = (RESTORE, REPORT, OFF)
# What a package may ask for in the config; `off` is the runner's own, for its reruns.
CONFIGURABLE_LEAK_POLICIES: tuple[LeakPolicy, ...] = (RESTORE, REPORT)
