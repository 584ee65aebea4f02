"""Seed 003 (issue 21) reproduced on the installed TF: a custom op that runs once.

`GetImageID` (fixtures/custom_ops/get_image_id.cc) is registered without `SetIsStateful` and
returns the next value of a counter on every Compute; `GetImageIDStateful` is the same kernel
registered stateful; `NextImageID` has no input; `ComputeCount` says how many times the kernels
ran. The library is compiled once (fixtures/custom_ops/build_ops.py caches it) and loaded with tf.load_op_library.

Each test builds the seed's loop, `sess.run` three times, and asserts what TF does today:
the ids the op returned and how many times its kernel really ran. docs/custom_ops.md gives
TF's rules behind each result, read from TF's code.
"""

from __future__ import annotations

import sys

import pytest
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2

from tests.conftest import FIXTURES

sys.path.insert(0, str(FIXTURES / "custom_ops"))
import build_ops  # noqa: E402  (fixtures/custom_ops/build_ops.py)

tf1 = tf.compat.v1
STEPS = 3


@pytest.fixture(scope="module")
def ops():
    """The compiled custom ops; fails (never skips) where no compiler is present."""
    try:
        return tf.load_op_library(str(build_ops.library_path("get_image_id.cc")))
    except build_ops.NoCompilerError as error:
        pytest.fail(str(error))


def run_steps(ops, make_outputs, config=None):
    """Build `make_outputs(ops)` -> (outputs, feed) in a fresh graph and sess.run it STEPS
    times: returns ([the ids of each output, per step], how many times the kernels ran)."""
    graph = tf.Graph()
    with graph.as_default():
        outputs, feed = make_outputs(ops)
        computed = ops.compute_count()
        with tf1.Session(graph=graph, config=config) as sess:
            sess.run(tf1.global_variables_initializer())
            before = sess.run(computed)
            steps = [[ids[0].decode() for ids in sess.run(outputs, feed_dict=feed)]
                     for _ in range(STEPS)]
            return steps, sess.run(computed) - before


def session_config(*, opt_level_l0=False, meta_optimizer_off=False,
                   grappler_constant_folding_off=False):
    config = config_pb2.ConfigProto()
    if opt_level_l0:  # the classic graph optimizer's constant folding and CSE off
        config.graph_options.optimizer_options.opt_level = config_pb2.OptimizerOptions.L0
    if meta_optimizer_off:  # all of Grappler off
        config.graph_options.rewrite_options.disable_meta_optimizer = True
    if grappler_constant_folding_off:
        config.graph_options.rewrite_options.constant_folding = rewriter_config_pb2.RewriterConfig.OFF
    return config


def assert_folded(steps, computed, calls=1):
    """Each call's kernel ran once (when TF optimized the graph for the first step, to fold
    it into a constant) and never again: every step returns that first value."""
    assert computed == calls, f"the kernel ran {computed} times in {STEPS} steps"
    assert len({tuple(step) for step in steps}) == 1, steps


def assert_runs_every_step(steps, computed, calls=1):
    assert computed == STEPS * calls, f"the kernel ran {computed} times in {STEPS} steps"
    assert len({tuple(step) for step in steps}) == STEPS, steps


# --- The seed's loop: what the issue reports -------------------------------------------

def constant_count(ops):
    return [ops.get_image_id(tf.constant(32))], None


def test_constant_input_returns_the_same_value_on_every_step(ops):
    steps, computed = run_steps(ops, constant_count)
    assert_folded(steps, computed)


def test_placeholder_input_changes_on_every_step(ops):
    def placeholder_count(ops):
        count = tf1.placeholder(tf.int32, [])
        return [ops.get_image_id(count)], {count: 32}

    assert_runs_every_step(*run_steps(ops, placeholder_count))


def test_stateful_twin_with_a_constant_input_changes_on_every_step(ops):
    steps, computed = run_steps(ops, lambda ops: ([ops.get_image_id_stateful(tf.constant(32))], None))
    assert_runs_every_step(steps, computed)


