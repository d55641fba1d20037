"""Benchmark `promote check --json` against a shell script doing the same git work, one mirror at a time."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Run as a script (`python benchmarks/bench_check.py`), so the helpers are imported by path.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    BENCH_DIR,
    WORK_DIR,
    Arm,
    BenchError,
    cached_fixture,
    format_table,
    git,
    interleave,
    machine_info,
    promote_argv,
    write_results,
)

# Bump when the generated fixture changes shape, so stale caches are rebuilt, not reused.
GENERATOR_VERSION = 1
TRUNK = "main"
DEFAULT_COMMITS = 50_000
FILES = 100
# Realistic mirror states: two up to date, one a few commits behind, one far behind.
# All are fast-forwards of the candidate, so `promote check` must say "promotable" (exit 0).
BEHIND = {"origin": 0, "mini": 0, "station": 3, "laptop": 40}
MIRRORS = tuple(BEHIND)
EPOCH = 1_600_000_000  # pinned commit dates: fixed start, one commit every 10 minutes
IDENT = b"Bench <bench@example.invalid>"
# A JSON list of strings is also a TOML array.
CONFIG = f'[promote]\ntrunk = "{TRUNK}"\nmirrors = {json.dumps(list(MIRRORS))}\n'
SCRIPT = BENCH_DIR / "check_mirrors.sh"


@dataclass(frozen=True)
class Fixture:
    """The generated working repository, its mirrors, and the answer both arms must give."""

    work: Path
    candidate: str
    heads: dict[str, str]  # mirror name -> the sha its trunk points at


def _data(payload: bytes) -> bytes:
    return b"data %d\n%s\n" % (len(payload), payload)


def _module(k: int, revision: int) -> bytes:
    """A small source-like file; only the revision line changes between versions."""
    return (
        f'"""Module {k} of the generated benchmark repository."""\n\n'
        f"REVISION = {revision}\n\n\ndef value() -> int:\n    return REVISION * {k + 1}\n"
    ).encode()


def fast_import_stream(commits: int) -> Iterator[bytes]:
    """A deterministic `git fast-import` stream: `commits` commits on the trunk, one file each."""
    for i in range(commits):
        stamp = b"%d +0000" % (EPOCH + 600 * i)
        yield b"commit refs/heads/%s\nmark :%d\n" % (TRUNK.encode(), i + 1)
        yield b"author %s %s\ncommitter %s %s\n" % (IDENT, stamp, IDENT, stamp)
        if i == 0:
            yield _data(b"Initial layout\n")
            yield b"M 100644 inline promote.toml\n" + _data(CONFIG.encode())
            for k in range(FILES):
                yield b"M 100644 inline src/mod_%03d.py\n" % k + _data(_module(k, 0))
        else:
            # Each later commit touches one of the files, round robin: small trees, small deltas.
            k = i % FILES
            yield _data(b"Change module %03d (revision %d)\n" % (k, i))
            yield b"M 100644 inline src/mod_%03d.py\n" % k + _data(_module(k, i))
        yield b"\n"
    yield b"done\n"


def build_fixture(root: Path, commits: int, commit_graph: bool) -> None:
    """Generate the working repository and its four bare mirrors under `root`."""
    work = root / "work"
    work.mkdir()
    git(work, "init", "--quiet", f"--initial-branch={TRUNK}")
    print(f"  fast-import: {commits} commits ...", flush=True)
    git(work, "fast-import", "--quiet", "--done", stdin=b"".join(fast_import_stream(commits)))
    # fast-import writes a loosely deltified pack; a clone receives one from pack-objects,
    # so repack to get the pack a developer's repository really has.
    git(work, "repack", "-a", "-d", "-f", "--quiet")
    git(work, "reset", "--hard", "--quiet", TRUNK)
    for name, behind in BEHIND.items():
        mirror = root / "mirrors" / f"{name}.git"
        # A local clone hardlinks the objects: cheap, and the mirror's pack is irrelevant to a
        # fetch whose objects the working repository already has.
        git(root, "clone", "--bare", "--quiet", str(work), str(mirror))
        if behind:
            target = git(work, "rev-parse", f"{TRUNK}~{behind}").strip()
            git(mirror, "update-ref", f"refs/heads/{TRUNK}", target)
        git(work, "remote", "add", name, str(mirror))
        # A developer has fetched every mirror before: the tracking refs exist.
        git(work, "fetch", "--quiet", name)
    for repo in [work, *(root / "mirrors").iterdir()]:
        if commit_graph:
            git(repo, "commit-graph", "write", "--reachable")
        else:
            # The fresh-clone case: no commit-graph anywhere (a local clone may copy one).
            objects = repo / "objects" if repo.suffix == ".git" else repo / ".git" / "objects"
            (objects / "info" / "commit-graph").unlink(missing_ok=True)


def load_fixture(commits: int, commit_graph: bool, fresh: bool) -> Fixture:
    """The cached fixture for these parameters, generated first when missing."""
    if commits <= max(BEHIND.values()) + 1:
        raise BenchError(f"--commits must be more than {max(BEHIND.values()) + 1}")
    version = git(BENCH_DIR, "--version").strip()
    params = {
        "generator": GENERATOR_VERSION,
        "commits": commits,
        "files": FILES,
        "behind": BEHIND,
        "commit_graph": commit_graph,
        "git": version,
    }
    root = cached_fixture(WORK_DIR / "check", params, lambda d: build_fixture(d, commits, commit_graph), fresh=fresh)
    work = root / "work"
    candidate = git(work, "rev-parse", TRUNK).strip()
    heads = {m: git(work, "rev-parse", f"{TRUNK}~{n}").strip() for m, n in BEHIND.items()}
    count = int(git(work, "rev-list", "--count", TRUNK).strip())
    if count != commits:
        raise BenchError(f"fixture {root} has {count} commits, expected {commits}; use --fresh")
    return Fixture(work=work, candidate=candidate, heads=heads)


def expected(fx: Fixture) -> dict[str, tuple[str, str, int, int]]:
    """Per mirror: (status, head, behind, discard) that an honest check must report."""
    return {m: ("up-to-date" if n == 0 else "fast-forward", fx.heads[m], n, 0) for m, n in BEHIND.items()}


def verify_promote(fx: Fixture, stdout: str) -> None:
    """Fail unless `promote check --json` gave the right verdict and every mirror's state."""
    try:
        report: dict[str, Any] = json.loads(stdout)
        got = {m["name"]: (m["status"], m["head"], m["behind"], m["discard"]) for m in report["mirrors"]}
        verdict, candidate = report["verdict"], report["candidate"]
    except (ValueError, KeyError, TypeError) as e:
        raise BenchError(f"promote check --json gave unusable output ({e!r}):\n{stdout}") from e
    if verdict != "promotable" or candidate != fx.candidate or got != expected(fx):
        raise BenchError(f"promote check gave a wrong answer:\n{stdout}")


