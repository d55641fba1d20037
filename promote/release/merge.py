"""`promote merge`: verify afresh, then fast-forward trunk on every mirror, never forcing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from promote.config.workspace import Workspace
from promote.core import state
from promote.core.git import Repo, Worktree
from promote.core.process import Finished
from promote.core.vocab import (
    ADVANCED,
    BLOCKED,
    INTERRUPTED,
    MERGED,
    NOT_ATTEMPTED,
    PARTIAL,
    REJECTED,
    UNDECIDED,
    UNVERIFIED,
    WOULD_ADVANCE,
    WOULD_MERGE,
    MergeMirrorState,
    MergeVerdict,
)
from promote.release import journal
from promote.release import mirrors as mirrors_mod
from promote.release.check import CheckResult, check
from promote.release.mirrors import MirrorStatus


@dataclass(frozen=True)
class MirrorMerge:
    """What happened to one mirror's trunk."""

    name: str
    before: str | None
    after: str | None
    status: MergeMirrorState
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

    verdict: MergeVerdict
    candidate: str
    trunk: str
    check: CheckResult
    mirrors: tuple[MirrorMerge, ...]
    local: str | None = None
    dry_run: bool = False
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "candidate": self.candidate,
            "trunk": self.trunk,
            "dry_run": self.dry_run,
            "mirrors": [m.to_json() for m in self.mirrors],
            "local": self.local,
            "notes": list(self.notes),
            "check": self.check.to_json(),
        }


def _unchanged(result: CheckResult) -> tuple[MirrorMerge, ...]:
    """The mirrors as the check left them: nothing pushed; why not, for each that lacks the candidate."""
    return tuple(
        MirrorMerge(m.name, m.head, m.head, mirrors_mod.UP_TO_DATE)
        if m.status == mirrors_mod.UP_TO_DATE
        else MirrorMerge(m.name, m.head, m.head, NOT_ATTEMPTED, m.reason or f"{m.status}: not pushed")
        for m in result.mirrors
    )


def _split(result: CheckResult) -> bool:
    """True when some mirrors hold the candidate and others are known not to: the fleet disagrees."""
    holds = any(m.status == mirrors_mod.UP_TO_DATE for m in result.mirrors)
    lacks = any(
        m.status in (mirrors_mod.FAST_FORWARD, mirrors_mod.DIVERGED, mirrors_mod.MISSING) for m in result.mirrors
    )
    return holds and lacks


def _verify(ws: Workspace, names: list[str]) -> dict[str, str | None]:
    """Each mirror's trunk as the mirror itself now reports it (None when it cannot be read)."""
    cfg = ws.config

    def head(name: str) -> str | None:
        return mirrors_mod.read_head(ws.repo, ws.target(name), cfg.trunk, timeout=cfg.mirror_timeout_s)[0]

    with ThreadPoolExecutor(max_workers=min(cfg.fetch_concurrency, max(1, len(names)))) as pool:
        return dict(zip(names, pool.map(head, names), strict=True))


def _read_back(m: MirrorStatus, sha: str, pushed: Finished, now: str | None, unread: str | None) -> MirrorMerge:
    """What the push did, judged by what the mirror holds now, not by git's exit code."""
    said = "pushed" if pushed.ok else _push_reason(pushed)
    if now == sha:
        # A push that timed out (a slow hook) may well have landed: the mirror is the record.
        reason = None if pushed.ok else f"git said {said!r}, but {m.name} holds the candidate"
        return MirrorMerge(m.name, m.head, sha, ADVANCED, reason)
    if unread is not None:
        why = f"{said}; {m.name} could not be read back ({unread}): it may hold the candidate"
        return MirrorMerge(m.name, m.head, None, UNVERIFIED, why)
    if pushed.ok:
        return MirrorMerge(m.name, m.head, now, UNVERIFIED, f"{m.name} reports {now} after the push")
    return MirrorMerge(m.name, m.head, now, REJECTED, said)


