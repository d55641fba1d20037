"""`promote merge`: verify afresh, then fast-forward trunk on every mirror, never forcing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from promote import journal
from promote import mirrors as mirrors_mod
from promote.check import BLOCKED, UNDECIDED, CheckResult, check
from promote.git import Outcome, Repo
from promote.workspace import Workspace

MERGED = "merged"
WOULD_MERGE = "would-merge"
PARTIAL = "partial"

ADVANCED = "advanced"
REJECTED = "rejected"
NOT_ATTEMPTED = "not-attempted"
UNVERIFIED = "unverified"
WOULD_ADVANCE = "would-advance"


@dataclass(frozen=True)
class MirrorMerge:
    """What happened to one mirror's trunk."""

    name: str
    before: str | None
    after: str | None
    status: str
    reason: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "before": self.before,
            "after": self.after,
            "status": self.status,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class MergeResult:
    """The outcome of `promote merge`, with the check it was based on."""

    verdict: str
    candidate: str
    trunk: str
    check: CheckResult
    mirrors: tuple[MirrorMerge, ...]
    local: str | None = None
    dry_run: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "candidate": self.candidate,
            "trunk": self.trunk,
            "dry_run": self.dry_run,
            "mirrors": [m.to_json() for m in self.mirrors],
            "local": self.local,
            "check": self.check.to_json(),
        }


def _unchanged(result: CheckResult, status: str) -> tuple[MirrorMerge, ...]:
    return tuple(MirrorMerge(m.name, m.head, m.head, status) for m in result.mirrors)


def _verify(ws: Workspace, names: list[str]) -> dict[str, str | None]:
    """Each mirror's trunk as the mirror itself now reports it (None when it cannot be read)."""
    cfg = ws.config

    def head(name: str) -> str | None:
        return mirrors_mod.read_head(ws.repo, name, cfg.trunk, timeout=cfg.mirror_timeout_s)[0]

    with ThreadPoolExecutor(max_workers=min(cfg.fetch_concurrency, max(1, len(names)))) as pool:
        return dict(zip(names, pool.map(head, names), strict=True))


def _push_all(ws: Workspace, result: CheckResult) -> list[MirrorMerge]:
    """Push to each mirror in turn; stop at the first refusal and leave the rest untouched."""
    cfg, sha = ws.config, result.candidate
    done: list[MirrorMerge] = []
    stopped = False
    for m in result.mirrors:
        if m.status == mirrors_mod.UP_TO_DATE:
            done.append(MirrorMerge(m.name, m.head, m.head, mirrors_mod.UP_TO_DATE))
            continue
        if stopped:
            done.append(MirrorMerge(m.name, m.head, m.head, NOT_ATTEMPTED))
            continue
        pushed = ws.repo.push(m.name, sha, cfg.trunk, timeout=cfg.mirror_timeout_s)
        status = ADVANCED if pushed.ok else REJECTED
        reason = None if pushed.ok else _push_reason(pushed)
        done.append(MirrorMerge(m.name, m.head, sha if pushed.ok else m.head, status, reason))
        journal.append(
            ws.repo.root,
            {"op": "push", "mirror": m.name, "url": m.url, "trunk": cfg.trunk, "before": m.head,
             "candidate": sha, "status": status, "reason": reason},
        )  # fmt: skip
        stopped = not pushed.ok
    return done


def _push_reason(outcome: Outcome) -> str:
    """Git's verdict on the ref, plus what the mirror's hooks said, on one line."""
    # `push --porcelain` marks a refused ref with "!" (e.g. "[remote rejected] (pre-receive hook declined)").
    verdict = next(
        (ln.split("\t")[-1].strip() for ln in outcome.stdout.splitlines() if ln.startswith("!")),
        outcome.reason,
    )
    said = [ln[len("remote:") :].strip() for ln in outcome.stderr.splitlines() if ln.startswith("remote:")]
    said = [s for s in said if s]
    return f"{verdict}: {'; '.join(said)}" if said else verdict


def _fast_forward_local(repo: Repo, trunk: str, sha: str) -> str:
    """Bring the local trunk to `sha` when that is a fast-forward and disturbs no work; say what happened."""
    local = repo.resolve(f"refs/heads/{trunk}")
    if local == sha:
        return f"local {trunk} already at {sha[:7]}"
    if local is not None and not repo.is_ancestor(local, sha):
        return f"local {trunk} left at {local[:7]}: it has commits the candidate lacks"
    if repo.current_branch() == trunk:
        if not repo.is_clean():
            return f"local {trunk} left at {(local or '')[:7]}: the working tree has changes"
        done = repo.merge_ff_only(sha)
        if not done.ok:
            return f"local {trunk} left at {(local or '')[:7]}: {done.reason}"
    elif local is None or not repo.update_ref(f"refs/heads/{trunk}", sha, local):
        return f"local {trunk} not moved: it changed while promote ran"
    return f"local {trunk} fast-forwarded {(local or '')[:7]} to {sha[:7]}"


def merge(ws: Workspace, candidate: str | None = None, *, dry_run: bool = False) -> MergeResult:
    """Verify every mirror fresh, then fast-forward each one to the candidate, without force."""
    cfg = ws.config
    result = check(ws, candidate)
    sha = result.candidate

    def finish(verdict: str, mirrors: tuple[MirrorMerge, ...], local: str | None = None) -> MergeResult:
        return MergeResult(verdict, sha, cfg.trunk, result, mirrors, local, dry_run)

    if result.verdict in (BLOCKED, UNDECIDED):
        return finish(result.verdict, _unchanged(result, NOT_ATTEMPTED))
    if dry_run:
        return finish(
            WOULD_MERGE,
            tuple(
                MirrorMerge(
                    m.name,
                    m.head,
                    m.head,
                    m.status if m.status == mirrors_mod.UP_TO_DATE else WOULD_ADVANCE,
                )
                for m in result.mirrors
            ),
        )
    pushed = _push_all(ws, result)
    # Trust no push report: read every mirror back and compare with the candidate.
    now = _verify(ws, [m.name for m in pushed])
    verified = tuple(
        MirrorMerge(m.name, m.before, now[m.name], m.status, m.reason)
        if now[m.name] == sha or m.status in (REJECTED, NOT_ATTEMPTED)
        else MirrorMerge(
            m.name,
            m.before,
            now[m.name],
            UNVERIFIED,
            f"{m.name} reports {now[m.name]} after the push",
        )
        for m in pushed
    )
    if all(m.after == sha for m in verified):
        local = _fast_forward_local(ws.repo, cfg.trunk, sha)
        journal.append(ws.repo.root, {"op": "merge", "trunk": cfg.trunk, "candidate": sha, "verdict": MERGED})
        return finish(MERGED, verified, local)
    advanced = any(m.status in (ADVANCED, UNVERIFIED) for m in verified)
    verdict = PARTIAL if advanced else BLOCKED
    journal.append(ws.repo.root, {"op": "merge", "trunk": cfg.trunk, "candidate": sha, "verdict": verdict})
    return finish(verdict, verified)
