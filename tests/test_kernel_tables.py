"""The kernel tables graphfix ships per TensorFlow version (graphfix/graph/tables/), and which
one answers: the installed TF's version's, else the newest, or the version `--tf-version`
names; the installed TF's own registry where no table is of it (issue 34)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, run_cli

sys.path.insert(0, str(FIXTURES))

SHIPPED = "2.16, 2.17, 2.18, 2.19, 2.20, 2.21"


def test_the_installed_tensorflows_table_is_what_its_registry_says():
    """The table of the installed TF's version, op by op (signature, defaults, kernels), is
    what its registries say now, in a fresh process: no custom op another test loaded."""
    done = subprocess.run([sys.executable, str(REPO / "tools" / "gen_kernel_table.py"),
                           "--check"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert " 0 differ from TensorFlow" in done.stdout


def test_every_supported_version_ships_a_table():
    from graphfix.graph import kernels

    assert ", ".join(kernels.shipped_versions()) == SHIPPED
    for version in kernels.shipped_versions():
        head = kernels._table(version).head()
        assert head["tensorflow"].startswith(version + ".")
        assert (head["distribution"], head["platform"]) == ("tensorflow", "linux-x86_64")


def _write(tmp_path, build, name="graph.pb"):
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        build(tf)
    path = tmp_path / name
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


def _check(path, *extra, exit_code):
    done = run_cli("check", "--format", "json", *extra, path, check_exit=exit_code)
    return json.loads(done.stdout)


def test_kernels_constrained_by_a_string_attr_are_found(tmp_path):
    """DepthToSpace's CPU kernels constrain `data_format`, GatherNd's `bad_indices_policy`
    (strings): both place on the CPU and the GPU, as TF's placer says."""
    from real_models import oracle

    def build(tf):
        for device in ("/cpu:0", "/gpu:0"):
            with tf.device(device):
                params = tf.compat.v1.placeholder(tf.float32, [4, 3])
                tf.gather_nd(params, tf.constant([[1], [2]]), name=f"gather_{device[1:4]}")
                tf.nn.depth_to_space(tf.zeros([1, 2, 2, 4]), 2, name=f"d2s_{device[1:4]}")

    path = _write(tmp_path, build)
    assert oracle.place(oracle.graph_def_of(path)).places
    assert _check(path, exit_code=0)["findings"] == []


def _half_range_on_gpu(tmp_path):
    """A graph whose answer differs between 2.16 and 2.21: Range of float16 has a GPU
    kernel from TF 2.18 on."""
    def build(tf):
        with tf.device("/gpu:0"):
            start, limit = (tf.compat.v1.placeholder(tf.float16, []) for _ in range(2))
            tf.range(start, limit, name="steps")

    return _write(tmp_path, build)


def test_tf_version_judges_by_that_versions_kernels(tmp_path):
    from real_models import oracle

    path = _half_range_on_gpu(tmp_path)
    assert oracle.place(oracle.graph_def_of(path)).places  # (the installed TF: 2.21)
    installed = _check(path, exit_code=0)
    assert installed["findings"] == []
    for version in ("2.18", "2.21"):
        assert _check(path, "--tf-version", version, exit_code=0)["findings"] == []
    old = _check(path, "--tf-version", "2.16", exit_code=1)
    assert old["tensorflow"] == {"version": "2.16", "source": "table"}
    [finding] = old["findings"]
    assert finding["node"] == "steps"
    assert finding["message"].startswith(
        "Cannot assign a device for operation steps: Could not satisfy explicit device "
        "specification '/device:GPU:0' because no supported kernel for GPU devices is "
        "available.")
    said = run_cli("check", path, "--tf-version", "2.17", "--verbose", check_exit=1).stderr
    assert "graphfix: kernels and op signatures: TensorFlow 2.17's table, shipped with " \
           "graphfix" in said


def test_the_api_takes_tf_version(tmp_path):
    import graphfix
    from graphfix.graph import kernels

    path = _half_range_on_gpu(tmp_path)
    [finding] = graphfix.check_graph(path, tf_version="2.16")
    assert finding.node == "steps"
    assert graphfix.check_graph(path) == []  # (the version named holds for its call only)
    assert kernels.selected().to_json()["version"] != "2.16"
    with pytest.raises(graphfix.UsageError, match=f"tf_version: no kernel table for "
                                                  f"TensorFlow '2.9'; graphfix ships {SHIPPED}"):
        graphfix.fix_graph(path, tf_version="2.9")


