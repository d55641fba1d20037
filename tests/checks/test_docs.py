"""Docs coverage against a real docs repository and kill switches found in real code at the deployed commit."""

from __future__ import annotations

from pathlib import Path

from promote import config
from promote.checks.docs import audit_docs
from promote.config import Config
from promote.evidence import gates
from tests.helpers.gitrepos import commit, git

CODE = {
    "sanctum/dflash.py": 'import os\nENABLED = os.environ.get("SANCTUM_MLX_DFLASH2", "1") != "0"\n',
    "tests/test_dflash.py": 'FORCED = "SANCTUM_TEST_ONLY_SWITCH"\n',
    "README.md": "Set SANCTUM_README_ONLY to opt out.\n",
}


def make_repos(tmp_path: Path, pages: dict[str, str]) -> tuple[Path, Path, Config]:
    """A code repository with a kill switch and a docs repository with `pages` committed."""
    code = tmp_path / "code"
    code.mkdir()
    git(code, "init", "-q", "-b", "main")
    commit(code, "code", CODE)
    docs = tmp_path / "docs"
    docs.mkdir()
    git(docs, "init", "-q", "-b", "main")
    commit(docs, "docs", {"docs/index.md": "# Sanctum\n", **pages})
    return code, docs, write_config(code)


def write_config(code: Path, repo: str = "../docs", pattern: str = "SANCTUM_[A-Z0-9_]+") -> Config:
    (code / "promote.toml").write_text(
        f'[promote]\ntrunk = "main"\n[promote.docs]\nrepo = "{repo}"\npages = ["docs/**/*.md"]\n'
        f'features = ["DFlash2"]\nfeature_pattern = "{pattern}"\n'
    )
    return config.load(code / "promote.toml")


def test_every_feature_with_a_page_passes_and_names_the_pages(tmp_path: Path) -> None:
    pages = {"docs/features/dflash2.md": "# DFlash2\n\nTurn it off with `SANCTUM_MLX_DFLASH2=0`.\n"}
    code, docs, cfg = make_repos(tmp_path, pages)
    deployed = git(code, "rev-parse", "HEAD")

    outcome = audit_docs(code, cfg, deployed)

    head = git(docs, "rev-parse", "HEAD")
    assert (outcome.status, outcome.reason) == ("pass", "every feature has a page (2)")
    assert outcome.evidence == (
        f"the docs repository (HEAD {head[:7]}): 2 page(s) matching docs/**/*.md; 2 feature(s), all documented",
        f"features discovered in the code at the deployed commit {deployed[:7]}",
        "DFlash2: docs/features/dflash2.md (listed in promote.toml)",
        f"SANCTUM_MLX_DFLASH2: docs/features/dflash2.md (found at {deployed[:7]} in sanctum/dflash.py:2)",
    )


def test_feature_without_a_page_is_undocumented_and_says_where_it_was_found(tmp_path: Path) -> None:
    # A page outside the globs and an uncommitted page do not count; mentions are case-sensitive.
    code, docs, cfg = make_repos(
        tmp_path, {"README.md": "SANCTUM_MLX_DFLASH2\n", "docs/dflash.md": "dflash2 is fast\n"}
    )
    (docs / "docs/draft.md").write_text("DFlash2 and SANCTUM_MLX_DFLASH2, not yet committed\n")
    deployed = git(code, "rev-parse", "HEAD")

    outcome = audit_docs(code, cfg, deployed)

    assert (outcome.status, outcome.reason) == ("fail", "no page mentions DFlash2, SANCTUM_MLX_DFLASH2")
    assert [(f.check, f.severity, f.subject, f.message) for f in outcome.findings] == [
        (
            "undocumented-feature",
            "error",
            "DFlash2",
            "DFlash2 (listed in promote.toml) is mentioned by none of the 2 pages people wrote in the docs repository",
        ),
        (
            "undocumented-feature",
            "error",
            "SANCTUM_MLX_DFLASH2",
            f"SANCTUM_MLX_DFLASH2 (found at {deployed[:7]} in sanctum/dflash.py:2) is mentioned by none of the "
            "2 pages people wrote in the docs repository",
        ),
    ]


def test_switches_are_read_at_the_deployed_commit_not_the_candidate(tmp_path: Path) -> None:
    code, _, cfg = make_repos(tmp_path, {"docs/dflash.md": "DFlash2: SANCTUM_MLX_DFLASH2\n"})
    deployed = git(code, "rev-parse", "HEAD")
    commit(code, "new switch", {"sanctum/new.py": 'FLAG = "SANCTUM_NEW_SWITCH"\n'})

    at_deployed = audit_docs(code, cfg, deployed)
    at_candidate = audit_docs(code, cfg, None)

    assert at_deployed.status == "pass"
    assert at_candidate.status == "fail"
    assert [f.subject for f in at_candidate.findings] == ["SANCTUM_NEW_SWITCH"]
    head = git(code, "rev-parse", "HEAD")
    assert f"no deployed commit known: features discovered in the candidate (HEAD {head[:7]})" in at_candidate.evidence


