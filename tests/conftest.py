"""Shared test helpers: running the CLI as a user does, and the fixture folders."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"


def run_cli(*args, cwd=None, check_exit=None) -> subprocess.CompletedProcess:
    """Run `python -m graphfix ARGS` in a fresh process, as a user would."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
    result = subprocess.run(
        [sys.executable, "-m", "graphfix", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd or REPO / "tests",
        env=env,
        timeout=300,
    )
    if check_exit is not None:
        assert result.returncode == check_exit, (result.stdout, result.stderr)
    return result


def error_lines(stderr: str) -> list[str]:
    """stderr without TF's own start-up chatter (absl, cuda probes)."""
    noise = ("WARNING: All log messages", "I0000", "W0000", "E0000", "cuda", "To enable")
    return [ln for ln in stderr.splitlines() if ln.strip() and not any(n in ln for n in noise)]


@pytest.fixture
def tf():
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    return tf
