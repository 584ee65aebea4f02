"""stateful-custom-ops on the seed-003 op, compiled for real (fixtures/custom_ops/get_image_id.cc).

Each test shows what a user sees: the graph's GetImageID returning the same ids on every
`sess.run` before the fix, changing ids after the graph fix, changing ids with the original
graph once the C++ fix is built, and no finding where TF does not fold.
"""

from __future__ import annotations

import json
import re
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

from graphfix import api
from graphfix.registry import UsageError
from tests.conftest import FIXTURES, run_cli

sys.path.insert(0, str(FIXTURES / "custom_ops"))
import build_ops  # noqa: E402  (fixtures/custom_ops/build_ops.py)

from transforms.stateful_custom_ops import registrations  # noqa: E402

tf1 = tf.compat.v1
STEPS = 3
SOURCE = FIXTURES / "custom_ops" / "get_image_id.cc"
NAME = "stateful-custom-ops"


@pytest.fixture(scope="module")
def library():
    """The compiled op library's path; fails (never skips) where no compiler is present."""
    try:
        return str(build_ops.library_path("get_image_id.cc"))
    except build_ops.NoCompilerError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="module")
def ops(library):
    return tf.load_op_library(library)


def graph_def_of(build):
    graph = tf.Graph()
    with graph.as_default():
        build()
    return graph.as_graph_def()


def ids_over_steps(graph_def, fetches, feed=None):
    """Import `graph_def`, run `fetches` STEPS times: the first id of each fetch, per step."""
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
        tensors = [graph.get_tensor_by_name(f) for f in fetches]
        with tf1.Session(graph=graph) as sess:
            return [[ids[0].decode() for ids in sess.run(tensors, feed_dict=feed)]
                    for _ in range(STEPS)]


def settings(library=None, sources=(), ops=()):
    options = {"sources": [str(s) for s in sources], "ops": list(ops)}
    if library:
        options["op_library"] = [library]
    return {NAME: options}


@pytest.fixture(scope="module")
def seed_graph(ops):
    """The seed's loop: one GetImageID on a constant count."""
    return graph_def_of(lambda: ops.get_image_id(tf.constant(32), name="image_ids"))


@pytest.fixture(scope="module")
def two_calls_graph(ops):
    """Two identical GetImageID calls on one constant."""
    def build():
        count = tf.constant(4, name="count")
        ops.get_image_id(count, name="first")
        ops.get_image_id(count, name="second")
    return graph_def_of(build)


def test_constant_input_is_an_error_naming_the_op_and_its_constant(seed_graph, library):
    steps = ids_over_steps(seed_graph, ["image_ids:0"])
    assert len({s[0] for s in steps}) == 1  # before: the same id on every step (folded)
    (finding,) = api.check_graph(seed_graph, only=[NAME], settings=settings(library))
    assert finding.severity == "error" and finding.node == "image_ids"
    assert "custom op GetImageID (image_ids) is not registered stateful" in finding.message
    assert "constant (Const)" in finding.message
    assert "evaluates it once" in finding.message and "workaround" in finding.message


def test_graph_fix_makes_it_change_every_step_with_the_same_input(seed_graph, library):
    fixed, changes = api.fix_graph(seed_graph, only=[NAME], settings=settings(library))
    assert [c.node for c in changes] == ["image_ids"]
    steps = ids_over_steps(fixed, ["image_ids:0"])
    assert len({s[0] for s in steps}) == STEPS  # after: a new id on every step
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(fixed, name="")
        with tf1.Session(graph=graph) as sess:
            assert sess.run("image_ids:0").shape == (32,)  # outputs otherwise unchanged
    assert api.check_graph(fixed, only=[NAME], settings=settings(library)) == []


