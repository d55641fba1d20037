"""Docs coverage: every named feature, and every kill switch in the deployed code, has a page that mentions it."""

from __future__ import annotations

import os
import re
import string
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from promote.config import Config
from promote.core import paths
from promote.core.errors import GitError
from promote.core.findings import Finding
from promote.core.git import Repo
from promote.core.outcome import FAIL, PASS, UNDECIDED, CheckOutcome

NAME = "docs"
# Prose in the code repository mentions switches without making them features of the running code.
PROSE = ("**/*.md", "**/*.rst")
LISTED = 3
# The front-matter key promote writes into every page it publishes (an evidence page, their index). A page with it,
# or at the configured page path, is promote's own: it mentions features because it reports on them, so it is
# never their documentation.
MARKER = "promote_evidence"
_PLACEHOLDERS = {"date": r"\d{4}-\d{2}-\d{2}", "commit": r"[0-9a-f]{7,40}", "run": r"[^/]+"}


@dataclass(frozen=True)
class Feature:
    """A feature that needs a page: where it came from, and the pages that mention it."""

    name: str
    origin: str
    pages: tuple[str, ...]


@dataclass(frozen=True)
class DocsReport:
    """The docs repository's pages and each feature's coverage."""

    repo: Path
    head: str
    pages: int
    own: int  # pages matching the globs that promote wrote, left out
    code_ref: str | None  # the commit features were discovered at (None: no pattern configured)
    features: tuple[Feature, ...]


@dataclass(frozen=True)
class DocsOutcome(CheckOutcome):
    """The docs check's outcome, with the features and the count of promote's own pages left out as values."""

    features: tuple[Feature, ...] = ()
    own: int = 0


def audit_docs(root: Path, config: Config, deployed_sha: str | None) -> CheckOutcome:
    """Pass when every feature has a page; fail naming each undocumented one; undecided if the docs cannot be read."""
    docs = config.docs
    if docs is None:
        return CheckOutcome(NAME, UNDECIDED, f"no [{config.prefix}.docs] configured: no docs were checked")
    # Named as the configuration names it (relative to the configuration file), not by this machine's path.
    shown = os.path.relpath(docs.repo, config.root)
    if not docs.repo.is_dir():
        return CheckOutcome(NAME, UNDECIDED, f"docs repository {shown} does not exist")
    try:
        docs_repo = Repo(docs.repo)
    except GitError as e:
        return CheckOutcome(NAME, UNDECIDED, f"docs repository {shown}: {str(e).replace(str(docs.repo), shown)}")
    head = docs_repo.resolve("HEAD")
    if head is None:
        return CheckOutcome(NAME, UNDECIDED, f"docs repository {shown} has no commits")
    matching = sorted(f for f in docs_repo.tree_files(head) if paths.matches(f, docs.pages))
    own = promotes_pages(docs_repo, head, docs.page, matching)
    pages = [f for f in matching if f not in own]
    evidence: list[str] = []
    found: dict[str, list[str]] = {name: [f"listed in {config.path.name}"] for name in docs.features}
    code_ref: str | None = None
    if docs.feature_pattern is not None:
        code_ref, note = _code_ref(root, deployed_sha)
        if code_ref is None:
            return CheckOutcome(NAME, UNDECIDED, note)
        evidence.append(note)
        try:
            for name, where in _discover(Repo(root), code_ref, docs.feature_pattern, config.test_paths).items():
                found.setdefault(name, []).append(where)
        except (GitError, re.error) as e:
            why = f"feature_pattern {docs.feature_pattern!r} cannot be searched: {e}"
            return CheckOutcome(NAME, UNDECIDED, why, tuple(evidence))
    covered = _mentions(docs_repo, head, pages, list(found))
    features = tuple(Feature(n, "; ".join(o), tuple(sorted(covered.get(n, ())))) for n, o in found.items())
    return _outcome(DocsReport(docs.repo, head, len(pages), len(own), code_ref, features), docs.pages, evidence)


def page_regex(pattern: str) -> re.Pattern[str]:
    """The paths the page pattern (`docs/evidence/{date}-{commit}.md`) can produce, and the index beside them."""
    out = []
    for literal, field, _, _ in string.Formatter().parse(pattern):
        out.append(re.escape(literal))
        if field is not None:
            out.append(_PLACEHOLDERS.get(field, r"[^/]+"))
    return re.compile("".join(out))


def index_path(pattern: str) -> str:
    """Where the index of evidence pages goes: `index.md` beside the pages."""
    parent = str(PurePosixPath(pattern).parent)
    return "index.md" if parent == "." else f"{parent}/index.md"


def json_beside(page: str) -> str:
    """Where a page's evidence JSON is published: beside it, with its name (the shared history reads it there)."""
    return (page[: -len(".md")] if page.endswith(".md") else page) + ".json"


