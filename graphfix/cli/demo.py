"""`graphfix demo`: the seed bugs end to end, on built-in fixtures: found, fixed, verified."""

from __future__ import annotations

import tempfile
import time
from importlib import resources
from pathlib import Path

from graphfix import registry
from graphfix.driver import Selected, run, write_outputs
from graphfix.driver import run as run_paths


def _say(text: str = "") -> None:
    print(text, flush=True)


def _show(lines, workdir: Path) -> None:
    """Lines of output, indented, with paths shown relative to the demo's folder."""
    for line in lines:
        _say("  " + line.replace(str(workdir) + "/", ""))


# The demo's graphs: fixtures of the repository, which the wheel carries in
# graphfix/demo_fixtures/ under these names (pyproject.toml's force-include).
DEMO_FIXTURES = {
    "seed000_int32_variable_on_gpu.pbtxt": "variables_to_cpu/seed000_ref/before.pbtxt",
    "seed003_two_tower_batch_norm.pbtxt": "update_ops/two_tower_slim_bn/before.pbtxt",
    "seed003_fed_embeddings.pbtxt": "feed_to_assign/embeddings_ref/before.pbtxt",
    "seed003_tower_variables.pbtxt": "shared_variables/two_tower_variables/before.pbtxt",
}
# The custom-op case's files (its graph is not in the HTML report: its op needs the library).
CUSTOM_OP_FIXTURES = {
    "seed003_image_ids.pbtxt": "stateful_custom_ops/seed_constant_count/before.pbtxt",
    "get_image_id.cc": "custom_ops/get_image_id.cc",
    "build_ops.py": "custom_ops/build_ops.py",
}


def _fixture(name: str) -> Path:
    """A demo graph: the installed copy, or in a development tree the repository's fixture."""
    installed = Path(str(resources.files("graphfix").joinpath("demo_fixtures", name)))
    if installed.exists():
        return installed
    return (Path(__file__).resolve().parents[2] / "fixtures"
            / {**DEMO_FIXTURES, **CUSTOM_OP_FIXTURES}[name])


def _check(path: Path, only: list[str], settings: dict | None = None) -> list:
    selected = Selected.build([registry.get_transform(n) for n in only], settings or {},
                              ("/gpu:0",))
    report, _ = run([str(path)], selected, fix=False)
    return report.findings


def _fix(path: Path, out: Path, only: list[str], settings: dict | None = None) -> list:
    selected = Selected.build([registry.get_transform(n) for n in only], settings or {}, ())
    report, outputs = run([str(path)], selected, fix=True, out=str(out))
    write_outputs(outputs)
    return report.changes


class Skipped(Exception):
    """A demo case this machine cannot run; str() says why, in one line."""


def seed000(workdir: Path) -> bool:
    """Seed 000: an int32 tf.Variable under tf.device('/gpu:0')."""
    from graphfix.verification.run import verify_path

    _say("== seed 000: tf.Variable(2) under tf.device('/gpu:0') ==")
    before = workdir / "seed000.pbtxt"
    before.write_bytes(_fixture("seed000_int32_variable_on_gpu.pbtxt").read_bytes())
    only = ["variables-to-cpu"]
    _say("$ graphfix verify seed000.pbtxt")
    unfixed = verify_path(str(before), steps=1)
    _show(unfixed.to_lines(), workdir)
    _say("$ graphfix check seed000.pbtxt --target-devices /gpu:0")
    findings = _check(before, only)
    _show((finding.to_text() for finding in findings), workdir)
    fixed = workdir / "seed000.fixed.pbtxt"
    _say("$ graphfix fix seed000.pbtxt -o seed000.fixed.pbtxt")
    _show((change.to_text() for change in _fix(before, fixed, only)), workdir)
    _say("$ graphfix check seed000.fixed.pbtxt --target-devices /gpu:0")
    remaining = _check(fixed, only)
    _say(f"  {len(remaining)} finding(s)")
    _say("$ graphfix verify seed000.fixed.pbtxt")
    result = verify_path(str(fixed), steps=1, fetches=["output:0"])
    _show(result.to_lines(), workdir)
    _say(f"  output:0 = {result.values.get('output:0')}")
    return not unfixed.passed and bool(findings) and not remaining and result.passed