def verify_shell(fx: Fixture, stdout: str) -> None:
    """Fail unless the shell script reported every mirror's state correctly."""
    got = {}
    try:
        for line in stdout.splitlines():
            name, status, head, behind, discard = line.split("\t")
            got[name] = (status, head, int(behind), int(discard))
    except ValueError as e:
        raise BenchError(f"check_mirrors.sh gave unusable output ({e}):\n{stdout}") from e
    if got != expected(fx):
        raise BenchError(f"check_mirrors.sh gave a wrong answer:\n{stdout}")


def latency_env(latency_ms: int) -> dict[str, str]:
    """Git config, passed by environment to both arms, that delays every mirror's answer."""
    if latency_ms <= 0:
        return {}
    # Local mirrors answer in ~10 ms; a real mirror is a network round trip away. Starting
    # upload-pack through `sleep` models that latency for fetch and ls-remote alike, for
    # both arms, without touching the cached fixture.
    env = {"GIT_CONFIG_COUNT": str(len(MIRRORS))}
    for i, mirror in enumerate(MIRRORS):
        env[f"GIT_CONFIG_KEY_{i}"] = f"remote.{mirror}.uploadpack"
        env[f"GIT_CONFIG_VALUE_{i}"] = f"sleep {latency_ms / 1000:.3f}; git-upload-pack"
    return env


def bytecode_env() -> dict[str, str]:
    """Let the promote arm cache its own bytecode, as every installed package does."""
    # An editable install runs promote/*.py from the source tree, and with
    # PYTHONDONTWRITEBYTECODE set (as in some sandboxes) every run would recompile them,
    # a cost no pip-installed user pays. Keep the cache under .work/, out of promote/.
    return {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(WORK_DIR / "pycache")}