def test_missing_or_unreadable_docs_repository_is_undecided(tmp_path: Path) -> None:
    code, _, _ = make_repos(tmp_path, {})
    (tmp_path / "plain").mkdir()
    (tmp_path / "empty").mkdir()
    git(tmp_path / "empty", "init", "-q", "-b", "main")

    gone = audit_docs(code, write_config(code, repo="../nowhere"), None)
    plain = audit_docs(code, write_config(code, repo="../plain"), None)
    empty = audit_docs(code, write_config(code, repo="../empty"), None)
    bad_pattern = audit_docs(code, write_config(code, pattern="SANCTUM_["), None)

    assert (gone.status, gone.reason) == ("undecided", "docs repository ../nowhere does not exist")
    assert plain.status == "undecided"
    assert "is not inside a git repository" in plain.reason
    assert (empty.status, empty.reason) == ("undecided", "docs repository ../empty has no commits")
    assert str(tmp_path) not in plain.reason, "the docs repository is named as configured, not by its path here"
    assert bad_pattern.status == "undecided"
    assert bad_pattern.reason.startswith("feature_pattern 'SANCTUM_[' cannot be searched")


EVIDENCE_PAGE = "---\npromote_evidence: page\norphan: true\n---\n# Promotion evidence\n\nDFlash2: no page\n"


def test_pages_promote_wrote_never_document_a_feature_and_are_counted_as_left_out(tmp_path: Path) -> None:
    # promote's evidence page (at its path, with its marker), its index (marker only), an old page of promote's at
    # the page pattern's path without a marker, and a person's page that mentions promote and quotes the marker
    # in its body: only the last one is documentation.
    person = "# Release process\n\nRun `promote audit`; its pages carry `promote_evidence: page`.\n"
    pages = {
        "docs/evidence/2026-12-01-1e4c82b.md": EVIDENCE_PAGE,
        "docs/evidence/index.md": EVIDENCE_PAGE.replace(": page", ": index"),
        "docs/evidence/2026-11-30-0a1b2c3.md": "# Promotion evidence\n\nSANCTUM_MLX_DFLASH2: no page\n",
        "docs/notes/elsewhere.md": EVIDENCE_PAGE.replace("DFlash2", "SANCTUM_MLX_DFLASH2"),
        "docs/release.md": person + "\nDFlash2 is not documented here either.\n",
    }
    code, docs, cfg = make_repos(tmp_path, pages)

    outcome = audit_docs(code, cfg, git(code, "rev-parse", "HEAD"))

    assert (outcome.status, outcome.reason) == ("fail", "no page mentions SANCTUM_MLX_DFLASH2")
    head = git(docs, "rev-parse", "HEAD")
    assert outcome.evidence[:2] == (
        f"the docs repository (HEAD {head[:7]}): 2 page(s) matching docs/**/*.md; 2 feature(s), 1 undocumented",
        "4 pages promote wrote (evidence pages, their index) left out: evidence is not documentation",
    )
    assert "DFlash2: docs/release.md (listed in promote.toml)" in outcome.evidence
    assert outcome.findings[0].message.endswith("none of the 2 pages people wrote in the docs repository")


def test_a_persons_index_beside_the_evidence_pages_still_counts(tmp_path: Path) -> None:
    code, _, cfg = make_repos(tmp_path, {"docs/evidence/index.md": "# Evidence\n\nDFlash2 and SANCTUM_MLX_DFLASH2.\n"})
    outcome = audit_docs(code, cfg, None)
    assert outcome.status == "pass", outcome.evidence
    assert not any("left out" in line for line in outcome.evidence)


def test_the_docs_gate_names_each_feature_and_its_pages_from_the_outcome(tmp_path: Path) -> None:
    many = {f"docs/p{i}.md": "DFlash2 and SANCTUM_MLX_DFLASH2\n" for i in range(5)}
    code, _, cfg = make_repos(tmp_path, many)

    gate = gates.docs(audit_docs(code, cfg, git(code, "rev-parse", "HEAD")), "unused")

    # As many pages as the check lists, each in its own backticks, then how many more.
    shown = "`docs/p0.md`, `docs/p1.md`, `docs/p2.md` (+2)"
    assert gate.evidence == (f"DFlash2: {shown}", f"SANCTUM_MLX_DFLASH2: {shown}")
    assert gate.status == "pass"
