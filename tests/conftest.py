"""Shared test helpers: running the CLI as a user does, and the fixture folders.

The suite runs with TensorFlow (`make test-full`) and without it (`make test-lean`:
graphfix's base install, no TF). Without it, a test that needs TF skips, by one rule, here:
a test (or test module) that imports TF or a package that comes with it, uses the `tf` or
`built` fixture, is marked `needs_tf`, or runs a graphfix command that says it needs TensorFlow
(`graphfix.tf_runtime.require_tensorflow`). Every other test runs, and must pass.

`make test` runs the lean suite first, then the suite with TF, and a test that passed without
TF does not run again with it: graphfix's graph and source paths never ask whether TF is
installed, so such a test asks nothing of TF. A test that says what graphfix does where TF IS
installed (that a graph check does not import it) is marked `both_installs` and runs in both.
The lean run lists its passes in the file GRAPHFIX_PASSED_WITHOUT_TF names; the run with TF
leaves them out (deselected, counted in its summary). Without that variable, every test runs.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib.abc
import importlib.machinery
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The CLI caches source results in the project root by default: the tests' runs cache into
# one folder of their own (test_source_cache.py covers the default place), one per test
# process (pytest-xdist's workers inherit the folder of the process that started them).
_TEST_CACHE_PREFIX = "graphfix-test-cache-"
if (os.environ.get("GRAPHFIX_CACHE_DIR") is None
        or pathlib.Path(os.environ["GRAPHFIX_CACHE_DIR"]).name.startswith(_TEST_CACHE_PREFIX)):
    os.environ["GRAPHFIX_CACHE_DIR"] = tempfile.mkdtemp(prefix=_TEST_CACHE_PREFIX)
    atexit.register(shutil.rmtree, os.environ["GRAPHFIX_CACHE_DIR"], True)

REPO = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"

from graphfix.tf_runtime import tensorflow_installed  # noqa: E402  (after the environment)

HAS_TENSORFLOW = tensorflow_installed()
NEEDS_TENSORFLOW = "needs TensorFlow, not installed here (the lean install)"
# What graphfix says where a command needs TF (graphfix.tf_runtime.require_tensorflow).
_SAYS_TF_IS_NEEDED = "needs TensorFlow, which is not installed here"
# TF and the packages that come with it (the `test` extra's; numpy only through TF).
_TF_PACKAGES = frozenset({"tensorflow", "tf_keras", "tf_slim", "keras", "tensorboard", "numpy"})
# A child process's traceback, in a failure, that says it could not import one of them.
_CHILD_MISSES_TF = re.compile(r"ModuleNotFoundError: No module named '(%s)[.']"
                              % "|".join(sorted(_TF_PACKAGES)))


class _ImportSkips(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on sys.meta_path where TF is not installed: importing one of `_TF_PACKAGES`
    that no other finder found skips the test (or the test module) doing it. Only the import
    skips: a look for the package (`importlib.util.find_spec`, as graphfix's own probes do)
    finds none, as it would in a user's lean install."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in _TF_PACKAGES:
            return None
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec):
        raise pytest.skip.Exception(f"{NEEDS_TENSORFLOW}: imports {spec.name}",
                                    allow_module_level=True)

    def exec_module(self, module):  # (never reached: create_module skips)
        raise AssertionError(module)


if not HAS_TENSORFLOW:
    sys.meta_path.append(_ImportSkips())


# The lean run's list of the tests it passed, which the run with TF leaves out.
_PASSED_WITHOUT_TF = os.environ.get("GRAPHFIX_PASSED_WITHOUT_TF")
_passed, _not_passed = set(), set()  # (node ids, as the lean run's reports come in)


def pytest_configure(config):
    config.addinivalue_line("markers", f"needs_tf: the test {NEEDS_TENSORFLOW} skips")
    config.addinivalue_line("markers", "both_installs: runs with TF even where it passed "
                                       "without it (it says what happens where TF is installed)")


def pytest_runtest_logreport(report):
    """Without TF, each test that passed in every phase is noted (in pytest-xdist's main
    process, which receives every worker's reports, and in a run without workers)."""
    if HAS_TENSORFLOW or not _PASSED_WITHOUT_TF:
        return
    if report.failed or report.skipped:
        _not_passed.add(report.nodeid)
    elif report.when == "call":
        _passed.add(report.nodeid)


def pytest_sessionfinish(session):
    if HAS_TENSORFLOW or not _PASSED_WITHOUT_TF or hasattr(session.config, "workerinput"):
        return
    pathlib.Path(_PASSED_WITHOUT_TF).write_text(
        "".join(f"{nodeid}\n" for nodeid in sorted(_passed - _not_passed)))


def pytest_terminal_summary(terminalreporter):
    if HAS_TENSORFLOW and _PASSED_WITHOUT_TF and os.path.exists(_PASSED_WITHOUT_TF):
        passed = len(pathlib.Path(_PASSED_WITHOUT_TF).read_text().splitlines())
        terminalreporter.write_line(f"{passed} tests passed without TF (the lean run) and ran "
                                    "again here only where marked both_installs")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Where TF is not installed, a test that failed because graphfix said it needs TF (an
    API's UsageError, a command's stderr in the failure, by whatever way the test ran it),
    or because a process it started could not import TF (a script building a graph), is
    reported skipped: it needs TF."""
    outcome = yield
    report = outcome.get_result()
    if HAS_TENSORFLOW or not report.failed or call.excinfo is None:
        return
    error = call.excinfo.value  # (a CalledProcessError keeps the child's stderr apart)
    said = f"{error}\n{getattr(error, 'stderr', '')}\n{getattr(report, 'longreprtext', '')}"
    missing = _CHILD_MISSES_TF.search(said)
    if missing is None and NEEDS_TENSORFLOW in said:  # (a child that imports conftest)
        missing = re.search(re.escape(NEEDS_TENSORFLOW) + r": imports (\w[\w.]*)", said)
    if _SAYS_TF_IS_NEEDED in said or missing:
        why = f"a child process imports {missing.group(1)}" if missing else "graphfix said so"
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"{NEEDS_TENSORFLOW}: {why}")


def pytest_collection_modifyitems(config, items):
    if HAS_TENSORFLOW:
        _leave_out_what_passed_without_tf(config, items)
        return
    skip = pytest.mark.skip(reason=NEEDS_TENSORFLOW)
    for item in items:
        if (item.get_closest_marker("needs_tf")
                or {"tf", "built"} & set(getattr(item, "fixturenames", ()))):
            item.add_marker(skip)


def _leave_out_what_passed_without_tf(config, items):
    if not _PASSED_WITHOUT_TF or not os.path.exists(_PASSED_WITHOUT_TF):
        return
    passed = set(pathlib.Path(_PASSED_WITHOUT_TF).read_text().splitlines())
    left_out = [item for item in items
                if item.nodeid in passed and not item.get_closest_marker("both_installs")]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        kept = set(map(id, items)) - set(map(id, left_out))
        items[:] = [item for item in items if id(item) in kept]


def python_interpreter(version: str) -> str | None:
    """A working Python `version` ("3.9") interpreter on this machine: pyenv's newest of
    that version, else `pythonX.Y` on PATH (a pyenv shim of a version not selected fails:
    each is asked its version); None where there is none."""
    pyenv = pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv"))
    candidates = sorted(pyenv.glob(f"versions/{version}.*/bin/python{version}"),
                        key=lambda p: [int(n) for n in p.parts[-3].split(".") if n.isdigit()])
    for candidate in [*map(str, reversed(candidates)), shutil.which(f"python{version}")]:
        if candidate is None:
            continue
        try:
            said = subprocess.run([candidate, "-c", "import sys; print(sys.version[:4])"],
                                  capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        if said.strip() == version or said.startswith(version + "."):
            return candidate
    return None


def run_cli(*args, cwd=None, check_exit=None, env=None) -> subprocess.CompletedProcess:
    """Run `python -m graphfix ARGS` in a fresh process, as a user would; `env` adds to
    the environment (a None value removes that variable)."""
    env = {k: v for k, v in {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                             "PYTHONWARNINGS": "ignore", **(env or {})}.items() if v is not None}
    result = subprocess.run(
        [sys.executable, "-m", "graphfix", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd or REPO / "tests",
        env=env,
        timeout=300,
    )
    if not HAS_TENSORFLOW and _SAYS_TF_IS_NEEDED in result.stderr:
        pytest.skip(f"{NEEDS_TENSORFLOW}: graphfix {' '.join(map(str, args[:1]))} said so")
    if check_exit is not None:
        assert result.returncode == check_exit, (result.stdout, result.stderr)
    return result


_EXPECT = re.compile(r"#\s*expect:\s*(.*)$")
_MARK = re.compile(r"(error|warning)(\s+unfixable)?(?:\s+col\s+(\d+))?")


@dataclasses.dataclass(frozen=True)
class Expected:
    """A finding a source fixture announces with `# expect: error|warning [unfixable]
    [col N]` on its line (several, comma-separated, for one line)."""

    line: int
    severity: str
    fixable: bool
    col: int | None


def expected_findings(code: str) -> list[Expected]:
    """Every `# expect:` marker of a source fixture, in order."""
    out = []
    for number, line in enumerate(code.splitlines(), 1):
        marker = _EXPECT.search(line)
        if marker:
            for part in marker.group(1).split(","):
                one = _MARK.fullmatch(part.strip())
                assert one, f"bad `# expect:` marker on line {number}: {part!r}"
                col = int(one.group(3)) if one.group(3) else None
                out.append(Expected(number, one.group(1), one.group(2) is None, col))
    return out


def source_cases(folder: str | None = None) -> list[pathlib.Path]:
    """The source fixture cases, of one transform (its fixtures folder, `update_ops`) or of
    all: each fixtures/<transform>/source/<case>/ holds before.py and after.py (identical for
    `noop_*` cases), or before/ and after/ folders of files fixed together as one run, and
    may hold case.json ({"settings": {...}}). tests/test_source_fixtures.py runs them all."""
    pattern = f"{folder or '*'}/source/*/"
    return sorted(case for case in FIXTURES.glob(pattern)
                  if (case / "before.py").is_file() or (case / "before").is_dir())


def case_settings(case: pathlib.Path) -> dict:
    """A fixture case's `--set` settings, from its case.json (none without one)."""
    spec = case / "case.json"
    return json.loads(spec.read_text()).get("settings", {}) if spec.is_file() else {}


def transform_of_case(case: pathlib.Path) -> str:
    """The transform a fixture case is of: its folder under fixtures/, as the registry
    spells it (fixtures/update_ops/source/x -> update-ops)."""
    top = case.relative_to(FIXTURES).parts[0]
    return top.replace("_", "-")


def fixture_findings(folder: str) -> list[tuple[pathlib.Path, str, list]]:
    """(case, before.py's code, its findings) of every single-file source case of a
    transform (its fixtures folder): what a test of what every finding says reads."""
    import graphfix

    out = []
    for case in source_cases(folder):
        if (case / "before.py").is_file():
            code = (case / "before.py").read_text()
            out.append((case, code, graphfix.check_source(
                code, only=[transform_of_case(case)], settings=case_settings(case))))
    return out


def pattern_copies(tmp_path_factory, shapes, *fix_options: str) -> dict[str, str]:
    """Each real-code pattern of `shapes` (fixtures/real_code/patterns/NAME) copied as it is
    ("NAME:before") and fixed by `graphfix fix --in-place --no-cache *fix_options .`
    ("NAME:after"), without its expected.json: {key: folder}."""
    folders = {}
    for shape in shapes:
        for version in ("before", "after"):
            target = tmp_path_factory.mktemp(f"{shape}-{version}")
            shutil.copytree(FIXTURES / "real_code" / "patterns" / shape, target,
                            dirs_exist_ok=True)
            (target / "expected.json").unlink()
            if version == "after":
                fixed = run_cli("fix", "--in-place", "--no-cache", *fix_options, ".", cwd=target)
                assert fixed.returncode in (0, 1), fixed.stderr
            folders[f"{shape}:{version}"] = str(target)
    return folders


def built_by_tf(script: str, argument) -> dict:
    """What `script` (Python that builds graphs with TF, reading `argument` as JSON from
    sys.argv[1]) prints as JSON on its last line, run in a process of its own on the CPU.
    The script can import the tests' TF helpers (`tf_steps`)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_USE_LEGACY_KERAS="1",
               CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"),
                                                        str(REPO / "tests")])))
    done = subprocess.run([sys.executable, "-c", script, json.dumps(argument)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


def pattern_copies_built(tmp_path_factory, script: str, shapes, *fix_options: str
                         ) -> tuple[dict, dict[str, str]]:
    """Each real-code pattern of `shapes` copied as it is and fixed (`pattern_copies`), every
    copy built by `script` (`built_by_tf`, given {copy: folder}): (what it printed,
    {copy: folder})."""
    folders = pattern_copies(tmp_path_factory, shapes, *fix_options)
    return built_by_tf(script, folders), folders


def check_copy(folder: str, transform: str) -> subprocess.CompletedProcess:
    """`graphfix check --no-cache --only TRANSFORM .` run in `folder` (a pattern's copy), as
    a user checks a tree."""
    return run_cli("check", "--no-cache", "--only", transform, ".", cwd=folder)


_TOWER_DEVICES = r'''
import importlib, json, sys
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
sys.modules["tensorflow"] = tf

out = {}
for label, folder in json.loads(sys.argv[1]).items():
    shape = label.split(":")[0]
    sys.path.insert(0, folder)
    for cached in MODULES:
        sys.modules.pop(cached, None)
    train = importlib.import_module("train")
    with tf.Graph().as_default() as graph:
        x = tf.zeros([3, 4])
DRIVE
        found = {v.op.name: v.device for v in tf.global_variables()}
        found.update({op.name: op.device for op in graph.get_operations()
                      if op.type == "MatMul"})
    sys.path.remove(folder)
    out[label] = found
print(json.dumps(out))
'''


def tower_devices(tmp_path_factory, shapes, modules: tuple[str, ...], drive: str):
    """Each real-code pattern of `shapes` copied and fixed by variables-to-cpu
    (`pattern_copies`), every copy's towers built with its own code under
    tensorflow.compat.v1 in one subprocess: `drive` (Python lines, indented by eight, with
    `train` the copy's train module, `x` a [3, 4] input and `shape` the pattern's name)
    builds them, `modules` are forgotten between copies. ({copy: {variable or MatMul:
    device}}, {copy: folder})."""
    script = _TOWER_DEVICES.replace("MODULES", repr(modules)).replace("DRIVE", drive.rstrip())
    return pattern_copies_built(tmp_path_factory, script, shapes, "--only", "variables-to-cpu")


def error_lines(stderr: str) -> list[str]:
    """stderr without TF's own start-up chatter (absl, cuda probes)."""
    noise = ("WARNING: All log messages", "I0000", "W0000", "E0000", "cuda", "To enable")
    return [ln for ln in stderr.splitlines() if ln.strip() and not any(n in ln for n in noise)]


@pytest.fixture
def tf():
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    return tf


class BackgroundScript:
    """A Python script run in a subprocess alongside the tests; its last stdout line is JSON."""

    def __init__(self, args: list[str]):
        self.args = args
        self.process: subprocess.Popen | None = None

    def start(self) -> subprocess.Popen:
        if self.process is None:
            # tf.compat.v1.layers and tf_slim need tf_keras under Keras 3.
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_USE_LEGACY_KERAS="1")
            self.process = subprocess.Popen([sys.executable, *self.args], stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True, env=env)
        return self.process

    def result(self, timeout: int = 240):
        stdout, stderr = self.start().communicate(timeout=timeout)
        assert self.process.returncode == 0, stderr[-4000:]
        return json.loads(stdout.splitlines()[-1])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module", autouse=True)
def _background_script(request):
    """For a test module that sets BACKGROUND_SCRIPT (argv of a script that builds real TF
    graphs): start it before the module's first test, so TF works while libcst tests run."""
    args = getattr(request.module, "BACKGROUND_SCRIPT", None)
    if args is None or not HAS_TENSORFLOW:  # (its tests use `built`: they skip)
        yield None
        return
    script = BackgroundScript(args)
    if any(item.module is request.module and "built" in item.fixturenames
           for item in request.session.items):
        script.start()
    yield script
    script.stop()


@pytest.fixture(scope="module")
def built(_background_script):
    """What the module's BACKGROUND_SCRIPT printed (its last line, as JSON)."""
    return _background_script.result()
