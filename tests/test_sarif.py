"""SARIF as GitHub code scanning and SARIF viewers read it: files named relative to a base
the run gives (`%SRCROOT%`), percent-encoded; a finding that keeps its identity across
commits (`partialFingerprints`); each rule's `helpUri` a page of the repository the package
names. (Measured against the official 2.1.0 schema when changed; see the CHANGELOG.)"""

from __future__ import annotations

import json
import tomllib
import urllib.parse
from pathlib import Path

from conftest import FIXTURES, REPO, run_cli

SOURCE = ("import tensorflow as tf\nwith tf.device('/gpu:0'):\n    d = tf.Variable(2)\n"
          "init = tf.initialize_all_variables()\n")
SEED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"


def _sarif(*args, cwd) -> dict:
    return json.loads(run_cli("check", "--no-cache", *args, "--format", "sarif", cwd=cwd,
                              check_exit=1).stdout)


def _located(run: dict, result: dict) -> Path:
    """The file a result names, resolved as a SARIF reader resolves it."""
    location = result["locations"][0]["physicalLocation"]["artifactLocation"]
    uri = location["uri"]
    if "uriBaseId" in location:
        uri = run["originalUriBaseIds"][location["uriBaseId"]]["uri"] + uri
    parsed = urllib.parse.urlsplit(uri)
    assert parsed.scheme == "file"
    return Path(urllib.parse.unquote(parsed.path))


def test_files_are_percent_encoded_references_to_the_runs_base(tmp_path):
    project, elsewhere = tmp_path / "proj", tmp_path / "else where"
    (project / "sp ace").mkdir(parents=True)
    elsewhere.mkdir()
    inside, outside = project / "sp ace" / "my train.py", elsewhere / "b.py"
    inside.write_text(SOURCE)
    outside.write_text(SOURCE)
    doc = _sarif("sp ace/my train.py", outside, cwd=project)
    [run] = doc["runs"]
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": project.as_uri() + "/"}}
    locations = [r["locations"][0]["physicalLocation"]["artifactLocation"]
                 for r in run["results"]]
    assert {"uri": "sp%20ace/my%20train.py", "uriBaseId": "%SRCROOT%"} in locations
    # a file outside the base: an absolute file URI, with no base to resolve it against
    assert {"uri": outside.as_uri()} in locations
    assert {_located(run, r) for r in run["results"]} == {inside, outside}
    # an absolute path inside the base is named relative to it, as a relative one is
    again = _sarif(inside, cwd=project)["runs"][0]["results"]
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in again} == {"sp%20ace/my%20train.py"}
    # a fix's file is the result's
    for result in run["results"]:
        for fix in result.get("fixes", []):
            [change] = fix["artifactChanges"]
            assert change["artifactLocation"] == result["locations"][0][
                "physicalLocation"]["artifactLocation"]


def _fingerprints(doc: dict) -> dict[tuple[str, int], str]:
    return {(r["ruleId"], r["locations"][0]["physicalLocation"].get("region", {})
             .get("startLine", 0)): r["partialFingerprints"]["graphfix/v1"]
            for r in doc["runs"][0]["results"]}


def test_a_finding_keeps_its_fingerprint_when_lines_above_it_move(tmp_path):
    source = tmp_path / "train.py"
    source.write_text(SOURCE)
    before = _fingerprints(_sarif("train.py", cwd=tmp_path))
    assert set(before) == {("variables-to-cpu", 3), ("deprecated-initializers", 4)}
    # the next commit: lines added above, another copy of the deprecated call below
    source.write_text("# a comment\n\n" + SOURCE + "again = tf.initialize_all_variables()\n")
    after = _fingerprints(_sarif("train.py", cwd=tmp_path))
    assert after[("variables-to-cpu", 5)] == before[("variables-to-cpu", 3)]
    assert after[("deprecated-initializers", 6)] == before[("deprecated-initializers", 4)]
    assert after[("deprecated-initializers", 7)] not in before.values()  # a new finding
    assert len(set(after.values())) == len(after)
    # the same statement twice is two findings, told apart
    source.write_text(SOURCE + "init = tf.initialize_all_variables()\n")
    twice = _fingerprints(_sarif("train.py", cwd=tmp_path))
    assert twice[("deprecated-initializers", 4)] == before[("deprecated-initializers", 4)]
    assert twice[("deprecated-initializers", 5)] != twice[("deprecated-initializers", 4)]


def test_a_graph_finding_is_fingerprinted_by_its_node(tmp_path):
    (tmp_path / "model.pbtxt").write_bytes(SEED.read_bytes())
    (tmp_path / "copy.pbtxt").write_bytes(SEED.read_bytes())
    doc = _sarif("model.pbtxt", "copy.pbtxt", "--only", "variables-to-cpu", cwd=tmp_path)
    results = doc["runs"][0]["results"]
    assert [r["locations"][0]["logicalLocations"][0]["name"] for r in results] == ["d", "d"]
    first, second = (r["partialFingerprints"]["graphfix/v1"] for r in results)
    assert first != second  # (same node, another file)
    again = _sarif("model.pbtxt", "--only", "variables-to-cpu", cwd=tmp_path)
    assert again["runs"][0]["results"][0]["partialFingerprints"]["graphfix/v1"] == first


def test_help_uri_is_the_transforms_page_in_the_repository_the_package_names(tmp_path):
    from graphfix.findings import REPOSITORY

    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    assert urls["Repository"] == REPOSITORY
    (tmp_path / "train.py").write_text(SOURCE)
    driver = _sarif("train.py", cwd=tmp_path)["runs"][0]["tool"]["driver"]
    assert driver["informationUri"] == REPOSITORY
    for rule in driver["rules"]:
        prefix = f"{REPOSITORY}/blob/main/"
        assert rule["helpUri"] == f"{prefix}docs/transforms/{rule['id']}.md"
        assert (REPO / rule["helpUri"].removeprefix(prefix)).is_file(), rule["helpUri"]