def test_identical_calls_are_named_together_and_no_longer_merged(two_calls_graph, library):
    (finding,) = api.check_graph(two_calls_graph, only=[NAME], settings=settings(library))
    assert ("custom op GetImageID is not registered stateful and its 2 identical calls "
            "(first, second) have only constant inputs (count): TF evaluates each once"
            in finding.message)
    assert "identical calls are merged into one" in finding.message
    before = ids_over_steps(two_calls_graph, ["first:0", "second:0"])
    assert len({tuple(step) for step in before}) == 1  # each folded, to its own id
    fixed, _ = api.fix_graph(two_calls_graph, only=[NAME], settings=settings(library))
    steps = ids_over_steps(fixed, ["first:0", "second:0"])
    assert all(a != b for a, b in steps)  # two Computes a step: not merged
    assert len({a for a, _ in steps}) == STEPS


def test_registration_read_from_the_cc_alone(seed_graph):
    (finding,) = api.check_graph(seed_graph, only=[NAME], settings=settings(sources=[SOURCE]))
    assert finding.severity == "error" and "GetImageID" in finding.message


def test_library_registrations_read_in_a_child_process(library):
    assert registrations.library_ops(library) == {
        "GetImageID": False, "GetImageIDStateful": True, "NextImageID": False,
        "ComputeCount": True}


def test_checking_with_a_library_leaves_this_process_free_of_the_tf_runtime(seed_graph, library,
                                                                         tmp_path):
    graph_path = tmp_path / "graph.pb"
    graph_path.write_bytes(seed_graph.SerializeToString())
    script = f"""
import sys
from graphfix import api
(finding,) = api.check_graph({str(graph_path)!r}, only=[{NAME!r}],
                             settings={{{NAME!r}: {{"op_library": [{library!r}]}}}})
print(finding.severity, "tensorflow" in sys.modules)
"""
    import subprocess
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)
    assert done.stdout.split() == ["error", "False"], done.stderr[-2000:]


def test_no_finding_for_stateful_op_placeholder_input_or_tf_ops(ops, library):
    def build():
        ops.get_image_id_stateful(tf.constant(3), name="stateful")
        ops.get_image_id(tf1.placeholder(tf.int32, shape=[], name="n"), name="fed")
        tf.add(tf.constant(1), tf.constant(2), name="sum")
    graph_def = graph_def_of(build)
    assert api.check_graph(graph_def, only=[NAME], settings=settings(library)) == []
    steps = ids_over_steps(graph_def, ["stateful:0", "fed:0"], feed={"n:0": 2})
    assert len({s[0] for s in steps}) == STEPS and len({s[1] for s in steps}) == STEPS


def test_no_input_op_is_an_error_the_graph_cannot_fix(ops, library):
    graph_def = graph_def_of(lambda: ops.next_image_id(name="next_id"))
    (finding,) = api.check_graph(graph_def, only=[NAME], settings=settings(library))
    assert not finding.fixable and "it has no inputs" in finding.message
    assert ".SetIsStateful()" in finding.message


def test_unknown_registration_is_a_warning(seed_graph):
    (finding,) = api.check_graph(seed_graph, only=[NAME])
    assert finding.severity == "warning" and "registration is unknown" in finding.message


def test_cpp_fix_adds_set_is_stateful_keeps_the_layout_and_is_idempotent():
    text = SOURCE.read_text()
    fixed, changed = registrations.with_stateful(text, ["GetImageID"])
    assert changed == ["GetImageID"]
    assert ('REGISTER_OP("GetImageID")\n    .SetIsStateful()\n    .Input("count: int32")'
            in fixed)
    assert fixed.replace("\n    .SetIsStateful()", "", 1) == text  # nothing else changed
    assert registrations.with_stateful(fixed, ["GetImageID", "GetImageIDStateful"]) == (fixed, [])
    inline, _ = registrations.with_stateful(
        'REGISTER_OP("GetImageID").Input("count: int32").Output("image_id: string");',
        ["GetImageID"])
    assert inline == ('REGISTER_OP("GetImageID").SetIsStateful().Input("count: int32")'
                      '.Output("image_id: string");')