def _push_one(ws: Workspace, m: MirrorStatus, sha: str, run: str) -> tuple[MirrorMerge, str | None]:
    """Journal the intent, push, read the mirror back, journal what it holds; (result, journal error)."""
    cfg, root = ws.config, ws.repo.root
    intent = journal.PushIntent(f"{run}/{m.name}", m.name, m.url, cfg.trunk, m.head, sha)
    # Written (and fsynced) before the push: a merge killed mid-push leaves this for the next run to settle.
    journal.append(root, intent)
    pushed = ws.repo.push(ws.target(m.name), sha, cfg.trunk, timeout=cfg.mirror_timeout_s)
    now, unread = mirrors_mod.read_head(ws.repo, ws.target(m.name), cfg.trunk, timeout=cfg.mirror_timeout_s)
    done = _read_back(m, sha, pushed, now, unread)
    try:
        journal.append(root, intent.done(done.status, done.after, done.reason))
    except state.StateError as e:
        return done, str(e)
    return done, None


def _push_all(ws: Workspace, result: CheckResult) -> tuple[list[MirrorMerge], str | None]:
    """Push to each mirror in turn; stop at the first that did not take it (or a journal failure)."""
    sha, run = result.candidate, state.new_run_id()
    done: list[MirrorMerge] = []
    stop: str | None = None
    failed: str | None = None
    for m in result.mirrors:
        if m.status == mirrors_mod.UP_TO_DATE:
            done.append(MirrorMerge(m.name, m.head, m.head, mirrors_mod.UP_TO_DATE))
            continue
        if stop is not None:
            done.append(MirrorMerge(m.name, m.head, m.head, NOT_ATTEMPTED, stop))
            continue
        try:
            merged, failed = _push_one(ws, m, sha, run)
        except state.StateError as e:
            if not any(d.status != mirrors_mod.UP_TO_DATE for d in done):
                raise  # nothing pushed yet: stop with the one-line error
            failed = str(e)
            done.append(MirrorMerge(m.name, m.head, m.head, NOT_ATTEMPTED, "the journal could not be written"))
            stop = "not pushed: the journal could not be written"
            continue
        done.append(merged)
        if failed is not None:
            stop = "not pushed: the journal could not be written"
        elif merged.status != ADVANCED:
            stop = f"not pushed: {m.name} did not take the candidate"
    return done, failed


def settle(ws: Workspace) -> list[str]:
    """Close every push a killed merge left open, with what that mirror holds now; what was settled."""
    root, timeout = ws.repo.root, ws.config.mirror_timeout_s
    entries = journal.read(root)
    closed = {e.id for e in entries if isinstance(e, journal.PushDone)}
    said = []
    for e in entries:
        if not isinstance(e, journal.PushIntent) or e.id in closed:
            continue
        now, unread = mirrors_mod.read_head(ws.repo, ws.target(e.mirror), e.trunk, timeout=timeout)
        if unread is not None:
            said.append(f"{e.mirror}: an interrupted push is still unsettled: {e.mirror} could not be read ({unread})")
            continue  # left open: the next run reads it again
        status: MergeMirrorState = ADVANCED if now == e.candidate else INTERRUPTED
        held = (now or "no branch")[:7]
        what = "the candidate" if now == e.candidate else "not the candidate"
        note = f"settled after an interrupted merge: {e.mirror} holds {held} ({what})"
        journal.append(root, e.done(status, now, note))
        said.append(f"{e.mirror}: {note}; before it was {(e.before or 'no branch')[:7]}")
    return said


def _push_reason(outcome: Finished) -> str:
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
    ref = f"refs/heads/{trunk}"
    local = repo.resolve(ref)
    if local == sha:
        return f"local {trunk} already at {sha[:7]}"
    at = (local or "")[:7]
    if local is not None and not repo.is_ancestor(local, sha):
        return f"local {trunk} left at {at}: it has commits the candidate lacks"
    # Moving a branch under a worktree that has it checked out would leave that worktree's index and files
    # at the old commit: its next commit would undo the release. Only a clean worktree is moved, by a merge there.
    holders = [w for w in repo.worktrees() if w.branch == ref]
    if not holders:
        if local is None or not repo.update_ref(ref, sha, local):
            return f"local {trunk} not moved: it changed while promote ran"
        return f"local {trunk} fast-forwarded {at} to {sha[:7]}"
    if len(holders) > 1:
        where = ", ".join(str(w.path) for w in holders)
        return f"local {trunk} left at {at}: it is checked out in {len(holders)} worktrees ({where})"
    why = _unsafe_to_move(repo, holders[0], trunk, local)
    if why is not None:
        return f"local {trunk} left at {at}: {why}"
    done = Repo(holders[0].path).merge_ff_only(sha)
    if not done.ok:
        return f"local {trunk} left at {at}: {done.reason}"
    return f"local {trunk} fast-forwarded {at} to {sha[:7]}"


