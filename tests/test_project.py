"""The project model: facts follow imports and calls between the files of a run, and
nothing else. Small projects under fixtures/source/project/, checked with the CLI as a user
would; every source fixture checked together and one by one gives the same findings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from graphfix import registry
from graphfix.driver import Selected, run

from conftest import FIXTURES, expected_findings, run_cli

PROJECTS = FIXTURES / "source" / "project"


def _check(*paths, cwd=None) -> list[dict]:
    """The findings of `graphfix check PATHS --format json`."""
    result = run_cli("check", *paths, "--no-cache", "--format", "json", cwd=cwd)
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    assert not report["failed"], report["failed"]
    return report["findings"]


def _marked(folder: Path) -> list[tuple[str, int]]:
    """(file, line) of every `# expect: error` marker of a folder's files."""
    return sorted((p.relative_to(folder).as_posix(), mark.line)
                  for p in folder.rglob("*.py") for mark in expected_findings(p.read_text()))


def _found(findings: list[dict], root: Path) -> list[tuple[str, int]]:
    return sorted((Path(f["path"]).resolve().relative_to(root.resolve()).as_posix(), f["line"])
                  for f in findings)


@pytest.mark.parametrize("name, transform", [
    ("package_model", "update-ops"), ("library_train_op", "update-ops"),
    ("variables_through_calls", "variables-to-cpu"), ("feeds_across_modules", "feed-to-assign"),
    ("cluster_across_modules", "replica-placement"),
    ("methods_across_modules", "variables-to-cpu"),
    ("star_imports", "deprecated-initializers"),
])
def test_facts_follow_imports_and_calls_and_the_fix_lands_where_the_finding_is(
        name: str, transform: str, tmp_path: Path):
    """update-ops: a batch norm two calls deep in a package (`from nets import build_model`,
    a relative import, a re-export) reaches the train script's train op; a train-op helper
    of a library gets the batch norm of the script that calls it (slim's barrier form in the
    same library is clean). variables-to-cpu: variables two calls below a GPU scope, in one
    file and in an imported model module (a `_variable_on_cpu` helper is clean); TF's alias
    imported from a helper module; methods: `self.build_model` inherited from a base class
    two modules away (extended through `super()`), a metric's local variables, a method of
    an instance the function makes, a class whose constructor builds (a base's method that
    places its own, and one that makes none, are clean). deprecated-initializers: TF's
    module reaching a model only through two star imports (a parameter of the old name is
    no TF name). feed-to-assign: a feed key bound in another module, a
    variable in a namedtuple field. replica-placement: a worker's variables under its own
    scope, the cluster made in a module it imports (a script beside them that imports
    neither is clean). `fix` edits the files with findings, and only them."""
    case = PROJECTS / name
    work = tmp_path / name
    shutil.copytree(case / "before", work)
    marked = _marked(work)
    assert marked and _found(_check(work), work) == marked
    assert {f["transform"] for f in _check(work)} == {transform}
    result = run_cli("fix", work, "--no-cache", "--only", transform, "--format", "json")
    assert result.returncode == 1, result.stderr  # changed
    assert json.loads(result.stdout)["summary"]["files_changed"] == len({f for f, _ in marked})
    for path in sorted((case / "after").rglob("*.py")):
        relative = path.relative_to(case / "after")
        assert (work / relative).read_text() == path.read_text(), relative
    assert _check(work) == []


def test_a_batch_norm_module_nobody_imports_reaches_no_train_op():
    folder = PROJECTS / "unimported_bn"
    assert _check(folder) == []
    assert _check(folder / "train.py") == []


def test_independent_scripts_in_one_folder_keep_their_facts_apart():
    """Six scripts, two with batch norms (one run correctly, one with its updates in
    place): no train op of the others needs update ops, together or alone."""
    folder = PROJECTS / "independent_scripts"
    assert _check(folder) == []
    for script in sorted(folder.glob("*.py")):
        assert _check(script) == [], script.name


def _runs_of_fixtures() -> list[Path]:
    """Every source fixture as the unit it is checked as: a file, or a folder of files
    checked together (multi-file cases, the projects)."""
    runs = []
    for transform in ("feed_to_assign", "replica_placement", "update_ops", "variables_to_cpu"):
        for case in sorted((FIXTURES / transform / "source").iterdir()):
            if (case / "before.py").is_file():
                runs.append(case / "before.py")
            elif (case / "before").is_dir():
                runs.append(case / "before")
    for project in sorted(p for p in PROJECTS.iterdir() if p.is_dir()):
        runs.append(project / "before" if (project / "before").is_dir() else project)
    return runs


def test_findings_do_not_depend_on_what_else_is_in_the_run(tmp_path: Path):
    """Run-independence: every source fixture and the independent scripts, checked all in
    one run, give exactly the findings each gives checked on its own."""
    tree = tmp_path / "all"
    alone = []
    for number, unit in enumerate(_runs_of_fixtures()):
        target = tree / f"{number:03d}_{unit.parent.name}"
        if unit.is_dir():
            shutil.copytree(unit, target)
            alone.append(target)
        else:
            target.mkdir(parents=True)
            shutil.copy(unit, target / unit.name)
            alone.append(target / unit.name)
    together = _check(tree)
    assert together  # the fixtures have findings: the comparison compares something
    # (one by one through the runner itself, in this process: the same code as the CLI's)
    selected = Selected.build(registry.select(None), {})
    one_by_one = []
    for target in alone:
        report, _ = run([str(target)], selected, fix=False)
        assert not report.failed, report.failed
        one_by_one.extend(f.to_json() for f in report.findings)

    def key(finding):
        return (finding["path"], finding["line"], finding["col"], finding["transform"],
                finding["message"])

    assert sorted(map(key, together)) == sorted(map(key, one_by_one))


def test_parts_held_packed_join_as_the_decoded_parts_do():
    """The run's process holds every file's part packed (`PackedParts`): the closures, the
    digests a cached result depends on and the parts each file's worker is sent are those
    of the decoded parts, and the worker's model decodes them as they were."""
    from graphfix.source.project import PackedParts, Project, pack_part, part_of_code

    files = sorted(PROJECTS.rglob("*.py"))
    parts = {str(path): part_of_code(path.read_text()) for path in files}
    assert len(parts) > 5 and all(parts.values())
    decoded = Project(parts)
    packed = Project(PackedParts({label: pack_part(part) for label, part in parts.items()}))
    for label in parts:
        assert packed.closure(label) == decoded.closure(label), label
        assert packed.context_digest(label) == decoded.context_digest(label), label
        sent = packed.subproject(label)
        assert isinstance(sent, PackedParts)
        assert sent.unpacked() == json.loads(json.dumps(decoded.subproject(label))), label