def test_cli_fix_rewrites_the_cc_and_the_rebuilt_op_changes_with_the_original_graph(
        seed_graph, tmp_path):
    source = tmp_path / "get_image_id.cc"
    shutil.copy(SOURCE, source)
    graph_path = tmp_path / "graph.pb"
    graph_path.write_bytes(seed_graph.SerializeToString())
    run_cli("fix", graph_path, "-o", tmp_path / "fixed.pb", "--only", NAME,
            "--set", f"{NAME}.sources={source}", "--set", f"{NAME}.ops=NextImageID",
            check_exit=1)
    text = source.read_text()
    assert 'REGISTER_OP("GetImageID")\n    .SetIsStateful()' in text
    assert 'REGISTER_OP("NextImageID")\n    .SetIsStateful()' in text
    # The rebuilt library, loaded in a child (a process registers an op name once):
    script = f"""
import sys, tensorflow as tf
sys.path.insert(0, {str(FIXTURES / "custom_ops")!r})
import build_ops
ops = tf.load_op_library(str(build_ops.library_path({str(source)!r})))
graph_def = tf.compat.v1.GraphDef.FromString(open({str(graph_path)!r}, "rb").read())
graph = tf.Graph()
with graph.as_default():
    tf.graph_util.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as sess:
        print(len({{sess.run("image_ids:0")[0] for _ in range({STEPS})}}))
"""
    import subprocess
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)
    assert done.stdout.strip().splitlines()[-1] == str(STEPS), done.stderr[-2000:]


def test_unreadable_cc_is_a_one_line_error(seed_graph, tmp_path):
    graph_path = tmp_path / "graph.pb"
    graph_path.write_bytes(seed_graph.SerializeToString())
    result = run_cli("check", graph_path, "--only", NAME,
                     "--set", f"{NAME}.sources={tmp_path / 'missing.cc'}", check_exit=2)
    assert "missing.cc: cannot read" in result.stdout + result.stderr
    with pytest.raises(UsageError, match="missing.cc: cannot read"):
        registrations.read_source(str(tmp_path / "missing.cc"))


def test_registration_read_from_a_metagraphs_op_list(seed_graph, ops):
    """A MetaGraphDef carries the op defs of its ops (stripped_op_list): no library needed."""
    from tensorflow.core.protobuf import meta_graph_pb2
    from tensorflow.python.framework import op_def_registry

    meta = meta_graph_pb2.MetaGraphDef()
    meta.graph_def.CopyFrom(seed_graph)
    for op in sorted({n.op for n in seed_graph.node}):
        meta.meta_info_def.stripped_op_list.op.add().CopyFrom(op_def_registry.get(op))
    (finding,) = api.check_graph(meta, only=[NAME])
    assert finding.severity == "error" and finding.fixable
    stateful = meta_graph_pb2.MetaGraphDef()
    stateful.CopyFrom(meta)
    (op_def,) = [op for op in stateful.meta_info_def.stripped_op_list.op
                 if op.name == "GetImageID"]
    op_def.is_stateful = True
    assert api.check_graph(stateful, only=[NAME]) == []


# --- verify --steps N: an output of an unstateful custom op stuck over the steps ---------

def custom_ops_check(result):
    """The "custom ops" check of a verify result (api or --format json), or None."""
    checks = result["checks"] if isinstance(result, dict) else [
        {"name": c.name, "passed": c.passed, "detail": c.detail} for c in result.checks]
    found = [c for c in checks if c["name"] == "custom ops"]
    return found[0] if found else None


