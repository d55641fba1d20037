"""A real tmpfs to fill up, for tests of what promote does when a disk is full."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def mounted(mount: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's `size=` syntax) at the existing directory `mount`; skips where none can be made."""
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(fs: Path, *, leave: int) -> None:
    """Fill the filesystem to the last block, then free `leave` bytes of it."""
    filler = fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - leave))


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[Path]:
    """`directory` (which keeps its files) refusing every write, for root too.

    root writes through any mode bits, so as root the directory becomes a tmpfs holding a copy of its files,
    remounted read-only (EROFS, as a read-only volume refuses); otherwise its mode drops to r-x.
    """
    if os.geteuid() != 0:
        directory.chmod(0o500)
        try:
            yield directory
        finally:
            directory.chmod(0o700)
        return
    saved = directory.with_name(directory.name + ".saved")
    subprocess.run(["cp", "-a", str(directory), str(saved)], check=True)
    with mounted(directory, "1m"):
        subprocess.run(["cp", "-a", f"{saved}/.", str(directory)], check=True)
        done = subprocess.run(["mount", "-o", "remount,ro", str(directory)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot remount a tmpfs read-only here: {done.stderr.decode().strip()}")
        yield directory
