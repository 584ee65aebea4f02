"""Output where CI reads it: GitHub Actions annotations, JUnit XML, docs links in JSON/SARIF
and the fixes as text (JSON `replacements`, SARIF `fixes`), from the CLI run on the seed 000
graph, its fixed graph and source files."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import FIXTURES, run_cli
from graphfix.cli.github import command, escape_data, escape_property

SEED = FIXTURES / "variables_to_cpu" / "seed000_ref"
SOURCE = "import tensorflow as tf\nwith tf.device('/gpu:0'):\n    d = tf.Variable(2)\n"
ANNOTATION = re.compile(r"^::(error|warning|notice) ([^:]*)::(.*)$")


def annotations(stdout: str) -> list[tuple[str, dict, str]]:
    """The workflow commands in `stdout`, as GitHub's runner reads them."""
    out = []
    for line in stdout.splitlines():
        match = ANNOTATION.match(line)
        if match:
            props = dict(p.split("=", 1) for p in match.group(2).split(","))
            out.append((match.group(1), props, match.group(3)))
    return out


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("src") / "train.py"
    path.write_text(SOURCE)
    return path


def test_escaping_follows_githubs_workflow_command_rules():
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"
    assert command("warning", "x", file="f.py", line=None, title="t") == "::warning file=f.py,title=t::x"


def test_check_github_annotates_source_lines_and_graph_nodes(source):
    result = run_cli("check", SEED / "before.pbtxt", source, "--only", "variables-to-cpu",
                     "--format", "github", check_exit=1)
    (graph_kind, graph, graph_msg), (src_kind, src, src_msg) = annotations(result.stdout)
    assert graph_kind == "error" and graph["file"] == str(SEED / "before.pbtxt")
    assert graph["title"] == "variables-to-cpu @d" and "line" not in graph
    assert "Cannot assign a device for operation d" in graph_msg
    assert src_kind == "error" and src["file"] == str(source)
    assert (src["line"], src["col"], src["title"]) == ("3", "9", "variables-to-cpu")
    assert "2 finding(s)" in result.stdout  # the summary still shows in the log


def test_warning_severity_is_a_warning_annotation(tmp_path):
    path = tmp_path / "init.py"
    path.write_text("import tensorflow as tf\ninit = tf.initialize_all_variables()\n")
    result = run_cli("check", path, "--only", "deprecated-initializers", "--format", "github",
                     check_exit=1)
    [(kind, props, _)] = annotations(result.stdout)
    assert kind == "warning" and props["line"] == "2"


def test_check_junit_has_a_testsuite_per_file_and_testcase_per_transform(source):
    result = run_cli("check", SEED / "before.pbtxt", SEED / "after.pbtxt", source,
                     "--only", "variables-to-cpu", "--only", "update-ops", "--format", "junit",
                     check_exit=1)
    root = ET.fromstring(result.stdout)
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {str(SEED / "before.pbtxt"), str(SEED / "after.pbtxt"), str(source)}
    fixed = suites[str(SEED / "after.pbtxt")]
    assert [c.get("name") for c in fixed.findall("testcase")] == ["variables-to-cpu", "update-ops"]
    assert fixed.find("testcase/failure") is None and fixed.get("failures") == "0"
    failing = suites[str(SEED / "before.pbtxt")]
    [failure] = failing.findall("testcase/failure")
    assert "operation d" in failure.get("message") and failing.get("failures") == "1"
    assert root.get("tests") == "6" and root.get("failures") == "2"


@pytest.mark.parametrize("graph, passed", [("before.pbtxt", False), ("after.pbtxt", True)])
def test_verify_junit_has_a_testcase_per_check(graph, passed):
    result = run_cli("verify", SEED / graph, "--format", "junit", check_exit=0 if passed else 1)
    root = ET.fromstring(result.stdout)
    [suite] = root.findall("testsuite")
    assert suite.get("name") == str(SEED / graph)
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert "placement" in cases
    failures = suite.findall("testcase/failure")
    if passed:
        assert not failures and "run" in cases and suite.get("tests") == str(len(cases))
    else:  # TF's own placer error, the fixed graph's is gone
        [failure] = failures
        assert "Could not satisfy explicit device specification" in failure.get("message")


def test_verify_github_annotates_the_failed_check():
    result = run_cli("verify", SEED / "before.pbtxt", "--format", "github", check_exit=1)
    [(kind, props, message)] = annotations(result.stdout)
    assert kind == "error" and props["title"] == "verify placement"
    assert "Could not satisfy explicit device specification" in message
    assert "verification failed" in result.stdout


