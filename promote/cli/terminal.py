"""How promote looks on a terminal: colour (off for NO_COLOR and when not a terminal), help texts, exit codes."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import IO, Literal, cast, get_args

import click

from promote.core.vocab import CheckVerdict, MergeVerdict, MirrorState, QualityVerdict, Severity, Status, StoryKind

# Each command's exit codes and one example, shown under its --help (the README's table, command by command).
EXIT_HELP = {
    "check": "0 promotable · 1 blocked · 2 usage/config error · 3 undecided (a mirror could not be read)",
    "merge": (
        "0 merged · 1 blocked (nothing pushed) · 2 usage · 3 undecided (nothing pushed) · 4 partial (rerun resumes)"
    ),
    "test": "0 all green · 1 failures or findings of severity error · 2 usage",
    "bisect": "0 not reproduced · 1 order-dependent, genuine or flaky · 2 usage · 3 undecided",
    "audit": "0 all four gates pass · 1 a gate fails · 2 usage · 3 a gate undecided · 4 gates pass, page not published",
    "accel": (
        "0 all hold · 1 broken switch, parity that differs without a non-inferior yardstick, an inferior yardstick, "
        "or a ledger or sweep error · 2 usage · 3 undecided (an inconclusive yardstick included)"
    ),
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


# --- Colour. A renderer marks the word it decides with (a verdict, a status, a severity) where it writes it,
# with a tone looked up from the word's typed value; `shown` then colours what is marked and nothing else, so
# no commit subject, test name or test output can be coloured however it is spelled.
Tone = Literal["alarm", "bad", "caution", "good", "note"]
STYLES: dict[Tone, tuple[str, bool | None]] = {
    "alarm": ("red", True),
    "bad": ("red", None),
    "caution": ("yellow", None),
    "good": ("green", None),
    "note": ("cyan", None),
}
# One table per vocabulary; tests/cli/test_terminal.py holds each one complete over its Literal's values.
SEVERITY_TONES: dict[Severity, Tone] = {"error": "alarm", "warning": "caution", "info": "note"}
AUDIT_TONES: dict[Status, Tone] = {"pass": "good", "fail": "bad", "undecided": "caution"}  # the audit's headline
GATE_TONES: dict[Status, Tone] = {"pass": "good", "fail": "alarm", "undecided": "caution"}  # a gate's row, in capitals
CHECK_TONES: dict[CheckVerdict, Tone] = {"promotable": "good", "blocked": "alarm", "undecided": "caution"}
MERGE_TONES: dict[MergeVerdict, Tone] = {
    "merged": "good",
    "would-merge": "good",
    "blocked": "alarm",
    "partial": "bad",
    "undecided": "caution",
}
MIRROR_TONES: dict[MirrorState, Tone] = {
    "up-to-date": "good",
    "fast-forward": "caution",
    "diverged": "bad",
    "missing": "bad",
    "unreachable": "caution",
}
QUALITY_TONES: dict[QualityVerdict, Tone] = {
    "non-inferior": "good",
    "inferior": "alarm",
    "inconclusive": "caution",
    "timed-out": "caution",
    "error": "caution",
}
# A test's story in `promote history --tests`: red for a while is worse than flipping or never running.
STORY_TONES: dict[StoryKind, Tone] = {"flaky-history": "caution", "never-ran": "caution", "red-streak": "bad"}

# A mark opens and closes with a NUL and a key drawn afresh by each process (os.urandom is what
# secrets.token_hex reads, without importing `secrets` into every command's start-up). Untrusted text cannot
# forge one: it does not know the key, and any NUL it carries is shown as `\x00` by `clean`.
_KEY = os.urandom(8).hex()
_MARK = re.compile(f"\x00{_KEY}({'|'.join(get_args(Tone))})\x00(.*?)\x00{_KEY}\x00", re.S)


def mark(word: str, tone: Tone, width: int = 0) -> str:
    """`word` marked to be shown in `tone`, padded to `width` outside the mark (columns measure `plain` text)."""
    return f"\x00{_KEY}{tone}\x00{word}\x00{_KEY}\x00" + " " * (width - len(word))


def plain(text: str) -> str:
    """`text` with every mark taken out and its word left: what is printed when there is no colour."""
    return _MARK.sub(r"\2", text) if "\x00" in text else text


def joined(lines: Iterable[str]) -> str:
    """A report's lines, each kept to one: a newline inside a line came with the untrusted text in it (a skip
    reason, a test id read from a published page) and is shown as `\\x0a`, so that text begins no line of its own
    (in a CI log, another tool's line or a GitHub Actions workflow command)."""
    return "\n".join(line.replace("\n", "\\x0a") for line in lines)


def shown(text: str, *, colour: bool) -> str:
    """`text` as it may reach a terminal: cleaned (redacted, control characters shown, no line a workflow
    command), marked words coloured."""
    from promote.core.redact import clean, inert_lines

    whole = clean(plain(text))
    if not colour:
        return inert_lines(whole)
    pieces = _MARK.split(text)  # text, tone, word, text, tone, word, ..., text
    between, words = [clean(p) for p in pieces[0::3]], [clean(w) for w in pieces[2::3]]
    # A secret spanning a mark's edge is redacted only when the text is cleaned whole: never colour at that price.
    if _interleave(between, words) != whole:
        return inert_lines(whole)
    styles = [STYLES[cast(Tone, tone)] for tone in pieces[1::3]]
    styled = [click.style(w, fg=fg, bold=bold) for w, (fg, bold) in zip(words, styles, strict=True)]
    return inert_lines(_interleave(between, styled))


def _interleave(between: list[str], words: list[str]) -> str:
    """The pieces around the marks with the marked words between them (one piece more than there are words)."""
    return "".join(p + w for p, w in zip(between, [*words, ""], strict=True))