def seed003(workdir: Path) -> bool:
    """Seed 003: two towers with slim.batch_norm, averaged gradients, no UPDATE_OPS."""
    from graphfix.registry import intended_changes
    from graphfix.verification.run import verify_path

    _say("== seed 003: two-tower slim.batch_norm, averaged gradients, UPDATE_OPS never run ==")
    before = workdir / "seed003.pbtxt"
    before.write_bytes(_fixture("seed003_two_tower_batch_norm.pbtxt").read_bytes())
    only = ["update-ops"]
    moving_mean = "variable:conv1/BatchNorm/moving_mean"
    _say("$ graphfix verify seed003.pbtxt --fetch train")
    unfixed = verify_path(str(before), steps=1, fetches=["train"])
    _show(unfixed.to_lines(), workdir)
    _say(f"  conv1 moving_mean after a step: {unfixed.values.get(moving_mean)}")
    _say("$ graphfix check seed003.pbtxt --only update-ops")
    findings = _check(before, only)
    _show((finding.to_text() for finding in findings), workdir)
    fixed = workdir / "seed003.fixed.pbtxt"
    _say("$ graphfix fix seed003.pbtxt -o seed003.fixed.pbtxt --only update-ops")
    _show((change.to_text() for change in _fix(before, fixed, only)), workdir)
    _say("$ graphfix verify seed003.fixed.pbtxt --fetch train --compare seed003.pbtxt")
    result = verify_path(str(fixed), steps=1, fetches=["train"], compare=str(before),
                         intended_changes=intended_changes)
    _show(result.to_lines(), workdir)
    _say(f"  conv1 moving_mean after a step: {result.values.get(moving_mean)}")
    return not unfixed.passed and bool(findings) and result.passed


def seed003_feed(workdir: Path) -> bool:
    """Seed 003's Q&A: feeding `embeddings` while Adam updates it fails with float_ref."""
    import numpy as np

    from graphfix.graph import graphfile as graphio
    from graphfix.graph import proto
    from graphfix.tf_runtime import import_runtime

    tf = import_runtime()

    _say("== seed 003 Q&A: feed_dict={embeddings: value} while Adam trains embeddings ==")
    before = workdir / "embeddings.pbtxt"
    before.write_bytes(_fixture("seed003_fed_embeddings.pbtxt").read_bytes())
    tf1 = tf.compat.v1
    value = np.full([5, 3], 0.5, np.float32)
    ids = np.array([0, 2], np.int32)

    def run(path: Path, feeds: dict) -> tuple[str | None, object]:
        graph = tf.Graph()
        with graph.as_default():
            tf1.import_graph_def(proto.to_tf(graphio.load(path).message), name="")
        with tf1.Session(graph=graph) as session:
            session.run("init")
            try:
                session.run("train", feed_dict=feeds)
            except tf.errors.InvalidArgumentError as exc:
                lines = [ln.strip() for ln in exc.message.splitlines() if ln.strip()]
                return next((ln for ln in lines if "incompatible" in ln), lines[0]), None
            return None, session.run("embeddings:0")

    _say("$ sess.run(train, feed_dict={'embeddings:0': value, 'ids:0': ids})")
    error, _ = run(before, {"embeddings:0": value, "ids:0": ids})
    _say(f"  InvalidArgumentError: {error}")
    fixed = workdir / "embeddings.fixed.pbtxt"
    _say("$ graphfix fix embeddings.pbtxt -o embeddings.fixed.pbtxt "
         "--set feed-to-assign.variables=embeddings")
    selected = Selected.build([registry.get_transform("feed-to-assign")],
                              {"feed-to-assign": {"variables": ["embeddings"]}}, ())
    report, outputs = run_paths([str(before)], selected, fix=True, out=str(fixed))
    write_outputs(outputs)
    _show((change.to_text() for change in report.changes), workdir)
    renames = {k: v for c in report.changes for k, v in c.details.get("renames", {}).items()}
    _say(f"$ sess.run(train, feed_dict={{{renames['embeddings:0']!r}: value, 'ids:0': ids}})")
    error_after, trained = run(fixed, {renames["embeddings:0"]: value, "ids:0": ids})
    _say(f"  trained embeddings (rows 0 and 2 moved from the fed 0.5):\n{trained}")
    moved = trained is not None and not np.allclose(trained[[0, 2]], 0.5)
    kept = trained is not None and np.allclose(trained[[1, 3, 4]], 0.5)
    return error is not None and "float_ref" in error and error_after is None and moved and kept


