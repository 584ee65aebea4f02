"""SARIF 2.1.0 output for `graphfix check --format sarif` (GitHub code scanning reads it)."""

from __future__ import annotations

import os
from urllib.parse import quote

from graphfix.findings import docs_url
from graphfix.findings import Report

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def artifact_uri(path: str) -> str:
    """A file's path as SARIF's `artifactLocation.uri`, a URI reference: its bytes
    percent-encoded where a URI may not hold them as they are (a space, `%`, `#`, a line
    break, a non-ASCII letter), `/` kept; an ordinary path is unchanged."""
    return quote(os.fsencode(path), safe="/")


def to_sarif(report: Report, transforms: dict) -> dict:
    """One run, one rule per transform, one result per finding. Graph findings point at
    the graph file and name the node in a logical location; notebook findings point at the
    notebook, with the line and column within the cell that a logical location names
    (`cell 3`; also the result's `properties.cell`). A source finding whose fix is known as
    text (`Finding.replacements`) carries it as the result's `fixes`."""
    rules = [
        {
            "id": name,
            "name": name,
            "shortDescription": {"text": t.summary},
            "helpUri": docs_url(name),
        }
        for name, t in sorted(transforms.items())
    ]
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    results = []
    for finding in report.findings:
        uri = artifact_uri(finding.path)
        location = {"physicalLocation": {"artifactLocation": {"uri": uri}}}
        if finding.line is not None:
            location["physicalLocation"]["region"] = {
                "startLine": finding.line, "startColumn": finding.col or 1}
        if finding.node is not None:
            location["logicalLocations"] = [{"name": finding.node, "kind": "node"}]
        properties = {"fixable": finding.fixable, "severity": finding.severity}
        if finding.cell is not None:
            location["logicalLocations"] = [{"name": f"cell {finding.cell}", "kind": "module"}]
            properties["cell"] = finding.cell
        result = {
            "ruleId": finding.transform,
            "ruleIndex": index.get(finding.transform, 0),
            "level": {"error": "error", "warning": "warning"}.get(finding.severity, "note"),
            "message": {"text": finding.message},
            "locations": [location],
            "properties": properties,
        }
        if finding.replacements:
            result["fixes"] = [fix(finding)]
        results.append(result)
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "graphfix", "informationUri":
                                "https://github.com/graphfix/graphfix", "rules": rules}},
            "results": results,
            # Columns and character offsets count code points, as Python's strings do.
            "columnKind": "unicodeCodePoints",
        }],
    }


def fix(finding) -> dict:
    """A SARIF `fix`: the finding's replacements, each region given both ways SARIF has
    (line and column, character offset and length) for the readers that know only one."""
    return {
        "description": {"text": f"graphfix fix --only {finding.transform}"},
        "artifactChanges": [{
            "artifactLocation": {"uri": artifact_uri(finding.path)},
            "replacements": [{
                "deletedRegion": {
                    "startLine": r.start[0], "startColumn": r.start[1],
                    "endLine": r.end[0], "endColumn": r.end[1],
                    "charOffset": r.offset, "charLength": r.length,
                },
                "insertedContent": {"text": r.text},
            } for r in finding.replacements],
        }],
    }
