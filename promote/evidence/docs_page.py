"""A published evidence page's JSON as a run of the shared history, every field checked for what it must hold.

Anyone who can push to the docs repository writes these pages, so a page is read as hostile: within the bounds
of promote.core.bounded_json, then field by field here, and anything else is one `JsonRejected` (the fault
`type` for a field that holds the wrong thing), which the cache reports as that page skipped.
"""

from __future__ import annotations

from typing import Any, get_args

from promote.core.bounded_json import MAX_BYTES, JsonRejected, loads
from promote.core.vocab import Fate
from promote.evidence.history import StoredRun, TestOutcome

SCHEMA_ID = "urn:promote-release:promote/schemas/evidence.schema.json"
OUTCOMES = frozenset(get_args(Fate))


def _wrong(where: str, expected: str) -> JsonRejected:
    return JsonRejected("type", f"{where} is not {expected}")


def _text(value: object, where: str) -> str:
    # Text SQLite can hold: a lone surrogate (`"\ud800"` is valid JSON) cannot be encoded for it.
    if not isinstance(value, str):
        raise _wrong(where, "text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _wrong(where, "text (a lone surrogate)") from None
    return value


def _maybe_text(value: object, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _wrong(where, "an object")
    for key in value:
        _text(key, f"a key of {where}")
    return value


def _test(item: object, at: int) -> TestOutcome:
    """One entry of `outcomes.tests`: package, id, outcome, reason, blocker, verdict, and (since CI was kept per
    test) the reason no CI job runs it."""
    where = f"outcomes.tests[{at}]"
    if not isinstance(item, list) or len(item) not in (6, 7):
        raise _wrong(where, "a list of 6 or 7 items")
    package, nodeid = _text(item[0], f"{where}[0]"), _text(item[1], f"{where}[1]")
    outcome = _text(item[2], f"{where}[2]")
    if outcome not in OUTCOMES:
        raise _wrong(f"{where}[2]", f"an outcome ({', '.join(sorted(OUTCOMES))})")
    reason, blocker, verdict, *ci = (_maybe_text(v, f"{where}[{i}]") for i, v in enumerate(item[3:], 3))
    return TestOutcome(package, nodeid, outcome, 0.0, "", reason, blocker, verdict, ci[0] if ci else None)


def run_of(doc: object) -> StoredRun | None:
    """A published page as a run (None: not an evidence page, or one from before `outcomes`); JsonRejected
    naming the first field that holds the wrong thing."""
    if not isinstance(doc, dict) or doc.get("$schema") != SCHEMA_ID or "outcomes" not in doc:
        return None
    shared = _object(doc["outcomes"], "outcomes")
    provenance = _object(doc.get("provenance"), "provenance")
    collected = _object(shared.get("collected"), "outcomes.collected")
    for package, count in collected.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise _wrong(f"outcomes.collected[{package!r}]", "a count")
    stations = _object(shared.get("stations", {}), "outcomes.stations")
    gates = _object(doc.get("gates", {}), "gates")
    tests = shared.get("tests")
    if not isinstance(tests, list):
        raise _wrong("outcomes.tests", "a list")
    ci = shared.get("ci", False)
    if not isinstance(ci, bool):
        raise _wrong("outcomes.ci", "true or false")
    return StoredRun(
        run_id=_text(doc.get("run"), "run"),
        kind=_text(shared.get("kind"), "outcomes.kind"),
        started=_text(shared.get("started"), "outcomes.started"),
        finished=_text(provenance.get("finished"), "provenance.finished"),
        commit=_maybe_text(shared.get("commit"), "outcomes.commit"),
        command=_text(provenance.get("command"), "provenance.command"),
        # The packages that ran (a test of one of them that the page does not list passed there).
        stations={p: _text(stations.get(p, ""), f"outcomes.stations[{p!r}]") for p in collected},
        gates={k: _text(_object(g, f"gates[{k!r}]").get("status"), f"gates[{k!r}].status") for k, g in gates.items()},
        tests=tuple(_test(item, at) for at, item in enumerate(tests)),
        ci_read=ci,
    )


def read_page(data: bytes, *, max_bytes: int = MAX_BYTES) -> StoredRun | None:
    """The run `data` (a published page's JSON) holds, or None when it is not an evidence page; JsonRejected
    when it is not JSON within the bounds or holds a field of the wrong type."""
    if len(data) > max_bytes:
        raise JsonRejected("size", f"larger than {max_bytes} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise JsonRejected("encoding", f"not UTF-8 (byte {e.start})") from None
    return run_of(loads(text))