def test_json_and_sarif_link_the_transforms_docs_page(source):
    doc = json.loads(run_cli("check", source, "--only", "variables-to-cpu", "--format", "json",
                             check_exit=1).stdout)
    [finding] = doc["findings"]
    assert finding["severity"] == "error"
    assert finding["docs"].endswith("docs/transforms/variables-to-cpu.md")
    sarif = json.loads(run_cli("check", source, "--only", "variables-to-cpu", "--format",
                               "sarif", check_exit=1).stdout)
    run = sarif["runs"][0]
    [rule] = [r for r in run["tool"]["driver"]["rules"] if r["id"] == "variables-to-cpu"]
    assert rule["helpUri"] == finding["docs"]
    assert run["results"][0]["properties"]["severity"] == "error"


def test_fix_github_and_bad_format():
    result = run_cli("fix", SEED / "before.pbtxt", "--dry-run", "--only", "variables-to-cpu",
                     "--format", "github", check_exit=1)
    [(kind, props, message)] = annotations(result.stdout)
    assert (kind, props["title"]) == ("notice", "variables-to-cpu @d")
    assert message.startswith("fixed: ") and "CPU" in message
    bad = run_cli("fix", SEED / "before.pbtxt", "--format", "junit", check_exit=2)
    assert bad.stderr == "graphfix: error: --format must be text or json or github, not 'junit'\n"


# -- fixes as text: JSON `replacements`, SARIF `fixes` -------------------------------------------

# Source fixtures of several transforms (one a two-file project, whose fix needs the other
# file's facts), and a CRLF file with non-ASCII text before and inside the edits.
FIXED_SOURCES = [
    FIXTURES / "variables_to_cpu/source/cifar10_towers/before.py",
    FIXTURES / "feed_to_assign/source/seed003_embeddings/before.py",
    FIXTURES / "average_gradients/source/seed003_embedding/before.py",
    FIXTURES / "update_ops/source/multi_file/before",
]
CRLF_SOURCE = ("# -*- coding: utf-8 -*-\r\n# größe: ünïcode ✓\r\nimport tensorflow as tf\r\n"
               "with tf.device('/gpu:0'):\r\n    d = tf.Variable(2, name='d✓')\r\n"
               "init = tf.initialize_all_variables()\r\n")


def _sarif_changes(sarif: dict) -> dict[str, list[dict]]:
    """Every replacement of every result's fixes, by the file it changes."""
    out: dict[str, list[dict]] = {}
    for result in sarif["runs"][0]["results"]:
        for fix in result.get("fixes", []):
            for change in fix["artifactChanges"]:
                out.setdefault(change["artifactLocation"]["uri"], []).extend(
                    change["replacements"])
    return out


def _apply_by_lines(text: str, replacements: list[dict]) -> str:
    """`text` with SARIF replacements made as an editor makes them: by line and column (from
    1, the end column just after the region), each placed in the unchanged text."""
    lines = re.split(r"(?<=\n)|(?<=\r)(?!\n)", text)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1

    regions = []
    for r in replacements:
        region = r["deletedRegion"]
        start = offset(region["startLine"], region["startColumn"])
        end = offset(region["endLine"], region["endColumn"])
        # the other form SARIF gives of the same region
        assert (region["charOffset"], region["charLength"]) == (start, end - start)
        regions.append((start, end, r["insertedContent"]["text"]))
    for start, end, inserted in sorted(regions, reverse=True):
        text = text[:start] + inserted + text[end:]
    return text


def _source_files(root):
    return sorted(root.rglob("*.py")) if root.is_dir() else [root]


@pytest.mark.parametrize("fixture", FIXED_SOURCES + ["crlf"],
                         ids=lambda f: f if f == "crlf" else f.parent.name)
def test_sarif_fixes_applied_make_what_fix_writes(fixture, tmp_path):
    checked, fixed = tmp_path / "checked", tmp_path / "fixed"
    for root in (checked, fixed):
        if fixture == "crlf":
            root.mkdir()
            (root / "train.py").write_bytes(CRLF_SOURCE.encode())
        elif fixture.is_dir():
            shutil.copytree(fixture, root)
        else:
            root.mkdir()
            shutil.copy(fixture, root / "train.py")
    sarif = json.loads(run_cli("check", "--no-cache", ".", "--format", "sarif",
                               cwd=checked, check_exit=1).stdout)
    run_cli("fix", "--no-cache", ".", cwd=fixed, check_exit=1)
    changes = _sarif_changes(sarif)
    assert changes  # the fixture's fix is text
    for path in _source_files(checked):
        label = str(path.relative_to(checked))
        before = path.read_bytes().decode("utf-8")
        after = (fixed / label).read_bytes().decode("utf-8")
        assert _apply_by_lines(before, changes.get(label, [])) == after
    # every fixable finding carries its own part of the fix
    for result in sarif["runs"][0]["results"]:
        assert bool(result.get("fixes")) == result["properties"]["fixable"], result


