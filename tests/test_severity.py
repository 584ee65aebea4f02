"""Severity on the command line: `--severity` (or `severity` in [tool.graphfix]) shows only
findings that severe or more, and the exit code counts only what is shown."""

from __future__ import annotations

import json

from conftest import FIXTURES, error_lines, run_cli

ADAM = FIXTURES / "variables_to_cpu" / "adam_ref" / "before.pbtxt"  # an int32 step, float weights
# One GPU: its float weights are a warning only where every GPU variable is asked about.
EVERY = ("--only", "variables-to-cpu", "--set", "variables-to-cpu.scope=every-gpu-variable")


def _findings(result) -> list[tuple[str, str]]:
    return [(f["node"], f["severity"]) for f in json.loads(result.stdout)["findings"]]


def test_severity_filters_what_is_shown_and_what_counts(tmp_path):
    every = run_cli("check", ADAM, *EVERY, "--format", "json")
    assert every.returncode == 1
    assert _findings(every) == [("global_step", "error"), ("w", "warning")]
    errors = run_cli("check", ADAM, *EVERY, "--format", "json",
                     "--severity", "error")
    assert errors.returncode == 1 and _findings(errors) == [("global_step", "error")]

    fixed = tmp_path / "fixed.pbtxt"
    run_cli("fix", ADAM, "--only", "variables-to-cpu", "-o", fixed, "--set",
            "variables-to-cpu.scope=no-kernel", check_exit=1)
    # What is left are the float weights on the GPU: warnings, which an error filter hides.
    left = run_cli("check", fixed, *EVERY, "--format", "json")
    assert left.returncode == 1 and {s for _, s in _findings(left)} == {"warning"}
    quiet = run_cli("check", fixed, *EVERY, "--severity", "error")
    assert quiet.returncode == 0, quiet.stdout
    assert "0 finding(s)" in quiet.stdout

    sarif = json.loads(run_cli("check", ADAM, *EVERY, "--format",
                               "sarif").stdout)
    assert [r["level"] for r in sarif["runs"][0]["results"]] == ["error", "warning"]


def test_severity_from_the_config_and_bad_values(tmp_path):
    graph = tmp_path / "g.pbtxt"
    graph.write_bytes(ADAM.read_bytes())
    (tmp_path / "pyproject.toml").write_text('[tool.graphfix]\nseverity = "error"\n')
    configured = run_cli("check", graph, *EVERY, "--format", "json",
                         cwd=tmp_path)
    assert _findings(configured) == [("global_step", "error")]
    overridden = run_cli("check", graph, *EVERY, "--format", "json",
                         "--severity", "info", cwd=tmp_path)
    assert len(_findings(overridden)) == 2

    bad = run_cli("check", graph, "--severity", "loud", cwd=tmp_path)
    assert bad.returncode == 2
    assert error_lines(bad.stderr) == [
        "graphfix: error: --severity must be one of error, warning, info, not 'loud'"]
    (tmp_path / "pyproject.toml").write_text('[tool.graphfix]\nseverity = "loud"\n')
    bad = run_cli("check", graph, cwd=tmp_path)
    assert bad.returncode == 2
    [line] = error_lines(bad.stderr)
    assert "[tool.graphfix] severity must be one of error, warning, info, not 'loud'" in line
