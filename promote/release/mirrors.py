"""Read every mirror's trunk concurrently and say whether a fast-forward to the candidate is safe."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from promote.core.git import Commit, Repo
from promote.core.vocab import (
    DIVERGED as DIVERGED,
)
from promote.core.vocab import (
    FAST_FORWARD as FAST_FORWARD,
)
from promote.core.vocab import (
    MISSING as MISSING,
)
from promote.core.vocab import (
    UNREACHABLE as UNREACHABLE,
)
from promote.core.vocab import (
    UP_TO_DATE as UP_TO_DATE,
)
from promote.core.vocab import (
    MirrorState,
    is_safe,
)

# How many of the commits a push would discard are listed by name; the count is always exact.
DISCARD_LISTED = 20


@dataclass(frozen=True)
class MirrorStatus:
    """One mirror's trunk compared with the candidate."""

    name: str
    url: str
    status: MirrorState
    head: str | None = None
    behind: int | None = None
    discard: int | None = None
    discard_commits: tuple[Commit, ...] = ()
    reason: str | None = None

    @property
    def safe(self) -> bool:
        """True when pushing the candidate here discards nothing."""
        return is_safe(self.status)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "url": self.url,
            "status": self.status,
            "head": self.head,
            "behind": self.behind,
            "discard": self.discard,
            "discard_commits": [c.to_json() for c in self.discard_commits],
            "reason": self.reason,
        }


def private_ref(mirror: str, trunk: str) -> str:
    """Where a fetched mirror head is kept: our own namespace, never a user's branch."""
    return f"refs/promote/mirrors/{mirror}/{trunk}"


def read_head(repo: Repo, mirror: str, trunk: str, *, timeout: float) -> tuple[str | None, str | None]:
    """The sha of the mirror's trunk as the mirror reports it, or (None, why not).

    A None sha with a None reason means the mirror answered but has no such branch.
    """
    listing = repo.ls_remote(mirror, trunk, timeout=timeout)
    if not listing.ok:
        return None, listing.reason
    wanted = f"\trefs/heads/{trunk}"
    heads = [ln.split("\t")[0] for ln in listing.stdout.splitlines() if ln.endswith(wanted)]
    return (heads[0], None) if heads else (None, None)


def compare(
    repo: Repo, name: str, url: str, trunk: str, head: str, candidate: str, *, timeout: float, target: str | None = None
) -> MirrorStatus:
    """Classify a mirror whose trunk is at `head`, fetching its commits first when they are not here.

    `target` is what git fetches from (a URL for a mirror configured by URL); by default the remote `name`.
    """
    if head == candidate:
        return MirrorStatus(name, url, UP_TO_DATE, head, behind=0, discard=0)
    counts = repo.left_right(candidate, head)
    if counts is None:
        fetched = repo.fetch(target or name, trunk, private_ref(name, trunk), timeout=timeout)
        if not fetched.ok:
            return MirrorStatus(name, url, UNREACHABLE, head, reason=f"fetch failed: {fetched.reason}")
        head = repo.resolve(private_ref(name, trunk)) or head
        counts = repo.left_right(candidate, head)
        if counts is None:
            return MirrorStatus(name, url, UNREACHABLE, head, reason=f"commit {head[:7]} missing after fetch")
    behind, discard = counts
    if discard == 0:
        return MirrorStatus(name, url, FAST_FORWARD, head, behind=behind, discard=0)
    return MirrorStatus(
        name,
        url,
        DIVERGED,
        head,
        behind=behind,
        discard=discard,
        discard_commits=tuple(repo.commits(head, candidate, limit=DISCARD_LISTED)),
    )


def _unread(name: str, url: str, trunk: str, reason: str | None) -> MirrorStatus:
    if reason is None:
        return MirrorStatus(name, url, MISSING, reason=f"no branch {trunk} on {name}")
    return MirrorStatus(name, url, UNREACHABLE, reason=reason)


def survey(
    repo: Repo,
    urls: dict[str, str],
    trunk: str,
    candidate: Callable[[], str],
    *,
    timeout: float,
    concurrency: int,
    targets: Mapping[str, str] | None = None,
) -> tuple[str, tuple[MirrorStatus, ...]]:
    """(candidate sha, every mirror's status in configuration order); mirrors are read concurrently.

    `candidate` is resolved while the mirrors are being listed, so the two overlap. `targets` maps a mirror
    configured by URL to that URL; the others are remote names.
    """
    where = dict(targets or {})
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(urls)))) as pool:
        listed = [pool.submit(read_head, repo, where.get(name, name), trunk, timeout=timeout) for name in urls]
        sha = candidate()
        compared = []
        for name, future in zip(urls, listed, strict=True):
            head, reason = future.result()
            if head is None:
                compared.append(pool.submit(_unread, name, urls[name], trunk, reason))
            else:
                target = where.get(name, name)
                compared.append(
                    pool.submit(compare, repo, name, urls[name], trunk, head, sha, timeout=timeout, target=target)
                )
        return sha, tuple(f.result() for f in compared)
