"""What a package's earlier runs counted, read back from their run.json."""

from __future__ import annotations

import json
from pathlib import Path

from promote.runners.package_findings import STORED_COUNTS, previous_total
from promote.runners.summary import PackageResult


def _stored(runs: Path, run_id: str, **counts: int) -> None:
    (runs / run_id).mkdir(parents=True)
    package = {"name": "pkg", **counts}
    (runs / run_id / "run.json").write_text(json.dumps({"packages": [package]}), encoding="utf-8")


def test_the_previous_total_counts_every_stored_outcome_errors_included(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _stored(runs, "20250101T000000Z-aaaa", passed=3)
    # Only errors, as a broken fixture leaves a run: still a run that ran tests.
    _stored(runs, "20250102T000000Z-bbbb", errors=2, crashed=1)
    _stored(runs, "20250103T000000Z-cccc")

    assert previous_total(runs / "20250104T000000Z-dddd" / "pkg") == ("20250102T000000Z-bbbb", 3)
    assert previous_total(runs / "20250102T000000Z-bbbb" / "pkg") == ("20250101T000000Z-aaaa", 3)


def test_the_stored_counts_are_keys_a_package_writes(tmp_path: Path) -> None:
    written = PackageResult("pkg", tmp_path, "local", 0, 0.0, (), (), (), tmp_path).to_json()
    assert [k for k in STORED_COUNTS if not isinstance(written.get(k), int)] == []
