"""Every registered source rule's own examples (its class's `VALID` and `INVALID`, as Fixit
does), each a test: the code in a file of its own, checked and fixed with that transform
alone, as `graphfix check`/`graphfix fix --only NAME` would."""

from __future__ import annotations

import textwrap

import pytest

from graphfix import registry
from graphfix.driver import Selected, run


def _examples():
    for transform in registry.all_transforms().values():
        if transform.codemod is None:
            continue
        codemod = transform.source_codemod()
        for number, code in enumerate(codemod.VALID):
            yield pytest.param(transform, "valid", code, id=f"{transform.name}-valid-{number}")
        for number, example in enumerate(codemod.INVALID):
            yield pytest.param(transform, "invalid", example,
                               id=f"{transform.name}-invalid-{number}")


def _run(transform, path, *, fix: bool):
    report, outputs = run([str(path)], Selected.build([transform], {}), fix=fix)
    assert not report.failed and not report.skipped, (report.failed, report.skipped)
    return report.findings, outputs


def test_every_built_in_rule_has_examples_of_both_kinds():
    for transform in registry.all_transforms().values():
        if transform.codemod is not None and transform.__module__.startswith("graphfix."):
            codemod = transform.source_codemod()
            assert codemod.VALID and codemod.INVALID, transform.name


@pytest.mark.parametrize("transform, kind, example", list(_examples()))
def test_rule_example(tmp_path, transform, kind, example):
    path = tmp_path / "example.py"
    if kind == "valid":
        path.write_text(textwrap.dedent(example).lstrip("\n"))
        findings, _ = _run(transform, path, fix=False)
        assert findings == [], [f.message for f in findings]
        return
    path.write_text(example.code)
    findings, _ = _run(transform, path, fix=False)
    assert findings, "no finding"
    assert all(f.transform == transform.name for f in findings)
    assert example.says in findings[0].message
    _, outputs = _run(transform, path, fix=True)
    if example.fixed is None:
        assert outputs == [] and not any(f.fixable for f in findings)
        return
    assert [o.data.decode() for o in outputs] == [example.fixed]
    path.write_text(example.fixed)  # fixed once and for all: a second fix finds nothing to do
    findings, outputs = _run(transform, path, fix=True)
    assert outputs == [] and not any(f.fixable for f in findings)
