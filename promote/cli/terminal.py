"""How promote looks on a terminal: colour (off for NO_COLOR and when not a terminal), help texts, exit codes."""

from __future__ import annotations

import functools
import os
import re
from typing import IO

import click

# Each command's exit codes and one example, shown under its --help (the README's table, command by command).
EXIT_HELP = {
    "check": "0 promotable · 1 blocked · 2 usage/config error · 3 undecided (a mirror could not be read)",
    "merge": (
        "0 merged · 1 blocked (nothing pushed) · 2 usage · 3 undecided (nothing pushed) · 4 partial (rerun resumes)"
    ),
    "test": "0 all green · 1 failures or findings of severity error · 2 usage",
    "bisect": "0 not reproduced · 1 order-dependent, genuine or flaky · 2 usage · 3 undecided",
    "audit": "0 all four gates pass · 1 a gate fails · 2 usage · 3 a gate undecided · 4 gates pass, page not published",
    "accel": "0 all hold · 1 broken switch, parity differs, or a ledger or sweep error · 2 usage · 3 undecided",
    "history": "0 · 2 no such run",
    "stations": "0",
    "demo": "0 the demo ran (its findings are expected) · 2 DIR not empty, or the demo extra missing",
    "init": "0 written · 2 already exists or not a repository",
}
EXAMPLES = {
    "check": "promote check --candidate HEAD",
    "merge": "promote merge --dry-run",
    "test": "promote test --package sanctum-mlx",
    "bisect": "promote bisect tests/test_routing.py::test_up --package sanctum-proxy",
    "audit": "promote audit --publish --push",
    "accel": "promote accel DFlash2 --json",
    "history": "promote history --limit 5",
    "stations": "promote stations --json",
    "demo": "promote demo --keep /tmp/promote-demo",
    "init": "promote init",
}
GROUP_EPILOG = (
    "\b\nExit codes: 0 ok · 1 blocked/failed · 2 usage or configuration error · 3 undecided · 4 partial merge"
    "\n(each command's --help gives its own)."
    "\n\b\nExample:\n  promote check && promote merge"
    '\n\b\nShell completion (bash; zsh and fish alike):\n  eval "$(_PROMOTE_COMPLETE=bash_source promote)"'
)


def epilog(name: str) -> str | None:
    """The exit codes and an example for command `name` (click keeps `\\b` paragraphs as written)."""
    if name not in EXIT_HELP:
        return None
    return f"\b\nExit codes: {EXIT_HELP[name]}\n\b\nExample:\n  {EXAMPLES[name]}"


def color_wanted(stream: IO[str]) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


# What is coloured, always at a fixed place in promote's own lines, never inside quoted text.
_WORDS = {
    "error": "red", "fail": "red", "FAIL": "red", "blocked": "red", "diverged": "red", "missing": "red",
    "partial": "red", "not green": "red",
    "warning": "yellow", "undecided": "yellow", "UNDECIDED": "yellow", "unreachable": "yellow",
    "fast-forward": "yellow",
    "pass": "green", "PASS": "green", "promotable": "green", "merged": "green", "would-merge": "green",
    "up-to-date": "green", "all green": "green", "info": "cyan",
}  # fmt: skip


@functools.cache
def _patterns() -> tuple[re.Pattern[str], ...]:
    """Where a word is coloured; compiled on first use, since output that is not a terminal never needs them."""
    word = "|".join(sorted((re.escape(w) for w in _WORDS), key=len, reverse=True))
    return (
        re.compile(rf"^(verdict: |audit \S+: )({word})$"),  # check/merge verdict, audit headline
        re.compile(rf"^()({word})$"),  # test's closing line
        re.compile(rf"^(  )({word})(?= )"),  # a finding's severity
        re.compile(rf"^()({word})(?= )"),  # a gate's status
        re.compile(rf"^(\S+ +)({word})(?=  )"),  # a mirror's status column
    )


def colorize(text: str) -> str:
    """`text` with verdicts, gate statuses, severities and mirror statuses styled; the rest untouched."""
    out = []
    for line in text.split("\n"):
        for pattern in _patterns():
            found = pattern.match(line)
            if found:
                word = found[2]
                styled = click.style(word, fg=_WORDS[word], bold=True if word in ("error", "FAIL", "blocked") else None)
                line = found[1] + styled + line[found.end() :]
                break
        out.append(line)
    return "\n".join(out)
