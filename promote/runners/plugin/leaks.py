"""Run a set of probes around each test and turn a difference into a `leaked-state` finding."""

from __future__ import annotations

import time
from collections.abc import Sequence

from promote.core.findings import Finding, Location, Severity
from promote.core.vocab import IMPORT
from promote.runners.plugin.probes import Change, Probe, Unreadable, change_text, show_change
from promote.runners.plugin.process_probes import DAEMON_THREAD
from promote.runners.plugin.records import LeakRecord, Origin
from promote.runners.plugin.sites import Sites

# What importing a module ordinarily changes, by pytest's doing (its import mode puts the module's root on
# sys.path) or a library's (threads, warning filters and loggers set up once): not a leak of the module's.
NOT_AT_IMPORT = frozenset({"sys.path", "threads", "warnings.filters", "logging"})
FOLD = 10  # tests a group names before saying "and N more"
SHOWN_VALUES = 3  # values a group shows per changed key where its tests left different ones


class LeakWatch:
    """Snapshots probes, compares, restores under the `restore` policy, and times itself."""

    def __init__(self, probes: Sequence[Probe], *, restore: bool, sites: Sites | None = None) -> None:
        self.probes = tuple(probes)
        self.restore = restore
        # Where calls were made (None: every change is put down to the test it was seen in).
        self.sites = sites
        self.elapsed_ns = 0
        self.tests = 0
        self.carried: dict[str, object] | None = None
        # Per probe: how many tests changed it only by ordinary use, restored without a finding.
        self.ordinary: dict[str, int] = {}
        # The same under either policy (under `report` ordinary use is left as the test left it).
        self.used: dict[str, int] = {}

    def before_test(self) -> dict[str, object]:
        """The state as a test starts: the last test's unchanged after-state, else a snapshot."""
        # Nothing runs between one test's teardown and the next test's setup in a process,
        # so an after-state that matched its before-state is still the state: reuse it.
        carried, self.carried = self.carried, None
        return carried if carried is not None else self.snapshot()

    def snapshot(self) -> dict[str, object]:
        """Every probe's current value (an `Unreadable` where a probe raised)."""
        start = time.perf_counter_ns()
        values: dict[str, object] = {}
        for p in self.probes:
            try:
                values[p.name] = p.snapshot()
            except Exception as e:
                values[p.name] = Unreadable(e)
        self.elapsed_ns += time.perf_counter_ns() - start
        return values

    def diff(self, before: dict[str, object], after: dict[str, object]) -> dict[str, list[Change]]:
        """The changes per probe name, only for probes that changed."""
        out = {}
        for p in self.probes:
            try:
                changes = p.changes(before[p.name], after[p.name])
            except Exception as e:
                changes = [Change(p.name, before[p.name], Unreadable(e))]
            # A change nobody could see (the same value, as a new object) is no change.
            changes = [c for c in changes if not _looks_same(c)]
            if changes:
                out[p.name] = changes
        return out

    def rebase(self, baseline: dict[str, object], pre: dict[str, object]) -> None:
        """Accept what changed since `pre` (a wider-scoped fixture's doing) into `baseline`."""
        post = self.snapshot()
        for name in self.diff(pre, post):
            baseline[name] = post[name]

    def check(self, nodeid: str, before: dict[str, object], test_file: str | None = None) -> list[LeakRecord]:
        """Compare now against `before`; restore if the policy says so; what leaked, one record per origin.

        `test_file`: the test's module. A change whose calls were all made outside it (a library, a fixture) is
        recorded apart, under the code that made it; the test's own stay together in one record, as before.
        """
        self.tests += 1
        after = self.snapshot()
        start = time.perf_counter_ns()
        changed = {} if _equal(before, after) else self.diff(before, after)
        if not changed:
            self.carried = after
            self.elapsed_ns += time.perf_counter_ns() - start
            return []
        quiet = self._ordinary(before, after, changed)
        if quiet:
            # Under `report` ordinary use is left as the test left it, and counted the same way.
            restored = self._restore(before, quiet)[0] if self.restore else list(quiet)
            for name in restored:
                self.used[name] = self.used.get(name, 0) + 1
                if self.restore:
                    self.ordinary[name] = self.ordinary.get(name, 0) + 1
            # A quiet change that could not be put back is a leak after all.
            changed.update({name: changes for name, changes in quiet.items() if name not in restored})
        records = []
        for origin, changes in self._by_origin(changed, test_file):
            # A daemon thread that other code started ends with the process: there is nothing to put back.
            running = origin is not None and all(c.kind == DAEMON_THREAD for cs in changes.values() for c in cs)
            restored, failed = self._restore(before, changes) if self.restore and not running else ([], [])
            shown = tuple(show_change(c) for cs in changes.values() for c in cs)
            kinds = tuple((name, c.kind) for name, cs in changes.items() for c in cs)
            records.append(LeakRecord(nodeid, shown, tuple(restored), tuple(failed), kinds=kinds, origin=origin))
        self.elapsed_ns += time.perf_counter_ns() - start
        return records

    def _by_origin(
        self, changed: dict[str, list[Change]], test_file: str | None
    ) -> list[tuple[Origin | None, dict[str, list[Change]]]]:
        """The changes per code that made them (None: the test itself), daemon threads it started apart.

        Code is one call site per function: the lines of one helper that seeds three generators are one origin,
        named by the earliest of its lines that made a change.
        """
        out: dict[tuple[tuple[str, str, int, bool, bool] | None, bool], tuple[Origin | None, dict[str, list[Change]]]]
        out = {}
        for name, changes in changed.items():
            for c in changes:
                origin = self._origin(c, test_file)
                # Apart from anything else the same code changed: nothing to restore there, nothing failed.
                running = origin is not None and c.kind == DAEMON_THREAD
                key = (None if origin is None else origin.site, running)
                shown, by_name = out.setdefault(key, (origin, {}))
                if origin is not None and shown is not None and origin.line < shown.line:
                    out[key] = (origin, by_name)
                by_name.setdefault(name, []).append(c)
        # The test's own first: its record is the one a reader of the plugin's findings meets first.
        return sorted(out.values(), key=lambda group: group[0] is not None)

    def _origin(self, change: Change, test_file: str | None) -> Origin | None:
        """The code outside the test that made `change`: None when any call was the test's own, or none was seen."""
        if self.sites is None or not change.sites:
            return None
        origins = [self.sites.origin(site, test_file) for site in change.sites]
        return None if None in origins else origins[0]

    def _ordinary(
        self, before: dict[str, object], after: dict[str, object], changed: dict[str, list[Change]]
    ) -> dict[str, list[Change]]:
        """Take out of `changed` the probes whose change their `ordinary` calls ordinary use."""
        quiet = {}
        for p in self.probes:
            if p.ordinary is None or p.name not in changed:
                continue
            try:
                ordinary = p.ordinary(before[p.name], after[p.name])
            except Exception:
                ordinary = False
            if ordinary:
                quiet[p.name] = changed.pop(p.name)
        return quiet

    def _restore(self, before: dict[str, object], changed: dict[str, list[Change]]) -> tuple[list[str], list[str]]:
        restored, failed = [], []
        for p in self.probes:
            if p.name not in changed:
                continue
            value = before[p.name]
            if p.restore is None or isinstance(value, Unreadable):
                failed.append(p.name)
                continue
            try:
                p.restore(value)
                restored.append(p.name)
            except Exception as e:
                failed.append(f"{p.name} ({type(e).__name__}: {e})")
        return restored, failed

    def imported(self, module: str, before: dict[str, object]) -> LeakRecord | None:
        """What importing `module` changed since `before`, never restored: the module's tests rely on it.

        A module that sets state when imported sets it before any test runs (pytest imports every module
        first), so a test collected earlier or later can fail of it; such a leak is named, not undone.
        """
        changed = {k: v for k, v in self.diff(before, self.snapshot()).items() if k not in NOT_AT_IMPORT}
        if not changed:
            return None
        shown = tuple(show_change(c) for changes in changed.values() for c in changes)
        return LeakRecord(module, shown, phase=IMPORT)

    def us_per_test(self) -> float | None:
        """Mean probe cost per test in microseconds (snapshots, comparison, restores)."""
        return round(self.elapsed_ns / 1000 / self.tests, 2) if self.tests else None


