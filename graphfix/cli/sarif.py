"""SARIF 2.1.0 output for `graphfix check --format sarif` (GitHub code scanning reads it).

Where the files are: each artifact's `uri` is a relative reference, percent-encoded, to
the base `%SRCROOT%`, the working directory graphfix ran in (a workflow's checkout), which
the run's `originalUriBaseIds` gives as an absolute `file:` URI; a file outside it is an
absolute `file:` URI with no base. Which finding is which across commits: each result's
`partialFingerprints` hash its transform, its file and what it flagged (a graph's node name,
a source's flagged line as text, not its number), so a finding keeps its identity when
lines above it move."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from urllib.parse import quote

from graphfix.findings import REPOSITORY, Report, docs_url

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SRCROOT = "%SRCROOT%"
FINGERPRINT = "graphfix/v1"  # (a new way of hashing gets a new key: old alerts stay apart)


def artifact_uri(path: str) -> str:
    """A path as a URI reference: its bytes percent-encoded where a URI may not hold them
    as they are (a space, `%`, `#`, a line break, a non-ASCII letter), `/` kept."""
    return quote(os.fsencode(path), safe="/")


def _directory_uri(folder: str) -> str:
    """An absolute folder as a `file:` URI ending in `/` (a base URI's form)."""
    return "file://" + artifact_uri(folder.rstrip("/") + "/")


def artifact_location(path: str, root: str) -> dict:
    """SARIF's `artifactLocation` of `path` (as the finding gives it): relative to `root`
    (the `%SRCROOT%` base) where it lies inside it, else an absolute `file:` URI."""
    absolute = os.path.normpath(os.path.join(root, path))
    relative = os.path.relpath(absolute, root)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return {"uri": "file://" + artifact_uri(absolute)}
    return {"uri": artifact_uri(relative.replace(os.sep, "/")), "uriBaseId": SRCROOT}


class _FlaggedLines:
    """The text of the lines findings flag, each file read once (a file that cannot be
    read, or is no longer what was checked, gives None: the fingerprint then hashes the
    finding's message)."""

    def __init__(self, root: str):
        self.root = root
        self.files: dict[tuple[str, int | None], list[str] | None] = {}

    def line(self, finding) -> str | None:
        key = (finding.path, finding.cell)
        if key not in self.files:
            self.files[key] = self._lines(finding.path, finding.cell)
        lines = self.files[key]
        if lines is None or not finding.line or finding.line > len(lines):
            return None
        return lines[finding.line - 1]

    def _lines(self, path: str, cell: int | None) -> list[str] | None:
        try:
            raw = Path(self.root, path).read_bytes()
            if cell is None:
                return raw.decode("utf-8", "replace").splitlines()
            source = json.loads(raw)["cells"][cell - 1]["source"]
            return ("".join(source) if isinstance(source, list) else source).splitlines()
        except (OSError, ValueError, LookupError, TypeError):
            return None


def fingerprints(findings: list, locations: list[dict], root: str) -> list[str]:
    """Each finding's identity across commits: a hash of its transform, its file's URI and
    what it flagged (a graph finding's node; a source finding's line, its surrounding space
    dropped, else its message), numbered where the same thing is flagged twice in a file."""
    lines = _FlaggedLines(root)
    seen: dict[str, int] = {}
    out = []
    for finding, location in zip(findings, locations):
        if finding.node is not None:
            flagged = f"node {finding.node}"
        else:
            text = lines.line(finding)
            flagged = f"line {' '.join(text.split())}" if text and text.strip() else (
                f"message {finding.message}")
        key = "\0".join([finding.transform, location["uri"], flagged])
        seen[key] = seen.get(key, 0) + 1
        digest = hashlib.sha256(f"{key}\0{seen[key]}".encode("utf-8", "surrogatepass"))
        out.append(digest.hexdigest()[:32])
    return out


def to_sarif(report: Report, transforms: dict, root: str | None = None) -> dict:
    """One run, one rule per transform, one result per finding. `root`: the `%SRCROOT%`
    base, the working directory by default. Graph findings point at the graph file and
    name the node in a logical location; notebook findings point at the notebook, with the
    line and column within the cell that a logical location names (`cell 3`; also the
    result's `properties.cell`). A source finding whose fix is known as text
    (`Finding.replacements`) carries it as the result's `fixes`."""
    root = os.path.abspath(root or os.getcwd())
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
    artifacts = [artifact_location(f.path, root) for f in report.findings]
    results = []
    for finding, artifact, fingerprint in zip(report.findings, artifacts,
                                              fingerprints(report.findings, artifacts, root)):
        location = {"physicalLocation": {"artifactLocation": artifact}}
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
            "partialFingerprints": {FINGERPRINT: fingerprint},
            "properties": properties,
        }
        if finding.replacements:
            result["fixes"] = [fix(finding, artifact)]
        results.append(result)
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "graphfix", "informationUri": REPOSITORY,
                                "rules": rules}},
            "originalUriBaseIds": {SRCROOT: {"uri": _directory_uri(root)}},
            "results": results,
            # Columns and character offsets count code points, as Python's strings do.
            "columnKind": "unicodeCodePoints",
        }],
    }


def fix(finding, artifact: dict) -> dict:
    """A SARIF `fix`: the finding's replacements in its file (`artifact`, its location),
    each region given both ways SARIF has (line and column, character offset and length)
    for the readers that know only one."""
    return {
        "description": {"text": f"graphfix fix --only {finding.transform}"},
        "artifactChanges": [{
            "artifactLocation": dict(artifact),
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
