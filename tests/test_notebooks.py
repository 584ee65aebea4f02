"""Jupyter notebooks as sources: cells read as one module, findings named by cell, fixes
written back as the same notebook (outputs, markdown, magics and JSON style kept)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import FIXTURES, run_cli

NOTEBOOKS = FIXTURES / "source_tree" / "notebooks"
TOWERS = NOTEBOOKS / "towers.ipynb"
TOWERS_FIXED = NOTEBOOKS / "towers.fixed.ipynb"
FIXED_CELLS = {3, 5}  # towers.ipynb: the tower loop (variables-to-cpu), the train op (update-ops)
BROKEN = ["merge_conflict.ipynb", "nbformat3.ipynb", "syntax_error.ipynb"]


def _copy(tmp_path, name="towers.ipynb"):
    target = tmp_path / name
    shutil.copyfile(NOTEBOOKS / name, target)
    return target


def _json(result):
    assert result.returncode in (0, 1), (result.stdout, result.stderr)
    return json.loads(result.stdout)


def _notebook(path_or_bytes):
    data = path_or_bytes if isinstance(path_or_bytes, bytes) else path_or_bytes.read_bytes()
    return json.loads(data)


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _code_notebook(*sources, **dump_style) -> dict:
    return {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                       "outputs": [], "source": s} for s in sources],
            "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 4}


BUG = "with tf.device('/gpu:0'):\n    step = tf.Variable(0)"


# -- check ------------------------------------------------------------------------------------


def test_check_names_the_cell_across_cells_sharing_one_namespace(tmp_path):
    path = _copy(tmp_path)
    result = run_cli("check", "towers.ipynb", cwd=tmp_path, check_exit=1)
    lines = result.stdout.splitlines()
    # `tf` and `slim` are imported in cell 2 and used in cells 3 and 5
    assert any(ln.startswith("towers.ipynb:cell 3:7:16: error: variables-to-cpu: tf.Variable creates "
                             "an int32 variable") for ln in lines), lines
    assert any(ln.startswith("towers.ipynb:cell 3:8:15: warning: variables-to-cpu: slim.conv2d")
               for ln in lines), lines
    # the batch norm of cell 3 makes the train op of cell 5 a finding; its line is named in
    # its cell, not in the module graphfix reads the cells as
    update = [ln for ln in lines if ": update-ops: " in ln]
    assert len(update) == 1 and update[0].startswith("towers.ipynb:cell 5:6:12: "), update
    assert "slim.batch_norm (cell 3, line 8)" in update[0]
    # %%writefile and %%bash cells, and the raw cell, are not Python: no findings there
    assert not any(f":cell {n}:" in result.stdout for n in (6, 7, 8))
    # (and the towers of cell 3 minimized outside their device scopes: colocate-gradients)
    assert any(ln.startswith("towers.ipynb:cell 5:6:12: warning: colocate-gradients: ")
               for ln in lines), lines
    assert lines[-1] == "5 finding(s) (5 fixable) in 1 file(s); 0 clean, 0 skipped, 0 failed"
    assert path.read_bytes() == TOWERS.read_bytes()


def test_json_findings_and_changes_carry_the_cell(tmp_path):
    _copy(tmp_path)
    (tmp_path / "train.py").write_text(f"import tensorflow as tf\n{BUG}\n")
    doc = _json(run_cli("check", "towers.ipynb", "train.py", "--format", "json", cwd=tmp_path))
    where = sorted((f["path"], f["cell"], f["line"], f["col"]) for f in doc["findings"])
    assert where == [("towers.ipynb", 3, 7, 16), ("towers.ipynb", 3, 8, 15),
                     ("towers.ipynb", 3, 11, 29), ("towers.ipynb", 5, 6, 12),
                     ("towers.ipynb", 5, 6, 12), ("train.py", None, 3, 12)]
    fixed = _json(run_cli("fix", "towers.ipynb", "--format", "json", cwd=tmp_path))
    assert sorted((c["cell"], c["line"], c["transform"]) for c in fixed["changes"]) == [
        (3, 7, "variables-to-cpu"), (3, 8, "variables-to-cpu"), (3, 11, "variables-to-cpu"),
        (5, 6, "colocate-gradients"), (5, 6, "update-ops")]


def test_sarif_locates_notebook_findings_in_their_cell(tmp_path):
    _copy(tmp_path)
    result = run_cli("check", "towers.ipynb", "--format", "sarif", "--only", "update-ops",
                     cwd=tmp_path, check_exit=1)
    (only,) = json.loads(result.stdout)["runs"][0]["results"]
    location = only["locations"][0]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == "towers.ipynb"
    assert location["physicalLocation"]["region"] == {"startLine": 6, "startColumn": 12}
    assert location["logicalLocations"] == [{"name": "cell 5", "kind": "module"}]
    assert only["properties"] == {"fixable": True, "cell": 5, "severity": "error"}


# -- fix --------------------------------------------------------------------------------------


def test_fix_rewrites_only_the_fixed_cells_and_keeps_everything_else(tmp_path):
    path = _copy(tmp_path)
    result = run_cli("fix", path, check_exit=1)
    assert result.stdout.strip().splitlines()[-1] == (
        "5 change(s) in 1 file(s); 0 unchanged, 0 skipped, 0 failed")
    assert path.read_bytes() == TOWERS_FIXED.read_bytes()
    before, after = _notebook(TOWERS), _notebook(path)
    assert list(after) == list(before) and after["metadata"] == before["metadata"]
    assert len(after["cells"]) == len(before["cells"])
    for number, (old, new) in enumerate(zip(before["cells"], after["cells"]), start=1):
        if number not in FIXED_CELLS:
            assert new == old, number  # markdown, raw, %%bash, %%writefile, clean code
            continue
        assert list(new) == list(old)  # same keys, same order
        assert {k: v for k, v in new.items() if k != "source"} == {
            k: v for k, v in old.items() if k != "source"}  # outputs, counts, metadata, id
        assert isinstance(new["source"], list) and new["source"] != old["source"]
        assert all(ln.endswith("\n") for ln in new["source"][:-1])
        assert not new["source"][-1].endswith("\n")  # as the cell's last line was
    tower, train = _source(after["cells"][2]), _source(after["cells"][4])
    # IPython lines stay, byte for byte, in the cells that were fixed
    assert tower.startswith("!pip install tf_slim\n%time images = tf.random.normal(")
    assert '        with tf.device("/cpu:0"):\n            step = tf.Variable(' in tower
    assert train.startswith("%%time\nlabels = ")
    assert train.endswith("    train_op = opt.minimize(loss, colocate_gradients_with_ops=True)\n"
                          "files = !ls\ntrain_op?")
    assert "with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):" in train
    assert after["cells"][2]["outputs"][0]["text"] == [
        "Requirement already satisfied: tf_slim in ./venv (1.1.0)\n"]
    # the written file is nbformat's JSON: indent 1, sorted keys as read, UTF-8 kept
    text = path.read_text(encoding="utf-8")
    assert text == json.dumps(after, indent=1, ensure_ascii=False) + "\n"
    assert "café" in text
    again = run_cli("fix", path, check_exit=0)
    assert "0 change(s) in 0 file(s); 1 unchanged" in again.stdout
    assert path.read_bytes() == TOWERS_FIXED.read_bytes()


def test_diff_shows_each_changed_cell_and_writes_nothing(tmp_path):
    path = _copy(tmp_path)
    result = run_cli("fix", "towers.ipynb", "--diff", cwd=tmp_path, check_exit=1)
    out = result.stdout
    for number in FIXED_CELLS:
        assert f"--- a/towers.ipynb:cell {number}\n+++ b/towers.ipynb:cell {number}\n" in out
    assert out.count("\n--- ") + out.startswith("--- ") == len(FIXED_CELLS)
    assert "+    with tf.control_dependencies(" not in out  # cell 5's wrap is at top level
    assert ("-train_op = opt.minimize(loss)\n"
            "+with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):\n"
            "+    train_op = opt.minimize(loss, colocate_gradients_with_ops=True)\n") in out
    assert " files = !ls\n" in out  # context lines: the IPython line, unchanged
    assert path.read_bytes() == TOWERS.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["towers.ipynb"]


@pytest.mark.parametrize("name, reason", [
    ("merge_conflict.ipynb", "not a Jupyter notebook: invalid JSON at line 12, column 1"),
    ("nbformat3.ipynb", "not a Jupyter notebook in nbformat 4 (nbformat 3)"),
    ("syntax_error.ipynb", "cell 2: syntax error at line 2, column 23: '(' was never closed"),
])
def test_broken_notebook_is_skipped_with_reason_and_untouched(tmp_path, name, reason):
    path = _copy(tmp_path, name)
    result = run_cli("fix", name, cwd=tmp_path, check_exit=0)
    assert f"{name}: skipped: {reason}" in result.stdout, result.stdout
    assert result.stdout.strip().splitlines()[-1].endswith("0 unchanged, 1 skipped, 0 failed")
    assert path.read_bytes() == (NOTEBOOKS / name).read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == [name], "no temporary left behind"


def test_fix_that_would_join_two_cells_is_skipped(tmp_path):
    # replica-placement moves the variables created in cells 2 and 3 under one
    # replica_device_setter block: that block cannot be split back into two cells
    head = ("import tensorflow.compat.v1 as tf\ncluster = tf.train.ClusterSpec("
            "{'worker': ['localhost:1829'], 'ps': ['localhost:1057']})\n"
            "server = tf.train.Server(cluster, job_name='worker', task_index=0)")
    doc = _code_notebook(head, "c = tf.get_variable('c', shape=[])",
                         "d = tf.get_variable('d', shape=[])\nres = c + d")
    path = tmp_path / "ps.ipynb"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    original = path.read_bytes()
    result = run_cli("fix", path, "--only", "replica-placement", check_exit=0)
    assert ("ps.ipynb: skipped: the fix would join cells 2 and 3 in one block"
            in result.stdout), result.stdout
    assert path.read_bytes() == original
    # check says the same: the findings stand, but fix would not apply them
    doc = json.loads(run_cli("check", path, "--only", "replica-placement", "--format", "json",
                             check_exit=1).stdout)
    assert [(f["cell"], f["fixable"]) for f in doc["findings"]] == [(2, False), (3, False)]
    for finding in doc["findings"]:
        assert finding["message"].endswith(
            "; not fixed in this notebook: the fix would join cells 2 and 3 in one block "
            "(merge the two cells, or fix them by hand)"), finding["message"]
    assert doc["summary"]["fixable"] == 0


def test_check_calls_a_notebook_fixable_when_fix_fixes_it(tmp_path):
    doc = _code_notebook("import tensorflow as tf", BUG)
    path = tmp_path / "one.ipynb"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    found = json.loads(run_cli("check", path, "--only", "variables-to-cpu", "--format", "json",
                               check_exit=1).stdout)["findings"]
    assert [(f["cell"], f["fixable"]) for f in found] == [(2, True)]
    assert "not fixed" not in found[0]["message"]
    run_cli("fix", path, "--only", "variables-to-cpu", check_exit=1)


# -- the notebook's own form ------------------------------------------------------------------


def test_json_style_of_the_original_is_kept(tmp_path):
    """Not nbformat's style: indent 2, ASCII escapes, one-string sources, no final newline,
    CRLF line endings. Only the fixed cell's source changes, in the file's own form."""
    doc = _code_notebook("import tensorflow as tf\n# café", BUG)
    text = json.dumps(doc, indent=2, ensure_ascii=True).replace("\n", "\r\n")
    path = tmp_path / "windows.ipynb"
    path.write_bytes(text.encode())
    run_cli("fix", path, "--only", "variables-to-cpu", check_exit=1)
    data = path.read_bytes()
    doc["cells"][1]["source"] = ("with tf.device('/gpu:0'):\n    with tf.device(\"/cpu:0\"):\n"
                                 "        step = tf.Variable(0)")
    assert data == json.dumps(doc, indent=2, ensure_ascii=True).replace("\n", "\r\n").encode()
    assert b"caf\\u00e9" in data and not data.endswith(b"\n")


def test_unchanged_notebook_is_not_written(tmp_path):
    doc = _code_notebook("import tensorflow as tf", "with tf.device('/cpu:0'):\n    v = 1")
    path = tmp_path / "clean.ipynb"
    path.write_text(json.dumps(doc, indent=3, sort_keys=False) + "\n\n")  # odd, but valid
    original, stat = path.read_bytes(), path.stat()
    result = run_cli("fix", path, check_exit=0)
    assert "1 unchanged" in result.stdout
    assert path.read_bytes() == original and path.stat().st_mtime_ns == stat.st_mtime_ns


def test_ipython_lines_in_a_block_a_fix_wraps_move_with_it(tmp_path):
    head = ("import tensorflow.compat.v1 as tf\ncluster = tf.train.ClusterSpec("
            "{'worker': ['localhost:1829'], 'ps': ['localhost:1057']})\n"
            "server = tf.train.Server(cluster, job_name='worker', task_index=0)")
    body = ("c = tf.get_variable('c', shape=[])\n%time x = 1\n!echo one \\\n  two\n"
            "d = tf.get_variable('d', shape=[])\nres = c + d\n")
    path = tmp_path / "ps.ipynb"
    path.write_text(json.dumps(_code_notebook(head, body), indent=1) + "\n")
    run_cli("fix", path, "--only", "replica-placement", check_exit=1)
    cell = _source(_notebook(path)["cells"][1])
    assert cell.startswith("with tf.device(tf.train.replica_device_setter(")
    assert ("    c = tf.get_variable('c', shape=[])\n    %time x = 1\n    !echo one \\\n"
            "      two\n    d = tf.get_variable('d', shape=[])\nres = c + d\n") in cell
    assert run_cli("fix", path, "--only", "replica-placement").returncode == 0


def test_strings_and_brackets_are_not_taken_for_ipython_lines(tmp_path):
    cell = ("import tensorflow as tf\nusage = '''\n%run this\n!or this\n'''\n"
            "ratio = (7\n% 4)\n" + BUG)
    path = tmp_path / "s.ipynb"
    path.write_text(json.dumps(_code_notebook(cell), indent=1) + "\n")
    doc = _json(run_cli("check", path, "--format", "json"))
    assert [(f["cell"], f["line"]) for f in doc["findings"]] == [(1, 9)]


def test_not_python_notebook_is_skipped(tmp_path):
    doc = _code_notebook("with(tf, device('/gpu:0'))")
    doc["metadata"] = {"kernelspec": {"language": "R", "name": "ir"}}
    path = tmp_path / "r.ipynb"
    path.write_text(json.dumps(doc))
    result = run_cli("check", path, check_exit=0)
    assert "r.ipynb: skipped: not a Python notebook (kernel language: R)" in result.stdout


# -- trees ------------------------------------------------------------------------------------


def _tree(tmp_path, git=False):
    root = tmp_path / "proj"
    for name in ("nb.ipynb", "sub/deep.ipynb", "legacy/old.ipynb", "scratch/tmp.ipynb",
                 ".ipynb_checkpoints/nb-checkpoint.ipynb"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(TOWERS, root / name)
    (root / "train.py").write_text(f"import tensorflow as tf\n{BUG}\n")
    if git:
        (root / ".gitignore").write_text("scratch/\n")
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _paths(doc):
    return sorted({f["path"] for f in doc["findings"]})


def test_directories_give_notebooks_without_checkpoints_or_excluded(tmp_path):
    root = _tree(tmp_path)
    doc = _json(run_cli("check", ".", "--format", "json", cwd=root))
    assert _paths(doc) == ["legacy/old.ipynb", "nb.ipynb", "scratch/tmp.ipynb",
                           "sub/deep.ipynb", "train.py"]
    doc = _json(run_cli("check", ".", "--format", "json", "--exclude", "legacy",
                        "--exclude", "*/deep.ipynb", cwd=root))
    assert _paths(doc) == ["nb.ipynb", "scratch/tmp.ipynb", "train.py"]
    (root / "pyproject.toml").write_text('[tool.graphfix]\nexclude = ["sub/*", "*.py"]\n')
    doc = _json(run_cli("check", ".", "--format", "json", cwd=root))
    assert _paths(doc) == ["legacy/old.ipynb", "nb.ipynb", "scratch/tmp.ipynb"]
    doc = _json(run_cli("check", "nb.ipynb", "sub/deep.ipynb", "--format", "json", cwd=root))
    assert _paths(doc) == ["nb.ipynb"]  # a file named explicitly: the config's exclude too


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_gitignore_applies_to_notebooks(tmp_path):
    root = _tree(tmp_path, git=True)
    doc = _json(run_cli("check", ".", "--format", "json", cwd=root))
    assert "scratch/tmp.ipynb" not in _paths(doc) and "nb.ipynb" in _paths(doc)


def test_jobs_give_the_same_report_and_notebooks(tmp_path):
    one = tmp_path / "one"
    shutil.copytree(NOTEBOOKS, one)
    shutil.copytree(FIXTURES / "source_tree" / "encodings", one / "encodings")
    many = tmp_path / "many"
    shutil.copytree(one, many)
    check = {jobs: run_cli("check", "one", "--format", "json", "--jobs", jobs, "--no-cache",
                           cwd=tmp_path)
             for jobs in ("1", "3")}
    assert check["1"].returncode == check["3"].returncode == 1, check["3"].stderr
    assert check["1"].stdout == check["3"].stdout
    doc = json.loads(check["3"].stdout)
    assert sorted(s["path"].rsplit("/", 1)[-1] for s in doc["skipped"]) == sorted(
        BROKEN + ["python2_device.py", "syntax_error_device.py", "undecodable_device.py"])
    first = run_cli("fix", "one", "--jobs", "1", cwd=tmp_path)
    second = run_cli("fix", "many", "--jobs", "3", cwd=tmp_path)
    assert first.returncode == second.returncode == 1
    assert first.stdout.replace("one/", "many/") == second.stdout
    for path in one.rglob("*"):
        if path.is_file():
            assert path.read_bytes() == (many / path.relative_to(one)).read_bytes(), path
    assert (many / "towers.ipynb").read_bytes() == TOWERS_FIXED.read_bytes()
    for name in BROKEN:
        assert (many / name).read_bytes() == (NOTEBOOKS / name).read_bytes()