def leak_finding(leak: LeakRecord, location: Location | None = None) -> Finding:
    """One test's `leaked-state` finding: a warning, unless state that should have been put back could not be.

    `location`: the test's, relative to the rootdir (the runner makes it relative to the repository).
    """
    keys = "; ".join(change_text(*change, _kind(leak, i)) for i, change in enumerate(leak.changes))
    if leak.phase == IMPORT:
        message = f"changed global state when imported: {keys}"
        return Finding("leaked-state", "warning", leak.test, message, cause=leak.test, location=location)
    # Whether a later test failed because of it is for the runner to say (promote.runners.leak_groups).
    message = f"changed global state and did not put it back: {keys} ({what_was_done(leak)})"
    if leak.origin is not None:
        # The runner groups these under the code that made them, across tests and workers.
        message = f"{leak.origin} changed global state during the test: {keys} ({what_was_done(leak)})"
    cause = leak.test if leak.origin is None else str(leak.origin)
    return Finding("leaked-state", leak_severity(leak), leak.test, message, cause=cause, location=location)


def leak_severity(leak: LeakRecord) -> Severity:
    return "error" if leak.unrestored else "warning"


def what_was_done(leak: LeakRecord) -> str:
    """What promote did about the leak: restored it, could not, or left it (under `report`)."""
    if leak.phase == IMPORT:
        return "left as is: the module's own tests may rely on it"
    if left_running(leak):
        return "left running: a daemon thread ends with its process, and the test did not start it itself"
    # Said as promote's act, after the test's: "did not put it back (restored)" read as if the test had.
    if leak.unrestored:
        done = f"promote restored {', '.join(leak.restored)} after the test; " if leak.restored else "promote "
        return f"{done}could not restore {', '.join(leak.unrestored)}"
    return "promote restored it after the test" if leak.restored else 'promote left it as is, as leaks = "report" asks'


