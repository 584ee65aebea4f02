"""Every source fixture case of every transform, run the same way: a transform adds cases
(folders), not tests.

A case is fixtures/<transform>/source/<case>/ (`conftest.source_cases`): before.py and
after.py, identical for `noop_*` cases, or before/ and after/ folders of files fixed together
as one run (a fact of one file, a batch norm or a reusing scope, counts where another file
uses it); an optional case.json gives its settings. A line of an input marked
`# expect: error|warning [unfixable] [col N]` (several joined by commas) is where a finding
must be, of that severity (at that column), fixed unless `unfixable`, and nowhere else.

For each case: `fix` gives after.py, with the marked findings; `check` finds the same; the
fix is idempotent (what is left is the unfixable findings, nothing else); the fix adds no
dependency on graphfix. What a transform's messages say is that transform's own test.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import graphfix
from graphfix import registry
from graphfix.driver import Selected, run, write_outputs

from conftest import (FIXTURES, case_settings, expected_findings, source_cases,
                      transform_of_case)

CASES = source_cases()


def _case_id(case: Path) -> str:
    return f"{case.parent.parent.name}/{case.name}"


def _marked(code: str) -> list[tuple[int, str, bool, int | None]]:
    """(line, severity, fixable, column or None) of every `# expect:` marker of `code`."""
    return [(e.line, e.severity, e.fixable, e.col) for e in expected_findings(code)]


def _found(findings, code: str) -> list[tuple[int, str, bool, int | None]]:
    """The findings as `_marked` says them: the column where the line's marker gives one."""
    columns = {e.line for e in expected_findings(code) if e.col is not None}
    return [(f.line, f.severity, f.fixable, f.col if f.line in columns else None)
            for f in findings]


def _unfixable(marks: list) -> list:
    return [m for m in marks if not m[2]]


def _single_file(case: Path, name: str, settings: dict) -> None:
    before = (case / "before.py").read_text()
    after = (case / "after.py").read_text()
    fixed, findings = graphfix.fix_source(before, only=[name], settings=settings)
    assert fixed == after
    assert _found(findings, before) == _marked(before), [f.to_text() for f in findings]
    assert graphfix.check_source(before, only=[name], settings=settings) == findings
    refixed, left = graphfix.fix_source(after, only=[name], settings=settings)
    assert refixed == after  # idempotent
    # What is left after the fix: the unfixable findings, nothing else.
    assert _found(left, after) == _unfixable(_marked(after))
    if case.name.startswith("noop_"):
        assert after == before and not _marked(before)
    assert after.count("graphfix") == before.count("graphfix")  # the fix needs TF only


def _tree(case: Path, name: str, settings: dict, tmp_path: Path) -> None:
    """The files of before/ checked and fixed as one run of the runner, into after/."""
    work = tmp_path / case.name
    shutil.copytree(case / "before", work)
    names = sorted(p.name for p in work.glob("*.py"))
    selected = Selected.build(registry.select([name]), settings)

    def marked(folder: Path) -> list:
        return sorted((n, *m) for n in names for m in _marked((folder / n).read_text()))

    def found(report) -> list:
        assert not report.failed and not report.skipped, (report.failed, report.skipped)
        by_file: dict[str, list] = {}
        for f in report.findings:
            by_file.setdefault(Path(f.path).name, []).append(f)
        return sorted((n, *m) for n, fs in by_file.items()
                      for m in _found(fs, (work / n).read_text()))

    expected = marked(case / "before")
    assert expected and found(run([str(work)], selected, fix=False)[0]) == expected
    report, outputs = run([str(work)], selected, fix=True)
    assert found(report) == expected
    changed = {n for n in names
               if (case / "before" / n).read_bytes() != (case / "after" / n).read_bytes()}
    assert {Path(o.target).name for o in outputs} == changed
    write_outputs(outputs)
    for n in names:
        assert (work / n).read_text() == (case / "after" / n).read_text(), n
    left = found(run([str(work)], selected, fix=False)[0])
    # (a tree's marks lead with the file's name: (name, line, severity, fixable, col))
    assert left == [m for m in marked(case / "after") if not m[3]]
    again, outputs = run([str(work)], selected, fix=True)
    assert outputs == [] and again.changes == []  # idempotent


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_source_case(case: Path, tmp_path: Path):
    name, settings = transform_of_case(case), case_settings(case)
    if (case / "before").is_dir():
        _tree(case, name, settings, tmp_path)
    else:
        _single_file(case, name, settings)


def test_every_transform_with_a_source_surface_has_fixtures():
    folders = {transform_of_case(c) for c in CASES}
    source_transforms = {name for name, t in graphfix.all_transforms().items()
                         if "source" in t.surfaces()}
    assert source_transforms <= folders, source_transforms - folders
    assert folders <= set(graphfix.all_transforms()), folders - set(graphfix.all_transforms())
    assert (FIXTURES / "update_ops" / "source" / "multi_file") in CASES
