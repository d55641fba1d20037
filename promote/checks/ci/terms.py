"""Shared vocabulary of the CI audit: shell words, test ids, repo-relative paths, per-test decisions."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from promote.core.vocab import DROPPED as DROPPED
from promote.core.vocab import RUN as RUN
from promote.core.vocab import UNDECIDED as UNDECIDED
from promote.core.vocab import CIVerdict as Fate

# Stands for the checkout directory ($GITHUB_WORKSPACE) so absolute paths into it can be made relative.
WORKSPACE = "/__promote_workspace__"


@dataclass(frozen=True)
class Word:
    """One shell word after quote removal; `known` is False when it holds an expansion we cannot see."""

    text: str
    known: bool = True


def words(*texts: str) -> tuple[Word, ...]:
    return tuple(Word(t) for t in texts)


def show(argv: tuple[Word, ...]) -> str:
    """A command as people read it (quoted where the shell would need it)."""
    out = []
    for w in argv:
        text = w.text
        out.append(f'"{text}"' if (" " in text or not text) and w.known else text)
    return " ".join(out)


@dataclass(frozen=True)
class Decision:
    """Whether one command (or job) runs one test, and why not when it does not.

    `scope` marks a drop that is no filter: the test is simply outside what the command covers.
    `subject` is set by the job that decides; a command's own decisions leave it empty.
    """

    verdict: Fate
    why: str = ""
    scope: bool = False
    subject: str = ""  # what a finding about the drop names: the job, and the filter when one dropped it


RUNS = Decision(RUN)


@dataclass(frozen=True)
class NodeId:
    """A collected test id relative to the repository root: `path.py::Class::test[param]`."""

    raw: str
    module: str
    parts: tuple[str, ...]

    @classmethod
    def parse(cls, raw: str) -> NodeId:
        pieces: list[str] = []
        depth, start = 0, 0
        # "::" inside a parametrize id (`test_x[a::b]`) does not separate nodes.
        i = 0
        while i < len(raw):
            ch = raw[i]
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth = max(0, depth - 1)
            elif depth == 0 and raw.startswith("::", i):
                pieces.append(raw[start:i])
                start = i + 2
                i += 1
            i += 1
        pieces.append(raw[start:])
        return cls(raw, normalize(pieces[0]) or pieces[0], tuple(pieces[1:]))


def normalize(path: str, cwd: str = "") -> str | None:
    """`path` (relative to repo-relative `cwd`) as a repo-relative path; "" is the root; None if outside."""
    if path.startswith(WORKSPACE):
        path = path[len(WORKSPACE) :].lstrip("/")
        cwd = ""
    elif path.startswith("/"):
        return None
    joined = posixpath.normpath(posixpath.join(cwd, path)) if path or cwd else "."
    if joined == ".":
        return ""
    if joined == ".." or joined.startswith("../"):
        return None
    return joined


def under(path: str, directory: str) -> bool:
    """True when repo-relative `path` is `directory` or inside it ("" is the root)."""
    return directory == "" or path == directory or path.startswith(directory + "/")


def label(source: str, job: str) -> str:
    return f"job `{job}` of {source}"
