"""Real venvs with one given MLX release from the package index, built once and reused."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Set to a directory to keep the venvs between test sessions (CI points it into its cache).
CACHE_ENV = "PROMOTE_MLX_VENVS"


def mlx_venv(version: str, base: Path) -> Path:
    """The python of a venv holding `mlx[cpu]==version`, pytest and pytest-xdist, and nothing else.

    Not `--system-site-packages`: that venv would see the newer MLX installed beside promote.
    Fails (saying what pip said) when the index has no such wheel for this platform.
    """
    root = Path(os.environ.get(CACHE_ENV) or base) / f"mlx-{version}"
    root.parent.mkdir(parents=True, exist_ok=True)
    # Test workers (xdist) may ask for the same venv at once: one builds it, the others wait for it.
    with open(root.parent / f".mlx-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(version, root)


def _build(version: str, root: Path) -> Path:
    python = root / "bin" / "python"
    ready = root / ".ready"
    if ready.is_file():
        return python
    host = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([host, "-m", "venv", "--clear", str(root)], check=True)
    pip = subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            f"mlx[cpu]=={version}",
            "pytest",
            "pytest-xdist",
        ],
        capture_output=True,
        text=True,
    )
    if pip.returncode != 0:
        pytest.fail(f"cannot install mlx[cpu]=={version} here: {pip.stderr.strip().splitlines()[-1:]}")
    found = subprocess.run(
        [python, "-c", "import mlx.core as mx; print(mx.__version__)"], capture_output=True, text=True
    )
    assert found.stdout.strip() == version, found.stderr[-2000:]
    ready.write_text(version)
    return python
