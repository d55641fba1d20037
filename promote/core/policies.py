"""The leak policies: what the plugin does about global state a test leaves changed, spelled once for every layer."""

from __future__ import annotations

RESTORE = "restore"  # report the leak, and put the state back before the next test
REPORT = "report"  # report the leak, and leave the state as the test left it
OFF = "off"  # do not probe: a rerun asks only whether a test fails
LEAK_POLICIES = (RESTORE, REPORT, OFF)
# What a package may ask for in the config; `off` is the runner's own, for its reruns.
CONFIGURABLE_LEAK_POLICIES = (RESTORE, REPORT)
