"""Make a station ready to run a package: its workdir, the candidate commit, the plugin, its inventory."""

from __future__ import annotations

import io
import json
import shlex
import tarfile
import threading
from dataclasses import dataclass, replace
from pathlib import Path

import promote
from promote.core.git import run_git
from promote.core.process import Telling, run_bounded
from promote.core.state import STATE_DIR
from promote.core.station import Station
from promote.runners.remote.ssh import StationError, Target, connection_failure, q
from promote.runners.stations import observed

LIB = ".promote-lib"
OUT = ".promote-out"
PREPARE_TIMEOUT_S = 300.0


def default_workdir(top: Path) -> str:
    """The station's workdir for the repository `top` when none is configured: under promote's state dir there."""
    return f"~/{STATE_DIR}/work/{top.name}"


# Two packages bound for one station share its workdir: one checkout at a time.
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()

# Exit statuses of the preparation script, each a reason a person can act on.
_PREPARE_FAULTS = {
    90: "cannot create or enter the workdir {workdir}",
    91: "git is not installed there",
    92: "cannot create a git repository in {workdir}",
    93: "{python} not found there",
    94: "{python} there cannot import pytest and pytest-xdist, which remote runs need",
}
# rsync's first complaint is the cause; what follows is its summary of the failure.
_RSYNC_TELLING = Telling(first=True, silent="exit {status}")
_PROBE = (
    # pytest and pytest-xdist first: without them nothing can run there (exit 94, as the workdir's check said).
    "import sys\ntry:\n    import pytest, xdist\nexcept ImportError as e:\n    print(e, file=sys.stderr)\n"
    "    sys.exit(94)\nimport json\nfrom promote.runners.stations import detect_local\n"
    "station, notes = detect_local()\nprint(json.dumps({'station': station.to_json(), 'notes': notes}))\n"
)


@dataclass(frozen=True)
class Workspace:
    """A station ready to run: the absolute workdir there, the commit checked out, what was detected."""

    target: Target
    workdir: str
    sha: str
    station: Station
    notes: tuple[str, ...] = ()

    @property
    def lib(self) -> str:
        return f"{self.workdir}/{LIB}"


def shell_path(path: str) -> str:
    """A station path for its shell: quoted, except a leading `~/`, which must reach the shell unquoted."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + q(path[2:])
    return q(path)


def lib_tar() -> bytes:
    """The installed `promote` package as a tar, so the station imports the very plugin this run uses."""
    root = Path(promote.__file__).resolve().parent

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if "__pycache__" in info.name.split("/") or info.name.endswith(".pyc") else info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(root, arcname="promote", filter=keep)
    return buf.getvalue()


def _lock(station: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(station, threading.Lock())


def _fail(target: Target, what: str) -> StationError:
    return StationError(f"station {target.label}: {what}")


def open_workdir(target: Target, workdir: str, *, git: bool) -> str:
    """Create the workdir (a git repository when syncing by git) and check the remote Python; its absolute path."""
    py = q(target.python)
    lines = [f"mkdir -p {shell_path(workdir)} && cd {shell_path(workdir)} && pwd -P || exit 90"]
    if git:
        lines += ["command -v git >/dev/null 2>&1 || exit 91", "[ -d .git ] || git init --quiet . >&2 || exit 92"]
    # Whether it can import pytest and xdist is asked with the inventory (install), in the same Python start.
    lines += [f"command -v {py} >/dev/null 2>&1 || exit 93"]
    reply = target.run("\n".join(lines), timeout=PREPARE_TIMEOUT_S)
    if reply.status in (255, None):
        raise _fail(target, connection_failure(target, reply))
    if not reply.ok:
        what = _PREPARE_FAULTS.get(reply.status, "the workdir could not be prepared")
        raise _fail(target, what.format(workdir=workdir, python=target.python) + f" ({reply.reason})")
    return reply.stdout.strip().splitlines()[-1]


def push(target: Target, repo: Path, sha: str, workdir: str) -> None:
    """Push the candidate to a ref of its own in the station's repository: a new ref, so never a forced update."""
    done = run_git(
        repo,
        # git runs core.sshCommand through a shell: each word quoted.
        "-c", f"core.sshCommand={shlex.join(target.ssh_command())}",
        # Hooks guard publishing to shared mirrors; this is the station's private scratch repository.
        "push", "--quiet", "--no-verify", "--end-of-options",
        target.git_url(workdir), f"{sha}:refs/promote/candidates/{sha}",
        timeout=PREPARE_TIMEOUT_S,
    )  # fmt: skip
    if not done.ok:
        raise _fail(target, f"git push of {sha[:12]} to {workdir} failed: {done.reason}")