def seed003_sharing(workdir: Path) -> bool:
    """Seed 003's sharing experiment in the tower recipe: tf.Variable in each tower of a
    reusing variable scope makes one copy per tower; the averaged step trains tower 0's."""
    import numpy as np

    from graphfix.graph import graphfile as graphio
    from graphfix.graph import proto
    from graphfix.tf_runtime import import_runtime

    tf = import_runtime()
    tf1 = tf.compat.v1

    _say("== seed 003 sharing: tf.Variable in two towers of a reusing variable scope ==")
    before = workdir / "towers.pbtxt"
    before.write_bytes(_fixture("seed003_tower_variables.pbtxt").read_bytes())
    feed = {"images:0": np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4),
            "labels:0": np.arange(8, dtype=np.int32) % 3}
    losses = ["tower_0/loss:0", "tower_1/loss:0"]

    def step(path: Path) -> tuple[list, bool]:
        """The towers' losses, and whether tower 1's own weights moved in one step."""
        graph = tf.Graph()
        with graph.as_default():
            tf1.import_graph_def(proto.to_tf(graphio.load(path).message), name="")
        config = tf1.ConfigProto(allow_soft_placement=True)
        with tf1.Session(graph=graph, config=config) as session:
            session.run("init")
            first = session.run("tower_1/w:0")
            values = session.run(losses, feed)
            session.run("train", feed)
            return values, not np.allclose(session.run("tower_1/w:0"), first)

    only = ["shared-variables"]
    _say("$ sess.run([tower_0/loss, tower_1/loss]); sess.run(train)")
    unfixed, moved = step(before)
    _say(f"  losses on one batch: {unfixed[0]:.4f} vs {unfixed[1]:.4f}; "
         f"tower_1/w {'moved' if moved else 'unchanged'} after the step")
    _say("$ graphfix check towers.pbtxt --only shared-variables")
    findings = _check(before, only)
    _show((finding.to_text() for finding in findings), workdir)
    fixed = workdir / "towers.fixed.pbtxt"
    _say("$ graphfix fix towers.pbtxt -o towers.fixed.pbtxt --only shared-variables")
    _show((change.to_text() for change in _fix(before, fixed, only)), workdir)
    _say("$ sess.run([tower_0/loss, tower_1/loss])  # the fixed graph")
    shared, _ = step(fixed)
    _say(f"  losses on one batch: {shared[0]:.4f} vs {shared[1]:.4f} (one set of weights)")
    return (not moved and not np.isclose(*unfixed) and bool(findings)
            and bool(np.isclose(*shared)))


STEPS = 3  # sess.run calls of the seed's loop, and verify's --steps, in the custom-op case


def seed_loop(library: str, graph_path: str, steps: int = STEPS) -> list[str]:
    """The seed's loop: import the graph, `sess.run("image_ids:0")` `steps` times in one
    session; the first id of each step. Loads `library` into this process (a process
    registers an op name once: a rebuilt library runs in a new process, `python -m
    graphfix.cli.demo LIBRARY GRAPH`)."""
    from graphfix.graph import graphfile as graphio
    from graphfix.graph import proto
    from graphfix.tf_runtime import import_runtime

    tf = import_runtime()
    tf.load_op_library(library)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(proto.to_tf(graphio.load(graph_path).message), name="")
    with tf.compat.v1.Session(graph=graph) as session:
        return [session.run("image_ids:0")[0].decode() for _ in range(steps)]