def test_each_finding_carries_the_part_of_the_fix_at_its_line(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SOURCE + "init = tf.initialize_all_variables()\n")
    doc = json.loads(run_cli("check", "--no-cache", path, "--format", "json",
                             check_exit=1).stdout)
    by_transform = {f["transform"]: f for f in doc["findings"]}
    [wrap] = by_transform["variables-to-cpu"]["replacements"]
    assert wrap == {"offset": len("import tensorflow as tf\nwith tf.device('/gpu:0'):\n    "),
                    "length": 0, "start": {"line": 3, "col": 5}, "end": {"line": 3, "col": 5},
                    "text": 'with tf.device("/cpu:0"):\n        '}
    [rename] = by_transform["deprecated-initializers"]["replacements"]
    assert (rename["start"], rename["text"]) == ({"line": 4, "col": 11},
                                                 "global_variables_initializer")
    # SARIF carries the same replacements, in SARIF's fields
    sarif = json.loads(run_cli("check", "--no-cache", path, "--format", "sarif",
                               check_exit=1).stdout)
    run = sarif["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    [result] = [r for r in run["results"] if r["ruleId"] == "variables-to-cpu"]
    [fix] = result["fixes"]
    assert fix["description"]["text"]
    [change] = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == str(path)
    assert change["replacements"] == [{
        "deletedRegion": {"startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 5,
                          "charOffset": wrap["offset"], "charLength": 0},
        "insertedContent": {"text": wrap["text"]}}]


def test_an_edit_at_the_end_of_a_last_line_without_a_line_break_ends_on_that_line(tmp_path):
    path = tmp_path / "train.py"
    path.write_text("import tensorflow as tf\nv = tf.all_variables")  # (no line break at the end)
    doc = json.loads(run_cli("check", "--no-cache", path, "--format", "json",
                             check_exit=1).stdout)
    [finding] = doc["findings"]
    [rename] = finding["replacements"]
    assert (rename["start"], rename["end"], rename["text"]) == (
        {"line": 2, "col": 8}, {"line": 2, "col": 21}, "global_variables")


def test_graph_and_unfixable_findings_have_no_replacements(source):
    doc = json.loads(run_cli("check", "--no-cache", SEED / "before.pbtxt", "--format", "json",
                             check_exit=1).stdout)
    assert doc["findings"] and all(f["replacements"] == [] for f in doc["findings"])
    unfixable = FIXTURES / "variables_to_cpu/source/unfixable/before.py"
    doc = json.loads(run_cli("check", "--no-cache", unfixable, "--format", "json",
                             check_exit=1).stdout)
    assert any(not f["fixable"] for f in doc["findings"])
    assert all(f["replacements"] == [] for f in doc["findings"] if not f["fixable"])


# -- the fixes as text come from the check's own run ---------------------------------------------

def _two_file_project(root):
    """update-ops' two-file project (its fix needs model.py's batch norm), with a deprecated
    initializer in train.py: the first rule that fixes runs before the ones still to ask."""
    shutil.copytree(FIXTURES / "update_ops/source/multi_file/before", root)
    train = root / "train.py"
    train.write_text(train.read_text().replace("tf.global_variables_initializer()",
                                                "tf.initialize_all_variables()")
                     + "with tf.device('/gpu:0'):\n    step = tf.Variable(0, name='step')\n")
    return root


def _two_runs(root) -> dict:
    """The JSON document as `check --format json --no-cache` made it before the fixes as text
    came from its own run: a check, then a whole run fixing (unwritten) for the texts."""
    from graphfix.api import _selected
    from graphfix.cli import replacements
    from graphfix.cli.output import report_document
    from graphfix.driver import run

    selected = _selected(None, None, None)
    here = os.getcwd()
    os.chdir(root)
    try:
        report, _ = run(["."], selected, fix=False)
        _, outputs = run(["."], selected, fix=True)
        replacements.give_replacements(report, replacements.fixed_texts(outputs))
    finally:
        os.chdir(here)
    return report_document(report, fixing=False)  # (with "tensorflow": what judged placement)


def test_json_of_one_run_is_that_of_a_check_and_a_fix_run(tmp_path):
    root = _two_file_project(tmp_path / "project")
    before = _two_runs(root)
    fixable = [f for f in before["findings"] if f["fixable"]]
    assert {f["transform"] for f in fixable} >= {"deprecated-initializers", "update-ops",
                                                 "variables-to-cpu"}
    assert all(f["replacements"] for f in fixable)
    before["summary"].pop("cached")
    cache = tmp_path / "cache"
    # uncached, cold, then warm (the texts from the cache)
    for extra, cached in ((["--no-cache"], 0), (["--no-cache", "--jobs", "1"], 0),
                          (["--cache-dir", cache], 0), (["--cache-dir", cache], 2),
                          (["--cache-dir", cache, "--jobs", "1"], 2)):
        doc = json.loads(run_cli("check", ".", "--format", "json", *extra, cwd=root,
                                 check_exit=1).stdout)
        assert doc["summary"].pop("cached") == cached, extra
        assert doc == before, extra
    # the --report file of a text check carries them too
    run_cli("check", ".", "--no-cache", "--report", tmp_path / "report.json", cwd=root,
            check_exit=1)
    doc = json.loads((tmp_path / "report.json").read_text())
    doc["summary"].pop("cached")
    assert doc == before


# libcst's parser, counted: each call appends the name of the file it parses (found by its
# text) to the file named by GRAPHFIX_TEST_PARSES, from whichever process makes it.
_COUNTING_PARSES = """\
import os, sys
import libcst
from pathlib import Path
texts = {p.read_bytes(): str(p) for p in Path('.').rglob('*.py')}
parse = libcst.parse_module
def counted(source, *args, **kwargs):
    data = source if isinstance(source, bytes) else source.encode()
    with open(os.environ['GRAPHFIX_TEST_PARSES'], 'a') as log:
        log.write(texts.get(data, '<other>') + '\\n')
    return parse(source, *args, **kwargs)
libcst.parse_module = counted
from graphfix.cli.main import main
sys.argv = ['graphfix', *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_without_the_cache_libcst_reads_each_file_once(tmp_path, jobs):
    root = _two_file_project(tmp_path / "project")
    (root / "clean.py").write_text("import tensorflow as tf\nx = tf.constant(1)\n")
    (root / "other.py").write_text(SOURCE)  # (its only fixing rule is the last to run)
    log = tmp_path / "parses.txt"
    result = subprocess.run(
        [sys.executable, "-c", _COUNTING_PARSES, "check", ".", "--no-cache", "--format",
         "json", "--jobs", jobs], cwd=root, capture_output=True, text=True, timeout=300,
        env={**os.environ, "GRAPHFIX_TEST_PARSES": str(log)})
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert {f["path"] for f in doc["findings"] if f["replacements"]} == {"other.py",
                                                                         "train.py"}
    # each is parsed once, though its fix is made too (and train.py's rules after the first
    # that fixes are asked of it again); model.py (its facts come from the survey's stdlib
    # parse) and clean.py have nothing for libcst. train.py's first fixing rule,
    # deprecated-initializers, reads the stdlib tree and fixes by text: the libcst rules
    # after it read that text, the one other parse ("<other>": no file's text)
    assert sorted(log.read_text().split()) == ["<other>", "other.py", "train.py"]


_LONG = "".join(f"x{i % 7} = {i}\n" for i in range(3000))  # (lines that repeat)


@pytest.mark.parametrize("where", ["first line", "middle", "last line", "two places",
                                   "a line added", "a line removed"])
def test_the_replacements_of_a_long_file_are_its_changes_alone(where):
    """A fix of a few lines in a long file gives replacements of those lines only, which
    make the fixed text (the lines both texts share at the start and end are set aside
    before difflib compares the rest)."""
    from graphfix.cli.replacements import text_replacements

    lines = _LONG.splitlines(keepends=True)
    changed = {"first line": {0}, "middle": {1500}, "last line": {2999},
               "two places": {10, 2990}}.get(where, set())
    new_lines = [line.replace(" = ", " = 1 + ") if n in changed else line
                 for n, line in enumerate(lines)]
    if where == "a line added":
        new_lines.insert(1500, "import os\n")
    if where == "a line removed":
        del new_lines[1500]
    new = "".join(new_lines)
    replacements = text_replacements(_LONG, new)
    made = _LONG
    for r in sorted(replacements, key=lambda r: r.offset, reverse=True):
        made = made[:r.offset] + r.text + made[r.offset + r.length:]
    assert made == new
    assert len(replacements) == max(len(changed), 1)
    assert all(len(r.text) + r.length <= 20 for r in replacements), replacements
