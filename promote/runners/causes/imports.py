"""Failures caused by a module's import: a test that fails alone, but passes when some module is not collected.

pytest imports every module of a package before the first test runs, so state a module sets at import
reaches tests collected before it as well as after it: no bisection over the tests before the victim can
find it. The plugin records which modules changed state while imported; a victim that fails even alone
(the whole package collected, only it selected) is rerun with those modules left out of collection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from promote.core.vocab import GENUINE, IMPORT, ORDER_DEPENDENT
from promote.runners.causes.bisect import Verdict
from promote.runners.causes.rerun import RerunError, Rerunner
from promote.runners.plugin.records import LeakRecord

# Reruns one victim may spend on this: all left out at once, then each of a few modules alone.
MOST_MODULES = 4


def importers(leaks: Sequence[LeakRecord]) -> list[str]:
    """The modules that changed global state while imported, each once, in collection order."""
    return list(dict.fromkeys(leak.test for leak in leaks if leak.phase == IMPORT))


def suspects_of(test: str, modules: Sequence[str]) -> list[str]:
    """The modules whose import may make `test` fail: every one that changed state, but its own."""
    own = test.split("::", 1)[0]
    return [m for m in modules if m != own]  # a test needs its own module


def by_import(rerunner: Rerunner, verdict: Verdict, modules: Sequence[str], *, passed_without: bool = False) -> Verdict:
    """`verdict` of a test failing alone, made order-dependent on the modules whose import makes it fail.

    The victim passes with every suspect module left out, and fails again with the named ones collected
    (the others still left out); otherwise the verdict stays as it was. `passed_without`: the first of
    these, made already (with the reruns alone).
    """
    suspects = suspects_of(verdict.test, modules)
    if verdict.kind != GENUINE or not suspects:
        return verdict
    reruns = verdict.reruns
    try:
        if not passed_without:
            reruns += 1
            if rerunner.fails([], verdict.test, ignore=suspects):
                return replace(verdict, reruns=reruns)
        named = list(suspects)
        if 1 < len(suspects) <= MOST_MODULES:
            for module in suspects:
                reruns += 1
                if rerunner.fails([], verdict.test, ignore=[m for m in suspects if m != module]):
                    named = [module]
                    break
        reruns += 1  # seen afresh: with the named modules collected it fails again
        if not rerunner.fails([], verdict.test, ignore=[m for m in suspects if m not in named]):
            return replace(verdict, reruns=reruns)
    except RerunError:
        return replace(verdict, reruns=reruns)
    detail = "fails whenever it is collected with " + ", ".join(named) + "; passes when they are not collected"
    return Verdict(verdict.test, ORDER_DEPENDENT, tuple(named), reruns, detail, by_import=True)