def _build_ops():
    """fixtures/custom_ops/build_ops.py (installed beside the demo's graphs), which compiles
    a custom op against this TF's headers and caches the library by its source."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("graphfix_demo_build_ops",
                                                  _fixture("build_ops.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seed003_custom_op(workdir: Path) -> bool:
    """Seed 003's GetImageID: a custom op registered without SetIsStateful, fed a constant
    count, is run once when TF optimizes the graph and returns those ids for ever. Skipped
    (`Skipped`) where no C++ compiler can build it."""
    import shutil
    import subprocess
    import sys

    from graphfix.verification.run import verify_path

    _say("== seed 003 custom op: GetImageID(tf.constant(32)) returns its first ids for ever ==")
    build_ops = _build_ops()
    source = workdir / "get_image_id.cc"
    source.write_bytes(_fixture("get_image_id.cc").read_bytes())
    before = workdir / "image_ids.pbtxt"
    before.write_bytes(_fixture("seed003_image_ids.pbtxt").read_bytes())
    library = workdir / "get_image_id.so"
    _say("$ c++ -shared -fPIC get_image_id.cc -o get_image_id.so $(TensorFlow's compile and "
         "link flags)")
    try:
        shutil.copy(build_ops.library_path(str(source)), library)
    except build_ops.NoCompilerError as exc:
        raise Skipped(str(exc)) from None
    except build_ops.BuildError as exc:  # (a compiler that fails: the case fails, saying why)
        _say(f"  {exc}")
        return False
    loaded = f"--set {registry.OP_LIBRARY}={library.name}"
    settings = {registry.OP_LIBRARY.transform: {registry.OP_LIBRARY.key: [str(library)]}}
    _say(f"$ for step in range({STEPS}): sess.run('image_ids:0')[0]  # the seed's loop")
    stuck = seed_loop(str(library), str(before))
    _say(f"  {', '.join(stuck)}")
    _say(f"$ graphfix verify image_ids.pbtxt --steps {STEPS} {loaded}")
    unfixed = verify_path(str(before), steps=STEPS, op_libraries=[str(library)])
    _show(unfixed.to_lines(), workdir)
    _say(f"$ graphfix check image_ids.pbtxt {loaded}")
    findings = _check(before, ["stateful-custom-ops"], settings)
    _show((finding.to_text() for finding in findings), workdir)
    fixed = workdir / "image_ids.fixed.pbtxt"
    _say(f"$ graphfix fix image_ids.pbtxt -o image_ids.fixed.pbtxt {loaded} "
         "--set stateful-custom-ops.sources=get_image_id.cc")
    settings["stateful-custom-ops"]["sources"] = [str(source)]
    _show((change.to_text() for change in _fix(before, fixed, ["stateful-custom-ops"],
                                                settings)), workdir)
    _say(f"$ graphfix verify image_ids.fixed.pbtxt --steps {STEPS} {loaded}")
    result = verify_path(str(fixed), steps=STEPS, op_libraries=[str(library)])
    _show(result.to_lines(), workdir)
    _say(f"$ for step in range({STEPS}): sess.run('image_ids:0')[0]  # on the fixed graph")
    unfolded = seed_loop(str(library), str(fixed))
    _say(f"  {', '.join(unfolded)}")
    rebuilt = workdir / "get_image_id.rebuilt.so"
    _say("$ c++ ... get_image_id.cc -o get_image_id.rebuilt.so  # the C++ fix, rebuilt")
    shutil.copy(build_ops.library_path(str(source)), rebuilt)
    _say(f"$ for step in range({STEPS}): sess.run('image_ids:0')[0]  # the original graph, "
         "the rebuilt library (a new process)")
    child = subprocess.run([sys.executable, "-m", "graphfix.cli.demo", str(rebuilt),
                            str(before)], capture_output=True, text=True, timeout=600)
    printed = child.stdout.strip().splitlines() if child.returncode == 0 else []
    rebuilt_ids = printed[-1].split(", ") if printed else []
    why = (child.stderr.strip().splitlines() or [f"exit {child.returncode}"])[-1]
    _say(f"  {', '.join(rebuilt_ids) if printed else why}")
    folded_seen = any(c.name == "custom ops" and not c.passed for c in unfixed.checks)
    return (len(set(stuck)) == 1 and folded_seen and bool(findings) and result.passed
            and len(set(unfolded)) == STEPS and len(set(rebuilt_ids)) == STEPS)


def _html_report() -> str:
    """`graphfix report` of the seed graphs, written to the system's temporary folder (it
    outlives the demo's own folder; no file of the user's is touched), atomically as every
    file graphfix writes: where it is, or why it was not written (the demo goes on)."""
    from graphfix.report.html import build
    from graphfix.storage import RefusedWrite, write_atomically

    selected = Selected.build(list(registry.all_transforms().values()), {}, ("/gpu:0",))
    page, _ = build([str(_fixture(name)) for name in DEMO_FIXTURES], selected)
    path = Path(tempfile.gettempdir()) / "graphfix-demo-report.html"
    try:
        write_atomically(path, page.encode())
    except RefusedWrite as exc:  # (names the file)
        return f"not written: {exc}"
    except OSError as exc:
        return f"not written: {path}: {exc}"
    return str(path)


def run_demo() -> int:
    """Run every seed case; exit 0 when each was found, fixed and verified."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="graphfix-demo-") as tmp:
        outcomes = {
            "seed 000 (variables-to-cpu)": seed000(Path(tmp)),
            "seed 003 (update-ops)": seed003(Path(tmp)),
            "seed 003 Q&A (feed-to-assign)": seed003_feed(Path(tmp)),
            "seed 003 sharing (shared-variables)": seed003_sharing(Path(tmp)),
        }
        skipped = {}
        custom_op = "seed 003 custom op (stateful-custom-ops)"
        try:
            outcomes[custom_op] = seed003_custom_op(Path(tmp))
        except Skipped as why:
            skipped[custom_op] = str(why)
            _say(f"  skipped: {why}")
    page = _html_report()
    _say()
    for name, ok in outcomes.items():
        _say(f"{'found, fixed, verified' if ok else 'FAILED'}: {name}")
    for name, why in skipped.items():
        _say(f"skipped: {name}: {why}")
    _say(f"HTML report of the seed graphs: {page}")
    _say(f"demo took {time.perf_counter() - start:.1f} s")
    return 0 if all(outcomes.values()) else 1


if __name__ == "__main__":  # the seed's loop in a fresh process: LIBRARY GRAPH
    import sys

    print(", ".join(seed_loop(*sys.argv[1:3])))
