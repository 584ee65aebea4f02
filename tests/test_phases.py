"""A long verify or trace shows its phases as it goes on a terminal (stderr a real
pseudo-terminal here), and nothing of them in a pipe."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import tempfile

from conftest import FIXTURES, REPO, run_cli

SEED_FIXED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "after.pbtxt"
SCRIPT = FIXTURES / "trace" / "feed_variable.py"  # two session runs, then a train op
# A terminal's control sequences (colours, cursor moves): what rich redraws a line with.
CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _on_a_terminal(*args) -> tuple[int, str, str]:
    """Run `python -m graphfix ARGS` with stderr a pseudo-terminal, as a person at a shell
    sees it, and stdout a file: (exit code, stdout, what the terminal showed)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore",
           "PYTHONPATH": str(REPO), "TERM": "xterm-256color", "COLUMNS": "120"}
    main, terminal = pty.openpty()
    with tempfile.TemporaryFile() as stdout:
        child = subprocess.Popen([sys.executable, "-m", "graphfix", *map(str, args)],
                                 stdout=stdout, stderr=terminal, stdin=subprocess.DEVNULL,
                                 cwd=REPO / "tests", env=env)
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(main, 1 << 16)
            except OSError:  # (Linux: EIO once the child's end is closed)
                break
            if not chunk:
                break
            shown += chunk
        os.close(main)
        code = child.wait(timeout=300)
        stdout.seek(0)
        return code, stdout.read().decode(), shown.decode("utf-8", "replace")


def _phases(shown: str) -> list[str]:
    """The phases a terminal showed, in order, each once (a redraw repeats its line)."""
    out: list[str] = []
    for line in re.split(r"[\r\n]", CONTROL.sub("", shown)):
        match = re.search(r"((?:verify|trace): .+?)\s+\d+:\d\d:\d\d", line)
        if match and (not out or out[-1] != match.group(1)):
            out.append(match.group(1))
    return out


def test_verify_shows_its_phases_in_order_on_a_terminal():
    code, stdout, shown = _on_a_terminal("verify", SEED_FIXED, "--steps", "2")
    assert code == 0, (stdout, shown)
    phases = _phases(shown)
    expected = ["verify: importing TensorFlow", "verify: checking placement",
                "verify: importing the graph", "verify: initializing", "verify: step 1 of 2",
                "verify: step 2 of 2"]
    assert [p for p in phases if p in expected] == expected, phases
    assert "pass  run: initialized, then 2 step(s) ran" in stdout
    assert "\x1b" not in stdout  # the verdict itself is plain text


def test_verify_of_a_script_shows_the_trace_then_the_verify_phases():
    code, stdout, shown = _on_a_terminal("verify", SCRIPT)
    assert code == 0, (stdout, shown)
    phases = _phases(shown)
    expected = ["trace: importing TensorFlow", f"trace: running {SCRIPT.name}",
                f"trace: session run 1 at {SCRIPT.name}:14",
                f"trace: session run 2 at {SCRIPT.name}:16",
                "verify: importing TensorFlow", "verify: importing the graph",
                "verify: step 1 of 1"]
    assert [p for p in phases if p in expected] == expected, phases


def test_no_phases_in_a_pipe():
    for args in (("verify", SEED_FIXED, "--steps", "2"), ("verify", SCRIPT)):
        result = run_cli(*args, check_exit=0)
        assert result.stderr == ""  # no phase, no control sequence
        assert "verify: step" not in result.stdout and "\x1b" not in result.stdout
