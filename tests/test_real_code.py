"""Patterns learned from real TF1 training code (issue 18's corpus, fixtures/real_code/
manifest.json): each a tiny project written here, in fixtures/real_code/patterns/<name>/,
with expected.json naming the findings a correct tool gives (file, line, transform; an
empty list: none). Checked with the CLI over the whole folder, as a user runs it. The
patterns graphfix gets wrong today are strict xfails naming what it does instead; they
flip when the project model lands."""

from __future__ import annotations

import json
import re

import sys

import pytest

from conftest import FIXTURES, run_cli

sys.path.insert(0, str(FIXTURES / "bench"))
from source_corpus import BLIND_PARTS, PARTS, TRANSFORMS  # noqa: E402  (how the corpus is labelled)

MANIFEST = FIXTURES / "real_code" / "manifest.json"
PATTERNS = FIXTURES / "real_code" / "patterns"

# What graphfix does with each pattern today, where that is wrong.
WRONG_TODAY: dict[str, str] = {}


def _pattern_names() -> list[str]:
    return sorted(p.name for p in PATTERNS.iterdir() if (p / "expected.json").is_file())


def _cases():
    for name in _pattern_names():
        marks = ([pytest.mark.xfail(strict=True, reason=WRONG_TODAY[name])]
                 if name in WRONG_TODAY else [])
        yield pytest.param(name, marks=marks, id=name)


def test_the_corpus_manifest_names_every_file_and_labels_it():
    """Issue 18's floor (15 repositories, 50 files), and per file a full commit and a
    label with its reason for every transform."""
    files = json.loads(MANIFEST.read_text())["files"]
    assert len(files) >= 50
    assert len({f["repo"] for f in files}) >= 15
    keys = [(f["repo"], f["commit"], f["path"]) for f in files]
    assert len(set(keys)) == len(keys)
    for entry in files:
        assert re.fullmatch(r"[0-9a-f]{40}", entry["commit"]), entry
        assert set(entry["labels"]) == set(TRANSFORMS), entry["path"]
        for label in entry["labels"].values():
            assert label["reason"].strip(), entry["path"]
            assert all(isinstance(line, int) and line > 0 for line in label["lines"])


def test_issue_36s_entries_say_their_part_and_source():
    """Issue 36's real positives: each later entry names its part (a fixing commit, an issue
    thread, read, or held out: labelled after the rules were tuned, or blind) and where it
    came from; each held-out part is at least ten files; a label corrected after a run says
    so."""
    files = json.loads(MANIFEST.read_text())["files"]
    parted = [f for f in files if "part" in f]
    assert {f["part"] for f in parted} <= set(PARTS) - {"issue-18"}
    assert all(f["source"].strip() for f in parted)
    for held_out in ("held-out", *BLIND_PARTS):
        assert sum(f["part"] == held_out for f in parted) >= 10, held_out
    positives = [(f["path"], line) for f in parted for label in f["labels"].values()
                 for line in label["lines"]]
    assert len(positives) >= 20
    for entry in files:
        if "label_corrected_after_run" in entry:
            assert entry["label_corrected_after_run"].strip(), entry["path"]


def test_every_pattern_is_collected():
    """A pattern folder without expected.json would silently test nothing; every name
    WRONG_TODAY lists is a real pattern."""
    folders = sorted(p.name for p in PATTERNS.iterdir() if p.is_dir())
    assert folders == _pattern_names()
    assert set(WRONG_TODAY) <= set(folders)


@pytest.mark.parametrize("name", _cases())
def test_pattern_gets_the_findings_a_correct_tool_gives(name):
    root = PATTERNS / name
    expected = {(f["file"], f["line"], f["transform"])
                for f in json.loads((root / "expected.json").read_text())["findings"]}
    result = run_cli("check", "--format", "json", "--no-cache", ".", cwd=root)
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    got = {(f["path"].removeprefix("./"), f["line"], f["transform"])
           for f in report["findings"] if f["transform"] in TRANSFORMS}
    assert got == expected
