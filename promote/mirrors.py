"""Read every mirror's trunk concurrently and say whether a fast-forward to the candidate is safe."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from promote.git import Commit, Repo

UP_TO_DATE = "up-to-date"
FAST_FORWARD = "fast-forward"
DIVERGED = "diverged"
MISSING = "missing"
UNREACHABLE = "unreachable"

# How many of the commits a push would discard are listed by name; the count is always exact.
DISCARD_LISTED = 20


@dataclass(frozen=True)
class MirrorStatus:
    """One mirror's trunk compared with the candidate."""

    name: str
    url: str
    status: str
    head: str | None = None
    behind: int | None = None
    discard: int | None = None
    discard_commits: tuple[Commit, ...] = ()
    reason: str | None = None

    @property
    def safe(self) -> bool:
        """True when pushing the candidate here discards nothing."""
        return self.status in (UP_TO_DATE, FAST_FORWARD)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "url": self.url,
            "status": self.status,
            "head": self.head,
            "behind": self.behind,
            "discard": self.discard,
            "discard_commits": [
                {"sha": c.sha, "short": c.short, "subject": c.subject, "author": c.author} for c in self.discard_commits
            ],
            "reason": self.reason,
        }


def private_ref(mirror: str, trunk: str) -> str:
    """Where a fetched mirror head is kept: our own namespace, never a user's branch."""
    return f"refs/promote/mirrors/{mirror}/{trunk}"


def read_head(repo: Repo, mirror: str, trunk: str, *, timeout: float) -> tuple[str | None, str | None]:
    """The mirror's trunk sha with its objects present locally, or (None, why not).

    A None sha with a None reason means the mirror answered but has no such branch.
    """
    listing = repo.ls_remote(mirror, trunk, timeout=timeout)
    if not listing.ok:
        return None, listing.reason
    wanted = f"refs/heads/{trunk}"
    heads = [ln.split("\t")[0] for ln in listing.stdout.splitlines() if ln.endswith(f"\t{wanted}")]
    if not heads:
        return None, None
    sha = heads[0]
    if repo.has_commit(sha):
        # Objects already here: the listing is all the fetch there is to do.
        return sha, None
    dest = private_ref(mirror, trunk)
    fetched = repo.fetch(mirror, trunk, dest, timeout=timeout)
    if not fetched.ok:
        return None, f"fetch failed: {fetched.reason}"
    return repo.resolve(dest), None


def compare(repo: Repo, name: str, url: str, head: str, candidate: str) -> MirrorStatus:
    """Classify a mirror whose trunk is at `head`."""
    if head == candidate:
        return MirrorStatus(name, url, UP_TO_DATE, head, behind=0, discard=0)
    behind = repo.count(candidate, head)
    if repo.is_ancestor(head, candidate):
        return MirrorStatus(name, url, FAST_FORWARD, head, behind=behind, discard=0)
    return MirrorStatus(
        name,
        url,
        DIVERGED,
        head,
        behind=behind,
        discard=repo.count(head, candidate),
        discard_commits=tuple(repo.commits(head, candidate, limit=DISCARD_LISTED)),
    )


def survey_one(repo: Repo, mirror: str, trunk: str, candidate: str, *, timeout: float) -> MirrorStatus:
    url = repo.remote_url(mirror)
    head, reason = read_head(repo, mirror, trunk, timeout=timeout)
    if head is None:
        if reason is None:
            return MirrorStatus(mirror, url, MISSING, reason=f"no branch {trunk} on {mirror}")
        return MirrorStatus(mirror, url, UNREACHABLE, reason=reason)
    return compare(repo, mirror, url, head, candidate)


def survey(
    repo: Repo,
    mirrors: tuple[str, ...],
    trunk: str,
    candidate: str,
    *,
    timeout: float,
    concurrency: int,
) -> tuple[MirrorStatus, ...]:
    """Every mirror's status, read concurrently (bounded), returned in configuration order."""
    if not mirrors:
        return ()
    with ThreadPoolExecutor(max_workers=min(concurrency, len(mirrors))) as pool:
        futures = [pool.submit(survey_one, repo, m, trunk, candidate, timeout=timeout) for m in mirrors]
        return tuple(f.result() for f in futures)
