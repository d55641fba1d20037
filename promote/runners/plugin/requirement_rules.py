"""The rule table that reads what a test needed out of how it failed, errored or was skipped."""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from promote.runners.plugin.outcomes import truncate


@dataclass(frozen=True)
class Rule:
    """`pattern` recognises the failure (in its exception lines or skip reason); `requirement` names the need.

    `requirement` is a template filled from the named groups of `pattern`, or, for groups it lacks,
    of the first of `frames` found in the whole failure text (traceback frames, their arguments).
    """

    pattern: str
    requirement: str
    frames: tuple[str, ...] = ()


# A repo id in the traceback, best evidence first: the URL asked for, a repo_id argument, a loader's call line.
HUB_FRAMES = (
    r"huggingface\.co/(?:api/(?:models|datasets|spaces)/|datasets/|spaces/)?(?P<repo>[\w.-]+/[\w.-]+)/"
    r"(?:resolve|revision|tree|commit)/",
    # `repo_id='org/name'` in a call, `path_or_repo_id = 'org/name'` in a frame's locals, `(repo_id: org/name, ...`
    # in huggingface_hub's own messages.
    r"(?<![A-Za-z0-9])(?:path_or_)?repo_id\s*(?:=\s*['\"]|:\s*)(?P<repo>[\w.-]+/[\w.-]+)",
    r"(?:load|download|from_pretrained)\w*\(\s*(?:\w+\s*=\s*)?['\"](?P<repo>[\w.-]+/[\w.-]+)['\"]",
    r"(?P<repo>[\w.-]+/[\w.-]+) is not a local folder",
)

# A module a skip reason names: an identifier, not a word that names something else a test can lack.
_NOT_MODULES = (
    "a|an|the|this|it|network|internet|online|offline|access|gpu|cuda|metal|mps|cpu|macos|mac|osx|linux|windows|"
    "darwin|apple|x86|arm64|display|root|admin|sudo|docker|hub|model|models|checkpoint|memory|ram|disk|python|"
    "data|dataset|datasets|credentials|token|login|slow|more|at|to|be|some|all|fix|fixing|work|review|update|refactor"
)
_BECAUSE = r"^(?:[\w ]*?\b(?:because|since|as)\s+|[\w ]*:\s*)?"
_MODULE = rf"(?!(?:{_NOT_MODULES})\b)(?P<name>[A-Za-z_][\w-]*)"

DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(
        r"^(?:[\w.]+\.)?(?:LocalEntryNotFoundError|OfflineModeIsEnabled|RepositoryNotFoundError|GatedRepoError)\b"
        r"|outgoing traffic has been disabled|cannot find the requested files in the (?:local|disk) cache"
        r"|couldn't find (?:it|them) in the cached files|is not a local folder and is not a valid model identifier",
        "hub:{repo}",
        HUB_FRAMES,
    ),
    # mlx: "[set_default_device] Cannot set gpu device without gpu backend." (and the same for streams)
    Rule(r"without gpu backend|\bNo Metal device\b|\bMetal is not (?:available|supported)\b", "device:metal"),
    Rule(r"(?i)^(?:requires?|needs?)\s+(?:an?\s+)?(?:apple\s+)?(?:metal|apple silicon)\b|\bno metal\b", "device:metal"),
    # Skips that name a device (docs/stations.md has the table): "Metal only", "No GPU available", "requires CUDA".
    Rule(
        r"(?i)\bmetal[\s-]+only\b|\bonly\s+(?:on|with|for)\s+metal\b|\bmetal\s+(?:is\s+)?(?:not\s+|un)available\b",
        "device:metal",
    ),
    Rule(
        r"(?i)\bcuda[\s-]+only\b|\b(?:requires?|needs?)\s+cuda\b|\bno\s+cuda\b|\bcuda\s+(?:is\s+)?(?:not\s+|un)available\b",
        "device:cuda",
    ),
    Rule(
        r"(?i)\bgpu[\s-]+only\b|\b(?:requires?|needs?)\s+(?:an?\s+)?gpu\b|\bno\s+gpu\b|\bgpu\s+(?:is\s+)?(?:not\s+|un)available\b",
        "device:gpu",
    ),
    Rule(
        r"^(?:[\w.]+\.)?MemoryError\b|\[metal::malloc\]|std::bad_alloc|\bInsufficient Memory\b|OutOfMemory",
        "memory",
    ),
    # Only a top-level name: "No module named 'pkg.sub'" means pkg is there and the import is wrong.
    Rule(r"^(?:[\w.]+\.)?(?:ModuleNotFoundError|ImportError): No module named '(?P<name>\w+)'", "package:{name}"),
    Rule(r"^could not import '(?P<name>\w+)'", "package:{name}"),  # pytest.importorskip's reason
)

# Only a skip reason is read this way: an exception's words ("KeyError: x not found") name no module.
SKIP_RULES: tuple[Rule, ...] = (
    # A skip written by hand for a module: "torch is required", "torch not installed", "requires torch".
    Rule(
        rf"(?i){_BECAUSE}{_MODULE}\s+(?:is\s+|are\s+)?(?:required|needed|missing|(?:not\s+|un)(?:installed|available)"
        r"|not\s+found)\b",
        "package:{name}",
    ),
    Rule(
        rf"(?i){_BECAUSE}(?:requires?|(?:please\s+)?install)\s+{_MODULE}\s*(?:$|[,.;:(<>=!~]|\s+(?:installed|to|for))",
        "package:{name}",
    ),
    Rule(rf"(?i){_BECAUSE}needs?\s+{_MODULE}\s+(?:to\s+be\s+)?installed", "package:{name}"),
)

