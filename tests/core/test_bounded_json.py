"""The bounded JSON reader (promote/core/bounded_json.py): for any input, a value or its one typed error."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promote.core.bounded_json import INT_MAX, INT_MIN, MAX_DEPTH, JSONBoundsError, depth, loads

FAST = settings(max_examples=150, deadline=None)

# JSON values within every bound: 64-bit integers, finite floats, any text.
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(INT_MIN, INT_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4), max_leaves=30
)


@FAST
@given(st.binary(max_size=400))
def test_any_bytes_give_a_value_or_the_one_error(data: bytes) -> None:
    try:
        loads(data)
    except JSONBoundsError as e:
        assert e.fault in ("size", "depth", "number", "syntax")


@FAST
@given(st.text(alphabet='[]{}",:\\0123456789-.eE truefalsn', max_size=300))
def test_any_json_looking_text_gives_a_value_or_the_one_error(text: str) -> None:
    with contextlib.suppress(JSONBoundsError):
        loads(text)


@FAST
@given(VALUES)
def test_a_document_within_the_bounds_reads_back_as_written(value: Any) -> None:
    assert loads(json.dumps(value).encode()) == value


@FAST
@given(st.integers(0, 20_000), st.sampled_from(["[", '{"k":']))
def test_nesting_is_refused_past_the_bound_without_recursion(levels: int, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    text = opener * levels + "0" * (opener == '{"k":' or levels == 0) + closer * levels
    if levels > MAX_DEPTH:
        with pytest.raises(JSONBoundsError) as e:
            loads(text)
        assert e.value.fault == "depth"
    else:
        assert depth(text) == levels
        loads(text)


@FAST
@given(st.integers())
def test_integers_beyond_64_bits_are_refused_as_numbers(n: int) -> None:
    if INT_MIN <= n <= INT_MAX:
        assert loads(str(n)) == n
    else:
        with pytest.raises(JSONBoundsError) as e:
            loads(str(n))
        assert e.value.fault == "number"


@pytest.mark.parametrize("text", ["9" * 400, "-" + "9" * 5000, "1e999", "-1e400", "NaN", "Infinity", "-Infinity"])
def test_numbers_no_column_can_hold_are_refused(text: str) -> None:
    with pytest.raises(JSONBoundsError) as e:
        loads(f"[{text}]")
    assert e.value.fault in ("number", "syntax")
    assert not math.isnan(loads("[1.5]")[0])


def test_brackets_inside_strings_do_not_count_and_size_is_bounded() -> None:
    assert loads(json.dumps({"a": "[" * 1000 + '\\"' + "{" * 1000})) == {"a": "[" * 1000 + '\\"' + "{" * 1000}
    with pytest.raises(JSONBoundsError) as e:
        loads(b" " * 101, max_bytes=100)
    assert e.value.fault == "size"
