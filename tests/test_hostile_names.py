"""A property test of every output format (issue 33): random Unicode names (control
characters, line breaks, `::`, `%`, `<!--`, `]]>`, bidi overrides, NUL, undecodable bytes in
file names) as node names and device names in real graph files, as file names given on the
command line and found by a directory walk, and as source text, through every format of
`check`, `fix`, `verify` and `report`; each output parsed back by its format's own reader:
an XML parser, `json`, the SARIF 2.1.0 fields readers rely on, GitHub's workflow-command
grammar, and the HTML page's DOM in headless Chromium.

Seeded and small in the suite (GRAPHFIX_HOSTILE_NAMES names a round, default 16, one
round, two of its four pages drawn in Chromium); `make bench` runs more rounds
(GRAPHFIX_HOSTILE_ROUNDS; fixtures/bench/hostile_names_bench.py), every page drawn. The
commands run in this
process (`graphfix.cli.main.main`) so that a round costs seconds; tests/test_hostile_output.py
runs the same cases as a user does, one process each."""

from __future__ import annotations

import io
import json
import os
import random
import sys
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hostile_names import (annotations, as_dom_text, foreign_lines, graph_with_variables,
                           raw_characters, rendered_dom, write_graph)

NAMES = int(os.environ.get("GRAPHFIX_HOSTILE_NAMES", "16"))
ROUNDS = int(os.environ.get("GRAPHFIX_HOSTILE_ROUNDS", "1"))

# Pieces a hostile name is made of, and random code points around them.
PIECES = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1b[31m", "\x1b]0;t\x07", "\x00", "\x7f",
          "\x85", "\x9b", "\u2028", "\u2029", "\u202a", "\u202e", "\u2066", "\u2069",
          "\u200f", "::", "::warning::x", "::add-mask::y", "::set-output name=a::b",
          "##[error]z", "%", "%0A", "%25", "<!--", "<script>", "</script>", "]]>", "<![CDATA[",
          "&amp;", "\"", "'", ",", "=", ":", " ", "\t", "\\", "é", "漢", "😀", "\ufeff",
          "\ufffe"]


def _code_point(rng: random.Random) -> str:
    while True:
        code = rng.choice([rng.randrange(0x00, 0x100), rng.randrange(0x100, 0x3000),
                           rng.randrange(0x2000, 0x2100), rng.randrange(0x10000, 0x10FFFF)])
        if not 0xD800 <= code <= 0xDFFF:  # (a lone surrogate is no UTF-8: file names only)
            return chr(code)


def hostile_name(rng: random.Random) -> str:
    parts = [rng.choice(PIECES) if rng.random() < 0.6 else _code_point(rng)
             for _ in range(rng.randrange(1, 7))]
    return "".join(parts)


def node_names(rng: random.Random, count: int) -> list[str]:
    """Names a graph may hold (graphfix reads `^x` as a control input and `x:1` as an
    output: a name is neither), each unique by its suffix."""
    names = []
    for i in range(count):
        name = hostile_name(rng).lstrip("^") or "x"
        names.append(f"{name}~{i}")
    return names


def file_name(rng: random.Random, i: int, suffix: str) -> bytes:
    """A file name: any bytes but `/` and NUL, sometimes not UTF-8 at all."""
    name = hostile_name(rng).replace("/", "|").replace("\0", "0").encode("utf-8", "replace")
    if rng.random() < 0.25:
        name += bytes([rng.randrange(0x80, 0x100)])
    return name[:200] + f"~{i}{suffix}".encode()


SOURCE = ("import tensorflow as tf\n# {note}\nwith tf.device('/gpu:0'):\n"
          "    d = tf.Variable(2)\n")


class Run:
    """One command run in this process: exit code, stdout, stderr (both UTF-8, strictly)."""

    def __init__(self, *args):
        from graphfix.cli.main import main

        streams = [io.BytesIO(), io.BytesIO()]
        wrappers = [io.TextIOWrapper(s, encoding="utf-8", newline="\n", write_through=True)
                    for s in streams]
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = wrappers
        try:
            main([os.fsdecode(a) for a in args])
        except SystemExit as exc:
            self.code = exc.code
        finally:
            sys.stdout, sys.stderr = saved
        self.stdout, self.stderr = (s.getvalue().decode("utf-8") for s in streams)
        for wrapper in wrappers:
            wrapper.detach()

    def __repr__(self) -> str:
        return f"Run(code={self.code}, stdout={self.stdout[-3000:]!r}, stderr={self.stderr!r})"