def rsync(target: Target, repo: Path, workdir: str) -> None:
    """Copy the working tree (as .gitignore allows) to the workdir; files the tree no longer has go too."""
    cmd = [
        "rsync", "--archive", "--delete", "--filter=:- .gitignore",
        # Our own state never travels; the station's copy of the plugin is not the tree's to delete.
        "--exclude=/.git/", f"--exclude=/{STATE_DIR}/", f"--exclude=/{LIB}/", f"--exclude=/{OUT}/",
        # rsync splits -e into words itself, honouring quotes like a shell.
        "-e", shlex.join(target.ssh_command()),
        "--", f"{repo}/", f"{target.host_spec}:{workdir}/",
    ]  # fmt: skip
    # The bounded runner: a timeout kills rsync's ssh child too, which would otherwise hold the station.
    try:
        done = run_bounded(cmd, timeout=PREPARE_TIMEOUT_S, telling=_RSYNC_TELLING)
    except FileNotFoundError:
        raise _fail(target, 'sync = "rsync" but rsync is not installed here') from None
    if done.status is None:
        raise _fail(target, f"rsync to {workdir} did not finish in {PREPARE_TIMEOUT_S:g} s")
    if not done.ok:
        raise _fail(target, f"rsync to {workdir} failed: {done.reason}")


def install(target: Target, workdir: str, sha: str | None, package_dir: str) -> tuple[Station, tuple[str, ...]]:
    """Check out `sha` (git sync), ship the plugin, and detect what the station has (its inventory)."""
    lib = f"{workdir}/{LIB}"
    py = q(target.python)
    checkout = [f"git -C {q(workdir)} checkout --quiet --detach {q(sha)} >&2 || exit 95"] if sha else []
    script = "\n".join(
        [
            *checkout,
            f"[ -d {q(package_dir)} ] || {{ echo 'no directory {package_dir}' >&2; exit 96; }}",
            f"rm -rf {q(lib + '.new')} && mkdir -p {q(lib + '.new')} && tar -xf - -C {q(lib + '.new')} || exit 97",
            f"rm -rf {q(lib)} && mv {q(lib + '.new')} {q(lib)} || exit 97",
            f'PYTHONPATH={q(lib)}"${{PYTHONPATH:+:$PYTHONPATH}}" {py} -c {q(_PROBE)}',
            "status=$?; [ $status -eq 94 ] && exit 94; [ $status -eq 0 ] || exit 98",
        ]
    )
    reply = target.run(script, stdin=lib_tar(), timeout=PREPARE_TIMEOUT_S)
    if reply.status in (255, None):
        raise _fail(target, connection_failure(target, reply))
    if not reply.ok:
        source = f"commit {sha[:12]} (is the package committed?)" if sha else "the copied tree"
        what = {
            95: f"cannot check out {(sha or '')[:12]} in {workdir}",
            96: f"{package_dir} is not in {source}",
            97: f"cannot unpack the promote plugin into {lib}",
            98: "cannot detect its inventory with the promote plugin",
            94: _PREPARE_FAULTS[94].format(python=target.python),
        }.get(reply.status, "preparing the run failed")
        raise _fail(target, f"{what} ({reply.reason})")
    try:
        found = json.loads(reply.stdout.strip().splitlines()[-1])
        return Station.from_json(found["station"]), tuple(str(n) for n in found["notes"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise _fail(target, f"its inventory probe printed no inventory ({reply.output[-200:]!r})") from None


def candidate(repo: Path) -> tuple[Path, str, bool]:
    """The top of the repository holding `repo`, its HEAD commit, and whether tracked files differ from it."""
    top = run_git(repo, "rev-parse", "--show-toplevel")
    head = run_git(repo, "rev-parse", "--verify", "HEAD^{commit}")
    if not (top.ok and head.ok):
        raise StationError(f"{repo} is not in a git repository with a commit: {(top if not top.ok else head).reason}")
    dirty = run_git(repo, "status", "--porcelain", "--untracked-files=no")
    return Path(top.stdout.strip()), head.stdout.strip(), bool(dirty.stdout.strip())


def prepare(
    target: Target, top: Path, sha: str, workdir: str, package: str, *, sync: str, configured: Station
) -> Workspace:
    """Every step before the tests run; raises StationError naming the station and the step that failed."""
    with _lock(target.station):
        absolute = open_workdir(target, workdir, git=sync == "git")
        if sync == "git":
            push(target, top, sha, absolute)
        else:
            rsync(target, top, absolute)
        detected, notes = install(target, absolute, sha if sync == "git" else None, f"{absolute}/{package}")
    return Workspace(
        target, absolute, sha, replace(observed(detected, configured), ssh=configured.ssh, local=False), notes
    )