def test_verify_reports_the_seed_op_folded_and_runs_it_again_with_folding_off(
        seed_graph, library, tmp_path):
    graph_path = tmp_path / "seed.pb"
    graph_path.write_bytes(seed_graph.SerializeToString())
    result = run_cli("verify", graph_path, "--steps", "2", "--format", "json",
                     "--set", f"{NAME}.op_library={library}", check_exit=1)
    report = json.loads(result.stdout)
    check = custom_ops_check(report)
    assert not check["passed"]
    detail = check["detail"]
    assert "GetImageID (image_ids:0) returned the same value on every step" in detail
    assert "with folding off it changes" in detail and "it is folded" in detail
    stuck, _, unfolded = detail.partition("with folding off it changes")
    first, second = re.findall(r"\[(id\d+), \.\.\.\]", unfolded)[:2]
    assert first != second  # the values shown: a new id on each step with folding off
    assert len(set(re.findall(r"\[(id\d+), \.\.\.\]", stuck))) == 1
    assert "run_folding_off" in report["seconds"]
    assert [c["name"] for c in report["checks"] if not c["passed"]] == ["custom ops"]


def test_verify_finds_nothing_folded_after_the_graph_fix(seed_graph, library):
    fixed, _ = api.fix_graph(seed_graph, only=[NAME], settings=settings(library))
    result = api.verify(fixed, steps=2, op_libraries=[library])
    assert result.passed
    check = custom_ops_check(result)
    assert check["passed"]
    assert "changed between steps: GetImageID (image_ids:0) ([id" in check["detail"]
    assert len(set(re.findall(r"\[(id\d+), \.\.\.\]", check["detail"]))) == 2  # per step
    assert "run_folding_off" not in result.seconds  # nothing stuck: no second run


def test_verify_leaves_a_stateful_op_alone_and_sees_a_fed_one_change(ops, library, tmp_path):
    def build():
        ops.get_image_id_stateful(tf.constant(3), name="stateful")
        ops.get_image_id(tf1.placeholder(tf.int32, shape=[], name="n"), name="fed")
    graph_path = tmp_path / "graph.pb"
    graph_path.write_bytes(graph_def_of(build).SerializeToString())
    # The library from [tool.graphfix], as check and fix read it:
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.graphfix.set]\n"{NAME}.op_library" = ["{library}"]\n')
    report = json.loads(run_cli("verify", graph_path, "--steps", "3", "--format", "json",
                                check_exit=0).stdout)
    check = custom_ops_check(report)
    assert check["passed"] and check["detail"].startswith(
        "not registered stateful, and changed between steps: GetImageID (fed:0) (id")
    assert "stateful:0" not in check["detail"]


def test_verify_says_an_unchanging_output_that_is_not_folded_is_not_folded(ops, library):
    """Zero ids from a constant 0: the same empty value on every step, folded or not."""
    graph_def = graph_def_of(lambda: ops.get_image_id(tf.constant(0), name="no_ids"))
    result = api.verify(graph_def, steps=2, op_libraries=[library])
    assert result.passed
    assert custom_ops_check(result)["detail"] == (
        "GetImageID (no_ids:0) returned the same value on every step, with folding off too: "
        "not folded")


def test_verify_of_one_step_says_the_check_needs_two(seed_graph, library):
    result = api.verify(seed_graph, steps=1, op_libraries=[library])
    check = custom_ops_check(result)
    assert check["passed"] and check["detail"].startswith("not checked: GetImageID")
    assert "--steps 2 or more" in check["detail"]


BAD_LIBRARIES = [
    ("{tmp}/missing.so", "missing.so: cannot read: No such file or directory"),
    ("{source}", "get_image_id.cc: cannot load as an op library"),
]


@pytest.mark.parametrize("given, said", BAD_LIBRARIES)
def test_verify_with_a_bad_library_is_a_one_line_error(seed_graph, tmp_path, given, said):
    graph_path = tmp_path / "seed.pb"
    graph_path.write_bytes(seed_graph.SerializeToString())
    given = given.format(tmp=tmp_path, source=SOURCE)
    result = run_cli("verify", graph_path, "--steps", "2",
                     "--set", f"{NAME}.op_library={given}", check_exit=2)
    assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("given, said", BAD_LIBRARIES)
