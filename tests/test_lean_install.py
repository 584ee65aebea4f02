"""`pip install graphfix` without TensorFlow, as a new user gets it.

The wheel built from this tree is installed into a fresh venv with its base dependencies alone
(from pip's cache, or the index the first time): no TensorFlow, no numpy. There it checks and
fixes seed 000's graph (the demo's fixture, as the wheel ships it) and a source file, with the
findings and the fixed output of the full install; every command and option that runs TF says
in one line what to install (exit 2), and so does the API. On this interpreter's Python and on
Python 3.9, the oldest graphfix supports, where a 3.9 interpreter is on the machine.

The venv's size and the install's time are measured here (docs/benchmarks.md has them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, expected_findings, python_interpreter

INSTALL_TENSORFLOW = "pip install 'graphfix[verify]' (or tensorflow-cpu / tensorflow-macos)"
MAX_VENV_BYTES = 250 * 2**20  # the target; the full install (with TF) is ~2.2 GB

PYTHON39 = python_interpreter("3.9")
PYTHONS = [
    pytest.param(sys.executable, id=f"python{sys.version_info[0]}.{sys.version_info[1]}"),
    pytest.param(PYTHON39, id="python3.9", marks=pytest.mark.skipif(
        PYTHON39 is None, reason="no Python 3.9 interpreter on this machine (python3.9 on "
        "PATH or under ~/.pyenv/versions/3.9.*): the oldest Python graphfix supports")),
]

SEED000 = FIXTURES / "variables_to_cpu" / "seed000_ref"
SOURCE = FIXTURES / "variables_to_cpu" / "source" / "device_strings"
CUSTOM_OP_GRAPH = FIXTURES / "stateful_custom_ops" / "seed_constant_count" / "before.pbtxt"


class LeanInstall:
    """A fresh venv holding the wheel and its base dependencies: its `graphfix` and
    `python`, how long the install took and how many bytes the venv holds."""

    def __init__(self, folder: Path, seconds: float):
        self.folder = folder
        self.seconds = seconds
        self.bytes = sum(f.stat().st_size for f in folder.rglob("*")
                         if f.is_file() and not f.is_symlink())
        self.python = str(folder / "bin" / "python")

    def run(self, *args, cwd: Path) -> subprocess.CompletedProcess:
        """`graphfix ARGS` as a user runs it, in `cwd`, with nothing of this repository on
        the path."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        return subprocess.run([str(self.folder / "bin" / "graphfix"), *map(str, args)],
                              capture_output=True, text=True, cwd=cwd, env=env, timeout=120)

    def python_says(self, code: str, cwd: Path) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        return subprocess.run([self.python, "-c", code], capture_output=True, text=True,
                              cwd=cwd, env=env, timeout=120)

    def shipped(self, name: str) -> Path:
        """A file the wheel ships in the installed package (graphfix/NAME)."""
        (found,) = self.folder.glob(f"lib/python*/site-packages/graphfix/{name}")
        return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                           "--disable-pip-version-check", "-w", str(out), str(REPO)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (built,) = out.glob("graphfix-*.whl")
    return built


