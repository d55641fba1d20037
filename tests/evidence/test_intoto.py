"""in-toto: one test-result v0.1 Statement per package, strictly parsed by in-toto-attestation, and a second
Statement with promote's own predicate for what v0.1 cannot hold, valid against the shipped schema."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest
from google.protobuf import json_format
from in_toto_attestation.predicates.test_result.v0 import test_result_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement

from promote import config
from promote.evidence import intoto
from promote.runners.suite import run_tests
from tests.helpers.packages import write_config, write_package

SHA = "0123456789abcdef0123456789abcdef01234567"
SUITE = """
    import pytest

    def test_green():
        pass

    def test_red():
        assert False

    @pytest.mark.skip(reason="later")
    def test_skipped():
        pass

    def test_needs_a_checkpoint():
        pass
"""


def parse(statement: dict[str, object]) -> Statement:
    """Parse as the in-toto library does, unknown fields refused, then validate."""
    pb = json_format.ParseDict(statement, statement_pb2.Statement(), ignore_unknown_fields=False)
    parsed = Statement.copy_from_pb(pb)
    parsed.validate()
    return parsed


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("intoto")
    write_package(root, "pkg", {"tests/test_a.py": SUITE})
    result = run_tests(config.load(write_config(root, [{"name": "pkg", "path": "pkg"}])))
    # As the requirements check would mark it: a test no station can run.
    return root, replace(result.packages[0], blocked_tests=("tests/test_a.py::test_needs_a_checkpoint",))


def test_the_test_result_statement_has_exactly_the_v0_1_fields(package) -> None:  # type: ignore[no-untyped-def]
    root, pkg = package
    both = intoto.statements(
        pkg, repo_url="https://bot:s3cret@github.com/team/sanctum.git", root=root, commit=SHA, run_id="r1"
    )
    assert set(both) == {"pkg", "pkg.promote"}
    statement = both["pkg"]
    parse(statement)
    predicate = json_format.ParseDict(statement["predicate"], test_result_pb2.TestResult(), ignore_unknown_fields=False)
    assert predicate.result == "FAILED"
    assert list(predicate.passed_tests) == ["tests/test_a.py::test_green"]
    assert list(predicate.failed_tests) == ["tests/test_a.py::test_red"]
    assert sorted(predicate.warned_tests) == [
        "tests/test_a.py::test_needs_a_checkpoint",
        "tests/test_a.py::test_skipped",
    ]
    assert statement["subject"] == [
        {
            "name": "https://github.com/team/sanctum.git",
            "uri": "https://github.com/team/sanctum.git",
            "digest": {"gitCommit": SHA},
        }
    ]
    assert "s3cret" not in json.dumps(both)


def test_a_field_v0_1_lacks_is_refused_by_the_strict_parse(package) -> None:  # type: ignore[no-untyped-def]
    _root, pkg = package
    statement = intoto.statement(pkg, repo_url="https://github.com/team/sanctum.git", commit=SHA, run_id="r1")
    with pytest.raises(json_format.ParseError, match="blockedTests"):
        json_format.ParseDict({**statement["predicate"], "blockedTests": []}, test_result_pb2.TestResult())


def test_what_v0_1_cannot_hold_is_in_our_own_statement_valid_against_its_schema(package) -> None:  # type: ignore[no-untyped-def]
    root, pkg = package
    detail = intoto.statements(pkg, repo_url="", root=root, commit=SHA, run_id="r1")["pkg.promote"]
    parse(detail)
    assert detail["predicateType"] == intoto.DETAIL_TYPE
    schema = json.loads(files("promote").joinpath(intoto.DETAIL_SCHEMA).read_text("utf-8"))
    jsonschema.validate(detail["predicate"], schema)
    assert [b["test"] for b in detail["predicate"]["blockedTests"]] == ["tests/test_a.py::test_needs_a_checkpoint"]
    assert detail["predicate"]["station"] == pkg.station
    assert detail["subject"][0]["name"] == root.resolve().as_uri(), "no remote: the repository's own file: URL"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**detail["predicate"], "extra": 1}, schema)


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("https://user:token@github.com/team/sanctum.git", "https://github.com/team/sanctum.git"),
        ("ssh://git@mini.local:2222/srv/sanctum.git", "ssh://mini.local:2222/srv/sanctum.git"),
        ("git@github.com:team/sanctum.git", "ssh://github.com/team/sanctum.git"),
        ("file:///srv/sanctum.git", "file:///srv/sanctum.git"),
        ("/srv/mirrors/sanctum.git", "file:///srv/mirrors/sanctum.git"),
    ],
)
def test_the_subject_is_the_canonical_remote_url_without_credentials(url: str, canonical: str) -> None:
    assert intoto.canonical_url(url, Path("/repo")) == canonical
