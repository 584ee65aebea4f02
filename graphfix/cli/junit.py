"""JUnit XML for `--format junit`, the shape CI dashboards (Jenkins, GitLab, GitHub test
reporters) read: `<testsuites>` of `<testsuite name tests failures>` of `<testcase name
classname>`, a failing one holding `<failure message type>text</failure>`.

`_suite` and `_case` are this format's boundary: every name and message they put in an
attribute or a text is made visible (`graphfix.escaping`), so the document holds no
character XML 1.0 excludes (a control character, a lone surrogate) and no bidi control; a
failure's text keeps its line breaks and tabs."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from graphfix.escaping import visible, xml_document
from graphfix.findings import Report


def _suite(root: ET.Element, name: str) -> ET.Element:
    return ET.SubElement(root, "testsuite", name=visible(name), tests="0", failures="0",
                         errors="0")


def _case(suite: ET.Element, name: str, *, failure: str | None = None,
          kind: str = "failure", text: str = "") -> None:
    case = ET.SubElement(suite, "testcase", name=visible(name), classname=suite.get("name"))
    suite.set("tests", str(int(suite.get("tests")) + 1))
    if failure is not None:
        element = ET.SubElement(case, kind, message=visible(failure), type=kind)
        element.text = visible(text, keep="\n\t") if text else visible(failure)
        counter = "failures" if kind == "failure" else "errors"
        suite.set(counter, str(int(suite.get(counter)) + 1))


def _document(root: ET.Element) -> str:
    for name in ("tests", "failures", "errors"):
        root.set(name, str(sum(int(s.get(name)) for s in root)))
    ET.indent(root)
    return xml_document('<?xml version="1.0" encoding="UTF-8"?>\n'
                        + ET.tostring(root, encoding="unicode"))


def verify_junit(result) -> str:
    """One testsuite for the graph, one testcase per verify check (a failed check's
    failure has its one-line detail as message, TF's whole error as text)."""
    root = ET.Element("testsuites", name="graphfix verify")
    suite = _suite(root, result.path)
    for check in result.checks:
        _case(suite, check.name, failure=None if check.passed else (check.detail or "failed"),
              text=check.message)
    return _document(root)


def _applies(transform, path: str, found: list) -> bool:
    """Whether `transform` was run on the input `path`: a graph transform on a graph, a
    source rule on a source or notebook (one that found something there, whatever its
    surface: a traced script's graph findings are at its lines)."""
    from pathlib import Path

    from graphfix.graph.graphfile import is_graph_path

    surface = "graph" if is_graph_path(Path(path)) else "source"
    return surface in transform.surfaces() or any(f.transform == transform.name for f in found)


def report_junit(report: Report, transforms) -> str:
    """One testsuite per input file, one testcase per transform (a `Transform` class) that
    applies to it (`_applies`): failed with its findings (one per line), passed when it
    found nothing; a file that could not be read is an error testcase."""
    root = ET.Element("testsuites", name="graphfix check")
    by_path: dict[str, list] = {}
    for finding in report.findings:
        by_path.setdefault(finding.path, []).append(finding)
    paths = list(dict.fromkeys([*report.unchanged_paths, *report.changed_paths, *by_path]))
    for path in paths:
        suite = _suite(root, path)
        found = by_path.get(path, [])
        for name in [t.name for t in transforms if _applies(t, path, found)]:
            mine = [f for f in found if f.transform == name]
            _case(suite, name, failure=mine[0].message if mine else None,
                  text="\n".join(visible(f.to_text(), keep="\t") for f in mine))
    for failure in report.failed:
        _case(_suite(root, failure["path"]), "read", failure=failure["error"], kind="error")
    return _document(root)
