"""`graphfix demo` runs every seed bug end to end on its built-in fixtures."""

import json
import re
from pathlib import Path

import pytest
from conftest import run_cli


@pytest.fixture(scope="module")
def demo_output() -> str:
    """What `graphfix demo` prints (run once for the tests that read it)."""
    return run_cli("demo", check_exit=0).stdout


def test_demo_finds_fixes_and_verifies_every_seed(demo_output):
    out = demo_output
    assert "no supported kernel for GPU devices is available" in out
    assert "verification failed" in out, "the unfixed graph fails verify first"
    assert "found, fixed, verified: seed 000" in out
    assert "found, fixed, verified: seed 003" in out
    assert "update-op variable(s) never changed" in out
    assert "all 4 update-op variable(s) changed" in out
    assert "incompatible with expected float_ref" in out
    assert "found, fixed, verified: seed 003 Q&A (feed-to-assign)" in out
    assert "tower_1/w unchanged after the step" in out
    assert "tower tower_1 holds its own copy of 2 variable(s) of tower_0" in out
    assert "found, fixed, verified: seed 003 sharing (shared-variables)" in out
    assert "FAILED" not in out
    # `make demo` writes the HTML report of its seed graphs and says where it is
    [where] = [line for line in out.splitlines()
               if line.startswith("HTML report of the seed graphs: ")]
    page = Path(where.split(": ", 1)[1]).read_text()
    data = re.search(r'<script type="application/json" id="graphfix-data">(.*?)</script>',
                     page, re.S).group(1)
    graphs = json.loads(data.replace("<\\/", "</"))["graphs"]
    assert len(graphs) == 4 and all(g["findings"] or "embeddings" in g["path"] for g in graphs)


def _loop_ids(out: str, comment: str) -> list[str]:
    """The ids the demo's `sess.run` loop printed on the line after the one ending `comment`."""
    lines = out.splitlines()
    (at,) = [k for k, line in enumerate(lines) if line.endswith(comment)]
    return lines[at + 1].strip().split(", ")


def test_demo_shows_the_custom_op_stuck_then_changing_where_a_compiler_builds_it(demo_output):
    out = demo_output
    assert "FAIL  custom ops: GetImageID (image_ids:0) returned the same value on every step" in out
    assert "with folding off it changes" in out and "it is folded" in out
    assert "added .SetIsStateful() to REGISTER_OP of GetImageID" in out
    assert "pass  custom ops: not registered stateful, and changed between steps" in out
    before = _loop_ids(out, "# the seed's loop")
    after_graph_fix = _loop_ids(out, "# on the fixed graph")
    after_cpp_fix = _loop_ids(out, "the rebuilt library (a new process)")
    assert len(before) == 3 and len(set(before)) == 1  # the value stuck
    assert len(set(after_graph_fix)) == 3 and after_cpp_fix == ["id1", "id2", "id3"]
    assert "found, fixed, verified: seed 003 custom op (stateful-custom-ops)" in out


def test_demo_says_the_custom_op_case_is_skipped_and_why_without_a_compiler(tmp_path):
    """No compiler on PATH and no CXX: the other seeds run, the custom op is skipped."""
    result = run_cli("demo", check_exit=0, env={"PATH": str(tmp_path), "CXX": None})
    out = result.stdout
    assert ("skipped: seed 003 custom op (stateful-custom-ops): no C++ compiler found "
            "(looked for c++, g++, clang++)") in out
    assert "found, fixed, verified: seed 000 (variables-to-cpu)" in out
    assert "found, fixed, verified: seed 003 custom op" not in out and "FAILED" not in out


def test_a_report_path_that_cannot_be_written_is_said_not_raised(tmp_path, monkeypatch):
    """The demo's HTML page goes to the system's temporary folder; where that name is taken
    by a folder, the demo says so in its line instead of failing."""
    import tempfile

    from graphfix.cli.demo import _html_report

    taken = tmp_path / "graphfix-demo-report.html"
    taken.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert _html_report() == f"not written: {taken}: cannot write: is a directory"
    assert list(taken.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == [taken.name]
