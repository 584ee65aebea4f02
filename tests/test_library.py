"""graphfix as a library a project depends on: its licence shipped, its changelog, typed,
one base exception, and `verify()`/`trace()` that take typed arguments and refuse what the
command line refuses."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import tomllib
import zipfile

import pytest

import graphfix
from conftest import FIXTURES, REPO, run_cli

FIXED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "after.pbtxt"


def test_the_licence_is_in_the_repository_the_wheel_and_the_sdist(tmp_path):
    licence = (REPO / "LICENSE").read_text()
    assert licence.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    sdist = project["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]
    assert {"LICENSE", "CHANGELOG.md"} <= set(sdist)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                            str(tmp_path), str(REPO)], capture_output=True, text=True,
                           timeout=600)
    assert built.returncode == 0, built.stderr
    [wheel] = tmp_path.glob("graphfix-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [shipped] = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(shipped).decode() == licence
        assert "graphfix/py.typed" in names  # (PEP 561: type checkers read its annotations)
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    metadata = metadata.decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert f"Project-URL: Repository, {project['project']['urls']['Repository']}" in metadata


def test_the_changelog_says_what_is_unreleased_and_each_version():
    changelog = (REPO / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## \[([^\]]+)\]", changelog, re.M)
    assert versions[0] == "Unreleased" and graphfix.__version__ in versions


def test_every_error_graphfix_raises_is_a_graphfix_error(tmp_path):
    assert issubclass(graphfix.UsageError, graphfix.Error)
    for error in (graphfix.InputError, graphfix.VerifyError, graphfix.TraceError):
        assert issubclass(error, graphfix.Error), error
    assert "Error" in graphfix.__all__ and "VerifyError" in graphfix.__all__
    with pytest.raises(graphfix.Error):
        graphfix.check_graph(b"\xff not a graph")  # InputError
    with pytest.raises(graphfix.Error):
        graphfix.check_graph(FIXED, only=["no-such-transform"])  # UsageError
    missing = tmp_path / "missing.py"
    with pytest.raises(graphfix.Error, match="no such script"):
        graphfix.trace(missing)  # TraceError


def test_verify_and_trace_take_typed_explicit_arguments():
    from graphfix import api

    for function, names in ((graphfix.verify, {"compare", "steps", "fetches", "feeds",
                                                "target_devices", "tolerance",
                                                "op_libraries", "logdir"}),
                            (api.trace, {"args", "runs", "until", "timeout"})):
        parameters = inspect.signature(function).parameters
        assert names <= set(parameters), function
        assert not any(p.kind is p.VAR_KEYWORD for p in parameters.values()), function
        assert all(p.annotation is not p.empty for p in parameters.values()), function
    with pytest.raises(TypeError):
        graphfix.verify(FIXED, step=2)  # a misspelt option is an error, not ignored


def test_verify_refuses_what_the_command_line_refuses():
    said = run_cli("verify", FIXED, "--steps", "0", check_exit=2).stderr
    assert said == "graphfix: error: --steps must be at least 1, not 0\n"
    with pytest.raises(graphfix.VerifyError, match=r"^steps must be at least 1, not 0$"):
        graphfix.verify(FIXED, steps=0)
    with pytest.raises(graphfix.VerifyError, match="nope"):
        graphfix.verify(FIXED, fetches=["nope:0"])
    with pytest.raises(graphfix.UsageError, match="tolerance"):
        graphfix.verify(FIXED, tolerance=-1.0)
    with pytest.raises(graphfix.UsageError, match="target_devices"):
        graphfix.verify(FIXED, target_devices=["/tpu:0"])


def test_trace_refuses_what_the_command_line_refuses(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('never run')\n")
    with pytest.raises(graphfix.UsageError, match="runs must be at least 1, not 0"):
        graphfix.trace(script, runs=0)
    with pytest.raises(graphfix.UsageError, match="timeout"):
        graphfix.trace(script, timeout=0)
    with pytest.raises(graphfix.UsageError, match="args must be a list"):
        graphfix.trace(script, "--gpus 2")


def test_the_module_docstrings_fix_source_example_is_what_it_returns():
    [example] = [line for line in graphfix.__doc__.splitlines() if "fix_source(" in line]
    assert example.split("=")[0].split() == ["new_code,", "findings"]
    new_code, findings = graphfix.fix_source(
        "import tensorflow as tf\ninit = tf.initialize_all_variables()\n")
    assert new_code.endswith("tf.global_variables_initializer()\n")
    assert [type(f) for f in findings] == [graphfix.Finding]
