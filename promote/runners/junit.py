"""JUnit XML of a package run, written by promote from its own records (not by pytest's plugin).

Writing it here, once, after the run keeps its cost off the workers, where every test pays it.
The XML is formatted here rather than through ElementTree: a test's output may hold characters
XML 1.0 cannot carry (ANSI colour codes, NUL), which ElementTree writes as they are, leaving a file
no CI server parses; and building a tree for thousands of test cases took ~10 ms of every run.
"""

from __future__ import annotations

import re
from pathlib import Path

from promote.core import state
from promote.core.redact import current as current_redactor
from promote.core.redact import escape_char
from promote.runners.summary import PackageResult

TAGS = {"failed": "failure", "error": "error", "skipped": "skipped", "xfailed": "skipped"}
COUNTERS = {"failure": "failures", "error": "errors", "skipped": "skipped"}
# Everything outside XML 1.0's Char production: not allowed even as a character reference.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# What needs any work in an attribute value: the above, markup and the whitespace XML would normalise.
_ATTRIBUTE_WORK = re.compile("[^\x20\x21\x23-\x25\x27-\x3b\x3d\x3f-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\t": "&#9;", "\n": "&#10;", "\r": "&#13;"}


def _visible(m: re.Match[str]) -> str:
    return _ESCAPES.get(m.group()) or escape_char(m)


def xml_text(value: str, *, attribute: bool = False) -> str:
    """`value` as XML character data (or a double-quoted attribute's value).

    Characters XML cannot hold are shown as `\\xNN` escapes, so the file parses and the reader
    still sees that they were there.
    """
    if attribute:
        # Most values (test ids, times) need nothing: one search decides.
        return _ATTRIBUTE_WORK.sub(_visible, value) if _ATTRIBUTE_WORK.search(value) else value
    if _NOT_XML.search(value):
        value = _NOT_XML.sub(escape_char, value)
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _case(nodeid: str, time_s: str | None, tag: str | None, message: str, text: str) -> str:
    module, _, name = nodeid.partition("::")
    classname = xml_text(module.removesuffix(".py").replace("/", "."), attribute=True)
    head = f'<testcase classname="{classname}" name="{xml_text(name or module, attribute=True)}"'
    if time_s is not None:
        head += f' time="{time_s}"'
    if tag is None:
        return f"    {head} />\n"
    message = xml_text(message, attribute=True)
    child = f'<{tag} message="{message}">{xml_text(text)}</{tag}>' if text else f'<{tag} message="{message}" />'
    return f"    {head}>\n      {child}\n    </testcase>\n"


def write_junit(result: PackageResult, path: Path) -> Path:
    """One <testsuite> with a <testcase> per test and subtest; crashed tests are errors."""
    # What a test printed may hold a secret the plugin could not know of (one set in the parent only).
    redact = current_redactor()
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    duration = 0.0
    cases = []
    for t in result.tests:
        duration += t.duration_s
        counts["tests"] += 1
        tag = TAGS.get(t.outcome)
        if tag is None:
            cases.append(_case(t.nodeid, f"{t.duration_s:.6f}", None, "", ""))
            continue
        counts[COUNTERS[tag]] += 1
        message = redact((t.skip_reason or t.outcome)[:500])
        cases.append(_case(t.nodeid, f"{t.duration_s:.6f}", tag, message, redact(t.longrepr or t.skip_reason or "")))
    for nodeid in result.crashed_tests:
        counts["tests"] += 1
        counts["errors"] += 1
        cases.append(_case(nodeid, None, "error", "worker crashed", f"the worker died while running {nodeid}"))
    values = {"name": result.name, "hostname": result.station, **{k: str(v) for k, v in counts.items()}}
    suite = "".join(f' {k}="{xml_text(v, attribute=True)}"' for k, v in {**values, "time": f"{duration:.3f}"}.items())
    body = f"  <testsuite{suite}>\n{''.join(cases)}  </testsuite>\n" if cases else f"  <testsuite{suite} />\n"
    state.write_private(path, f"<?xml version='1.0' encoding='utf-8'?>\n<testsuites>\n{body}</testsuites>\n")
    return path


def merge_junit(sources: list[Path], path: Path) -> Path:
    """The <testsuite> of each package's junit.xml in one <testsuites> document at `path`."""
    suites = []
    for source in sources:
        text = source.read_text(encoding="utf-8") if source.is_file() else ""
        start, end = text.find("<testsuites>"), text.rfind("</testsuites>")
        if start >= 0 and end > start:
            suites.append(text[start + len("<testsuites>") : end].strip("\n") + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"<?xml version='1.0' encoding='utf-8'?>\n<testsuites>\n{''.join(suites)}</testsuites>\n", "utf-8")
    return path
