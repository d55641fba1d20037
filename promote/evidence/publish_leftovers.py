"""What a publisher killed past catching (SIGKILL, a power cut) left in the docs work tree, recognised as its own.

Before writing a file, the publisher notes in the docs repository's git directory the file and a digest of
the bytes it is about to write. The next publisher, holding the same lock, reads the note: a file that still
holds exactly those bytes is promote's own leftover, put back as the docs repository's HEAD has it (or caught
up in its index, when the commit had landed); a file changed since is someone's work and stays as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from promote.core.errors import PromoteError
from promote.core.git import Repo

NOTE_NAME = "promote-publish.pending"


class NoteError(PromoteError):
    """The note of what is about to be written could not be written: the publish is refused before it starts."""


def note_path(repo: Repo) -> Path:
    return Path(repo.out("rev-parse", "--path-format=absolute", "--git-path", NOTE_NAME).strip())


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def note(path: Path, files: Mapping[str, bytes]) -> None:
    """Say which files are about to be written, and with what (whole or not at all: a rename)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps({rel: _digest(data) for rel, data in files.items()}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:  # a full docs disk: nothing of the page is written yet
        tmp.unlink(missing_ok=True)
        raise NoteError(f"cannot write {tmp}: {e.strerror or e}") from None


def done(path: Path) -> None:
    path.unlink(missing_ok=True)


def _noted(path: Path) -> dict[str, str]:
    try:
        noted = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in noted.items() if isinstance(v, str)} if isinstance(noted, dict) else {}


def _ours(repo: Repo, rel: str, digest: str) -> bool:
    target = repo.root / rel
    return not target.is_symlink() and target.is_file() and _digest(target.read_bytes()) == digest


def is_leftover(repo: Repo, rel: str) -> bool:
    """Whether `rel` holds exactly what a publisher noted it was writing: promote's, recovered under the lock."""
    digest = _noted(note_path(repo)).get(rel)
    return digest is not None and _ours(repo, rel, digest)


def recover(repo: Repo, path: Path) -> list[str]:
    """Put back what a killed publisher left; the files put back. The note is gone afterwards."""
    put_back = []
    for rel, digest in _noted(path).items():
        if not _ours(repo, rel, digest):
            continue  # changed since promote wrote it (or gone): not ours to touch
        committed = repo.run("rev-parse", "--verify", "--quiet", f"HEAD:{rel}")
        if committed.ok and repo.run("hash-object", "--", rel).stdout.strip() == committed.stdout.strip():
            repo.run("update-index", "--add", "--", rel)  # the commit landed; the index had not caught up
        elif committed.ok:
            # Exactly the bytes promote wrote (the digest says so): HEAD's version takes nothing of anyone's.
            repo.run("checkout", "HEAD", "--", rel)
        else:
            (repo.root / rel).unlink()
        put_back.append(rel)
    done(path)
    return put_back