def promotes_pages(repo: Repo, head: str, pattern: str, candidates: list[str]) -> set[str]:
    """Which of `candidates` promote wrote: its marker in their front matter, or at the page pattern's path (the
    page's evidence JSON beside it too)."""
    shapes, index = (page_regex(pattern), page_regex(json_beside(pattern))), index_path(pattern)
    # A person's index.md beside the pages is theirs unless it carries the marker (checked below).
    own = {p for p in candidates if any(shape.fullmatch(p) for shape in shapes) and p != index}
    wanted = set(candidates)
    lines: dict[str, dict[int, str]] = {}
    for hit in repo.grep(head, ["---", f"{MARKER}:"], fixed=True):
        if hit.path in wanted:
            lines.setdefault(hit.path, {})[hit.line] = hit.text.rstrip()
    for path, found in lines.items():
        # Front matter: "---" on the first line, the marker before the next "---". A page that only mentions
        # promote (or quotes the marker in its body) is a person's.
        if found.get(1) != "---":
            continue
        end = min((n for n, text in found.items() if n > 1 and text == "---"), default=None)
        if end is not None and any(1 < n < end and text.startswith(f"{MARKER}:") for n, text in found.items()):
            own.add(path)
    return own


def _code_ref(root: Path, deployed_sha: str | None) -> tuple[str | None, str]:
    """The commit to look for features in, and an evidence line saying which one and why."""
    if deployed_sha is not None:
        return deployed_sha, f"features discovered in the code at the deployed commit {deployed_sha[:7]}"
    try:
        head = Repo(root).resolve("HEAD")
    except GitError as e:
        return None, f"cannot read the code repository: {e}"
    if head is None:
        return None, "the code repository has no commits to discover features in"
    return head, f"no deployed commit known: features discovered in the candidate (HEAD {head[:7]})"


def _discover(repo: Repo, ref: str, pattern: str, test_paths: tuple[str, ...]) -> dict[str, str]:
    """Every match of `pattern` in `ref`'s non-test code, with where it was first seen."""
    regex = re.compile(pattern)
    places: dict[str, list[str]] = {}
    for hit in repo.grep(ref, [pattern], fixed=False):
        if paths.matches(hit.path, test_paths) or paths.matches(hit.path, PROSE):
            continue
        for m in regex.finditer(hit.text):
            places.setdefault(m.group(), []).append(f"{hit.path}:{hit.line}")
    out = {}
    for name in sorted(places):
        where = places[name]
        more = f" (and {len(where) - 1} more place(s))" if len(where) > 1 else ""
        out[name] = f"found at {ref[:7]} in {where[0]}{more}"
    return out


def _mentions(repo: Repo, head: str, pages: list[str], names: list[str]) -> dict[str, set[str]]:
    """For each feature name, the pages whose text contains it (case-sensitive)."""
    if not names or not pages:
        return {}
    wanted = set(pages)
    covered: dict[str, set[str]] = {}
    for hit in repo.grep(head, names, fixed=True):
        if hit.path in wanted:
            for name in names:
                if name in hit.text:
                    covered.setdefault(name, set()).add(hit.path)
    return covered


def _pages(n: int) -> str:
    return f"{n} page" if n == 1 else f"{n} pages"


def _outcome(r: DocsReport, globs: tuple[str, ...], evidence: list[str]) -> CheckOutcome:
    missing = [f for f in r.features if not f.pages]
    # The docs repository by its role, never its path on this machine: these lines reach published pages.
    where = f"the docs repository (HEAD {r.head[:7]}): {r.pages} page(s) matching {', '.join(globs)}"
    summary = "all documented" if not missing else f"{len(missing)} undocumented"
    lines = [f"{where}; {len(r.features)} feature(s), {summary}"]
    if r.own:
        lines.append(
            f"{_pages(r.own)} promote wrote (evidence pages, their index) left out: evidence is not documentation"
        )
    lines += evidence
    for f in r.features:
        shown = ", ".join(f.pages[:LISTED]) + (f" (+{len(f.pages) - LISTED})" if len(f.pages) > LISTED else "")
        lines.append(f"{f.name}: {shown or 'no page'} ({f.origin})")
    findings = tuple(
        Finding(
            "undocumented-feature",
            "error",
            f.name,
            f"{f.name} ({f.origin}) is mentioned by none of the {_pages(r.pages)} people wrote in the docs repository",
        )
        for f in missing
    )
    if missing:
        names = ", ".join(f.name for f in missing)
        return DocsOutcome(NAME, FAIL, f"no page mentions {names}", tuple(lines), findings, r.features, r.own)
    if not r.features:
        return DocsOutcome(NAME, PASS, "no feature needs a page (none listed or found)", tuple(lines), own=r.own)
    return DocsOutcome(NAME, PASS, f"every feature has a page ({len(r.features)})", tuple(lines), (), r.features, r.own)
