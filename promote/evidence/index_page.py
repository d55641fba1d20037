"""The index of evidence pages in the docs repository: newest first, one line per run (date, commit, four gates)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from promote.checks.docs import MARKER
from promote.core.git import Repo
from promote.evidence.gates import TITLES
from promote.evidence.render import md_code, md_text

STATUS = {"pass": "PASS", "fail": "FAIL", "undecided": "UNDECIDED"}


@dataclass(frozen=True)
class Entry:
    """One published evidence page, as its front matter describes it."""

    path: str  # inside the docs repository
    date: str
    commit: str
    run: str
    gates: tuple[tuple[str, str], ...]  # (gate key, status)


def front_matter(text: str) -> dict[str, str]:
    """The `key: value` lines between a page's opening and closing `---` (values unquoted), else nothing."""
    lines = text.splitlines()
    if not lines or lines[0] != "---" or "---" not in lines[1:]:
        return {}
    fields = {}
    for line in lines[1 : lines.index("---", 1)]:
        key, sep, value = line.partition(": ")
        if sep:
            fields[key] = value.strip().strip('"')
    return fields


def entry(path: str, text: str) -> Entry | None:
    """The page's entry, when promote wrote it as an evidence page."""
    fields = front_matter(text)
    if fields.get(MARKER) != "page":
        return None
    gates = tuple(g.partition("=")[::2] for g in fields.get("promote_gates", "").split() if "=" in g)
    date, commit, run = (fields.get(f"promote_{k}", "") for k in ("date", "commit", "run"))
    return Entry(path, date, commit, run, gates)


def published(repo: Repo, directory: str) -> list[Entry]:
    """The evidence pages committed under `directory` of the docs repository."""
    head = repo.resolve("HEAD")
    if head is None:
        return []
    found = []
    for path in repo.tree_files(head):
        if posixpath.dirname(path) == directory and path.endswith(".md"):
            e = entry(path, repo.out("show", f"{head}:{path}"))
            if e is not None:
                found.append(e)
    return found


def theirs(repo: Repo, index: str) -> bool:
    """True when a page someone else wrote sits at the index's path: promote never overwrites it."""
    head = repo.resolve("HEAD")
    if head is None or not repo.run("cat-file", "-e", f"{head}:{index}").ok:
        return False
    return front_matter(repo.out("show", f"{head}:{index}")).get(MARKER) != "index"


def markdown(entries: list[Entry], index: str) -> str:
    """The index page: newest first (by date, then run), each line linking its page relative to the index."""
    here = posixpath.dirname(index)
    rows = sorted({e.path: e for e in entries}.values(), key=lambda e: (e.date, e.run), reverse=True)
    head = "| Date | Commit | " + " | ".join(title for _, title in TITLES) + " |"
    lines = [
        "---", f"{MARKER}: index", "orphan: true", "---", "", "# Promotion evidence", "",
        "Every evidence page `promote audit --publish` wrote here, newest first. promote rewrites this page on"
        " each publish; it is not documentation of any feature.", "",
        head, "|" + "---|" * (2 + len(TITLES)),
    ]  # fmt: skip
    for e in rows:
        statuses = dict(e.gates)
        link = f"[{md_text(e.date or e.run)}]({posixpath.relpath(e.path, here or '.')})"
        cells = [STATUS.get(statuses.get(key, ""), "UNDECIDED") for key, _ in TITLES]
        lines.append(f"| {link} | {md_code(e.commit[:7])} | " + " | ".join(cells) + " |")
    if not rows:
        lines.append("| none yet | | " + " | ".join("" for _ in TITLES) + " |")
    return "\n".join(lines) + "\n"
