"""The command line's help and shell completion, and what a graph run leaves unloaded."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import FIXTURES, run_cli

SEED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"


def test_top_help_lists_every_command_with_its_summary():
    top = run_cli("--help", check_exit=0).stdout
    assert top.startswith("usage: graphfix ")
    for command, summary in [("list", "List the transforms"), ("check", "Report findings"),
                             ("fix", "Apply fixes"), ("verify", "Re-import a graph"),
                             ("demo", "The seed bugs end to end"), ("trace", "Run a script")]:
        assert any(line.split()[1:3] == [command, summary.split()[0]]
                   for line in top.splitlines() if len(line.split()) > 2), (command, top)
    for option in ("--version", "--install-completion", "--show-completion"):
        assert option in top
    # no command: the same help, as a usage error (ruff's way): on stderr, exit 2
    alone = run_cli(check_exit=2)
    assert (alone.stdout, alone.stderr) == ("", top)


def test_check_help_lists_its_options_in_panels():
    shown = run_cli("check", "--help", check_exit=0, env={"COLUMNS": "100"}).stdout
    assert shown.startswith("usage: graphfix check")
    for option in ("--only NAME", "--set NAME.key=value", "--target-devices DEVICES",
                   "--format FORMAT", "--report FILE", "--exclude GLOB", "-j, --jobs N",
                   "--no-cache", "--cache-dir DIR", "-h, --help"):
        assert option in shown, option
    for panel in ("Arguments", "Transforms", "Output", "Sources"):
        assert f"╭─ {panel} " in shown, panel
    assert "text, json, sarif, github (Actions annotations) or junit" in shown
    assert "--in-place" not in shown  # fix's, not check's


def test_show_completion_prints_a_bash_script_that_completes_commands_and_options():
    script = run_cli("--show-completion", "bash", check_exit=0).stdout
    assert "_graphfix_completion()" in script and "complete " in script
    commands = run_cli(env={"_GRAPHFIX_COMPLETE": "complete_bash", "COMP_WORDS": "graphfix ch",
                            "COMP_CWORD": "1"}, check_exit=0).stdout
    assert commands.split() == ["check"]
    options = run_cli(env={"_GRAPHFIX_COMPLETE": "complete_bash",
                           "COMP_WORDS": "graphfix fix --dr", "COMP_CWORD": "2"},
                      check_exit=0).stdout
    assert options.split() == ["--dry-run"]


def test_show_completion_prints_the_script_of_the_shell_named():
    """Whatever shell runs graphfix (here: pytest, or make's sh), the shell named."""
    assert run_cli("--show-completion", "zsh", check_exit=0).stdout.startswith(
        "#compdef graphfix\n")
    assert "complete --command graphfix" in run_cli("--show-completion", "fish",
                                                    check_exit=0).stdout
    refused = run_cli("--show-completion", "sh", check_exit=2)
    assert refused.stderr == ("graphfix: error: argument --show-completion: invalid choice: "
                              "'sh' (choose from 'bash', 'zsh', 'fish', 'powershell', 'pwsh') "
                              "(see graphfix --help)\n")


def test_version():
    from graphfix import __version__

    assert run_cli("--version", check_exit=0).stdout == f"graphfix {__version__}\n"


def test_usage_errors_are_one_line_naming_the_command():
    for args, said in [
        (["nope"], "graphfix: error: argument COMMAND: invalid choice: 'nope' (choose from "
                   "'list', 'check', 'fix', 'verify', 'report', 'demo', 'trace') (see graphfix --help)"),
        (["check"], "graphfix: error: check: the following arguments are required: PATH "
                    "(see graphfix check --help)"),
        (["check", "x.pb", "--jobs", "0"], "graphfix: error: check: argument --jobs/-j: must "
                                           "be at least 1, not 0 (see graphfix check --help)"),
        (["check", "x.pb", "--only"], "graphfix: error: check: argument --only: expected one "
                                      "argument (see graphfix check --help)"),
        (["verify", "a.pb", "b.pb"], "graphfix: error: verify: unrecognized arguments: b.pb "
                                     "(see graphfix verify --help)"),
    ]:
        result = run_cli(*args, check_exit=2)
        assert (result.stdout, result.stderr) == ("", said + "\n"), args


@pytest.mark.both_installs  # (where TF is installed, a graph fix still leaves it unimported)
def test_a_graph_fix_loads_neither_pydantic_nor_rich(tmp_path):
    """typer would build a pydantic adapter per option and rich help panels; a run that only
    reads a graph and prints its changes needs neither (nor libcst, nor the TF runtime)."""
    script = textwrap.dedent(f"""
        import sys
        from graphfix.cli.main import main
        try:
            main(["fix", {str(SEED)!r}, "-o", {str(tmp_path / 'out.pbtxt')!r}])
        except SystemExit as stop:
            assert stop.code == 1, stop.code
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "rich", "libcst")
                     or m.startswith("tensorflow.python")))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-1] == "[]"
    assert (tmp_path / "out.pbtxt").exists()


def test_top_help_gives_each_commands_summary_as_a_whole_sentence():
    top = run_cli("--help", check_exit=0, env={"COLUMNS": "200"}).stdout
    rows = {line.split()[1]: " ".join(line.strip("│ ").split()[1:])
            for line in top.splitlines() if line.startswith("│    ")}
    assert rows["report"] == ("Write one self-contained HTML page for graphs (devices, moved "
                              "groups, cross-device edges, findings).")
    assert rows["trace"].endswith("(this runs the script's code).")
    assert all(summary.endswith(".") for summary in rows.values()), rows


def test_report_help_shows_o_as_the_page_and_required():
    shown = run_cli("report", "--help", check_exit=0, env={"COLUMNS": "100"}).stdout
    assert shown.startswith("usage: graphfix report -o FILE.html ")
    assert "where to write fixed graphs" not in shown
    assert "-o, --output FILE.html  the page to write (required)" in shown
    missing = run_cli("report", str(SEED), check_exit=2)
    assert missing.stderr == ("graphfix: error: report: the following arguments are required: "
                              "-o/--output (see graphfix report --help)\n")


def test_report_of_a_python_file_says_what_to_do_instead(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import tensorflow as tf\n")
    page = tmp_path / "r.html"
    done = run_cli("report", script, "-o", page, check_exit=2)
    assert done.stderr.startswith(f"graphfix: error: {script}: a Python script: report shows "
                                  "graphs")
    assert "graphfix trace" in done.stderr and "not a valid GraphDef" not in done.stderr
    assert not page.exists()
    shown = run_cli("report", "--help", check_exit=0, env={"COLUMNS": "100"}).stdout
    assert "Python files" not in shown


def test_verify_and_trace_show_the_scripts_arguments_as_optional():
    for command, operand in (("verify", "GRAPH"), ("trace", "SCRIPT")):
        usage = run_cli(command, "--help", check_exit=0).stdout.split("\n\n")[0]
        assert " ".join(usage.split()).endswith(f"[-h] {operand} [ARGS ...]"), usage