@pytest.mark.parametrize("command", ["check", "fix", "report"])
@pytest.mark.parametrize("given", ["2.15", "3", "latest"])
def test_an_unknown_tf_version_is_a_usage_error(tmp_path, command, given):
    seed = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"
    out = ["-o", tmp_path / "out.pbtxt"] if command != "check" else []
    done = run_cli(command, seed, "--tf-version", given, *out, check_exit=2)
    assert done.stderr == (f"graphfix: error: --tf-version: no kernel table for TensorFlow "
                           f"{given!r}; graphfix ships {SHIPPED}\n")
    assert not (tmp_path / "out.pbtxt").exists()


# A process with no TensorFlow to import: a finder ahead of every other refuses it.
_NO_TENSORFLOW = """
import importlib.abc, json, sys

class NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "tensorflow":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoTensorFlow())
"""


def _run(script: str, *, env: dict | None = None, site: str | None = None) -> dict:
    """The JSON `script` prints last, run by a fresh Python (`site` first on its path)."""
    import graphfix

    paths = [p for p in (site, str(Path(graphfix.__file__).resolve().parents[1])) if p]
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(paths),
                                            "GRAPHFIX_LIVE_KERNELS": "", **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


_ASK = """
from graphfix.graph import kernels, signatures

def answers():
    return {"source": kernels.selected().to_json(), "gpu": kernels.gpu_kernels_registered(),
            "MatchingFiles on GPU": kernels.verdict("MatchingFiles", "GPU"),
            "NoOp on GPU": kernels.verdict("NoOp", "GPU"),
            "DecodeJxl is TF's": signatures.is_tf_op("DecodeJxl")}

seen = {"default": answers()}
with kernels.tf_version("2.16"):
    seen["2.16"] = answers()
seen["after"] = answers()
seen["tensorflow imported"] = sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow")
print(json.dumps(seen))
"""


def test_with_no_tensorflow_the_newest_table_answers():
    """No TF to import (and none imported): the newest table answers, --tf-version's table
    where one is named, asked of `graphfix.graph.kernels` and `signatures` directly."""
    seen = _run(_NO_TENSORFLOW + _ASK)
    newest = {"source": {"version": "2.21", "source": "table"}, "gpu": True,
              "MatchingFiles on GPU": False, "NoOp on GPU": True, "DecodeJxl is TF's": True}
    assert seen["default"] == seen["after"] == newest
    assert seen["2.16"] == {**newest, "source": {"version": "2.16", "source": "table"},
                            "DecodeJxl is TF's": False}  # (an op of TF 2.21)
    assert seen["tensorflow imported"] == []


_CHECK = """
from graphfix.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as stopped:
    imported = [m for m in sys.modules if m.split(".")[0] == "tensorflow"]
    print(json.dumps({"exit": stopped.code, "tensorflow imported": imported}))
"""


def _check_without_tensorflow(*args) -> tuple[dict, dict, str]:
    """`graphfix check --format json ARGS` in a process with no TensorFlow to import: (its
    JSON, how it ended, its stderr)."""
    import graphfix

    done = subprocess.run([sys.executable, "-c", _NO_TENSORFLOW + _CHECK, "check", "--format",
                           "json", "--no-cache", *map(str, args)], capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "GRAPHFIX_LIVE_KERNELS": "",
                               "PYTHONPATH": str(Path(graphfix.__file__).resolve().parents[1])})
    lines = done.stdout.splitlines()
    return json.loads("\n".join(lines[:-1])), json.loads(lines[-1]), done.stderr


