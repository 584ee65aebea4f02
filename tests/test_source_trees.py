"""Source trees as users have them: encodings, line endings, broken files, excludes,
.gitignore, pyproject configuration, pre-commit hooks, parallel runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, run_cli

TREE = FIXTURES / "source_tree"
ENCODINGS = TREE / "encodings"


def _copy(name, tmp_path):
    target = tmp_path / name
    shutil.copyfile(ENCODINGS / name, target)
    return target


def _fix_json(*args, cwd=None):
    result = run_cli("fix", *args, "--format", "json", cwd=cwd)
    assert result.returncode in (0, 1), (result.stdout, result.stderr)
    return json.loads(result.stdout)


# -- 1. safety: encodings, line endings, unparsable files ---------------------------------


def test_crlf_file_is_fixed_and_keeps_crlf(tmp_path):
    path = _copy("crlf_device.py", tmp_path)
    doc = _fix_json(path, "--only", "variables-to-cpu")
    assert doc["summary"]["files_changed"] == 1
    data = path.read_bytes()
    assert b'with tf.device("/cpu:0"):\r\n' in data
    assert data.count(b"\n") == data.count(b"\r\n"), "every line ends in CRLF"
    assert data.startswith(ENCODINGS.joinpath("crlf_device.py").read_bytes()[:60])
    again = _fix_json(path, "--only", "variables-to-cpu")
    assert again["summary"]["changes"] == 0 and path.read_bytes() == data


def test_latin1_file_is_fixed_in_latin1(tmp_path):
    path = _copy("latin1_device.py", tmp_path)
    original = path.read_bytes()
    doc = _fix_json(path, "--only", "variables-to-cpu")
    assert doc["summary"]["files_changed"] == 1 and not doc["skipped"]
    data = path.read_bytes()
    old_lines, new_lines = original.splitlines(), data.splitlines()
    for line in old_lines[:7]:  # the cookie, the comment, the import, NAME: byte for byte
        assert line in new_lines
    assert "# Modèle à deux tours (café)".encode("latin-1") in data
    assert "name='étape'".encode("latin-1") in data
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    assert data.decode("latin-1").count('with tf.device("/cpu:0"):') == 1
    again = _fix_json(path, "--only", "variables-to-cpu")
    assert again["summary"]["changes"] == 0 and path.read_bytes() == data


@pytest.mark.parametrize("name, reason", [
    ("python2_device.py", "Python 2"),
    ("syntax_error_device.py", "syntax error at line 4"),
    ("undecodable_device.py", "not UTF-8"),
])
def test_unparsable_file_is_skipped_with_reason_and_untouched(tmp_path, name, reason):
    path = _copy(name, tmp_path)
    original = path.read_bytes()
    result = run_cli("fix", path, check_exit=0)
    assert f"{path}: skipped: " in result.stdout and reason in result.stdout
    assert "1 skipped" in result.stdout
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == [name], "no temporary left behind"


def test_unknown_coding_cookie_is_skipped(tmp_path):
    path = tmp_path / "odd.py"
    path.write_bytes(b"# -*- coding: klingon -*-\nimport tensorflow as tf\n")
    result = run_cli("check", path, check_exit=0)
    assert "odd.py: skipped: unknown encoding: klingon" in result.stdout


def test_mixed_tree_fixes_the_good_files_and_skips_the_rest(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(ENCODINGS, tree)
    doc = _fix_json(tree, "--only", "variables-to-cpu")
    assert doc["summary"]["files_changed"] == 2
    assert sorted(s["path"].rsplit("/", 1)[-1] for s in doc["skipped"]) == [
        "python2_device.py", "syntax_error_device.py", "undecodable_device.py"]
    assert not doc["failed"]
    for name in ("python2_device.py", "syntax_error_device.py", "undecodable_device.py"):
        assert (tree / name).read_bytes() == (ENCODINGS / name).read_bytes()
    again = _fix_json(tree, "--only", "variables-to-cpu")
    assert again["summary"]["changes"] == 0


def test_file_without_trigger_words_is_not_parsed(tmp_path):
    path = tmp_path / "plain.py"
    path.write_text("print 'no tensorflow here'\n")  # Python 2, but nothing to fix: not parsed
    doc = json.loads(run_cli("check", path, "--format", "json", check_exit=0).stdout)
    assert doc["summary"]["skipped"] == 0 and doc["summary"]["findings"] == 0


# -- 2. paths: what a directory holds ------------------------------------------------------

BUG = "import tensorflow as tf\nwith tf.device('/gpu:0'):\n    step = tf.Variable(0)\n"
TREE_FILES = [
    "a.py", "sub/keep.py", "sub/deep/more.py", ".hidden/h.py", "venv/v.py", "myenv/x.py",
    "node_modules/pkg/n.py", "gen/model_pb2.py", "legacy/old.py", "sub/legacy_x.py",
    "ignored_dir/i.py", "scratch.py", "notes.txt",
]


def _tree(tmp_path, git=False):
    root = tmp_path / "proj"
    for name in TREE_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(BUG)
    (root / "myenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    if git:
        import subprocess

        (root / ".gitignore").write_text("ignored_dir/\nscratch.py\n")
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _read_paths(root, *args, cwd=None):
    result = run_cli("check", *args, "--format", "json", "--only", "variables-to-cpu", cwd=cwd)
    assert result.returncode in (0, 1), (result.stdout, result.stderr)
    doc = json.loads(result.stdout)
    return sorted({Path(f["path"]).relative_to(root).as_posix()
                   for f in doc["findings"]})


def test_directory_skips_hidden_venvs_node_modules(tmp_path):
    root = _tree(tmp_path)
    assert _read_paths(root, root) == sorted([
        "a.py", "sub/keep.py", "sub/deep/more.py", "gen/model_pb2.py", "legacy/old.py",
        "sub/legacy_x.py", "ignored_dir/i.py", "scratch.py"])


def test_exclude_globs_match_relative_paths_and_names(tmp_path):
    root = _tree(tmp_path)
    got = _read_paths(root, root, "--exclude", "*_pb2.py", "--exclude", "legacy",
                      "--exclude", "sub/deep/*", "--exclude", "ignored_dir/")
    assert got == ["a.py", "scratch.py", "sub/keep.py", "sub/legacy_x.py"]


def test_exclude_applies_to_files_named_explicitly(tmp_path):
    root = _tree(tmp_path)
    got = _read_paths(root, root / "a.py", root / "gen" / "model_pb2.py", "--exclude", "*_pb2.py")
    assert got == ["a.py"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_gitignore_is_honoured_inside_a_work_tree(tmp_path):
    root = _tree(tmp_path, git=True)
    assert _read_paths(root, root) == sorted([
        "a.py", "sub/keep.py", "sub/deep/more.py", "gen/model_pb2.py", "legacy/old.py",
        "sub/legacy_x.py"])
    # a path relative to the working directory, as pre-commit and users give it
    result = run_cli("check", ".", "--format", "json", "--only", "variables-to-cpu", cwd=root)
    paths = sorted({f["path"] for f in json.loads(result.stdout)["findings"]})
    assert paths == ["a.py", "gen/model_pb2.py", "legacy/old.py", "sub/deep/more.py",
                     "sub/keep.py", "sub/legacy_x.py"]


# -- 3. configuration: [tool.graphfix] in pyproject.toml -----------------------------------

INT_AND_FLOAT = ("import tensorflow as tf\nwith tf.device('/gpu:0'):\n"
                 "    step = tf.Variable(0)\n    w = tf.get_variable('w', [3])\n"
                 "opt = tf.train.AdamOptimizer().minimize(w)\n")


def _project(tmp_path, table: str):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text(f'[project]\nname = "x"\n\n{table}')
    (root / "pkg" / "train.py").write_text(INT_AND_FLOAT)
    (root / "pkg" / "model_pb2.py").write_text(INT_AND_FLOAT)
    return root


def _check(*args, cwd):
    result = run_cli("check", *args, "--format", "json", cwd=cwd)
    assert result.returncode in (0, 1), (result.stdout, result.stderr)
    return json.loads(result.stdout)


def test_config_only_exclude_and_set(tmp_path):
    root = _project(tmp_path, '[tool.graphfix]\nonly = ["variables-to-cpu"]\n'
                              'exclude = ["*_pb2.py"]\n[tool.graphfix.set]\n'
                              '"variables-to-cpu.scope" = "no-kernel"\n')
    float_graph = FIXTURES / "variables_to_cpu" / "float_gpu_no_kernel_scope" / "before.pbtxt"
    shutil.copyfile(float_graph, root / "pkg" / "float.pbtxt")
    doc = _check("pkg", "pkg/float.pbtxt", cwd=root)
    # only variables-to-cpu, not model_pb2.py; no-kernel: the float variables of the graph
    # and of the source stay, the int32 one is found
    assert [(f["path"], f["line"], f["transform"]) for f in doc["findings"]] == [
        ("pkg/train.py", 3, "variables-to-cpu")]
    # the command line overrides: --set one key, --exclude the globs, --only the selection
    doc = _check("pkg/train.py", "--set", "variables-to-cpu.scope=every-gpu-variable", cwd=root)
    assert [(f["path"], f["line"]) for f in doc["findings"]] == [
        ("pkg/train.py", 3), ("pkg/train.py", 4)]
    doc = _check("pkg/float.pbtxt", "--set", "variables-to-cpu.scope=every-gpu-variable",
                 cwd=root)
    assert [f["path"] for f in doc["findings"]] == ["pkg/float.pbtxt"]
    doc = _check("pkg", "--exclude", "nothing", cwd=root)
    assert {f["path"] for f in doc["findings"]} == {"pkg/train.py", "pkg/model_pb2.py"}
    doc = _check("pkg/train.py", "--only", "update-ops", cwd=root)
    assert {f["transform"] for f in doc["findings"]} <= {"update-ops"}
    doc = _check("pkg/train.py", cwd=root)
    assert {f["transform"] for f in doc["findings"]} == {"variables-to-cpu"}


def test_config_disable_and_nearest_file_wins(tmp_path):
    root = _project(tmp_path, '[tool.graphfix]\ndisable = ["variables-to-cpu"]\n')
    (root / "pkg" / "pyproject.toml").write_text(
        '[tool.graphfix]\nonly = ["variables-to-cpu"]\nexclude = ["model_pb2.py"]\n')
    doc = _check(root / "pkg", cwd=tmp_path)
    assert {(f["path"].rsplit("/", 1)[-1], f["transform"]) for f in doc["findings"]} == {
        ("train.py", "variables-to-cpu")}
    doc = _check(root / "pkg" / "train.py", "--exclude", "x", cwd=root)  # the nearest: pkg's
    assert {f["transform"] for f in doc["findings"]} == {"variables-to-cpu"}
    (root / "pkg" / "pyproject.toml").write_text('[project]\nname = "inner"\n')  # no table:
    doc = _check("pkg", cwd=root)  # the outer one applies
    assert "variables-to-cpu" not in {f["transform"] for f in doc["findings"]}


def test_config_target_devices(tmp_path):
    root = _project(tmp_path, '[tool.graphfix]\ntarget-devices = ["/gpu:0", "/gpu:1"]\n')
    from graphfix import config

    assert config.load([str(root / "pkg")]).target_devices == "/gpu:0,/gpu:1"
    _check("pkg", cwd=root)  # accepted


@pytest.mark.parametrize("spelling", [
    '[tool.graphfix]\ntarget-devices = "/gpu:0"\n',
    '[tool . "graphfix"]\ntarget-devices = "/gpu:0"\n',
    '[tool]\ngraphfix = { target-devices = "/gpu:0" }\n',
    'tool.graphfix.target-devices = "/gpu:0"\n',
    'tool = { graphfix = { target-devices = "/gpu:0" } }\n',
])
def test_config_every_toml_spelling_of_the_table_is_read(tmp_path, spelling):
    from graphfix import config

    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text(spelling)
    assert config.load([str(root)]).target_devices == "/gpu:0"
    # A project that only has "graphfix" in its name or scripts is not ours to parse (nor
    # to reject: broken TOML elsewhere in it is its own business).
    (root / "pyproject.toml").write_text(
        '[project]\nname = "graphfix-models"\n[project.scripts]\ngraphfix = "x:y"\n[oops\n')
    assert config.load([str(root)]).target_devices is None


@pytest.mark.parametrize("table, problem", [
    ('[tool.graphfix]\nonly = ["variables-to-cpu"]\nincluce = ["x"]\n', "no key 'incluce'"),
    ('[tool.graphfix]\nonly = ["no-such-transform"]\n', "unknown transform 'no-such-transform'"),
    ('[tool.graphfix]\ndisable = "variables-to-cpu\n', "not valid TOML"),
    ('[tool.graphfix]\nexclude = [1, 2]\n', "exclude must be a list of strings"),
    ('[tool.graphfix.set]\n"variables-to-cpu.scope" = "everything"\n', "must be one of"),
    ('[tool.graphfix.set]\n"variables-to-cpu.nope" = "x"\n', "has no parameter 'nope'"),
])
def test_config_errors_are_one_line_naming_the_file(tmp_path, table, problem):
    from conftest import error_lines

    root = _project(tmp_path, table)
    for command in ("check", "fix"):
        result = run_cli(command, "pkg", cwd=root)
        assert result.returncode == 2, (result.stdout, result.stderr)
        lines = error_lines(result.stderr)
        assert len(lines) == 1 and "Traceback" not in result.stderr, lines
        assert "pyproject.toml" in lines[0] and problem in lines[0], lines[0]
    assert (root / "pkg" / "train.py").read_text() == INT_AND_FLOAT


# -- 4. pre-commit --------------------------------------------------------------------------


def test_pre_commit_hooks():
    yaml = pytest.importorskip("yaml")
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    by_id = {h["id"]: h for h in hooks}
    assert set(by_id) == {"graphfix-check", "graphfix-fix"}
    assert by_id["graphfix-check"]["entry"] == "graphfix check"
    assert by_id["graphfix-fix"]["entry"] == "graphfix fix"
    for hook in hooks:
        assert hook["language"] == "python" and hook["types_or"] == ["python", "jupyter"]
        assert hook["name"] and hook["description"]


def test_pre_commit_style_run_on_file_names(tmp_path):
    # pre-commit runs the entry with the staged files' names, from the repository root
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "bad.py").write_text(BUG)
    assert run_cli("check", "ok.py", cwd=tmp_path).returncode == 0
    assert run_cli("check", "ok.py", "bad.py", cwd=tmp_path).returncode == 1
    assert run_cli("fix", "ok.py", "bad.py", cwd=tmp_path).returncode == 1  # changed: fail
    assert run_cli("fix", "ok.py", "bad.py", cwd=tmp_path).returncode == 0  # then clean


# -- 5. parallel runs -----------------------------------------------------------------------


def _tree_of_fixtures(root):
    """A source fixture of each transform, every multi-file run, the encodings cases."""
    for transform in sorted(FIXTURES.glob("*/source")):
        for before in sorted(transform.glob("*/before.py"))[:1]:
            case = before.parent
            shutil.copyfile(before, root / f"{transform.parent.name}__{case.name}.py")
    for folder in sorted(FIXTURES.glob("*/source/*/before")):
        if folder.is_dir():
            shutil.copytree(folder, root / f"{folder.parent.parent.parent.name}__{folder.parent.name}")
    for path in ENCODINGS.glob("*.py"):
        shutil.copyfile(path, root / path.name)
    return root


def test_jobs_give_the_same_report_and_files_as_one_process(tmp_path):
    one, many = tmp_path / "one", tmp_path / "many"
    one.mkdir()
    _tree_of_fixtures(one)
    shutil.copytree(one, many)
    assert len(list(one.rglob("*.py"))) > 10
    check = {jobs: run_cli("check", "one", "--format", "json", "--jobs", jobs, "--no-cache",
                           cwd=tmp_path)
             for jobs in ("1", "3")}
    assert check["1"].returncode == check["3"].returncode == 1, check["3"].stderr
    assert check["1"].stdout == check["3"].stdout
    doc = json.loads(check["3"].stdout)
    assert doc["summary"]["findings"] > 6 and len(doc["skipped"]) == 3 and not doc["failed"]
    # a cross-file fact (the batch norm of model.py) reached the worker that read train.py
    assert any(f["transform"] == "update-ops" and "multi_file" in f["path"]
               and f["path"].endswith("/train.py") for f in doc["findings"])
    first = run_cli("fix", "one", "--jobs", "1", cwd=tmp_path)
    second = run_cli("fix", "many", "--jobs", "3", cwd=tmp_path)
    assert first.returncode == second.returncode == 1
    assert first.stdout.replace("one/", "many/") == second.stdout
    for path in one.rglob("*.py"):
        assert path.read_bytes() == (many / path.relative_to(one)).read_bytes(), path
    again = run_cli("check", "many", "--jobs", "3", "--format", "json", cwd=tmp_path)
    assert json.loads(again.stdout)["summary"]["fixable"] == 0



def test_a_file_s_parse_is_freed_before_the_next_file_is_read(tmp_path):
    """libcst's tree of a file and its metadata are left in reference cycles: a process
    that checks many files must free each before the next, or its peak memory grows with
    the number of files it reads (issue 18: "peak memory flat from 1x to 4x the tree")."""
    import gc

    from graphfix import registry
    from graphfix.driver import Selected, run

    towers = "".join(f'with tf.device("/gpu:{i % 2}"):\n    w{i} = tf.Variable(tf.zeros([{i + 1}]))\n'
                     for i in range(30))
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("import tensorflow as tf\n" + towers)
    selected = Selected.build([registry.all_transforms()["variables-to-cpu"]], {})
    was_enabled = gc.isenabled()
    gc.disable()  # (only the run's own collections free cycles: none by chance)
    try:
        gc.collect()
        report, _ = run([str(tmp_path)], selected, fix=False, jobs=1)
        left = gc.collect()
    finally:
        if was_enabled:
            gc.enable()
    assert len(report.findings) >= 60  # both files went through libcst
    assert left < 2_000, f"{left:,} objects of the run were garbage left in cycles"


# -- 6. output: summary line and progress bar -----------------------------------------------


def test_summary_line_counts_changed_unchanged_skipped_failed(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(ENCODINGS, tree)
    (tree / "clean.py").write_text("x = 1\n")
    result = run_cli("fix", tree, tree / "missing.py", "--only", "variables-to-cpu")
    assert result.returncode == 2
    last = result.stdout.strip().splitlines()[-1]
    assert last == "3 change(s) in 2 file(s); 1 unchanged, 3 skipped, 1 failed", last
    check = run_cli("check", tree, "--only", "variables-to-cpu")
    last = check.stdout.strip().splitlines()[-1]
    assert last == "3 finding(s) (3 fixable) in 2 file(s); 1 clean, 3 skipped, 0 failed", last


def test_no_progress_bar_when_not_a_terminal(tmp_path):
    root = tmp_path / "many"
    root.mkdir()
    for number in range(60):
        (root / f"m{number}.py").write_text(BUG)
    result = run_cli("check", root, "--only", "variables-to-cpu")
    assert result.returncode == 1 and result.stderr.strip() == ""


def test_progress_bar_on_a_terminal(tmp_path):
    import os
    import pty
    import subprocess
    import sys

    root = tmp_path / "many"
    root.mkdir()
    for number in range(60):
        (root / f"m{number}.py").write_text(BUG)
    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "graphfix", "check", str(root), "--only",
                                "variables-to-cpu"], stdout=subprocess.PIPE, stderr=slave,
                               cwd=REPO / "tests")
    os.close(slave)
    shown = b""
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        shown += data
    process.communicate(timeout=120)
    os.close(master)
    assert process.returncode == 1
    assert b"sources" in shown and b"/60" in shown, shown[-500:]  # 60 files, or 120 steps


@pytest.mark.parametrize("code, where", [
    ("import tensorflow as tf\nprint 'hi'\nwith tf.device('/gpu:0'):\n    v = tf.Variable(1)\n",
     "syntax error at line 2, column 1: Missing parentheses in call to 'print'"),
    ("import tensorflow as tf\ntry:\n    tf.device('/gpu:0')\nexcept Exception, e:\n    pass\n",
     "syntax error at line 4, column 8: multiple exception types must be parenthesized"),
    ("import tensorflow as tf\nwith tf.device('/gpu:0'):\n    v = tf.Variable(1\n",
     "syntax error at line 3, column 20: '(' was never closed"),
])
def test_syntax_errors_name_the_line_and_the_problem(code, where):
    from graphfix.source.codemod import run_source

    result = run_source(code.encode(), "f.py", [], fix=True)
    assert result.skipped is not None and result.skipped.startswith(where), result.skipped


def test_config_path_excludes_are_relative_to_the_config_folder(tmp_path):
    root = _project(tmp_path, '[tool.graphfix]\nonly = ["variables-to-cpu"]\n'
                              'exclude = ["pkg/gen/*", "./pkg/old"]\n')
    for folder in ("gen", "old", "new"):
        (root / "pkg" / folder).mkdir()
        (root / "pkg" / folder / "m.py").write_text(BUG)
    expected = {"pkg/train.py", "pkg/model_pb2.py", "pkg/new/m.py"}
    doc = _check(".", cwd=root)
    assert {f["path"] for f in doc["findings"]} == expected
    doc = _check(".", cwd=root / "pkg")  # the same files, run from below the config
    assert {"pkg/" + f["path"] for f in doc["findings"]} == expected
    doc = _check("gen/m.py", "new/m.py", cwd=root / "pkg")  # files named explicitly too
    assert {f["path"] for f in doc["findings"]} == {"new/m.py"}


def test_one_fix_run_leaves_nothing_fixable_where_two_rules_fix_one_file(tmp_path):
    """colocate-gradients fixes train.py first; replica-placement's finding there rests on a
    device helper of another module (devices.py), which its view after that fix must still
    know: one `fix` leaves nothing to fix (before, the second rule lost the other file's
    code and a second `fix` was needed)."""
    case = FIXTURES / "replica_placement" / "source" / "global_step_under_device_of_module"
    shutil.copytree(case / "before", tmp_path / "tree")
    first = run_cli("check", "tree", "--format", "json", "--no-cache", cwd=tmp_path)
    assert sorted(f["transform"] for f in json.loads(first.stdout)["findings"]) == [
        "colocate-gradients", "replica-placement"]
    assert run_cli("fix", "tree", "--no-cache", cwd=tmp_path).returncode == 1
    again = run_cli("check", "tree", "--format", "json", "--no-cache", cwd=tmp_path)
    assert json.loads(again.stdout)["findings"] == [], again.stdout