def _kind(leak: LeakRecord, i: int) -> str:
    """The kind of the record's `i`th change (a record from before kinds were kept: a plain set)."""
    return leak.kinds[i][1] if len(leak.kinds) == len(leak.changes) else "set"


def change_texts(leaks: list[LeakRecord]) -> list[str]:
    """Each change the records (of one group) made, in the order first made, with its values over all of them.

    The records of one call site need not all have made the same changes (a helper that seeds numpy only once
    numpy is imported): each change is shown with the values of the records that made it.
    """
    seen: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
    for leak in leaks:
        for i, (key, before, after) in enumerate(leak.changes):
            befores, afters = seen.setdefault((key, _kind(leak, i)), ([], []))
            befores.append(before)
            afters.append(after)
    return [change_text(key, values(b), values(a), kind) for (key, kind), (b, a) in seen.items()]


def folded(items: list[str], most: int = FOLD) -> str:
    """Up to `most` items, then how many more."""
    shown = ", ".join(items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def values(seen: list[str]) -> str:
    """One value as it is; several as how many, and the first few of them."""
    distinct = list(dict.fromkeys(seen))
    if len(distinct) == 1:
        return distinct[0]
    return f"{len(distinct)} values ({folded(distinct, SHOWN_VALUES)})"


def left_running(leak: LeakRecord) -> bool:
    """Whether `leak` is only daemon threads that code outside the test started (nothing to restore, no error)."""
    return leak.origin is not None and bool(leak.kinds) and all(kind == DAEMON_THREAD for _, kind in leak.kinds)


def _looks_same(change: Change) -> bool:
    if change.kind != "set":
        # A call is the change (a seed to the value already there is still a seed), whatever the values show.
        return False
    try:
        return repr(change.before) == repr(change.after)
    except Exception:
        return False


def _equal(before: dict[str, object], after: dict[str, object]) -> bool:
    # One comparison of the whole snapshot (in C) for the usual test that changed nothing; the
    # per-probe diffs run only when something differs. A value whose `==` raises is not "equal".
    try:
        return bool(before == after)
    except Exception:
        return False