def test_check_without_tensorflow_places_by_the_newest_table_or_the_one_named(tmp_path):
    seed = FIXTURES / "variables_to_cpu" / "seed000_ref" / "before.pbtxt"
    doc, ended, said = _check_without_tensorflow(seed, "--target-devices", "/gpu:0",
                                                 "--verbose")
    assert ended == {"exit": 1, "tensorflow imported": []}
    assert doc["tensorflow"] == {"version": "2.21", "source": "table"}
    [finding] = doc["findings"]
    assert finding["message"].startswith("Cannot assign a device for operation d: ")
    assert said == "graphfix: kernels and op signatures: TensorFlow 2.21's table, shipped " \
                   "with graphfix\n"
    path = _half_range_on_gpu(tmp_path)
    doc, ended, _ = _check_without_tensorflow(path)
    assert (doc["findings"], ended["exit"]) == ([], 0)
    doc, ended, _ = _check_without_tensorflow(path, "--tf-version", "2.16")
    assert [f["node"] for f in doc["findings"]] == ["steps"]
    assert ended == {"exit": 1, "tensorflow imported": []}


# An installed TensorFlow as pip lays it out: the package, and the distribution's folder
# that says its name and version. graphfix must choose without importing it.
_NOT_TO_IMPORT = "raise ImportError('graphfix imported the tensorflow package')\n"


def _site(tmp_path, distribution: str, plugins: bool = False) -> str:
    site = tmp_path / "site-packages"
    (site / "tensorflow").mkdir(parents=True)
    (site / "tensorflow" / "__init__.py").write_text(_NOT_TO_IMPORT)
    (site / f"{distribution}.dist-info").mkdir()
    (site / f"{distribution}.dist-info" / "top_level.txt").write_text("tensorflow\n")
    if plugins:
        (site / "tensorflow-plugins").mkdir()
        (site / "tensorflow-plugins" / "libmetal_plugin.dylib").write_bytes(b"")
    return str(site)


_CHOSEN = """
import json
from graphfix.graph import kernels

chosen = {"source": kernels.selected().to_json()}
try:
    chosen["gpu"] = kernels.gpu_kernels_registered()
except kernels.NoGpuKernelsError as exc:
    chosen["error"] = str(exc)
print(json.dumps(chosen))
"""


@pytest.mark.parametrize("distribution, version", [
    ("tensorflow-2.16.2", "2.16"),
    ("tensorflow_cpu-2.16.1", "2.16"),  # (its own registry has no GPU kernel: the table has)
    ("tensorflow_macos-2.18.0", "2.18"),
    ("tensorflow_intel-2.20.0", "2.20"),
])
def test_an_installed_tensorflow_of_a_shipped_version_is_answered_by_its_table(
        tmp_path, distribution, version):
    chosen = _run(_CHOSEN, site=_site(tmp_path, distribution))
    assert chosen == {"source": {"version": version, "source": "table"}, "gpu": True}


@pytest.mark.parametrize("distribution, plugins, live, version", [
    ("tf_nightly-2.22.0.dev20261201", False, "", "2.22.0.dev20261201"),
    ("tensorflow-2.21.0rc1", False, "", "2.21.0rc1"),
    ("tensorflow-2.15.1", False, "", "2.15.1"),
    ("tensorflow_macos-2.16.2", True, "", "2.16.2"),  # (a plug-in registers kernels)
    ("tensorflow-2.16.2", False, "1", "2.16.2"),  # (GRAPHFIX_LIVE_KERNELS=1)
])
def test_a_tensorflow_no_table_is_of_is_asked_itself(tmp_path, distribution, plugins, live,
                                                     version):
    """Its registry answers: here, a package that cannot be imported says so in one line."""
    chosen = _run(_CHOSEN, site=_site(tmp_path, distribution, plugins),
                  env={"GRAPHFIX_LIVE_KERNELS": live})
    assert chosen == {
        "source": {"version": version, "source": "installed registry"},
        "error": f"TensorFlow {version} cannot be imported (graphfix imported the tensorflow "
                 "package) to ask its kernel registry, so placement cannot be checked; name "
                 f"the TensorFlow to check for with --tf-version (graphfix has tables of "
                 f"{SHIPPED})"}


def test_tf_version_overrides_the_installed_tensorflow(tmp_path):
    named = "named = kernels.tf_version('2.19')\nnamed.__enter__()\n"
    script = _CHOSEN.replace("\nchosen = ", f"\n{named}chosen = ")
    chosen = _run(script, site=_site(tmp_path, "tf_nightly-2.22.0.dev20261201"))
    assert chosen == {"source": {"version": "2.19", "source": "table"}, "gpu": True}