def test_check_with_a_bad_library_says_what_verify_says(seed_graph, tmp_path, given, said):
    """check reads a library in a child process, verify loads it in its own; a library
    neither can read or load is said in the same words (`graphfix.tf_runtime`), exit 2."""
    graph_path = tmp_path / "seed.pb"
    graph_path.write_bytes(seed_graph.SerializeToString())
    given = given.format(tmp=tmp_path, source=SOURCE)
    result = run_cli("check", graph_path, "--only", NAME,
                     "--set", f"{NAME}.op_library={given}", check_exit=2)
    (line,) = [line for line in (result.stdout + result.stderr).splitlines() if said in line]
    verified = run_cli("verify", graph_path, "--set", f"{NAME}.op_library={given}",
                       check_exit=2)
    said_by_verify = verified.stderr.strip().removeprefix("graphfix: error: ")
    assert said in said_by_verify and line.endswith(f": {said_by_verify}"), (line, said_by_verify)


def test_the_op_library_setting_is_named_once_as_this_transforms_param():
    """`registry.OP_LIBRARY`, the setting verify and a traced check read, is the repeatable
    param of this transform that `--set` spells `stateful-custom-ops.op_library`."""
    from graphfix.registry import OP_LIBRARY, get_transform

    (param,) = [p for p in get_transform(OP_LIBRARY.transform).params
                if p.name == OP_LIBRARY.key]
    assert param.multiple and str(OP_LIBRARY) == f"{NAME}.op_library"


def test_verify_takes_no_other_transform_setting(seed_graph, tmp_path):
    graph_path = tmp_path / "seed.pb"
    graph_path.write_bytes(seed_graph.SerializeToString())
    result = run_cli("verify", graph_path, "--set", f"{NAME}.sources={SOURCE}", check_exit=2)
    assert f"--set {NAME}.sources is not verify's" in result.stderr


# --- C++ named on the command line, or found beside the Python sources -------------------

def test_cc_named_on_the_command_line_is_read_as_the_registration(seed_graph, tmp_path):
    graph_path = tmp_path / "graph.pb"
    graph_path.write_bytes(seed_graph.SerializeToString())
    shutil.copy(SOURCE, tmp_path / "my_ops.cc")
    result = run_cli("check", graph_path, tmp_path / "my_ops.cc", "--only", NAME,
                     "--format", "json", check_exit=1)
    report = json.loads(result.stdout)
    (finding,) = report["findings"]
    assert "GetImageID (image_ids) is not registered stateful" in finding["message"]
    assert finding["fixable"] and report["skipped"] == []


def test_cc_beside_the_python_sources_gets_set_is_stateful(seed_graph, tmp_path):
    graph_path = tmp_path / "graph.pb"
    graph_path.write_bytes(seed_graph.SerializeToString())
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text('import tensorflow as tf\n'
                                      'ops = tf.load_op_library("get_image_id.so")\n')
    shutil.copy(SOURCE, project / "get_image_id.cc")
    result = run_cli("fix", graph_path, project, "-o", tmp_path / "fixed.pb", "--only", NAME,
                     check_exit=1)
    assert "get_image_id.cc: stateful-custom-ops: added .SetIsStateful()" in result.stdout
    text = (project / "get_image_id.cc").read_text()
    assert 'REGISTER_OP("GetImageID")\n    .SetIsStateful()' in text
    assert text.count(".SetIsStateful()") == SOURCE.read_text().count(".SetIsStateful()") + 1


def test_cc_named_without_stateful_custom_ops_selected_is_skipped(tmp_path):
    shutil.copy(SOURCE, tmp_path / "my_ops.cc")
    result = run_cli("check", tmp_path / "my_ops.cc", "--only", "update-ops",
                     "--format", "json", check_exit=0)
    (skipped,) = json.loads(result.stdout)["skipped"]
    assert skipped["path"].endswith("my_ops.cc")


