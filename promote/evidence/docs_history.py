"""The team's shared history: the evidence JSON pages published in the docs repository, read into a local cache.

Each published page carries its run's `outcomes` (every package's collected count, and the tests that did not
pass); `promote history --tests --from-docs` imports the pages not cached yet into `.promote/docs-history.sqlite`
and tells the stories over them, so every machine tells the same story from the same pages.
"""

from __future__ import annotations

import json
import posixpath
from typing import Any

from promote.checks.docs import index_path
from promote.config import Config
from promote.core import state
from promote.core.errors import ConfigError
from promote.core.git import Repo
from promote.evidence.history import History, StoredRun, TestOutcome

CACHE_NAME = "docs-history.sqlite"
SCHEMA_ID = "urn:promote-release:promote/schemas/evidence.schema.json"


def outcomes(run: StoredRun) -> dict[str, Any]:
    """What a published page needs to be a run of the shared history: the packages' counts, and the tests that did not
    pass or that no CI job runs."""
    return {
        "kind": run.kind,
        "started": run.started,
        "commit": run.commit,
        "stations": run.stations,
        "collected": run.collected,
        "ci": run.ci_read,
        "tests": [[t.package, t.nodeid, t.outcome, t.reason, t.blocker, t.verdict, t.ci]
                  for t in run.tests if t.outcome != "passed" or t.ci],
    }  # fmt: skip


def _run_of(doc: dict[str, Any]) -> StoredRun | None:
    """A published page as a run of the cache (None: not an evidence page, or one from before `outcomes`)."""
    shared = doc.get("outcomes")
    if doc.get("$schema") != SCHEMA_ID or not isinstance(shared, dict):
        return None
    # A page published before CI was kept per test has six items a test, and no `ci`.
    tests = tuple(TestOutcome(p, n, o, 0.0, "", reason, blocker, verdict, ci[0] if ci else None)
                  for p, n, o, reason, blocker, verdict, *ci in shared["tests"])  # fmt: skip
    return StoredRun(
        run_id=str(doc["run"]),
        kind=str(shared["kind"]),
        started=str(shared["started"]),
        finished=str(doc["provenance"]["finished"]),
        commit=shared["commit"],
        command=str(doc["provenance"]["command"]),
        # The packages that ran (a test of one of them that the page does not list passed there).
        stations={p: str(shared["stations"].get(p, "")) for p in shared["collected"]},
        gates={k: str(g["status"]) for k, g in doc["gates"].items()},
        tests=tests,
        ci_read=bool(shared.get("ci", False)),
    )


def cache(config: Config) -> History:
    """The local cache of the published pages, brought up to date with the docs repository's HEAD."""
    if config.docs is None:
        raise ConfigError(f"{config.path}: --from-docs needs [{config.prefix}.docs] naming the docs repository")
    history = History(state.state_dir(config.root), name=CACHE_NAME)
    try:
        repo = Repo(config.docs.repo)
        head = repo.resolve("HEAD")
        folder = posixpath.dirname(index_path(config.docs.page))
        known = set(history.run_ids())
        for path in repo.tree_files(head) if head else []:
            if posixpath.dirname(path) == folder and path.endswith(".json"):
                try:
                    run = _run_of(json.loads(repo.out("show", f"{head}:{path}")))
                except (ValueError, KeyError, TypeError):
                    continue  # a JSON file that is not an evidence page of ours
                if run is not None and run.run_id not in known:
                    history.record(run)
    except BaseException:
        history.close()
        raise
    return history
