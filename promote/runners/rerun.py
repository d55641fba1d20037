"""Rerun chosen tests of a package, in a given order, in a fresh pytest process (for bisecting)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from promote.config import PackageConfig
from promote.errors import PromoteError
from promote.runners import progress
from promote.runners.records import read_all_results
from promote.runners.runner import PLUGIN, environment

FAILED = ("failed", "error")


class RerunError(PromoteError):
    """A rerun could not say whether the test failed (pytest could not run it at all)."""


class Rerunner:
    """Runs `prefix + [victim]` in a new process each time; every rerun keeps its own directory."""

    def __init__(self, pkg: PackageConfig, python: str, base: Path, station: Path | None = None) -> None:
        self.pkg = pkg
        self.python = python
        self.base = base
        # The same station inventory as the run: a test it cannot run is skipped in reruns too.
        self.station = station
        self.invocations = 0

    def _pytest(self, out_dir: Path, *options: str) -> subprocess.CompletedProcess[bytes]:
        self.invocations += 1
        cmd = [
            self.python, "-m", "pytest", "-p", "no:promote", "-p", PLUGIN,
            "--rootdir", str(self.pkg.path),
            # One process, serial, and leaks left in place: otherwise the polluter could not pollute.
            "-p", "no:xdist", "-p", "no:cacheprovider", "-q",
            *options, *self.pkg.args,
        ]  # fmt: skip
        if self.station is not None:
            cmd += ["--promote-station", str(self.station)]
        with (out_dir / "pytest.log").open("wb") as log:
            return subprocess.run(
                cmd,
                cwd=self.pkg.path,
                env=environment(self.pkg, self.python),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                check=False,
            )

    def collect(self) -> list[str]:
        """Every test id of the package in collection order."""
        out_dir = self.base / "collect"
        out_dir.mkdir(parents=True, exist_ok=True)
        ids = out_dir / "ids.txt"
        done = self._pytest(out_dir, "--collect-only", "--promote-collect", str(ids))
        if not ids.exists():
            raise RerunError(f"cannot collect the tests of {self.pkg.name} (pytest exit {done.returncode})")
        return [line for line in ids.read_text(encoding="utf-8").splitlines() if line]

    def run_through(self, victim: str) -> tuple[list[str], bool] | None:
        """Run the package in collection order up to `victim`: (the tests before it, whether it failed).

        One process both learns the order and sees whether the whole prefix makes the victim fail;
        None when the package has no such test.
        """
        out_dir = self.base / "through"
        out_dir.mkdir(parents=True, exist_ok=True)
        self._pytest(out_dir, "--promote-out", str(out_dir), "--promote-leaks", "off", "--promote-until", victim)
        records = sorted(
            (t for r in read_all_results(out_dir) for t in r.tests if t.parent is None and t.index > 0),
            key=lambda t: t.index,
        )
        order = [t.nodeid for t in records]
        if victim not in order:
            return None
        return order[: order.index(victim)], records[order.index(victim)].outcome in FAILED

    def fails(self, prefix: Sequence[str], victim: str) -> bool:
        """Run `prefix` then `victim` in one fresh process; True when the victim failed (or died)."""
        out_dir = self.base / f"rerun-{self.invocations + 1:03d}"
        out_dir.mkdir(parents=True, exist_ok=True)
        select = out_dir / "select.txt"
        select.write_text("".join(f"{t}\n" for t in [*prefix, victim]), encoding="utf-8")
        done = self._pytest(
            out_dir, "--promote-out", str(out_dir), "--promote-leaks", "off", "--promote-select", str(select)
        )
        outcomes = {t.nodeid: t.outcome for r in read_all_results(out_dir) for t in r.tests if t.parent is None}
        if victim in outcomes:
            return outcomes[victim] in FAILED
        for path in out_dir.glob("progress-*.jsonl"):
            if victim in progress.unfinished(path):
                return True  # the process died while running it: a failure too
        raise RerunError(
            f"{victim} did not run in a rerun of {self.pkg.name} (pytest exit {done.returncode}; log: {out_dir})"
        )