def _unsafe_to_move(repo: Repo, w: Worktree, trunk: str, local: str | None) -> str | None:
    """Why the worktree `w`, which has trunk checked out, must not be fast-forwarded (None: it may be)."""
    here = w.path.resolve() == repo.root.resolve()
    place = "the working tree" if here else f"the worktree {w.path}, which has {trunk} checked out,"
    if not w.path.is_dir():
        return f"{place} is missing (`git worktree prune` forgets it)"
    if w.busy:
        return f"{place} is in the middle of a rebase or bisection of it"
    if w.head != local:
        return f"{place} is at {(w.head or 'no commit')[:7]}, not at {trunk}'s tip"
    if not (repo if here else Repo(w.path)).is_clean():
        return f"{place} has changes"
    return None


def _as_now(m: MirrorMerge, head: str | None, sha: str) -> MirrorMerge:
    """One mirror's record corrected by what it holds now (None: it could not be read)."""
    if head == m.after:
        return m
    if head == sha:
        if m.status in (ADVANCED, mirrors_mod.UP_TO_DATE, UNVERIFIED):
            return MirrorMerge(m.name, m.before, sha, ADVANCED if m.status == UNVERIFIED else m.status)
        return MirrorMerge(
            m.name, m.before, sha, m.status, f"{m.reason}; it holds the candidate now, pushed by another"
        )
    if m.status in (ADVANCED, mirrors_mod.UP_TO_DATE):
        return MirrorMerge(
            m.name, m.before, head, UNVERIFIED, f"{m.name} reports {head or 'nothing readable'} after the push"
        )
    return MirrorMerge(m.name, m.before, m.after if head is None else head, m.status, m.reason)


def _verdict(mirrors: tuple[MirrorMerge, ...], sha: str) -> MergeVerdict:
    """Judged by what the mirrors hold after the pushes, whoever put it there."""
    if all(m.after == sha for m in mirrors):
        return MERGED
    # Any mirror holding the candidate while another does not is a split fleet; so is one nobody can read
    # after a push to it: "nothing pushed" cannot be promised then.
    if any(m.after == sha or m.status == UNVERIFIED for m in mirrors):
        return PARTIAL
    return BLOCKED


def _dry_run(result: CheckResult) -> tuple[MirrorMerge, ...]:
    return tuple(
        MirrorMerge(m.name, m.head, m.head, m.status if m.status == mirrors_mod.UP_TO_DATE else WOULD_ADVANCE)
        for m in result.mirrors
    )


def merge(ws: Workspace, candidate: str | None = None, *, dry_run: bool = False) -> MergeResult:
    """Verify every mirror fresh, then fast-forward each one to the candidate, without force.

    Raises StateError (exit 2) before any push when the journal cannot be written.
    """
    cfg, root = ws.config, ws.repo.root
    notes: list[str] = []
    if not dry_run:
        journal.writable(root)
        # Before anything else: a killed merge's open push is settled with what that mirror holds now.
        notes += settle(ws)
    result = check(ws, candidate)
    sha = result.candidate

    def finish(verdict: MergeVerdict, mirrors: tuple[MirrorMerge, ...], local: str | None = None) -> MergeResult:
        return MergeResult(verdict, sha, cfg.trunk, result, mirrors, local, dry_run, tuple(notes))

    if not result.mirrors:
        return finish(UNDECIDED, ())
    if result.verdict in (BLOCKED, UNDECIDED):
        return finish(PARTIAL if _split(result) else result.verdict, _unchanged(result))
    if dry_run:
        return finish(WOULD_MERGE, _dry_run(result))
    pushed, failed = _push_all(ws, result)
    if failed is not None:
        notes.append(f"{failed}; the mirrors' record is in this report only")
    # Every mirror read back once more: one that moved after our push (or on its own) counts as it is now.
    now = _verify(ws, [m.name for m in pushed])
    verified = tuple(_as_now(m, now[m.name], sha) for m in pushed)
    verdict = _verdict(verified, sha)
    local = _fast_forward_local(ws.repo, cfg.trunk, sha) if verdict == MERGED else None
    try:
        journal.append(root, journal.MergeDone(cfg.trunk, sha, verdict))
    except state.StateError as e:
        notes.append(str(e))
    return finish(verdict, verified, local)
