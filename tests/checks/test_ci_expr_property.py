"""`if:` and `runs-on` expressions come from workflows anyone with push access writes: whatever their text and
whatever the matrix holds, the evaluator answers with a typed value or says why it cannot, never raises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from promote.checks.ci.expr import Truth, evaluate_if, evaluate_value

PIECES = st.sampled_from([
    "matrix.os", "matrix['os']", "matrix.config.runner", "github.repository", "github.event_name", "inputs.x",
    "case(", "fromJSON(", "format(", "join(", "contains(", "startsWith(", "'a'", "'3.11'", "3.11", "0", "-1",
    "true", "null", "==", "!=", "<", ">=", "&&", "||", "!", "(", ")", ",", "[", "]", ".", "*", "${{", "}}", " ",
    "'{0}-{1}'", "'[1,2]'", "'{\"a\": 1}'", "'''", "success()", "always()",
])  # fmt: skip
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True), st.text(max_size=5))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
MATRIX = st.none() | st.dictionaries(st.sampled_from(["os", "config", "python"]), VALUES, max_size=3)


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=12).map("".join) | st.text(max_size=40), MATRIX)
def test_any_if_is_a_truth_and_any_expression_a_value_or_why_not(text: str, matrix: dict[str, object] | None) -> None:
    truth = evaluate_if(text, "me/name", matrix)
    assert isinstance(truth, Truth) and truth.value in (True, False, None)
    assert truth.value is not None or truth.why
    value, why = evaluate_value("${{ " + text + " }}", "me/name", matrix)
    assert (value is None) == bool(why) or value is None


def test_a_hostile_nesting_is_unreadable_not_a_recursion_error() -> None:
    for text in ("(" * 5000 + "true" + ")" * 5000, "!" * 20000 + "true", "matrix" + "[0]" * 3000):
        truth = evaluate_if(text, None, {})
        assert truth.value is None and "nested deeper" in truth.why
    # One string token can hold a hostile document for fromJSON: read by the bounded JSON reader, never recursed.
    deep = evaluate_if("fromJSON('" + "[" * 100_000 + "')", None, {})
    assert deep.value is None and "nested deeper" in deep.why, deep
