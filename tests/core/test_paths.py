"""Glob matching of repository paths, and credential redaction."""

from __future__ import annotations

import pytest

from promote.core.paths import matches
from promote.core.redact import redact

DEFAULTS = ("tests/**", "**/test_*.py", "**/*_test.py", "**/conftest.py")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests/test_a.py", True),
        ("tests/data/model.json", True),
        ("packages/sanctum-mlx/tests/test_decode.py", True),
        ("test_top.py", True),
        ("pkg/decode_test.py", True),
        ("conftest.py", True),
        ("pkg/sub/conftest.py", True),
        ("sanctum/decode.py", False),
        ("sanctum/testing.py", False),
        ("contests/x.py", False),
        ("pkg/tests.py", False),
    ],
)
def test_default_test_paths(path: str, expected: bool) -> None:
    assert matches(path, DEFAULTS) is expected


def test_single_star_stays_in_one_directory() -> None:
    assert matches("docs/a.md", ["docs/*.md"])
    assert not matches("docs/deep/a.md", ["docs/*.md"])
    assert matches("docs/deep/a.md", ["docs/**/*.md"])
    assert matches("docs/a.md", ["docs/**/*.md"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://user:tok@github.com/o/r.git", "https://***@github.com/o/r.git"),
        (
            "fatal: unable to access 'https://ghp_abc@host/r/': refused",
            "fatal: unable to access 'https://***@host/r/': refused",
        ),
        ("ssh://git@host:22/r.git", "ssh://***@host:22/r.git"),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
        ("/srv/git/r.git", "/srv/git/r.git"),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected
