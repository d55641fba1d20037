"""JUnit XML of a package run, written by promote from its own records (not by pytest's plugin).

Writing it here, once, after the run keeps its cost off the workers, where every test pays it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from promote.runners.summary import PackageResult

TAGS = {"failed": "failure", "error": "error", "skipped": "skipped", "xfailed": "skipped"}


def write_junit(result: PackageResult, path: Path) -> Path:
    """One <testsuite> with a <testcase> per test and subtest; crashed tests are errors."""
    suite = ET.Element("testsuite", name=result.name, hostname=result.station)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    duration = 0.0
    for t in result.tests:
        module, _, name = t.nodeid.partition("::")
        case = ET.SubElement(suite, "testcase", classname=module.removesuffix(".py").replace("/", "."))
        case.set("name", name or module)
        case.set("time", f"{t.duration_s:.6f}")
        duration += t.duration_s
        counts["tests"] += 1
        tag = TAGS.get(t.outcome)
        if tag is not None:
            counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[tag]] += 1
            child = ET.SubElement(case, tag, message=(t.skip_reason or t.outcome)[:500])
            child.text = t.longrepr or t.skip_reason or ""
    for nodeid in result.crashed_tests:
        module, _, name = nodeid.partition("::")
        case = ET.SubElement(suite, "testcase", classname=module.removesuffix(".py").replace("/", "."), name=name)
        ET.SubElement(case, "error", message="worker crashed").text = f"the worker died while running {nodeid}"
        counts["tests"] += 1
        counts["errors"] += 1
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", f"{duration:.3f}")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    path.write_bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))
    return path
