"""What the CLI prints: list, SARIF, diffs, dry runs."""

from __future__ import annotations

import json
import os

import pytest

from conftest import FIXTURES, run_cli
from graphfix import tf_runtime as _tensorflow

SEED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"


def test_list_shows_every_transform_with_surfaces():
    result = run_cli("list", check_exit=0)
    for name in ("variables-to-cpu", "update-ops", "feed-to-assign", "replica-placement"):
        assert name in result.stdout
    doc = json.loads(run_cli("list", "--format", "json", check_exit=0).stdout)
    by_name = {t["name"]: t for t in doc}
    assert by_name["variables-to-cpu"]["surfaces"] == ["graph", "source"]
    assert by_name["update-ops"]["params"][1]["choices"] == ["all", "first"]


def test_help_lists_every_command_and_each_command_its_options():
    top = run_cli("--help", check_exit=0, env={"COLUMNS": "60"}).stdout
    for command in ("list", "check", "fix", "verify", "demo"):
        assert f"    {command} " in top
    assert max(map(len, top.splitlines())) <= 60  # wrapped to $COLUMNS, as argparse does
    assert run_cli("--help", "fix", check_exit=0).stdout == run_cli("--help", check_exit=0).stdout
    fix = run_cli("fix", "--help", check_exit=0).stdout
    assert fix.startswith("usage: graphfix fix")
    for option in ("--only", "--set", "--in-place", "--diff", "--dry-run", "-o OUT"):
        assert option in fix
    verify = run_cli("verify", "--help", check_exit=0).stdout
    assert "--steps" in verify and "--in-place" not in verify
    # a command's options are its own: fix's are unknown to check
    result = run_cli("check", "x.pb", "--in-place", check_exit=2)
    assert result.stderr == ("graphfix: error: check: unrecognized arguments: --in-place "
                             "(see graphfix check --help)\n")


def test_sarif_has_rules_results_and_locations(tmp_path):
    source = tmp_path / "train.py"
    source.write_text("import tensorflow as tf\nwith tf.device('/gpu:0'):\n    d = tf.Variable(2)\n")
    result = run_cli("check", SEED, source, "--only", "variables-to-cpu", "--format", "sarif",
                     check_exit=1)
    doc = json.loads(result.stdout)
    assert doc["version"] == "2.1.0" and doc["$schema"].endswith("sarif-2.1.0.json")
    run = doc["runs"][0]
    assert run["tool"]["driver"]["name"] == "graphfix"
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert "variables-to-cpu" in rule_ids
    [graph_result] = [r for r in run["results"] if "logicalLocations" in r["locations"][0]]
    [source_result] = [r for r in run["results"] if "logicalLocations" not in r["locations"][0]]
    assert graph_result["level"] == "error"
    assert graph_result["locations"][0]["logicalLocations"][0]["name"] == "d"
    region = source_result["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 3 and region["startColumn"] >= 1
    assert rule_ids[graph_result["ruleIndex"]] == graph_result["ruleId"]


def test_graph_diff_and_dry_run_write_nothing(tmp_path):
    target = tmp_path / "g.pbtxt"
    target.write_bytes(SEED.read_bytes())
    result = run_cli("fix", target, "--diff", "--only", "variables-to-cpu", check_exit=1)
    assert "~ d: device /device:GPU:0 -> /device:CPU:0" in result.stdout
    assert target.read_bytes() == SEED.read_bytes()
    dry = run_cli("fix", target, "--dry-run", "--only", "variables-to-cpu", "--format", "json",
                  check_exit=1)
    assert json.loads(dry.stdout)["summary"]["changes"] == 1
    assert target.read_bytes() == SEED.read_bytes()


def test_source_diff_is_unified(tmp_path):
    source = tmp_path / "train.py"
    text = "import tensorflow as tf\nwith tf.device('/gpu:0'):\n    d = tf.Variable(2)\n"
    source.write_text(text)
    result = run_cli("fix", source, "--diff", "--only", "variables-to-cpu", check_exit=1)
    assert f"--- {source}\n" in result.stdout and f"+++ {source}\n" in result.stdout
    relative = run_cli("fix", "train.py", "--diff", "--only", "variables-to-cpu", cwd=tmp_path,
                       check_exit=1)
    assert "--- a/train.py\n" in relative.stdout and "+++ b/train.py\n" in relative.stdout
    assert '+    with tf.device("/cpu:0"):' in result.stdout
    assert source.read_text() == text


def test_a_graph_run_under_a_profiler_still_writes_the_profile(tmp_path):
    """A graph run ends its process without teardown, but not under a profiler (or
    coverage), which writes its data as the program ends."""
    import subprocess
    import sys

    profile = tmp_path / "fix.prof"
    result = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", profile, "-m", "graphfix", "fix", SEED,
         "-o", tmp_path / "fixed.pbtxt"], capture_output=True, text=True, timeout=300)
    assert "1 change(s) in 1 file(s)" in result.stdout, result.stderr
    assert profile.stat().st_size > 0 and (tmp_path / "fixed.pbtxt").exists()


def test_tf_start_up_lines_stay_off_stderr():
    """Loading TF writes absl's and the CUDA stub's lines before its log level applies;
    a check that needs TF's kernel registry shows none of them (graphfix's default level
    is 2: no INFO, no WARNING)."""
    result = run_cli("check", SEED, "--target-devices", "/gpu:0", check_exit=1,
                     env={"TF_CPP_MIN_LOG_LEVEL": None})
    assert "Could not satisfy explicit device specification" in result.stdout
    assert result.stderr == ""


LOG = (b"WARNING: All log messages before absl::InitializeLog() is called are written to "
       b"STDERR\nI0000 00:00:1.5 1 cudart_stub.cc:31] no cuda\nW0000 00:00:1.5 1 a.cc:1] warn\n"
       b"E0000 00:00:1.5 1 b.cc:2] failed call to cuInit\nnot a log line\n")


@pytest.mark.parametrize("level, shown", [
    ("2", ["E0000 00:00:1.5 1 b.cc:2] failed call to cuInit", "not a log line"]),
    ("3", ["not a log line"]),
    ("0", LOG.decode().splitlines()),
])
def test_quiet_calls_hide_the_severities_the_level_hides(capfd, monkeypatch, level, shown):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", level)
    hidden = _tensorflow._hidden_severities()
    _tensorflow._quietly(lambda: os.write(2, LOG),
                         lambda line: (_tensorflow._severity(line) or "-") in hidden)
    assert capfd.readouterr().err.splitlines() == shown


def test_a_failing_quiet_call_shows_every_line(capfd):
    def fails():
        os.write(2, LOG)
        raise ImportError("no TF here")

    with pytest.raises(ImportError):
        _tensorflow._quietly(fails, lambda line: True)
    assert capfd.readouterr().err.splitlines() == LOG.decode().splitlines()