_ABSENT = r"no such file|failed to open|does not exist|not found|cannot find|can't find|unable to open|not a directory"


# What a module prints when it checks for its optional packages itself, e.g. "Missing required packages: psutil".
_LACKS = re.compile(
    r"(?i)\b(?:missing|required|requires|needs|please install|install)\b[\w ]*?"
    r"\b(?:packages?|modules?|dependenc(?:y|ies)|librar(?:y|ies))\s*:\s*"
    r"(?P<names>[A-Za-z_][\w.-]*(?:\s*(?:,|\band\b)\s*[A-Za-z_][\w.-]*)*)"
)


def checkpoint_rules(model_dirs: Iterable[Path]) -> tuple[Rule, ...]:
    """One rule per model directory: a missing path under it needs `checkpoint:<its first part>`."""
    rules = []
    for directory in model_dirs:
        # mlx_lm.load takes a missing local path for a repo id and says so.
        absent = rf"(?=.*(?:{_ABSENT}|repo id must be in the form))"
        path = rf"(?<![\w/.-]){re.escape(str(directory).rstrip('/'))}/(?P<checkpoint>[^/'\"\s:,;()\[\]]+)"
        rules.append(Rule(rf"(?i)^{absent}.*?{path}", "checkpoint:{checkpoint}"))
    return tuple(rules)


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?::\s.*)?$")
_ASSERTION = re.compile(r"^(?:assert\b|(?:[\w.]+\.)?AssertionError\b)")
_SEPARATOR = re.compile(r"^(?:_ )+_?$|^_{3,}|^={3,}")


def excerpt(text: str) -> str:
    """The lines of a pytest failure that name things: exceptions, failing lines, frame locations and arguments.

    Source listings are dropped, so a long traceback keeps what the rules read (its full text is truncated).
    """
    kept = []
    for line in text.splitlines():
        if not line.strip() or _SEPARATOR.match(line):
            continue
        if not line[0].isspace() or line.lstrip().startswith('File "'):
            kept.append(line)
    return truncate("\n".join(kept))


def message_lines(text: str) -> list[str]:
    """The exception lines of a failure text (pytest's `E` lines, or a native traceback's last lines)."""
    found = []
    for line in text.splitlines():
        if line == "E" or line.startswith("E "):
            found.append(line[1:].strip())
        elif _EXCEPTION_LINE.match(line):
            found.append(line)
    return found


def raised(text: str) -> bool:
    """Whether a failure text shows an exception of its own (a test failed only by its subtests shows none)."""
    return bool(message_lines(text))


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def _last(pattern: str, text: str) -> dict[str, str] | None:
    # The last occurrence is nearest the raise: the innermost frame, the final exception.
    found = None
    for m in re.finditer(pattern, text, re.MULTILINE):
        found = m
    return None if found is None else {k: v for k, v in found.groupdict().items() if v}


def apply(rule: Rule, messages: str, whole: str) -> str | None:
    """The requirement `rule` reads from a failure, or None when it does not match or cannot name it."""
    match = re.search(rule.pattern, messages, re.MULTILINE)
    if match is None:
        return None
    values = {k: v for k, v in match.groupdict().items() if v}
    missing = _fields(rule.requirement) - set(values)
    for frame in rule.frames if missing else ():
        found = _last(frame, whole)
        if found is not None and missing <= set(found):
            values = {**found, **values}
            break
    if _fields(rule.requirement) - set(values):
        return None  # it is this kind of failure, but nothing says what exactly was missing
    return rule.requirement.format(**{k: v.rstrip(".") for k, v in values.items()})


def infer_failure(text: str, rules: Sequence[Rule]) -> str | None:
    """The requirement a failed or errored test's text shows it lacked; a failed assertion is never one."""
    lines = message_lines(text)
    if any(_ASSERTION.match(line) for line in lines):
        return None
    messages = "\n".join(lines)
    return next((r for rule in rules if (r := apply(rule, messages, text)) is not None), None)


def infer_output(text: str, rules: Sequence[Rule]) -> tuple[str, ...]:
    """The requirements a module's own last lines name: the packages it says it lacks, or what a rule reads."""
    found: list[str] = []
    for line in text.splitlines():
        if (m := _LACKS.search(line)) is not None:
            found += [f"package:{n}" for n in re.split(r"\s*(?:,|\band\b)\s*", m["names"]) if n]
        elif (r := next((r for rule in rules if (r := apply(rule, line, text)) is not None), None)) is not None:
            found.append(r)
    return tuple(dict.fromkeys(found))


def infer_skip(reason: str, rules: Sequence[Rule]) -> str | None:
    """The requirement a skip reason names, by the same rules."""
    # pytest words a skip raised from code (pytest.skip, importorskip) as "Skipped: <reason>".
    reason = reason.removeprefix("Skipped: ")
    return next((r for rule in (*rules, *SKIP_RULES) if (r := apply(rule, reason, reason)) is not None), None)