def test_cc_named_that_cannot_be_read_says_so_in_one_line(seed_graph, tmp_path):
    graph_path = tmp_path / "graph.pb"
    graph_path.write_bytes(seed_graph.SerializeToString())
    (tmp_path / "latin1.cc").write_bytes(b'// \xe9\nREGISTER_OP("GetImageID");\n')
    result = run_cli("check", graph_path, tmp_path / "latin1.cc", "--only", NAME, check_exit=2)
    (line,) = result.stderr.strip().splitlines()
    assert line.endswith("latin1.cc: cannot read: not UTF-8 text")


def test_fix_diff_shows_the_cc_change_and_writes_nothing(seed_graph, tmp_path):
    graph_path = tmp_path / "graph.pb"
    graph_path.write_bytes(seed_graph.SerializeToString())
    source = tmp_path / "my_ops.cc"
    shutil.copy(SOURCE, source)
    result = run_cli("fix", graph_path, source, "-o", tmp_path / "fixed.pb", "--only", NAME,
                     "--diff", check_exit=1)
    assert f"+++ {source}" in result.stdout
    assert ' REGISTER_OP("GetImageID")\n+    .SetIsStateful()\n     .Input("count: int32")' \
        in result.stdout
    assert source.read_text() == SOURCE.read_text() and not (tmp_path / "fixed.pb").exists()


def test_verify_watches_a_custom_op_inside_the_graph(ops, library):
    """GetImageID feeding another op, not fetched by the user: its output is watched too."""
    def build():
        ids = ops.get_image_id(tf.constant(2), name="image_ids")
        tf.strings.join([ids, "-suffix"], name="joined")
    result = api.verify(graph_def_of(build), steps=2, op_libraries=[library])
    check = custom_ops_check(result)
    assert not check["passed"]
    assert check["detail"].startswith("GetImageID (image_ids:0) returned the same value")


def test_verify_leaves_a_custom_op_in_a_cond_branch_not_taken_unwatched(ops, library):
    """A tensor of a branch not taken has no value: fetching it would fail the run."""
    tf1.disable_control_flow_v2()  # (a v1 cond: Switch and Merge in the main graph)
    try:
        def build():
            taken = tf1.placeholder(tf.bool, [], name="taken")
            chosen = tf1.cond(taken, lambda: ops.get_image_id(tf.constant(1), name="in_branch"),
                              lambda: tf.constant(["none"]))
            tf.identity(chosen, name="chosen")
        graph_def = graph_def_of(build)
    finally:
        tf1.enable_control_flow_v2()
    assert "Switch" in {node.op for node in graph_def.node}
    result = api.verify(graph_def, steps=2, op_libraries=[library],
                        feeds={"taken": np.array(False)})
    assert result.passed, result.to_lines()
    assert custom_ops_check(result) is None


def test_ops_named_fix_the_cc_without_a_graph_once(tmp_path):
    """`fix my_ops.cc --set ...ops=GetImageID`: the user names the op; no graph is needed."""
    source = tmp_path / "my_ops.cc"
    shutil.copy(SOURCE, source)
    result = run_cli("fix", source, "--set", f"{NAME}.ops=GetImageID", check_exit=1)
    assert "my_ops.cc: stateful-custom-ops: added .SetIsStateful() to REGISTER_OP of GetImageID" \
        in result.stdout
    fixed = source.read_text()
    assert fixed == registrations.with_stateful(SOURCE.read_text(), ["GetImageID"])[0] != \
        SOURCE.read_text()
    again = run_cli("fix", source, "--set", f"{NAME}.ops=GetImageID", check_exit=0)
    assert "0 change(s) in 0 file(s); 1 unchanged" in again.stdout
    assert source.read_text() == fixed


def test_a_library_is_read_only_for_a_graph_with_a_custom_op(tmp_path):
    """A configured op_library costs no TF start to a graph of TF's own ops (the library
    here is not one: reading it would fail), yet a path that does not exist is still said."""
    graph_def = graph_def_of(lambda: tf.add(tf.constant(1), tf.constant(2), name="sum"))
    not_a_library = tmp_path / "not_a_library.so"
    not_a_library.write_text("text")
    assert api.check_graph(graph_def, only=[NAME], settings=settings(str(not_a_library))) == []
    with pytest.raises(UsageError, match="missing.so: cannot read"):
        api.check_graph(graph_def, only=[NAME], settings=settings(str(tmp_path / "missing.so")))