@pytest.fixture(scope="module", params=PYTHONS)
def lean(request, wheel, tmp_path_factory) -> LeanInstall:
    folder = tmp_path_factory.mktemp("lean") / "venv"
    made = subprocess.run([request.param, "-m", "venv", str(folder)], capture_output=True,
                          text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    start = time.perf_counter()
    done = subprocess.run([str(folder / "bin" / "python"), "-m", "pip", "install", "-q",
                           "--disable-pip-version-check", str(wheel)],
                          capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-3000:]
    return LeanInstall(folder, seconds)


def test_the_install_has_no_tensorflow_and_fits(lean, record_property):
    listed = subprocess.run([lean.python, "-m", "pip", "list", "--format", "json",
                             "--disable-pip-version-check"],
                            capture_output=True, text=True, timeout=120)
    names = {p["name"].lower().replace("_", "-") for p in json.loads(listed.stdout)}
    assert {"graphfix", "protobuf", "libcst", "typer", "rich"} <= names
    assert not {n for n in names if n.startswith(("tensorflow", "tf-", "keras", "numpy"))}
    record_property("venv_megabytes", round(lean.bytes / 2**20))
    record_property("install_seconds", round(lean.seconds, 1))
    print(f"\nlean install: {lean.bytes / 2**20:.0f} MB, {lean.seconds:.1f} s")
    assert lean.bytes < MAX_VENV_BYTES, f"{lean.bytes / 2**20:.0f} MB"


def test_check_and_fix_seed000_graph(lean, tmp_path):
    graph = tmp_path / "seed000.pbtxt"
    shutil.copy(lean.shipped("demo_fixtures/seed000_int32_variable_on_gpu.pbtxt"), graph)
    assert graph.read_bytes() == (SEED000 / "before.pbtxt").read_bytes()

    checked = lean.run("check", graph.name, cwd=tmp_path)
    assert checked.returncode == 1, checked.stderr
    assert ("seed000.pbtxt@d: error: variables-to-cpu: Cannot assign a device for operation d: Could "
            "not satisfy explicit device specification '/device:GPU:0' because no supported "
            "kernel for GPU devices is available. (no GPU kernel for: VariableV2 d "
            "(dtype=DT_INT32)") in checked.stdout
    assert "1 finding(s) (1 fixable) in 1 file(s)" in checked.stdout

    fixed = lean.run("fix", graph.name, "-o", "fixed.pbtxt", cwd=tmp_path)
    assert fixed.returncode == 1, fixed.stderr
    assert ("seed000.pbtxt@d: variables-to-cpu: moved 3 node(s) of d's colocation group from "
            "/device:GPU:0 to /device:CPU:0") in fixed.stdout
    # byte for byte what the full install writes (the fixture's after, made with TF)
    assert (tmp_path / "fixed.pbtxt").read_bytes() == (SEED000 / "after.pbtxt").read_bytes()
    assert lean.run("check", "fixed.pbtxt", cwd=tmp_path).returncode == 0


def test_check_and_fix_a_source_file(lean, tmp_path):
    source = tmp_path / "towers.py"
    code = (SOURCE / "before.py").read_text()
    source.write_text(code)

    checked = lean.run("check", "--format", "json", source.name, cwd=tmp_path)
    assert checked.returncode == 1, checked.stderr
    found = json.loads(checked.stdout)["findings"]
    assert [(f["line"], f["severity"], f["fixable"]) for f in found] == [
        (e.line, e.severity, e.fixable) for e in expected_findings(code)]
    assert {f["transform"] for f in found} == {"variables-to-cpu"}

    fixed = lean.run("fix", source.name, cwd=tmp_path)
    assert fixed.returncode == 1, fixed.stderr
    assert source.read_text() == (SOURCE / "after.py").read_text()


def _says_what_to_install(done: subprocess.CompletedProcess, what: str,
                          stdout: str = "") -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.splitlines() == [
        f"graphfix: error: {what} needs TensorFlow, which is not installed here: "
        f"{INSTALL_TENSORFLOW}"], done.stderr
    assert done.stdout == stdout


def test_what_runs_tensorflow_says_what_to_install(lean, tmp_path):
    shutil.copy(SEED000 / "before.pbtxt", tmp_path / "g.pbtxt")
    shutil.copy(CUSTOM_OP_GRAPH, tmp_path / "custom.pbtxt")
    (tmp_path / "train.py").write_text("import tensorflow as tf\n")
    (tmp_path / "my_ops.so").write_bytes(b"\x7fELF")  # (stat'ed, never loaded: no TF)
    asked = [
        ("graphfix verify", ["verify", "g.pbtxt"]),
        ("graphfix verify", ["verify", "g.pbtxt", "--logdir", "logs"]),
        ("graphfix trace", ["trace", "train.py"]),
        ("graphfix check --trace", ["check", "--trace", "train.py"]),
        ("graphfix fix --trace", ["fix", "--trace", "train.py", "-o", "out.meta"]),
        ("graphfix fix --verify", ["fix", "--verify", "train.py"]),
        ("--logdir", ["fix", "g.pbtxt", "-o", "out.pbtxt", "--logdir", "logs"]),
        ("graphfix demo", ["demo"]),
        ("custom.pbtxt: reading the custom-op library my_ops.so",  # (the graph it is for)
         ["check", "custom.pbtxt", "--set", "stateful-custom-ops.op_library=my_ops.so"]),
    ]
    for what, args in asked:
        # (a check's error for one graph is that graph's: the run's summary counts it failed)
        summary = "0 finding(s) (0 fixable) in 0 file(s); 0 clean, 0 skipped, 1 failed\n"
        _says_what_to_install(lean.run(*args, cwd=tmp_path), what,
                              summary if args[0] == "check" and "--trace" not in args else "")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "custom.pbtxt", "g.pbtxt", "my_ops.so", "train.py"]  # nothing written
    assert (tmp_path / "train.py").read_text() == "import tensorflow as tf\n"

    # a graph without a custom op reads no library: the check goes on, TF or not
    plain = lean.run("check", "g.pbtxt", "--set", "stateful-custom-ops.op_library=my_ops.so",
                     cwd=tmp_path)
    assert plain.returncode == 1, plain.stderr


def test_the_api_raises_what_to_install(lean, tmp_path):
    shutil.copy(SEED000 / "before.pbtxt", tmp_path / "g.pbtxt")
    (tmp_path / "train.py").write_text("import tensorflow as tf\n")
    for call, what in (("graphfix.verify('g.pbtxt')", "graphfix.verify"),
                       ("graphfix.trace('train.py')", "graphfix.trace")):
        done = lean.python_says(
            "import graphfix\n"
            f"try:\n    {call}\nexcept graphfix.UsageError as exc:\n    print(exc)\n", tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == (f"{what} needs TensorFlow, which is not installed here: "
                               f"{INSTALL_TENSORFLOW}\n")
    # and what needs no TF works
    done = lean.python_says("import graphfix\n"
                            "print([f.node for f in graphfix.check_graph('g.pbtxt')])", tmp_path)
    assert (done.returncode, done.stdout) == (0, "['d']\n"), done.stderr
