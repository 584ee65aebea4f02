"""The GitHub Action (action.yml): its `run:` steps run here as the runner runs them (bash
-eo pipefail, each with the environment the action gives it, inputs through `env:`, a
GITHUB_OUTPUT and GITHUB_PATH file, `if:` conditions evaluated), on a small project with a
fixture source and graph. The one step that is another action (the upload to code
scanning) cannot run here: each run says how it went (`upload`), as its `outcome`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO

yaml = pytest.importorskip("yaml")

ACTION = yaml.safe_load((REPO / "action.yml").read_text())
SOURCE = ("import tensorflow as tf\nwith tf.device('/gpu:0'):\n    d = tf.Variable(2)\n"
          "init = tf.initialize_all_variables()\n")  # an error and a warning
SEED = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"  # an error
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
COMPARISON = re.compile(r"(\S+) (==|!=) '([^']*)'")


class Runner:
    """The steps of action.yml run in order, as GitHub's runner runs a composite action."""

    def __init__(self, workspace: Path, temp: Path, python_path: Path):
        self.workspace, self.temp, self.python_path = workspace, temp, python_path
        self.path_file = temp / "github_path"
        self.path_file.touch()

    def value(self, expression: str, inputs: dict, steps: dict) -> str:
        kind, _, rest = expression.partition(".")
        if kind == "inputs":
            return inputs[rest]
        if kind == "steps":
            step, _, field = rest.partition(".")
            if field == "outcome":
                return steps.get(step, {}).get("outcome", "skipped")
            return steps.get(step, {}).get("outputs", {}).get(field.removeprefix("outputs."), "")
        raise AssertionError(f"an expression this runner does not know: {expression}")

    def condition(self, text: str, inputs: dict, steps: dict) -> bool:
        """`if:` as action.yml writes it: comparisons joined by `||`."""
        terms = []
        for term in text.split("||"):
            match = COMPARISON.fullmatch(term.strip())
            assert match, f"an `if:` this runner does not know: {text}"
            left, op, right = match.groups()
            terms.append((self.value(left, inputs, steps) == right) == (op == "=="))
        return any(terms)

    def run(self, given: dict, *, upload: str, only: set[str] | None = None) -> dict:
        """Each step's outcome, outputs and output; `upload`: the upload step's outcome
        (`success`, `failure`) where its `if:` lets it run."""
        inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
        inputs.update(given)
        steps: dict[str, dict] = {}
        for step in ACTION["runs"]["steps"]:
            key = step["id"]
            if only is not None and key not in only and "run" in step:
                continue
            if "if" in step and not self.condition(step["if"], inputs, steps):
                steps[key] = {"outcome": "skipped"}
                continue
            if "uses" in step:
                assert step["uses"].startswith("github/codeql-action/upload-sarif@")
                steps[key] = {"outcome": upload}
                continue
            if any(s.get("outcome") == "failure" for s in steps.values()
                   if s is not steps.get("upload")):
                steps[key] = {"outcome": "skipped"}  # (a failed step ends the action)
                continue
            steps[key] = self._run_step(step, inputs, steps)
        return steps

    def _run_step(self, step: dict, inputs: dict, steps: dict) -> dict:
        assert step["shell"] == "bash" and not EXPRESSION.search(step["run"]), step["name"]
        output = self.temp / "github_output"
        output.write_text("")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PYTHON"))}
        added = [line for line in self.path_file.read_text().splitlines() if line]
        env.update({
            "GITHUB_ACTION_PATH": str(REPO), "GITHUB_OUTPUT": str(output),
            "GITHUB_PATH": str(self.path_file), "GITHUB_WORKSPACE": str(self.workspace),
            "RUNNER_TEMP": str(self.temp), "PATH": os.pathsep.join([*added, env["PATH"]]),
            # the packages graphfix needs, as the runner's Python would have them
            "PYTHONPATH": str(self.python_path), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "TF_CPP_MIN_LOG_LEVEL": "3",
        })
        for name, value in (step.get("env") or {}).items():
            env[name] = EXPRESSION.sub(lambda m: self.value(m.group(1), inputs, steps),
                                       str(value))
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               step["run"]], cwd=self.workspace, env=env, capture_output=True,
                              text=True, timeout=600)
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if line)
        return {"outcome": "success" if done.returncode == 0 else "failure",
                "code": done.returncode, "outputs": outputs, "stdout": done.stdout,
                "stderr": done.stderr}