def results_name(args: argparse.Namespace) -> str:
    """`check` for the headline run; variants get their own file rather than overwrite it."""
    name = "check"
    if args.commits != DEFAULT_COMMITS:
        name += f"-commits{args.commits}"
    if args.commit_graph:
        name += "-commit-graph"
    if args.latency_ms:
        name += f"-latency{args.latency_ms}ms"
    return name


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per arm (default 5)")
    p.add_argument("--commits", type=int, default=DEFAULT_COMMITS, help=f"commits on trunk (default {DEFAULT_COMMITS})")
    p.add_argument(
        "--commit-graph",
        action="store_true",
        help="write a commit-graph in every repository (default: none, as in a fresh clone)",
    )
    p.add_argument(
        "--latency-ms",
        type=int,
        default=0,
        help="delay each mirror's answer by MS to model a remote mirror (default 0: local)",
    )
    p.add_argument("--fresh", action="store_true", help="regenerate the fixture even if cached")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Generate (or reuse) the fixture, time both arms interleaved, print and save the figures."""
    args = parse_args(argv)
    print(
        f"bench_check: {args.commits} commits, 4 local bare mirrors, "
        f"commit-graph {'yes' if args.commit_graph else 'no'}, latency {args.latency_ms} ms",
        flush=True,
    )
    fx = load_fixture(args.commits, args.commit_graph, args.fresh)
    env = latency_env(args.latency_ms)
    promote = Arm(
        name="promote",
        argv=(*promote_argv(), "check", "--json"),
        cwd=fx.work,
        ok_exit=frozenset({0}),  # mirrors only behind: promotable, nothing else is a success
        verify=lambda out: verify_promote(fx, out),
        env={**env, **bytecode_env()},
    )
    shell = Arm(
        name="shell",
        argv=("bash", str(SCRIPT), TRUNK, *MIRRORS),
        cwd=fx.work,
        ok_exit=frozenset({0}),
        verify=lambda out: verify_shell(fx, out),
        env=env,
    )
    print(f"bench_check: {args.rounds} rounds, arms interleaved, 1 warm-up each", flush=True)
    timings = interleave(promote, shell, args.rounds)

    ratios = timings.ratios()
    ratio = timings.median_ratio()
    rows = [
        [
            name,
            f"{timings.median(name):.3f}",
            f"{min(timings.seconds[name]):.3f}",
            f"{max(timings.seconds[name]):.3f}",
        ]
        for name in timings.arms
    ]
    print()
    print(format_table(["arm", "median s", "min s", "max s"], rows))
    print()
    print("per-round ratio promote/shell: " + ", ".join(f"{r:.3f}" for r in ratios))
    # CPU time of each arm's process tree: the work done, which a loaded machine stretches far less than wall time.
    cpu_ratio = statistics.median(timings.cpu_ratios())
    print(f"median CPU-time ratio promote/shell: {cpu_ratio:.3f} (load {os.getloadavg()[0]:.1f})")
    # Issue 27's guards: start-up dominates with local mirrors; a round trip per mirror hides it.
    target = 2.0 if args.latency_ms == 0 else 0.7
    interval = timings.ratio_interval()
    verdict = interval.verdict(target)
    print(
        f"median ratio promote/shell: {ratio:.3f} (target <= {target}; the median lies in "
        f"{interval.low:.3f}-{interval.high:.3f} with {interval.coverage:.1%} confidence: {verdict})"
    )

    results = {
        "benchmark": "check",
        "command": "python benchmarks/bench_check.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine_info(),
        "fixture": {
            "commits": args.commits,
            "files": FILES,
            "mirrors": BEHIND,
            "commit_graph": args.commit_graph,
            "latency_ms": args.latency_ms,
            "path": str(fx.work),
        },
        "arms": {promote.name: list(promote.argv), shell.name: list(shell.argv)},
        "rounds": args.rounds,
        "first": timings.first,
        "seconds": timings.seconds,
        "median_s": {name: timings.median(name) for name in timings.arms},
        "mean_s": {name: statistics.fmean(timings.seconds[name]) for name in timings.arms},
        "ratios": ratios,
        "median_ratio": ratio,
        "cpu_seconds": timings.cpu_seconds,
        "median_cpu_ratio": cpu_ratio,
        "target": f"median ratio promote/shell <= {target}",
        "target_met": ratio <= target,
        "median_ratio_interval": {"low": interval.low, "high": interval.high, "coverage": interval.coverage},
        "verdict": verdict,
        "load": os.getloadavg(),
    }
    print(f"results: {write_results(results_name(args), results)}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BenchError as e:
        print(f"bench_check: error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
