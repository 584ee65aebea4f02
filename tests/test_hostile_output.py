"""Output that cannot be turned against its reader (issue 33), each case as a user meets it:
a node or file name holding a line break then `::warning::` under `--format github`, ESC
sequences and bidi overrides on a terminal, control characters in JUnit XML, `<!--` in the
HTML page's data; and the process: a full, closed or ASCII-only standard output, and
`fix --html` / `--report` that cannot be written, which leaves the fixed graph unwritten."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, run_cli
from hostile_names import (SEED, annotations, as_dom_text, foreign_lines,
                           graph_with_variables, raw_characters, rendered_dom,
                           write_graph)

INJECTED = "d\n::warning::INJECTED"
ESCAPED = "d\x1b[31mRED\u202eevil"
SOURCE = "import tensorflow as tf\nwith tf.device('/gpu:0'):\n    d = tf.Variable(2)\n"


@pytest.fixture(scope="module")
def injected_graph(tmp_path_factory) -> Path:
    return write_graph(tmp_path_factory.mktemp("g") / "model.pb", graph_with_variables([INJECTED]))


def test_github_format_prints_no_workflow_command_a_node_name_holds(injected_graph, tmp_path):
    checked = run_cli("check", injected_graph, "--only", "variables-to-cpu", "--format",
                      "github", check_exit=1)
    assert foreign_lines(checked.stdout + checked.stderr) == []
    [(kind, props, message)] = annotations(checked.stdout)
    assert kind == "error" and "\\n::warning::INJECTED" in props["title"]
    assert "d\\n::warning::INJECTED" in message  # (the name, visible, in the annotation)
    copy = tmp_path / "model.pb"
    shutil.copy(injected_graph, copy)
    fixed = run_cli("fix", copy, "--in-place", "--only", "variables-to-cpu", "--format",
                    "github", check_exit=1)
    assert foreign_lines(fixed.stdout + fixed.stderr) == []
    [(kind, props, _)] = annotations(fixed.stdout)
    assert kind == "notice" and "\\n::warning::INJECTED" in props["title"]


def test_github_format_prints_no_workflow_command_a_walked_file_name_holds(tmp_path):
    tree = tmp_path / "src"
    tree.mkdir()
    (tree / "a\n::warning::x.py").write_text(SOURCE)
    (tree / "::add-mask::b.py").write_text(SOURCE)
    (tree / "c\n::set-output name=x::y.py").write_text("def broken(:\n")  # skipped
    done = run_cli("check", "src", "--format", "github", cwd=tmp_path, check_exit=1)
    assert foreign_lines(done.stdout + done.stderr) == []
    files = {props["file"] for _, props, _ in annotations(done.stdout)}
    assert files == {"src/a\\n::warning::x.py", "src/::add-mask::b.py"}


def test_terminal_text_shows_escapes_not_escape_sequences(tmp_path):
    graph = write_graph(tmp_path / "model.pbtxt", graph_with_variables([ESCAPED]))
    done = run_cli("check", graph, "--only", "variables-to-cpu", check_exit=1)
    assert "d\\x1b[31mRED\\u202eevil" in done.stdout
    assert raw_characters(done.stdout + done.stderr) == []


def test_a_one_line_error_naming_a_hostile_file_shows_it_escaped(tmp_path):
    bad = tmp_path / "x\x1b]0;owned\x07\u202e\n::warning::y.pb"
    bad.write_bytes(b"\x08\x96\x01not a graph")
    done = run_cli("check", bad, check_exit=2)
    [line] = done.stderr.splitlines()
    assert line.startswith("graphfix: error: ") and "x\\x1b]0;owned\\x07\\u202e\\n" in line
    assert raw_characters(done.stdout + done.stderr) == []
    assert foreign_lines(done.stderr) == []


def test_junit_xml_holds_no_character_xml_excludes(tmp_path):
    name = "d\x0b\x1b[31m\x00]]><!--"
    graph = write_graph(tmp_path / "model.pb", graph_with_variables([name]))
    checked = run_cli("check", graph, "--only", "variables-to-cpu", "--format", "junit",
                      check_exit=1)
    root = ET.fromstring(checked.stdout)  # (expat refuses \x0b, \x1b, NUL)
    [failure] = root.iter("failure")
    assert "d\\x0b\\x1b[31m\\x00]]><!--" in failure.get("message")
    verified = run_cli("verify", graph, "--format", "junit", check_exit=1)
    root = ET.fromstring(verified.stdout)
    assert "d\\x0b\\x1b[31m\\x00]]><!--" in next(root.iter("failure")).get("message")


def test_verify_text_and_github_escape_the_names_in_its_checks(injected_graph):
    text = run_cli("verify", injected_graph, check_exit=1)
    assert "FAIL  placement" in text.stdout and "d\\n::warning::INJECTED" in text.stdout
    assert foreign_lines(text.stdout) == [] and raw_characters(text.stdout) == []
    github = run_cli("verify", injected_graph, "--format", "github", check_exit=1)
    assert foreign_lines(github.stdout + github.stderr) == []
    [(kind, props, _)] = annotations(github.stdout)
    assert kind == "error" and props["title"] == "verify placement"


def test_html_page_of_a_name_holding_a_comment_opener_draws_its_tables(tmp_path):
    name = "d<!--<script>"
    graph = write_graph(tmp_path / "model.pb", graph_with_variables([name]))
    page = tmp_path / "report.html"
    run_cli("report", graph, "-o", page, "--only", "variables-to-cpu", check_exit=0)
    dom = rendered_dom(page)
    assert dom.rendered and dom.tables >= 8
    assert as_dom_text(name) in dom.cells  # the finding's node, shown as text
    assert "<" not in page.read_text().split('id="graphfix-data">')[1].split("</script>")[0]


def test_sarif_artifact_uri_is_a_uri_reference(tmp_path):
    tree = tmp_path / "src"
    tree.mkdir()
    (tree / "a b%\n#?.py").write_text(SOURCE)
    done = run_cli("check", "src", "--format", "sarif", cwd=tmp_path, check_exit=1)
    [result] = json.loads(done.stdout)["runs"][0]["results"]
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "src/a%20b%25%0A%23%3F.py"
    assert urllib.parse.unquote(uri) == "src/a b%\n#?.py"


def _printing_graph(path: Path, printed: dict[str, str]) -> Path:
    """A graph whose op `train` runs, for each stream, a `PrintV2` of its string there
    (what `tf.print(text, output_stream=sys.stdout)` builds)."""
    from tensorflow.core.framework import graph_pb2

    graph = graph_pb2.GraphDef()
    graph.versions.producer = 1087
    for stream, text in printed.items():
        const = graph.node.add(name=f"{stream}_text", op="Const")
        const.attr["dtype"].type = 7  # DT_STRING
        const.attr["value"].tensor.dtype = 7
        const.attr["value"].tensor.string_val.append(text.encode())
        shown = graph.node.add(name=f"print_{stream}", op="PrintV2", input=[const.name])
        shown.attr["output_stream"].s = stream.encode()
        shown.attr["end"].s = b"\n"
    graph.node.add(name="train", op="NoOp", input=[f"^print_{s}" for s in printed])
    return write_graph(path, graph)


def test_what_a_graph_prints_reaches_stderr_escaped_and_leaves_stdout_to_the_report(tmp_path):
    """A Print op writes the graph's own strings to descriptor 1 or 2 while verify runs
    it: to stderr, each line escaped, never before the JSON document on stdout."""
    graph = _printing_graph(tmp_path / "printing.pb", {
        "stdout": "out\x1b[31mRED\n::error::INJECTED", "stderr": "err\x1b]0;title\x07##[x]"})
    done = run_cli("verify", graph, "--fetch", "train", "--format", "json", check_exit=0)
    assert json.loads(done.stdout)["passed"] is True  # (stdout is the document alone)
    assert "out\\x1b[31mRED" in done.stderr and "err\\x1b]0;title\\x07" in done.stderr
    assert "\\x3a:error::INJECTED" in done.stderr
    assert raw_characters(done.stderr) == [] and foreign_lines(done.stderr) == []


def test_what_tf_logs_through_python_reaches_stderr_escaped_and_leaves_stdout_to_the_report(
        tmp_path):
    """TF's import of a MetaGraphDef skips a collection of no kind and names it in a Python
    `logging` record (`ERROR:tensorflow:Cannot identify data type for collection KEY.
    Skipping.`), written to graphfix's own standard error: escaped there too."""
    from tensorflow.core.protobuf import meta_graph_pb2

    meta = meta_graph_pb2.MetaGraphDef()
    meta.graph_def.versions.producer = 1087
    meta.graph_def.node.add(name="train", op="NoOp")
    meta.collection_def["c\x1b[31mRED\n::error::INJECTED"].SetInParent()  # (no kind)
    path = tmp_path / "model.meta"
    path.write_bytes(meta.SerializeToString())
    done = run_cli("verify", path, "--fetch", "train", "--format", "json", check_exit=0)
    assert json.loads(done.stdout)["passed"] is True  # (stdout is the document alone)
    assert "ERROR:tensorflow:Cannot identify data type for collection c\\x1b[31mRED" in (
        done.stderr)
    assert "\\x3a:error::INJECTED. Skipping." in done.stderr
    assert raw_characters(done.stderr) == [] and foreign_lines(done.stderr) == []