def test_two_identical_calls_are_merged_into_one(ops):
    """Fed from a placeholder (so not folded), two calls run as one: same id, one Compute."""
    def two_calls(op):
        def make(ops):
            count = tf1.placeholder(tf.int32, [])
            return [getattr(ops, op)(count), getattr(ops, op)(count)], {count: 32}
        return make

    steps, computed = run_steps(ops, two_calls("get_image_id"))
    assert computed == STEPS and all(first == second for first, second in steps), steps
    # The stateful twin is never merged: two Computes per step, two different ids.
    steps, computed = run_steps(ops, two_calls("get_image_id_stateful"))
    assert computed == 2 * STEPS and all(first != second for first, second in steps), steps


def test_two_calls_on_two_constants_are_each_folded_not_merged(ops):
    """Not in the issue: with constant inputs the calls are folded before they could be
    merged, each to its own value (two different ids, fixed for the session)."""
    def two_constant_calls(ops):
        return [ops.get_image_id(tf.constant(32)), ops.get_image_id(tf.constant(32))], None

    steps, computed = run_steps(ops, two_constant_calls)
    assert_folded(steps, computed, calls=2)
    assert steps[0][0] != steps[0][1]


# --- What the issue says does not help, and does not ----------------------------------

def test_placeholder_with_default_does_not_help(ops):
    def with_default(ops):
        return [ops.get_image_id(tf1.placeholder_with_default(tf.constant(32), []))], None

    assert_folded(*run_steps(ops, with_default))


def test_control_dependency_on_a_random_op_does_not_help(ops):
    def after_random(ops):
        with tf.control_dependencies([tf1.random_uniform([])]):
            count = tf.constant(32)
        return [ops.get_image_id(count)], None

    assert_folded(*run_steps(ops, after_random))


@pytest.mark.parametrize("config", [
    session_config(grappler_constant_folding_off=True),
    session_config(meta_optimizer_off=True),
    session_config(opt_level_l0=True),
], ids=["grappler-constant-folding-off", "meta-optimizer-off", "L0"])
def test_one_optimizer_off_alone_does_not_help(ops, config):
    """Two passes fold it (Grappler's and the classic graph optimizer's): either one alone
    still does."""
    assert_folded(*run_steps(ops, constant_count, config))


# --- What does help -----------------------------------------------------------------

@pytest.mark.parametrize("config", [
    session_config(opt_level_l0=True, meta_optimizer_off=True),
    session_config(opt_level_l0=True, grappler_constant_folding_off=True),
], ids=["L0-and-meta-optimizer-off", "L0-and-grappler-constant-folding-off"])
def test_both_folding_passes_off_runs_it_every_step(ops, config):
    assert_runs_every_step(*run_steps(ops, constant_count, config))


def test_l0_also_stops_the_merge(ops):
    """CSE is the classic optimizer's (L1) pass: at L0 two calls on one placeholder run twice."""
    def two_calls(ops):
        count = tf1.placeholder(tf.int32, [])
        return [ops.get_image_id(count), ops.get_image_id(count)], {count: 32}

    steps, computed = run_steps(ops, two_calls, session_config(opt_level_l0=True))
    assert computed == 2 * STEPS and all(first != second for first, second in steps), steps


@pytest.mark.parametrize("use_resource", [False, True], ids=["ref-variable", "resource-variable"])
def test_input_read_from_a_variable_runs_it_every_step(ops, use_resource):
    def from_variable(ops):
        count = tf1.get_variable("count", initializer=32, use_resource=use_resource)
        return [ops.get_image_id(tf.identity(count))], None

    assert_runs_every_step(*run_steps(ops, from_variable))


# --- The graph fix's candidate: a stateful pass-through TF cannot fold ---------------

def test_constant_through_debug_identity_v2_runs_every_step_with_the_same_count(ops):
    """DebugIdentityV2 is stateful (never folded, never merged) and, with no debug_urls,
    returns its input unchanged and writes nothing: the op sees the same count, and runs."""
    graph = tf.Graph()
    with graph.as_default():
        count = tf.raw_ops.DebugIdentityV2(input=tf.constant(32))
        with tf1.Session(graph=graph) as sess:
            assert sess.run(count) == 32
            assert len(sess.run(ops.get_image_id(count))) == 32

    def one_call(ops):
        return [ops.get_image_id(tf.raw_ops.DebugIdentityV2(input=tf.constant(32)))], None

    assert_runs_every_step(*run_steps(ops, one_call))


