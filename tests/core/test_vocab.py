"""core.vocab: every status and verdict the JSON contracts allow is the Literal the code branches on, and back."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any, get_args

import pytest

from promote.core import policies, vocab
from promote.core.vocab import COUNT_KEYS, RED, assert_never, is_red, worst


def schema(name: str) -> dict[str, Any]:
    return json.loads(files("promote.schemas").joinpath(f"{name}.schema.json").read_text(encoding="utf-8"))


def at(doc: dict[str, Any], pointer: str) -> Any:
    node: Any = doc
    for part in pointer.strip("/").split("/"):
        node = node[part]
    return node


# (schema, JSON pointer to an `enum`, the values the code may write there)
CONTRACTS: list[tuple[str, str, tuple[object, ...]]] = [
    *[("audit", f"properties/gates/properties/{g}/properties/status/enum", get_args(vocab.Status))
      for g in ("tested", "docs", "merged", "deployed")],
    *[("evidence", f"properties/gates/properties/{g}/properties/status/enum", get_args(vocab.Status))
      for g in ("tested", "docs", "merged", "deployed")],
    ("evidence", "properties/verdict/enum", get_args(vocab.Status)),
    ("audit", "properties/published/properties/status/enum", get_args(vocab.PublishStatus)),
    ("audit", "properties/published/properties/push/enum", (*get_args(vocab.PushStatus), None)),
    ("audit", "properties/unstored/items/properties/what/enum", get_args(vocab.Stored)),
    ("check", "properties/verdict/enum", get_args(vocab.CheckVerdict)),
    ("evidence", "properties/merge/properties/check_verdict/enum", get_args(vocab.CheckVerdict)),
    ("merge", "properties/verdict/enum", get_args(vocab.MergeVerdict)),
    ("check", "properties/mirrors/items/properties/status/enum", get_args(vocab.MirrorState)),
    ("evidence", "properties/merge/properties/mirrors/items/properties/status/enum", get_args(vocab.MirrorState)),
    ("bisect", "properties/verdict/enum", get_args(vocab.RerunVerdict)),
    ("evidence", "properties/failures/items/properties/tests/items/properties/rerun/properties/verdict/enum",
     get_args(vocab.RerunVerdict)),
    ("evidence", "properties/failures/items/properties/tests/items/properties/outcome/enum", RED),
    ("accel", "properties/verdict/enum", get_args(vocab.AccelVerdict)),
    ("accel", "$defs/bench_case/properties/verdict/enum", get_args(vocab.BenchVerdict)),
    ("accel", "$defs/acceleration/properties/bench/properties/verdict/enum", get_args(vocab.BenchVerdict)),
    ("accel", "$defs/overload/properties/source/enum", get_args(vocab.LoadSource)),
    ("config", "properties/promote/properties/accelerations/items/properties/bench/properties/better/enum",
     get_args(vocab.Better)),
    ("ledger", "properties/outcome/enum", get_args(vocab.LedgerOutcome)),
    ("config", "properties/promote/properties/packages/items/properties/leaks/enum",
     policies.CONFIGURABLE_LEAK_POLICIES),
    ("config", "properties/tool/properties/promote/properties/packages/items/properties/leaks/enum",
     policies.CONFIGURABLE_LEAK_POLICIES),
    ("evidence", "properties/stories/properties/tests/items/properties/kind/enum", get_args(vocab.StoryKind)),
    ("evidence", "properties/stories/properties/tests/items/properties/severity/enum", get_args(vocab.Severity)),
    ("history", "$defs/story/properties/kind/enum", get_args(vocab.StoryKind)),
    ("history", "$defs/story/properties/severity/enum", get_args(vocab.Severity)),
    *[(name, "$defs/finding/properties/severity/enum", get_args(vocab.Severity))
      for name in ("accel", "audit", "bisect", "check", "history", "test")],
]  # fmt: skip


@pytest.mark.parametrize(("name", "pointer", "allowed"), CONTRACTS, ids=[f"{n}:{p}" for n, p, _ in CONTRACTS])
def test_each_schema_enum_is_the_literal_the_code_writes(name: str, pointer: str, allowed: tuple[object, ...]) -> None:
    enum = at(schema(name), pointer)

    # Both ways: a value the code writes that the schema refuses breaks readers; one the schema allows that the
    # code never writes is a contract nobody keeps.
    assert sorted(map(str, enum)) == sorted(map(str, allowed))
    assert len(enum) == len(set(enum))


def test_every_status_enum_in_the_schemas_is_covered_by_a_contract_above() -> None:
    covered = {(name, pointer) for name, pointer, _ in CONTRACTS}
    found = set()
    for path in Path(str(files("promote.schemas"))).glob("*.schema.json"):
        name = path.name.removesuffix(".schema.json")
        if name in ("github-workflow", "sarif-2.1.0"):  # vendored: not our vocabulary
            continue
        found |= {(name, p) for p in enum_pointers(json.loads(path.read_text(encoding="utf-8")), "")}
    # `sync` is a transport, and `sections` a page key: names, not statuses or verdicts.
    uncovered = {
        (n, p) for n, p in found - covered if not p.endswith(("/sync/enum", "/sections/items/properties/key/enum"))
    }
    assert uncovered == set()


def enum_pointers(node: Any, here: str) -> list[str]:
    if isinstance(node, dict):
        out = [f"{here}/enum".strip("/")] if "enum" in node else []
        return out + [p for k, v in node.items() for p in enum_pointers(v, f"{here}/{k}")]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in enum_pointers(v, f"{here}/{i}")]
    return []


def test_the_package_counts_in_the_json_contract_are_the_mapped_keys() -> None:
    package = at(schema("test"), "properties/packages/items")
    counted = [k for k in package["required"] if k in get_args(vocab.CountKey)]

    assert counted == ["passed", "failed", "errors", "skipped", "blocked", "crashed"]
    assert set(COUNT_KEYS) == set(get_args(vocab.Count))
    assert set(COUNT_KEYS.values()) == set(get_args(vocab.CountKey))
    assert COUNT_KEYS["error"] == "errors"


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([], "pass"),
        (["pass", "pass"], "pass"),
        (["pass", "undecided"], "undecided"),
        (["undecided", "fail", "pass"], "fail"),
        (["fail"], "fail"),
    ],
)
def test_worst_is_fail_then_undecided_then_pass(statuses: list[vocab.Status], expected: vocab.Status) -> None:
    assert worst(statuses) == expected
    assert worst(iter(statuses)) == expected  # one pass over a generator is enough


def test_a_red_test_failed_errored_or_crashed_and_nothing_else_is() -> None:
    outcomes = get_args(vocab.TestOutcome)

    assert [o for o in outcomes if is_red(o)] == ["failed", "error", "crashed"]
    assert not is_red(None)
    assert not is_red("blocked")


def test_assert_never_refuses_a_value_that_reached_it() -> None:
    with pytest.raises(AssertionError, match="'new-status'"):
        assert_never("new-status")  # type: ignore[arg-type]


def test_mypy_refuses_a_drift_branch_that_misses_a_status(tmp_path: Path) -> None:
    # The point of the Literals: a chain that forgets one value fails at type-check, not at run time.
    source = tmp_path / "branch.py"
    source.write_text(
        "from promote.core.vocab import DriftStatus, assert_never\n\n"
        "def every(status: DriftStatus) -> str:\n"
        "    if status == 'same' or status == 'test-only':\n        return 'unchanged'\n"
        "    if status == 'undeployed' or status == 'behind':\n        return 'changed'\n"
        "    assert_never(status)\n\n"
        "def one_missed(status: DriftStatus) -> str:\n"
        "    if status == 'same' or status == 'test-only':\n        return 'unchanged'\n"
        "    if status == 'behind':\n        return 'changed'\n"
        "    assert_never(status)\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    errors = [line for line in done.stdout.splitlines() if ": error: " in line]
    assert len(errors) == 1, done.stdout
    assert "branch.py:15:" in errors[0]  # the chain that missed a status, not the complete one
    assert "Literal['undeployed']" in errors[0]