def _dependencies(folder: Path) -> Path:
    """This environment's installed packages, graphfix's own install left out (the action
    installs graphfix itself)."""
    folder.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        if not entry.name.startswith(("graphfix", "_editable_impl", "__editable__")) and \
                entry.suffix != ".pth":
            (folder / entry.name).symlink_to(entry)
    return folder


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    """A workspace with a fixture source and graph, and graphfix installed by the action's
    install step (once: each test runs the steps after it)."""
    root = tmp_path_factory.mktemp("action")
    workspace, temp = root / "workspace", root / "runner_temp"
    (workspace / "src").mkdir(parents=True)
    temp.mkdir()
    (workspace / "src" / "train.py").write_text(SOURCE)
    (workspace / "model.pbtxt").write_bytes(SEED.read_bytes())
    runner = Runner(workspace, temp, _dependencies(root / "site"))
    install = runner.run({"python": sys.executable}, upload="skipped",
                         only={"install"})["install"]
    assert install["outcome"] == "success", install["stderr"]
    [venv_bin] = runner.path_file.read_text().split()
    assert (Path(venv_bin) / "graphfix").exists()
    return runner


STEPS = {"check", "annotate", "fail"}  # (the install ran once: `runner`)


def test_default_inputs_check_write_sarif_annotate_and_fail(runner):
    steps = runner.run({}, upload="failure", only=STEPS)  # (no security-events permission)
    check = steps["check"]
    assert check["outcome"] == "success", check["stderr"]
    # (a directory gives its sources: the graph is checked where it is named, below)
    assert check["outputs"]["findings"] == "2" and check["outputs"]["failing"] == "2"
    sarif = json.loads(Path(check["outputs"]["sarif-file"]).read_text())
    results = sarif["runs"][0]["results"]
    assert sorted(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                  for r in results) == ["src/train.py", "src/train.py"]
    assert sarif["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == \
        runner.workspace.as_uri() + "/"
    annotate, fail = steps["annotate"], steps["fail"]
    assert annotate["outcome"] == "success", annotate["stderr"]
    commands = [line for line in annotate["stdout"].splitlines() if line.startswith("::")]
    assert sorted(line.split(" ")[0] for line in commands) == ["::error", "::warning"]
    assert any(line.startswith("::error file=src/train.py,line=3,col=9,") for line in commands)
    assert fail["outcome"] == "failure"
    assert fail["stdout"] == "graphfix: 2 finding(s) at least as severe as info\n"


def test_inputs_select_transforms_severity_and_what_fails(runner):
    steps = runner.run({"paths": "src\nmodel.pbtxt", "transforms": "deprecated-initializers",
                        "fail-on": "error", "upload-sarif": "false",
                        "target-devices": "/gpu:0"}, upload="success", only=STEPS)
    check = steps["check"]
    assert check["outcome"] == "success", check["stderr"]
    assert (check["outputs"]["findings"], check["outputs"]["failing"]) == ("1", "0")
    assert steps["upload"]["outcome"] == "skipped"  # upload-sarif: false
    annotate = steps["annotate"]
    assert [line.split(" ")[0] for line in annotate["stdout"].splitlines()
            if line.startswith("::")] == ["::warning"]
    assert steps["fail"]["outcome"] == "success"  # a warning: not as severe as error
    errors_only = runner.run({"paths": "src model.pbtxt", "severity": "error",
                              "fail-on": "warning"}, upload="success", only=STEPS)
    assert errors_only["check"]["outputs"]["findings"] == "2"
    assert errors_only["annotate"]["outcome"] == "skipped"  # uploaded: no annotations needed
    assert errors_only["fail"]["outcome"] == "failure"


def test_a_bad_input_fails_the_check_in_one_line(runner):
    steps = runner.run({"fail-on": "sometimes"}, upload="success", only=STEPS)
    assert steps["check"]["code"] == 2
    assert steps["check"]["stdout"].startswith("::error title=graphfix::fail-on must be")
    assert steps["fail"]["outcome"] == "skipped"
    unknown = runner.run({"transforms": "nope"}, upload="success", only=STEPS)
    assert unknown["check"]["code"] == 2
    assert unknown["check"]["stderr"].startswith("graphfix: error: unknown transform 'nope'")