# --- a traced script that loads the library (issue 21 in the trace path) ------------------

TRACED = FIXTURES / "trace" / "custom_op.py"  # seed 003's loop, its library given in argv


def line_of(path, text: str) -> int:
    (number,) = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return number


def test_trace_records_each_library_the_script_loads_absolute_once(library, tmp_path):
    """tf.load_op_library (here TF1's, `import tensorflow` in a TF1 script), TF 2's own and
    load_library's, with a relative path: the absolute path, once."""
    from graphfix.trace import Trace, trace

    captured = trace(TRACED, [library])
    assert captured.op_libraries == [library]
    assert json.loads(captured.files()["trace.json"])["op_libraries"] == [library]
    assert captured.summary().endswith(f"; op libraries loaded: {library}")

    # The registration comes from the library the script loaded: without the op list the
    # MetaGraphDef carries, still an error; without the library too, unknown (a warning).
    from graphfix import registry
    from graphfix.driver import Selected
    from graphfix.trace.at_sites import check_trace

    selected = Selected.build(registry.select([NAME]), {}, ())
    del captured.meta_graph.meta_info_def.stripped_op_list.op[:]
    (finding,) = check_trace(captured, selected)[0]
    assert (finding.severity, finding.fixable, finding.line) == (
        "error", True, line_of(TRACED, "get_image_id(tf.constant(32)"))

    # The same trace, had the script loaded no library (its trace.json saying none too).
    files = captured.files()
    loaded_none = Trace(captured.script, captured.meta_graph, captured.sites, captured.runs,
                        captured.stopped, files["graph.meta"],
                        {**json.loads(files["trace.json"]), "op_libraries": []},
                        sessions=captured.sessions)
    assert loaded_none.op_libraries == []
    (finding,) = check_trace(loaded_none, selected)[0]
    assert finding.severity == "warning" and "registration is unknown" in finding.message

    (tmp_path / "lib").mkdir()
    shutil.copy(library, tmp_path / "lib" / "my_ops.so")
    script = tmp_path / "loads_twice.py"
    script.write_text(
        "import tensorflow as tf\n"
        "import tensorflow.compat.v1 as v1\n"
        "from tensorflow.python.framework.load_library import load_op_library\n"
        "v1.disable_eager_execution()\n"
        "ops = load_op_library('lib/my_ops.so')\n"
        "tf.load_op_library('lib/my_ops.so')\n"
        "with v1.Session() as sess:\n"
        "    sess.run(ops.get_image_id(tf.constant(2)))\n")
    assert trace(script).op_libraries == [str(tmp_path / "lib" / "my_ops.so")]


def test_check_trace_reads_the_registration_from_the_library_the_script_loaded(library):
    shown = json.loads(run_cli("check", "--trace", "--only", NAME, "--format", "json",
                               TRACED, library, check_exit=1).stdout)
    (finding,) = shown["findings"]
    assert (finding["path"], finding["line"], finding["severity"], finding["fixable"]) == (
        str(TRACED), line_of(TRACED, "get_image_id(tf.constant(32)"), "error", True)
    assert finding["message"].startswith(
        "custom op GetImageID (image_ids) is not registered stateful and its inputs are all "
        "constant (Const): TF evaluates it once")
    assert any(note.endswith(f"op libraries loaded: {library}") for note in shown["notes"])


def test_verify_script_loads_the_library_and_reports_the_op_folded(library):
    result = run_cli("verify", TRACED, "--steps", "2", "--format", "json", "--", library,
                     check_exit=1)
    report = json.loads(result.stdout)
    check = custom_ops_check(report)
    assert not check["passed"]
    assert "GetImageID (image_ids:0) returned the same value on every step" in check["detail"]
    assert "with folding off it changes" in check["detail"] and "it is folded" in check["detail"]
    assert [c["name"] for c in report["checks"] if not c["passed"]] == ["custom ops"]


