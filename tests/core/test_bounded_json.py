"""The bounded JSON reader: any input gives a value or the one typed error, `JsonRejected`, never another."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promote.core import bounded_json
from promote.core.bounded_json import MAX_DEPTH, JsonRejected, load_object, loads, parse_lines, read_lines, read_object

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ATTACKS = {
    "deep": ("[" * 50_000 + "]" * 50_000, "depth"),
    "deep-object": ('{"a":' * 50_000 + "1" + "}" * 50_000, "depth"),
    "deep-unclosed": ("[" * 50_000, "depth"),
    "400 digits": ('{"seconds": ' + "9" * 400 + "}", "number"),
    "5000 digits": ('{"seconds": ' + "9" * 5000 + "}", "number"),
    "past float": ('{"seconds": 1e400}', "number"),
    "400-digit float": ('{"seconds": ' + "9" * 400 + ".5}", "number"),
    "NaN": ('{"seconds": NaN}', "number"),
    "Infinity": ("[-Infinity]", "number"),
    "cut short": ('{"seconds": 1', "syntax"),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_each_attack_is_one_typed_error(name: str) -> None:
    text, kind = ATTACKS[name]
    with pytest.raises(JsonRejected) as e:
        loads(text)
    assert e.value.kind == kind
    assert "\n" not in str(e.value) and len(str(e.value)) < 120  # one line, and no input echoed


def test_quotes_never_closed_are_scanned_once() -> None:
    # 200,000 strings opened and never closed: a scan restarting at each quote would take minutes.
    started = time.perf_counter()
    with pytest.raises(JsonRejected) as e:
        loads("[" * (MAX_DEPTH + 1) + '"\\' * 200_000)
    assert e.value.kind == "depth" and time.perf_counter() - started < 5


def test_what_a_tool_writes_reads_as_json_does() -> None:
    doc = {"tokens_per_s": 41.5, "ids": [1, -2, 2**63 - 1], "s": "[[[{" * 100, "n": None, "ok": True, "e": "\\"}
    assert load_object(json.dumps(doc)) == doc
    nested = "[" * MAX_DEPTH + "]" * MAX_DEPTH  # as deep as allowed, brackets in strings never count
    assert loads(nested) == json.loads(nested)


def test_an_object_file_that_is_not_an_object_or_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "latin.json").write_bytes(b'{"a": "\xff"}')
    kinds = {}
    for name in ("list.json", "latin.json"):
        with pytest.raises(JsonRejected) as e:
            read_object(tmp_path / name)
        kinds[name] = e.value.kind
    assert kinds == {"list.json": "type", "latin.json": "encoding"}
    with pytest.raises(FileNotFoundError):
        read_object(tmp_path / "absent.json")


def test_a_file_past_the_size_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded_json, "MAX_BYTES", 1000)
    path = tmp_path / "big.jsonl"
    path.write_text("".join(json.dumps({"item": f"i{n}", "passed": True}) + "\n" for n in range(100)))
    with pytest.raises(JsonRejected) as e:
        read_object(path)
    assert e.value.kind == "size"
    lines = read_lines(path)
    assert isinstance(lines[-1], JsonRejected) and lines[-1].kind == "size"
    assert all(isinstance(v, dict) for v in lines[:-2])  # the line cut at the bound is refused, the rest read


def test_lines_keep_their_numbers_and_never_raise(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b'{"a": 1}\n\n' + b"[" * 50_000 + b"\n" + b'{"s": ' + b"1" * 400 + b"}\n\xff\xfe\n[2]\n")
    out = read_lines(path)
    assert out[0] == {"a": 1} and out[-1] == [2]
    refused = [(e.line, e.kind) for e in out if isinstance(e, JsonRejected)]
    assert refused == [(3, "depth"), (4, "number"), (5, "syntax")]


def _check(text: str) -> None:
    with contextlib.suppress(JsonRejected):
        loads(text)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-(10**500), 10**500)
    | st.floats()
    | st.text(alphabet='[]{}"\\ab,:'),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=20,
)


@FAST
@given(st.text())
def test_any_text(text: str) -> None:
    _check(text)
    assert all(isinstance(v, JsonRejected) or v is None or isinstance(v, (bool, int, float, str, list, dict))
               for v in parse_lines(text))  # fmt: skip


@FAST
@given(json_values, st.integers(min_value=0, max_value=3000), st.sampled_from(["[", '{"k":', '[[{"a":']))
def test_nested_values_huge_numbers_and_wrong_types(value: object, depth: int, opener: str) -> None:
    text = json.dumps(value)  # Python writes NaN, Infinity and integers of any size: all must be refused cleanly
    closer = "".join({"[": "]", "{": "}"}[c] for c in reversed(opener) if c in "[{")
    _check(opener * depth + text + closer * depth)
    try:
        load_object(text)
    except JsonRejected as e:
        assert e.kind in ("type", "number", "depth", "syntax")


@FAST
@given(st.binary(max_size=400), st.integers(min_value=0, max_value=500))
def test_any_bytes_in_a_file(tmp_path_factory: pytest.TempPathFactory, data: bytes, upto: int) -> None:
    path = tmp_path_factory.mktemp("bytes") / "out.json"
    path.write_bytes(data)
    with contextlib.suppress(JsonRejected):
        read_object(path)
    for v in read_lines(path, upto=upto):
        assert not isinstance(v, BaseException) or isinstance(v, JsonRejected)