def _inputs(folder: Path, rng: random.Random) -> dict:
    """The round's files: a binary and a text graph of hostile node names, graphs of hostile
    devices (each refused, naming the device), hostile file names on the command line and in
    a walked folder (a fixable source each, and one that is skipped), a hostile source
    comment in each."""
    names = node_names(rng, NAMES)
    half = len(names) // 2
    graphs = [write_graph(folder / os.fsdecode(file_name(rng, 0, ".pb")),
                          graph_with_variables(names[:half])),
              write_graph(folder / "text.pbtxt", graph_with_variables(names[half:]))]
    # A device index no device has is refused, naming the device; a job may be named
    # anything but `:` and `/` (its variable found and moved to the job's CPU, the job
    # named in each).
    device = f"/device:GPU:0{hostile_name(rng)}<\x1b"
    refused = [write_graph(folder / "device.pb", graph_with_variables(["v"], device))]
    job = f"/job:{hostile_name(rng).replace('/', '|').replace(':', '|')}/device:GPU:0"
    graphs.append(write_graph(folder / "job.pb", graph_with_variables(["v"], job)))
    walked = folder / "src"
    walked.mkdir()
    sources = []
    for i in range(max(2, NAMES // 4)):
        where = folder if i % 2 else walked
        path = where / os.fsdecode(file_name(rng, i, ".py"))
        note = hostile_name(rng).translate({ord(c): " " for c in "\r\n\0"})  # (one line)
        path.write_text(SOURCE.format(note=note), errors="surrogateescape")
        sources.append(path)
    skipped = walked / os.fsdecode(file_name(rng, 99, ".py"))
    skipped.write_text("def broken(:\n")
    given = [p.name for p in sources if p.parent == folder]  # (relative: a line starts so)
    return {"names": names, "graphs": [g.name for g in graphs], "refused":
            [g.name for g in refused], "sources": given + ["src"], "device": device,
            "job": job,
            "paths": [g.name for g in graphs + refused]
            + [str(p.relative_to(folder)) for p in sources]}


def _log_safe(run: Run) -> None:
    """Whatever the format, graphfix's output read in a CI log holds no workflow command
    but graphfix's own, and no traceback."""
    assert foreign_lines(run.stdout + run.stderr) == [], run
    assert "Traceback" not in run.stderr, run


def _text_safe(run: Run) -> None:
    assert raw_characters(run.stdout + run.stderr) == [], run
    _log_safe(run)


def _github_safe(run: Run, paths: list[str]) -> None:
    """No workflow command but graphfix's own; each annotates one of `paths` (one file
    property per path, none with a character that would act on the log)."""
    _log_safe(run)
    files = {props["file"] for _, props, _ in annotations(run.stdout)}
    assert len(files) == len(paths), (files, paths)
    assert raw_characters("".join(files) + "".join(m for _, _, m in annotations(run.stdout))
                          ) == []


def _junit_safe(run: Run) -> ET.Element:
    _log_safe(run)
    root = ET.fromstring(run.stdout)  # expat: XML 1.0's characters only, well formed
    assert root.tag == "testsuites"
    return root


def _sarif_safe(run: Run, inputs: dict) -> None:
    _log_safe(run)
    doc = json.loads(run.stdout)
    assert doc["version"] == "2.1.0" and doc["$schema"].endswith("sarif-2.1.0.json")
    [sarif_run] = doc["runs"]
    assert sarif_run["tool"]["driver"]["name"] == "graphfix"
    rule_ids = [r["id"] for r in sarif_run["tool"]["driver"]["rules"]]
    nodes = set()
    for result in sarif_run["results"]:
        assert result["ruleId"] in rule_ids and result["ruleId"] == rule_ids[result["ruleIndex"]]
        assert isinstance(result["message"]["text"], str) and result["message"]["text"]
        assert result["level"] in ("error", "warning", "note")
        [location] = result["locations"]
        uri = location["physicalLocation"]["artifactLocation"]["uri"]
        assert urllib.parse.quote(urllib.parse.unquote_to_bytes(uri), safe="/") == uri
        assert not set(uri) - set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                  "0123456789-._~/%")
        nodes.update(loc["name"] for loc in location.get("logicalLocations", []))
        for fix in result.get("fixes", []):
            for change in fix["artifactChanges"]:
                assert change["artifactLocation"]["uri"] == uri
    assert set(inputs["names"]) <= nodes  # each hostile node, exactly as the graph names it


def _page_safe(page: Path, names: list[str], *, in_chromium: bool = True) -> None:
    """The page's data holds no `<`; in Chromium (the suite draws two of a round's four
    pages, the longer run all) its tables are drawn, each name shown as text."""
    data = page.read_text().split('id="graphfix-data">')[1].split("</script>")[0]
    assert "<" not in data
    if not (in_chromium or ROUNDS > 1):
        return
    dom = rendered_dom(page)
    assert dom.rendered and dom.tables >= 8
    for name in names:  # the finding's node, as text in its table cell
        assert as_dom_text(name) in dom.cells, name


@pytest.mark.parametrize("seed", range(33, 33 + ROUNDS))
def test_hostile_names_through_every_format(seed, tmp_path, monkeypatch):
    rng = random.Random(seed)
    monkeypatch.chdir(tmp_path)
    inputs = _inputs(tmp_path, rng)
    graphs, refused, sources = inputs["graphs"], inputs["refused"], inputs["sources"]
    every = [*graphs, *refused, *sources]
    common = ["--jobs", "1", "--only", "variables-to-cpu"]

    # check: every format, and its --report and --html
    text = Run("check", *every, *common, "--report", "r.json", "--html", "check.html")
    assert text.code == 2, text  # (the refused graphs)
    _text_safe(text)
    report = json.loads(Path("r.json").read_text())
    found = [f for f in report["findings"] if f["node"]]
    assert {f["node"] for f in found} == {*inputs["names"], "v"}
    assert any(inputs["job"] in f["message"] for f in found if f["node"] == "v")
    [failure] = report["failed"]
    assert failure["path"] == "device.pb" and " in device " in failure["error"]
    as_json = Run("check", *every, *common, "--format", "json")
    _log_safe(as_json)
    shown = json.loads(as_json.stdout)
    assert shown["findings"] == report["findings"] and shown["failed"] == report["failed"]
    _sarif_safe(Run("check", *every, *common, "--format", "sarif"), inputs)
    _github_safe(Run("check", *every, *common, "--format", "github"), inputs["paths"])
    junit = _junit_safe(Run("check", *every, *common, "--format", "junit"))  # (+ skipped)
    assert len({s.get("name") for s in junit.iter("testsuite")}) == len(inputs["paths"]) + 1
    _page_safe(tmp_path / "check.html", inputs["names"])

    # fix: text and json of a dry run (--diff: the hostile comments' lines), then github
    # with --report and --html, written in place
    diff = Run("fix", *graphs, *sources, *common, "--diff")
    assert diff.code == 1, diff
    _text_safe(diff)
    dry = Run("fix", *graphs, *sources, *common, "--dry-run", "--format", "json")
    _log_safe(dry)
    changed = {c["node"] for c in json.loads(dry.stdout)["changes"] if c["node"]}
    assert set(inputs["names"]) <= changed
    fixed = Run("fix", *graphs, *sources, *common, "--in-place", "--format", "github",
                "--report", "fix.json", "--html", "fix.html")
    assert fixed.code == 1, fixed
    _github_safe(fixed, [p for p in inputs["paths"] if p not in refused])
    assert json.loads(Path("fix.json").read_text())["summary"]["changes"] >= len(inputs["names"])
    _page_safe(tmp_path / "fix.html", inputs["names"], in_chromium=False)

    # verify the first graph (as it was: rebuilt) and report
    write_graph(tmp_path / graphs[0], graph_with_variables(inputs["names"][:NAMES // 2]))
    for fmt in ("text", "github", "junit", "json"):
        verified = Run("verify", graphs[0], "--format", fmt, *(
            ["--report", "v.json", "--html", "verify.html"] if fmt == "junit" else []))
        assert verified.code == 1, verified
        if fmt == "text":
            _text_safe(verified)
        elif fmt == "github":
            _github_safe(verified, [graphs[0]])
        elif fmt == "junit":
            _junit_safe(verified)
        else:
            _log_safe(verified)
            doc = json.loads(verified.stdout)
            assert doc["path"] == graphs[0] and doc["passed"] is False
            assert {c["name"] for c in doc["checks"]} == {
                c["name"] for c in json.loads(Path("v.json").read_text())["checks"]}
    _page_safe(tmp_path / "verify.html", inputs["names"][:NAMES // 2])
    page = Run("report", *graphs, "--only", "variables-to-cpu", "-o", "report.html")
    _text_safe(page)
    _page_safe(tmp_path / "report.html", inputs["names"][:NAMES // 2], in_chromium=False)