def test_fix_trace_writes_the_meta_and_the_cc_beside_the_script_all_or_nothing(
        library, tmp_path):
    script, source = tmp_path / "custom_op.py", tmp_path / "get_image_id.cc"
    shutil.copy(TRACED, script)
    shutil.copy(SOURCE, source)
    original = SOURCE.read_text()
    fixed_meta = tmp_path / "fixed.meta"

    # --diff: the .cc's diff shown, nothing written
    shown = run_cli("fix", "--trace", "--only", NAME, "--diff", script, library,
                    check_exit=1).stdout
    assert f"--- {source}\n+++ {source}\n" in shown  # (the .cc as the run names it)
    assert ' REGISTER_OP("GetImageID")\n+    .SetIsStateful()\n     .Input("count: int32")' \
        in shown
    assert source.read_text() == original and not fixed_meta.exists()

    # a .meta that cannot be written: the .cc is not written either
    run_cli("fix", "--trace", "--only", NAME, script, library, "-o",
            tmp_path / "missing" / "fixed.meta", check_exit=2)
    assert source.read_text() == original

    shown = run_cli("fix", "--trace", "--only", NAME, script, library, "-o", fixed_meta,
                    check_exit=1).stdout
    line = line_of(script, "get_image_id(tf.constant(32)")
    assert f"{script}:{line}: {NAME}: routed image_ids's constant inputs through" in shown
    assert (f"{source}: {NAME}: added .SetIsStateful() to REGISTER_OP of GetImageID "
            "(rebuild the library)") in shown
    assert source.read_text() == registrations.with_stateful(original, ["GetImageID"])[0] \
        != original
    assert 'REGISTER_OP("GetImageID")\n    .SetIsStateful()\n' in source.read_text()
    run_cli("check", fixed_meta, "--only", NAME, "--set", f"{NAME}.op_library={library}",
            check_exit=0)


def test_fix_trace_fixes_a_cc_named_in_sources_and_dry_run_writes_nothing(library, tmp_path):
    source = tmp_path / "elsewhere" / "my_ops.cc"
    source.parent.mkdir()
    shutil.copy(SOURCE, source)
    shown = run_cli("fix", "--trace", "--only", NAME, "--dry-run",
                    "--set", f"{NAME}.sources={source}", TRACED, library, check_exit=1).stdout
    assert f"{source}: {NAME}: added .SetIsStateful() to REGISTER_OP of GetImageID" in shown
    assert source.read_text() == SOURCE.read_text()
    run_cli("fix", "--trace", "--only", NAME, "--set", f"{NAME}.sources={source}",
            "-o", tmp_path / "fixed.meta", TRACED, library, check_exit=1)
    assert 'REGISTER_OP("GetImageID")\n    .SetIsStateful()\n' in source.read_text()
    assert (tmp_path / "fixed.meta").exists()


def test_fix_verify_loads_the_library_so_the_fixed_scripts_graph_imports(library, tmp_path):
    """fix --verify traces the fixed copy and verifies its graph: a graph with a custom op
    imports only with the library the script loaded."""
    script = tmp_path / "with_init.py"
    script.write_text(
        "import sys\n"
        "import tensorflow as tf\n"
        "my_ops = tf.load_op_library(sys.argv[1])\n"
        "count = tf.Variable(3, name='count')\n"
        "image_ids = my_ops.get_image_id(count, name='image_ids')\n"
        "with tf.Session() as sess:\n"
        "    sess.run(tf.initialize_all_variables())\n"
        "    for step in range(2):\n"
        "        sess.run(image_ids)\n")
    shown = run_cli("fix", "--verify", script, "--", library, check_exit=1).stdout
    assert "not written" not in shown, shown
    assert "sess.run(tf.global_variables_initializer())" in script.read_text()
