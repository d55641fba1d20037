"""Write small test packages (real pytest suites) and a promote.toml that runs them."""

from __future__ import annotations

import textwrap
from pathlib import Path

# Two tests that kill their process (os._exit, SIGKILL) among ones that pass, fail and leak an environment variable.
CRASHING_SUITE = """
    import os

    def test_1():
        pass

    def test_2_dies():
        os._exit(3)

    def test_3():
        pass

    def test_4_fails():
        assert 1 == 2

    def test_5_killed():
        os.kill(os.getpid(), 9)

    def test_6_leaks():
        os.environ["LEAKED_BY_TEST_6"] = "1"
"""


def write_package(root: Path, name: str, files: dict[str, str]) -> Path:
    """A package directory with the given test files (dedented)."""
    pkg = root / name
    pkg.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return pkg


def write_config(root: Path, packages: list[dict[str, object]]) -> Path:
    """promote.toml with one [[promote.packages]] table per entry."""
    lines = ["[promote]", 'trunk = "main"', ""]
    for pkg in packages:
        lines.append("[[promote.packages]]")
        for key, value in pkg.items():
            if isinstance(value, str):
                lines.append(f'{key} = "{value}"')
            elif isinstance(value, list):
                lines.append(f"{key} = [" + ", ".join(f'"{v}"' for v in value) + "]")
            else:
                lines.append(f"{key} = {value}")
        lines.append("")
    path = root / "promote.toml"
    path.write_text("\n".join(lines))
    return path