def test_one_debug_identity_per_call_stops_the_merge(ops):
    """Two calls sharing one pass-through are still merged; one pass-through each are not."""
    def shared(ops):
        count = tf.raw_ops.DebugIdentityV2(input=tf.constant(32))
        return [ops.get_image_id(count), ops.get_image_id(count)], None

    def one_each(ops):
        count = tf.constant(32)
        return [ops.get_image_id(tf.raw_ops.DebugIdentityV2(input=count)),
                ops.get_image_id(tf.raw_ops.DebugIdentityV2(input=count))], None

    steps, computed = run_steps(ops, shared)
    assert computed == STEPS and all(first == second for first, second in steps), steps
    steps, computed = run_steps(ops, one_each)
    assert computed == 2 * STEPS and all(first != second for first, second in steps), steps


def test_saved_graph_rewritten_with_debug_identity_v2_runs_every_step(ops):
    """The rewrite as the graph fix would make it, on a GraphDef: each GetImageID's constant
    input goes through a DebugIdentityV2 node of its own; the imported graph runs the op on
    every step and returns what the original graph returned on its first."""
    graph = tf.Graph()
    with graph.as_default():
        ops.get_image_id(tf.constant(32), name="image_ids")
    graph_def = graph.as_graph_def()
    node = next(n for n in graph_def.node if n.op == "GetImageID")
    unfolded = graph_def.node.add(name=f"{node.name}/count_unfolded", op="DebugIdentityV2",
                                  input=[node.input[0]])
    unfolded.attr["T"].type = tf.int32.as_datatype_enum
    node.input[0] = unfolded.name

    fixed = tf.Graph()
    with fixed.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
        image_ids = fixed.get_tensor_by_name("image_ids:0")
        computed = ops.compute_count()
        with tf1.Session(graph=fixed) as sess:
            before = sess.run(computed)
            steps = [sess.run(image_ids) for _ in range(STEPS)]
            assert sess.run(computed) - before == STEPS
    assert len({tuple(ids) for ids in steps}) == STEPS
    assert all(len(ids) == 32 for ids in steps)  # the op still saw count=32


def test_an_op_with_no_inputs_is_folded_by_the_classic_pass_only(ops):
    """NextImageID has no inputs: Grappler never folds a node without inputs, the classic
    graph optimizer (L1) does; so L0 alone runs it every step."""
    def no_input(ops):
        return [ops.next_image_id()], None

    assert_folded(*run_steps(ops, no_input))
    assert_folded(*run_steps(ops, no_input, session_config(meta_optimizer_off=True)))
    assert_runs_every_step(*run_steps(ops, no_input, session_config(opt_level_l0=True)))


def test_the_registry_reports_is_stateful_after_loading(ops):
    """The bit every rule above consults, as Python sees it once the library is loaded."""
    from tensorflow.python.framework import op_def_registry

    assert op_def_registry.get("GetImageID").is_stateful is False
    assert op_def_registry.get("NextImageID").is_stateful is False
    assert op_def_registry.get("GetImageIDStateful").is_stateful is True
    assert op_def_registry.get("DebugIdentityV2").is_stateful is True  # the graph fix's pass-through


def test_no_input_op_is_folded_even_after_a_stateful_node(ops):
    """An op with no input has nothing to route through a pass-through, and a control input
    does not help: the classic pass allows control edges from non-constant nodes and moves
    them onto the folded constant. Only the C++ fix (or L0) keeps it running."""
    def after_stateful(ops):
        with tf.control_dependencies([tf.raw_ops.DebugIdentityV2(input=tf.constant(0))]):
            return [ops.next_image_id()], None

    assert_folded(*run_steps(ops, after_stateful))


# --- The build: cached, and plain about a missing compiler ---------------------------

def test_the_library_is_built_once_and_then_reused(ops):
    first = build_ops.library_path("get_image_id.cc")
    built_at = first.stat().st_mtime_ns
    assert build_ops.library_path("get_image_id.cc") == first
    assert first.stat().st_mtime_ns == built_at


def test_no_compiler_is_said_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(build_ops.NoCompilerError, match=r"no C\+\+ compiler found \(looked for c\+\+, g\+\+"):
        build_ops.library_path("get_image_id.cc")