_WARNS_WHILE_DIVERTED = r'''
import logging, sys, warnings
from graphfix.cli import foreign_output
from graphfix.cli.output import echo

NAME = "w\x1b[31mRED\n::error::INJECTED"
foreign_output.divert()
warnings.warn(f"deprecated in {NAME}", DeprecationWarning)
logging.getLogger("absl").warning("skipped %s", NAME)
echo("graphfix's own line", err=True)
sys.stderr.write("\x1b[2K")  # (graphfix's own stream: a progress display's redraw)
foreign_output.restore()
warnings.warn("after", UserWarning)
'''


def test_python_warnings_and_library_logging_while_diverted_reach_stderr_escaped():
    """While graphfix runs TF: a warning `warnings.warn` shows and a record of a library's
    logger (absl's) are passed on escaped, a line at a time; graphfix's own `sys.stderr` is
    written as it is; once restored, Python shows warnings itself again."""
    done = subprocess.run([sys.executable, "-W", "always", "-c", _WARNS_WHILE_DIVERTED],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "DeprecationWarning: deprecated in w\\x1b[31mRED" in lines[0]
    assert lines[1] == "\\x3a:error::INJECTED"
    assert "WARNING:absl:skipped w\\x1b[31mRED" in done.stderr
    assert "graphfix's own line" in lines
    assert "\x1b[2K" in done.stderr  # (graphfix's own, raw)
    assert done.stderr.endswith("UserWarning: after\n")
    assert foreign_lines(done.stderr) == []
    assert raw_characters(done.stderr.replace("\x1b[2K", "")) == []


# -- the process --------------------------------------------------------------------------

def _graphfix(*args, stdout=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphfix", *map(str, args)], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, cwd=REPO / "tests", timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})})


def test_a_full_standard_output_is_one_line_and_exit_2():
    with open("/dev/full", "w") as full:
        done = _graphfix("check", SEED, "--only", "variables-to-cpu", stdout=full)
    assert done.returncode == 2
    assert done.stderr == ("graphfix: error: standard output: cannot write: "
                           "No space left on device\n")


def test_a_closed_standard_output_is_one_line_and_exit_2():
    done = subprocess.run([sys.executable, "-c", "import os, runpy, sys; os.close(1); "
                           "sys.argv = ['graphfix', 'check', sys.argv[1]]; "
                           "runpy.run_module('graphfix', run_name='__main__')", str(SEED)],
                          stderr=subprocess.PIPE, text=True, cwd=REPO / "tests", timeout=300)
    assert done.returncode == 2
    assert done.stderr == "graphfix: error: standard output is closed\n"


def test_a_full_standard_output_while_a_graph_prints_is_one_line_and_exit_2(tmp_path):
    graph = _printing_graph(tmp_path / "printing.pb", {"stdout": "printed"})
    with open("/dev/full", "w") as full:
        done = _graphfix("verify", graph, "--fetch", "train", stdout=full)
    assert done.returncode == 2
    assert done.stderr == ("printed\ngraphfix: error: standard output: cannot write: "
                           "No space left on device\n")


def test_a_pipe_whose_reader_left_ends_the_run_quietly():
    read, write = os.pipe()
    os.close(read)
    done = _graphfix("check", SEED, "--format", "json", stdout=write)
    os.close(write)
    assert done.returncode == 1 and done.stderr == ""


def test_an_ascii_standard_output_shows_a_non_ascii_path_escaped(tmp_path):
    folder = tmp_path / "caf\u00e9"
    folder.mkdir()
    graph = shutil.copy(SEED, folder / "g\u2603.pbtxt")
    done = _graphfix("check", graph, "--only", "variables-to-cpu", stdout=subprocess.PIPE,
                     env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 1, done.stderr
    assert done.stderr == ""
    assert f"{tmp_path}/caf\\xe9/g\\u2603.pbtxt@d: error: variables-to-cpu" in done.stdout
    junit = _graphfix("check", graph, "--only", "variables-to-cpu", "--format", "junit",
                      stdout=subprocess.PIPE, env={"PYTHONIOENCODING": "ascii"})
    suite = ET.fromstring(junit.stdout).find("testsuite")
    assert suite.get("name") == str(graph)  # (XML's own escape: &#233; is the letter)


@pytest.mark.parametrize("option", ["--html", "--report"])
def test_fix_whose_report_cannot_be_written_writes_no_graph_either(tmp_path, option):
    graph = shutil.copy(SEED, tmp_path / "model.pbtxt")
    before = Path(graph).read_bytes()
    target = tmp_path / "missing" / ("page.html" if option == "--html" else "r.json")
    done = run_cli("fix", graph, "--in-place", option, target, check_exit=2)
    assert f"{target}: cannot write: directory {target.parent} does not exist" in done.stderr
    assert Path(graph).read_bytes() == before  # the fixed graph was not written either
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pbtxt"]


def test_fix_html_is_written_with_the_fixed_graph(tmp_path):
    """The page is made from the graph as it was: with --in-place it still shows the
    devices before the fix, then after."""
    graph = shutil.copy(SEED, tmp_path / "model.pbtxt")
    page = tmp_path / "page.html"
    run_cli("fix", graph, "--in-place", "--html", page, "--only", "variables-to-cpu",
            check_exit=1)
    data = json.loads(page.read_text().split('id="graphfix-data">')[1].split("</script>")[0])
    [section] = data["graphs"]
    assert section["moved_groups"] and section["changes"] == 1
